"""CALM's per-token early exit, decoded for real: a halted token's state fills the skipped layers.

Each generated token walks up the layers and stops at the first exit whose confidence (max
softmax probability, or the top-2 margin p1 - p2) is >= a threshold; its prediction is that
exit's argmax. The layers it skipped still need its keys and values, because later tokens attend
to it at every layer. As CALM does, the exited token's hidden state at the exit layer is COPIED
upward: each skipped layer j computes its keys and values from that state (layer j's input norm,
its k and v projections, rotary position embedding on the keys) and appends them to its cache.
So every layer's cache always holds every position, and the next token's walk runs over a full
cache whose upper rows are approximations (the simulation in eebench.rules.decoder_sweep assumes
an oracle cache instead: the full model's states everywhere).

Each position's walk up the layers is the one dynamic loop (eebench.rules.engine.exit_loop) over
a `DecoderWalk`, the exit protocol's walk for the generated-token unit (eebench.models.units):

    walk.step(j, emit)        run on to exit j (exit layer j; the last exit: layer L, read by
                              the model's own norm and LM head); its logits [1, V] and, at an
                              exit head, its signals (argmax, maxprob, margin: what CALM's rule
                              reads)
    walk.fill_skipped(rows)   the unit's `carry` when the rule says exit: the layers above get
                              the token's keys and values from its state at the exit (`halt`)
    walk.keep(rows)           batch size 1: nothing to cut

built from these steps, also used on their own:

    walk = begin(model, token_ids, cache)   # live state of one position: embedded, layer 0
    advance(model, walk, k)                 # run layers walk.layer..k-1; walk.layer = k
    exits.logits(model, k, walk.hidden)     # read an exit at the walk's layer
    halt(model, walk)                       # carry the halted state upward: fill the caches
                                            # of layers walk.layer..L-1 by copying; the cache is
                                            # then whole and the next position may begin

`DecoderExitModel` is the model the loop sees: the exits in order, the unit, the parameters, and a
walk per position over one sequence's cache. CALM's rule is the catalog's `calm`
(eebench.rules.calm: maxprob or margin >= threshold).

State = (hidden [1, 1, d], the shared DynamicCache, position, layer reached). Batch size 1 only:
tokens of different prompts would exit at different layers, and this walk does not cut a batch.
The prompt is prefilled with every layer except its last token, which is the first walk (its
exit decides the first generated token), so a prompt of P tokens makes P - 1 prefill positions
and N walks at positions P-1 .. P+N-2.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import nn

from eebench.errors import UsageError
from eebench.models.decoder_exits import (
    DecoderExits,
    cached_length,
    embed,
    exit_signals,
    new_cache,
    num_layers,
    parts,
    rotary,
    run_layers,
)
from eebench.models.units import GENERATED
from eebench.rules.calm import MEASURES, CalmRule
from eebench.rules.engine import exit_loop


@dataclass
class TokenWalk:
    """One position's live state on its way up the layers."""

    hidden: torch.Tensor  # [1, n, d]: the state after `layer` layers
    cache: Any  # DynamicCache shared by every walk of one sequence
    position_ids: torch.Tensor  # [1, n]
    rope: tuple  # (cos, sin) at those positions, computed once per walk
    layer: int = 0  # layers run so far


def begin(model: nn.Module, token_ids: torch.Tensor, cache: Any) -> TokenWalk:
    """A walk for `token_ids` [1, n] at the positions after what the cache holds."""
    hidden = embed(model, token_ids)
    past = cached_length(cache, 0)
    positions = torch.arange(past, past + hidden.shape[1], device=hidden.device)[None]
    return TokenWalk(hidden, cache, positions, rotary(model, hidden, positions))


def advance(model: nn.Module, walk: TokenWalk, to_layer: int) -> TokenWalk:
    """Run layers walk.layer .. to_layer - 1."""
    walk.hidden = run_layers(model, walk.hidden, walk.layer, to_layer, walk.cache,
                             walk.position_ids, walk.rope)
    walk.layer = max(walk.layer, to_layer)
    return walk


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def copy_into_layer(model: nn.Module, walk: TokenWalk, j: int) -> None:
    """Layer j's keys and values of the walk's positions, computed from its halted state."""
    layer = parts(model).layers[j]
    attn = layer.self_attn
    x = layer.input_layernorm(walk.hidden)
    b, n, _ = x.shape
    keys = attn.k_proj(x).view(b, n, -1, attn.head_dim)
    if getattr(attn, "k_norm", None) is not None:  # Qwen3-style per-head key norm
        keys = attn.k_norm(keys)
    keys = keys.transpose(1, 2)
    values = attn.v_proj(x).view(b, n, -1, attn.head_dim).transpose(1, 2)
    cos, sin = (t.unsqueeze(1) for t in walk.rope)
    keys = keys * cos + _rotate_half(keys) * sin
    walk.cache.update(keys, values, j)


def halt(model: nn.Module, walk: TokenWalk) -> None:
    """Carry the halted state upward: every layer above the walk's gets its keys and values."""
    for j in range(walk.layer, num_layers(model)):
        copy_into_layer(model, walk, j)


class DecoderWalk:
    """One decoding position of a causal LM, exit by exit, over the sequence's cache (an ExitWalk
    of eebench.models.exits, plus `fill_skipped`). Exit j runs to layer `layers[j]`; the last
    exit is layer L, read by the model's own norm and LM head (DecoderExits.logits at L)."""

    def __init__(self, model: nn.Module, exits: DecoderExits, token_ids: torch.Tensor,
                 cache: Any):
        if token_ids.shape[0] != 1:
            raise UsageError("a decoder walk takes batch size 1",
                             hint="decode one prompt at a time")
        self.model, self.exits = model, exits
        self.layers = (*exits.layers, num_layers(model))
        self.state = begin(model, token_ids, cache)

    def step(self, j: int, emit: bool) -> tuple[torch.Tensor, dict[str, torch.Tensor]] | None:
        k = self.layers[j]
        advance(self.model, self.state, k)
        if not emit:
            return None
        logits = self.exits.logits(self.model, k, self.state.hidden[:, -1])
        # an exit head's confidence; the model's own head (the last exit) is not read for one
        return logits, exit_signals(logits) if j < len(self.layers) - 1 else {}

    def fill_skipped(self, rows: torch.Tensor) -> None:
        """The rows `rows` (bool [1]) exit here: the layers above get their keys and values."""
        if bool(rows.any()):
            halt(self.model, self.state)

    def keep(self, rows: torch.Tensor) -> None:
        if not bool(rows.all()):  # the loop cuts only some rows of several
            raise UsageError("a decoder walk takes batch size 1")


class DecoderExitModel:
    """A causal LM and its exits as the exit protocol sees them (eebench.models.exits), over one
    sequence's cache: exit j after layer `exit_layers[j]`, the last the full model; the unit a
    generated token; `exit_walk` one position's walk after what the cache holds."""

    unit = GENERATED.name

    def __init__(self, model: nn.Module, exits: DecoderExits, cache: Any):
        self.model, self.exits, self.cache = model, exits, cache
        self.exit_layers = (*exits.layers, num_layers(model))
        self.num_exits = len(self.exit_layers)

    def parameters(self) -> Any:
        return self.model.parameters()

    def exit_walk(self, ids: torch.Tensor, mask: torch.Tensor | None = None,
                  types: torch.Tensor | None = None) -> DecoderWalk:
        return DecoderWalk(self.model, self.exits, ids, self.cache)


@dataclass
class CalmDecode:
    """Tokens of a CALM decode; per token its exit layer and the exit heads read on the way
    (the last layer's own head not counted)."""

    tokens: list[int] = field(default_factory=list)
    exit_layers: list[int] = field(default_factory=list)
    exits_evaluated: list[int] = field(default_factory=list)


@torch.inference_mode()
def calm_decode(model: nn.Module, exits: DecoderExits, prompt_ids: torch.Tensor, n_new: int,
                threshold: float, measure: Literal["maxprob", "margin"] = "maxprob"
                ) -> CalmDecode:
    """Greedy decoding of `n_new` tokens where each token exits at the first exit whose
    confidence >= threshold (else the last layer), its state copied into the skipped layers'
    caches: each position is one run of the exit loop with CALM's rule. Batch size 1 only."""
    if measure not in MEASURES:
        raise UsageError(f"unknown confidence measure {measure!r}", hint="maxprob or margin")
    prompt = prompt_ids.reshape(1, -1)
    total, cache = num_layers(model), new_cache(model)
    if prompt.shape[1] > 1:
        run_layers(model, embed(model, prompt[:, :-1]), 0, total, cache)
    lm, rule = DecoderExitModel(model, exits, cache), CalmRule(threshold, measure)
    last = lm.num_exits - 1
    token, out = prompt[:, -1:], CalmDecode()
    for _ in range(n_new):
        batch = {"input_ids": token, "attention_mask": torch.ones_like(token)}
        exit_index, choice = exit_loop(lm, rule, batch).answer()
        j = int(exit_index[0])
        out.tokens.append(int(choice[0]))
        out.exit_layers.append(lm.exit_layers[j])
        out.exits_evaluated.append(min(j + 1, last))  # exit heads read; the model's own not
        token = choice[:1, None].to(prompt.device)
    return out
