"""Exact FLOPs of greedy decoding along each path: plain, self-speculative, CALM.

The project's convention (`mac2-matmul`, docs/flops.md): matrix multiplications at 2 FLOPs per
multiply-add; embedding lookups, norms, rotary embeddings, softmax and activations count 0. The
counts come from the config's shapes, per module and per position, and are summed along the path
a decode took (its rounds, its exit layers), as for encoders: a trace would see one path only.

With hidden size d, H query heads and G key/value heads of size h, intermediate size f and a
vocabulary of V, one decoder layer at position p (attending over the p + 1 positions 0..p)
costs in multiply-adds

    q: d*H*h   k, v: d*G*h each   o: H*h*d   scores QK^T: H*h*(p+1)   weighted sum AV: H*h*(p+1)
    MLP (SwiGLU: gate, up, down): 3*d*f

an LM head (the model's, or a logit-lens exit) d*V, an adapter exit 2*d*r more, and a halted
token's copy into one skipped layer (CALM) its k and v projections, 2*d*G*h.

Positions are counted causally: position p pays for p + 1 keys. An implementation that runs a span
of n positions at once and masks a full n x (past + n) score matrix (eager attention does)
multiplies n(n-1)/2 more score and weighted-sum pairs per head and layer: `masked_excess`.

A prompt of P tokens costs the same on every path up to its last token: `prefill` counts
positions 0..P-2 through all L layers. `generation` counts the rest: generated token i is decided
at position P-1+i. Which work each path does there:

- greedy: every position through all L layers and the LM head.
- self-speculation (as `eebench.rules.self_speculation` runs it, reusing the draft's cache): a
  round drafting d' tokens runs its pending position(s) and its d' drafts through all L layers
  (k while drafting, L - k while verifying), d' exit heads and d' + 1 LM heads; the rejected
  drafts' positions are cropped and run again in the next round.
- CALM: a token exiting after layer e runs e layers, the exit heads read on the way (the LM head
  too when e = L), and copies its state into the L - e skipped layers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eebench.errors import UsageError


@dataclass(frozen=True)
class DecoderShape:
    """The shapes FLOPs depend on, read from a Llama-like config."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int

    @classmethod
    def of(cls, config: Any) -> DecoderShape:
        if isinstance(config, cls):
            return config
        heads = config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        return cls(layers=config.num_hidden_layers, hidden=config.hidden_size, heads=heads,
                   kv_heads=getattr(config, "num_key_value_heads", None) or heads,
                   head_dim=head_dim, intermediate=config.intermediate_size,
                   vocab=config.vocab_size)


def _weights_flops(s: DecoderShape) -> int:
    """One layer's weight multiplications for one position: q, k, v, o and the MLP."""
    q = s.hidden * s.heads * s.head_dim
    kv = 2 * s.hidden * s.kv_heads * s.head_dim
    o = s.heads * s.head_dim * s.hidden
    mlp = 3 * s.hidden * s.intermediate
    return 2 * (q + kv + o + mlp)


def _attention_flops(s: DecoderShape, keys: int) -> int:
    """Scores QK^T and the weighted sum AV of one position over `keys` positions."""
    return 2 * 2 * s.heads * s.head_dim * keys


def layer_flops(config: Any, position: int) -> int:
    """One decoder layer at one position p, attending over p + 1 positions."""
    s = DecoderShape.of(config)
    return _weights_flops(s) + _attention_flops(s, position + 1)


def layers_over(config: Any, start: int, stop: int, layers: int) -> int:
    """`layers` decoder layers over positions start..stop-1 (closed form of the sum)."""
    if stop <= start:
        return 0
    s = DecoderShape.of(config)
    n = stop - start
    keys = (start + 1 + stop) * n // 2  # sum of p + 1 over the positions
    return layers * (n * _weights_flops(s) + _attention_flops(s, keys))


def lm_head_flops(config: Any) -> int:
    s = DecoderShape.of(config)
    return 2 * s.hidden * s.vocab


def exit_head_flops(config: Any, rank: int | None = None) -> int:
    """One exit head: the logit lens (rank None) or an adapter exit of bottleneck `rank`."""
    s = DecoderShape.of(config)
    return lm_head_flops(s) + (2 * 2 * s.hidden * rank if rank else 0)


def copy_flops(config: Any) -> int:
    """A halted token's keys and values in one skipped layer."""
    s = DecoderShape.of(config)
    return 2 * 2 * s.hidden * s.kv_heads * s.head_dim


def masked_excess(config: Any, span: int, layers: int = 1) -> int:
    """What a span of `span` positions run at once with a full masked score matrix multiplies
    beyond the causal count, over `layers` layers."""
    s = DecoderShape.of(config)
    return layers * _attention_flops(s, span * (span - 1) // 2)


@dataclass(frozen=True)
class DecodeFlops:
    """FLOPs of one decode: the prompt up to its last token, and the generation."""

    prefill: int
    generation: int
    n_new: int

    @property
    def total(self) -> int:
        return self.prefill + self.generation

    @property
    def per_token(self) -> float:
        """Generation FLOPs per generated token."""
        return self.generation / self.n_new if self.n_new else float("nan")


def _check(prompt_len: int, n_new: int) -> None:
    if prompt_len < 1 or n_new < 0:
        raise UsageError(f"need a prompt of >= 1 token and n_new >= 0 (got {prompt_len}, "
                         f"{n_new})")


def _prefill(config: Any, prompt_len: int) -> int:
    return layers_over(config, 0, prompt_len - 1, DecoderShape.of(config).layers)


def greedy_flops(config: Any, prompt_len: int, n_new: int) -> DecodeFlops:
    """Plain greedy decoding of n_new tokens."""
    _check(prompt_len, n_new)
    s = DecoderShape.of(config)
    p = prompt_len - 1
    generation = layers_over(s, p, p + n_new, s.layers) + n_new * lm_head_flops(s)
    return DecodeFlops(_prefill(s, prompt_len), generation, n_new)


def draft_lengths(accepted: Sequence[int], d: int) -> list[int]:
    """The drafts each round made, given its accepted counts: d, except that the last rounds
    draft no more than leaves room for the verifier's token (d' = min(d, remaining - 1))."""
    n_new = sum(accepted) + len(accepted)
    out, made = [], 0
    for a in accepted:
        out.append(min(d, n_new - made - 1))
        made += a + 1
    return out


def self_spec_flops(config: Any, prompt_len: int, rounds: Sequence[int], k: int, d: int,
                    head_cost: int | None = None) -> DecodeFlops:
    """Self-speculative decoding whose rounds accepted `rounds` drafts each (draft length d,
    exit k, `head_cost` FLOPs per exit head: default the logit lens)."""
    s = DecoderShape.of(config)
    n_new = sum(rounds) + len(rounds)
    _check(prompt_len, n_new)
    if not 1 <= k < s.layers:
        raise UsageError(f"exit layer must be within 1..{s.layers - 1}, got {k}")
    head = exit_head_flops(s) if head_cost is None else head_cost
    generation, start, pending = 0, prompt_len - 1, 1  # the prompt's last token is pending
    for accepted, drafts in zip(rounds, draft_lengths(rounds, d)):
        generation += layers_over(s, start, start + pending + drafts, s.layers)
        generation += drafts * head + (drafts + 1) * lm_head_flops(s)
        start += pending + accepted
    return DecodeFlops(_prefill(s, prompt_len), generation, n_new)


def calm_step_flops(config: Any, position: int, exit_layer: int, exits_evaluated: int,
                    head_cost: int | None = None) -> int:
    """One CALM token at `position`: layers up to its exit, the exit heads read, the LM head if
    it ran to the end, and its copy into the skipped layers."""
    s = DecoderShape.of(config)
    if not 1 <= exit_layer <= s.layers:
        raise UsageError(f"exit layer must be within 1..{s.layers}, got {exit_layer}")
    head = exit_head_flops(s) if head_cost is None else head_cost
    return (exit_layer * layer_flops(s, position) + exits_evaluated * head
            + (lm_head_flops(s) if exit_layer == s.layers else 0)
            + (s.layers - exit_layer) * copy_flops(s))


def calm_flops(config: Any, prompt_len: int, exit_layers: Sequence[int],
               exits_evaluated: Sequence[int], head_cost: int | None = None) -> DecodeFlops:
    """CALM decoding whose tokens exited at `exit_layers`, reading `exits_evaluated` exit
    heads each (the last layer's own head not counted)."""
    _check(prompt_len, len(exit_layers))
    if len(exits_evaluated) != len(exit_layers):
        raise UsageError("exit_layers and exits_evaluated must have one entry per token")
    generation = sum(calm_step_flops(config, prompt_len - 1 + i, int(e), int(n), head_cost)
                     for i, (e, n) in enumerate(zip(exit_layers, exits_evaluated)))
    return DecodeFlops(_prefill(config, prompt_len), generation, len(exit_layers))


def static_flops(config: Any, prompt_len: int, n_new: int, k: int,
                 head_cost: int | None = None) -> DecodeFlops:
    """Greedy decoding with the first k layers alone and exit k's head (the model truncated at
    exit k, the static baseline): the prompt through k layers, each generated token through k
    layers and one exit head (`head_cost`: default the logit lens)."""
    _check(prompt_len, n_new)
    s = DecoderShape.of(config)
    if not 1 <= k <= s.layers:
        raise UsageError(f"exit layer must be within 1..{s.layers}, got {k}")
    head = (lm_head_flops(s) if k == s.layers else exit_head_flops(s)) if head_cost is None \
        else head_cost
    p = prompt_len - 1
    generation = layers_over(s, p, p + n_new, k) + n_new * head
    return DecodeFlops(layers_over(s, 0, p, k), generation, n_new)


def teacher_forced_flops(config: Any, length: int, k: int, head_cost: int | None = None) -> int:
    """One teacher-forced pass of `length` tokens scored at exit k: the `length - 1` positions
    that predict a next token through k layers and one head each (the last position predicts
    nothing and is not counted)."""
    s = DecoderShape.of(config)
    if length < 2 or not 1 <= k <= s.layers:
        raise UsageError(f"need length >= 2 and an exit within 1..{s.layers} "
                         f"(got {length}, {k})")
    head = (lm_head_flops(s) if k == s.layers else exit_head_flops(s)) if head_cost is None \
        else head_cost
    return layers_over(s, 0, length - 1, k) + (length - 1) * head
