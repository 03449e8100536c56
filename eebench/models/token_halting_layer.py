"""One encoder layer computed for the live tokens only (token-level early exit, TOKEE).

When a word halts, its pieces' hidden states are copied to the layers above: they no longer
change, so a layer need not compute their queries, attention output or feed-forward. The live
tokens still attend to every token, halted ones included, so every token's keys and values are
projected from its (frozen) state at each layer. Per layer, with q live tokens of n:

    queries, attention output projection   2 q d^2      keys and values   2 n d^2
    scores and weighted sum                2 q n d      feed-forward      2 q d d_ff
                                                                          (multiply-adds)

`live_layer` runs a BERT-style layer that way (the layers of the `bert` and `roberta` families:
self-attention with query/key/value, its output dense + LayerNorm, intermediate, output dense +
LayerNorm), with eager attention math; other families are refused in one line (`check_live`).
With every token live it is the layer itself (tests/test_token_halting.py holds them together).
"""

from __future__ import annotations

import torch
from torch import nn

from eebench.errors import UsageError

LIVE_FAMILIES = ("bert", "roberta")


def check_live(model) -> None:
    """Refuse, in one line, a model whose layers `live_layer` cannot compute token by token."""
    family = getattr(model.config, "model_type", "?")
    if family not in LIVE_FAMILIES:
        raise UsageError(f"token-level halting runs live on {', '.join(LIVE_FAMILIES)} layers; "
                         f"this model is {family!r}",
                         hint="its decisions are still simulated exactly (halted states copied)")


def live_layer(layer: nn.Module, hidden: torch.Tensor, mask_add: torch.Tensor,
               live: torch.Tensor) -> torch.Tensor:
    """`layer` (a BERT-style encoder layer, eval mode) on `hidden` [B, T, H] for the tokens
    `live` (bool [B, T]) only: their new states; every other token's state is returned as it
    was. `mask_add` is the additive attention mask [B, 1, 1, T] (eebench.models.families)."""
    counts = live.sum(1)
    q = int(counts.max()) if live.numel() else 0
    if q == 0:
        return hidden
    b, t, h = hidden.shape
    # each row's live positions first, in order, padded with position 0 (discarded)
    order = torch.sort((~live).to(torch.uint8), dim=1, stable=True).indices[:, :q]
    valid = torch.arange(q, device=hidden.device)[None, :] < counts[:, None]
    x = hidden.gather(1, order[..., None].expand(b, q, h))  # [B, q, H]
    att = layer.attention.self
    size = att.attention_head_size
    heads = h // size

    def split(z: torch.Tensor) -> torch.Tensor:  # [B, L, H] -> [B, heads, L, size]
        return z.view(b, -1, heads, size).transpose(1, 2)

    query, key, value = split(att.query(x)), split(att.key(hidden)), split(att.value(hidden))
    scores = torch.matmul(query, key.transpose(-1, -2)) * (size ** -0.5) + mask_add
    context = torch.matmul(torch.softmax(scores, dim=-1), value)  # [B, heads, q, size]
    context = context.transpose(1, 2).reshape(b, q, h)
    attended = layer.attention.output(context, x)  # dense, dropout, LayerNorm(+ x)
    out = layer.output(layer.intermediate(attended), attended)  # feed-forward, LayerNorm
    rows = torch.arange(b, device=hidden.device)[:, None].expand(b, q)
    new = hidden.clone()
    new[rows[valid], order[valid]] = out[valid].to(hidden.dtype)
    return new
