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

The walk is the decoder's exit unit, in a small interface the engine's one dynamic loop can ask:

    walk = begin(model, token_ids, cache)   # live state of one position: embedded, layer 0
    advance(model, walk, k)                 # run layers walk.layer..k-1; walk.layer = k
    exits.logits(model, k, walk.hidden)     # read an exit at the walk's layer
    halt(model, walk)                       # carry the halted state upward: fill the caches
                                            # of layers walk.layer..L-1 by copying; the cache is
                                            # then whole and the next position may begin

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
    final_logits,
    new_cache,
    num_layers,
    parts,
    read_logits,
    rotary,
    run_layers,
)


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


@dataclass
class CalmDecode:
    """Tokens of a CALM decode; per token its exit layer and the exit heads read on the way
    (the last layer's own head not counted)."""

    tokens: list[int] = field(default_factory=list)
    exit_layers: list[int] = field(default_factory=list)
    exits_evaluated: list[int] = field(default_factory=list)


@torch.no_grad()
def calm_decode(model: nn.Module, exits: DecoderExits, prompt_ids: torch.Tensor, n_new: int,
                threshold: float, measure: Literal["maxprob", "margin"] = "maxprob"
                ) -> CalmDecode:
    """Greedy decoding of `n_new` tokens where each token exits at the first exit whose
    confidence >= threshold (else the last layer), its state copied into the skipped layers'
    caches. Batch size 1 only."""
    if measure not in ("maxprob", "margin"):
        raise UsageError(f"unknown confidence measure {measure!r}", hint="maxprob or margin")
    prompt = prompt_ids.reshape(1, -1)
    total, cache = num_layers(model), new_cache(model)
    if prompt.shape[1] > 1:
        run_layers(model, embed(model, prompt[:, :-1]), 0, total, cache)
    token, out = prompt[:, -1:], CalmDecode()
    for _ in range(n_new):
        walk, evaluated, choice = begin(model, token, cache), 0, None
        for k in exits.layers:
            advance(model, walk, k)
            evaluated += 1
            arg, top, gap = read_logits(exits.logits(model, k, walk.hidden[:, -1]))
            if float(top if measure == "maxprob" else gap) >= threshold:
                choice = int(arg)
                break
        if choice is None:
            advance(model, walk, total)
            choice = int(final_logits(model, walk.hidden[:, -1]).argmax(-1))
        halt(model, walk)
        out.tokens.append(choice)
        out.exit_layers.append(walk.layer)
        out.exits_evaluated.append(evaluated)
        token = torch.tensor([[choice]], device=prompt.device)
    return out
