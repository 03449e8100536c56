"""A multi-exit model made from a Hugging Face encoder: `build_model` loads the pretrained
backbone (eebench.models.backbones) and `assemble` cuts it to its layers and adds the method's
exit heads (eebench.models.multi_exit), the heads' poolers started from the pretrained ones."""

from __future__ import annotations

import copy
from collections import Counter

import torch
from torch import nn

from eebench.errors import UsageError, one_line
from eebench.models.backbones import encoder_parts, load_hf_model
from eebench.models.multi_exit import ExitHeads, ExitPooler, HeadBuilder, MultiExitModel
from eebench.models.pooling import resolve_pooling

ATTN_IMPLEMENTATIONS = ("eager", "sdpa")  # eager: what the FLOP counter traces; sdpa: faster


def check_attn(attn: str) -> None:
    if attn not in ATTN_IMPLEMENTATIONS:
        raise UsageError(f"unknown attention implementation {attn!r}",
                         hint=f"choose from: {', '.join(ATTN_IMPLEMENTATIONS)}")


def assemble(hf_model: nn.Module, method: HeadBuilder, num_labels: int,
             num_layers: int | None = None, pooling: str = "cls") -> MultiExitModel:
    """A MultiExitModel from a Hugging Face encoder: its parts, cut to `num_layers`, plus the
    method's heads (initialised from the encoder's pooler, or from the pooler of their own layer
    where the checkpoint has one per layer, pooling with `pooling`). Returned in eval mode."""
    parts = encoder_parts(hf_model)
    available = len(parts.layers)
    n = method.head_layers(available)[-1] if num_layers is None else int(num_layers)
    if not 1 <= n <= available:
        raise UsageError(f"cannot use {n} layers of a {available}-layer backbone",
                         hint=f"choose between 1 and {available}")
    if n < available and not parts.truncatable:
        raise UsageError(f"this {hf_model.config.model_type} backbone cannot be cut to {n} of its "
                         f"{available} layers: its layer groups depend on the depth",
                         hint=f"use all {available} layers")
    if num_labels < 1:
        raise UsageError(f"num_labels must be at least 1, got {num_labels}")
    config = hf_model.config  # the object the layers read: truncation and attention stay in sync
    config.num_hidden_layers = n
    dense = None if parts.pooler is None else copy.deepcopy(parts.pooler)
    pooler = ExitPooler(config.hidden_size, pooling, dense, config.initializer_range)
    heads = method.build_heads(config, num_labels, n, pooler)
    _start_from_layer_poolers(heads, parts.exit_poolers)
    model = MultiExitModel(config, parts.embeddings, parts.layers[:n], heads, num_labels, method,
                           pooling)
    return model.eval()


def _start_from_layer_poolers(heads: ExitHeads, exit_poolers: dict[int, nn.Linear]) -> None:
    """A head that alone runs its pooler starts from the pretrained pooler of its own layer, where
    the checkpoint has one per layer (ElasticBERT); a pooler several heads share (PABEE's) keeps
    the last layer's, like every other backbone's."""
    if not exit_poolers:
        return
    runs = Counter(id(getattr(head, "pooler", None)) for head in heads.heads)
    for head, layer in zip(heads.heads, heads.exit_layers, strict=True):
        own = getattr(head, "pooler", None)
        if layer in exit_poolers and runs[id(own)] == 1 and isinstance(own, ExitPooler):
            with torch.no_grad():
                own.dense.weight.copy_(exit_poolers[layer].weight)
                own.dense.bias.copy_(exit_poolers[layer].bias)


def build_model(backbone: str, method: HeadBuilder, num_labels: int,
                num_layers: int | None = None, attn_implementation: str = "eager",
                pooling: str | None = None) -> MultiExitModel:
    """Pretrained backbone weights (first `num_layers` layers) plus the method's exit heads,
    pooling with `pooling` (None: the way the backbone was pretrained to pool)."""
    check_attn(attn_implementation)
    pooling = resolve_pooling(backbone, pooling)
    try:
        hf = load_hf_model(backbone, attn_implementation)
    except ValueError as e:  # e.g. MPNet has no SDPA attention in transformers
        if attn_implementation == "eager":
            raise
        first = one_line(e, limit=160)
        raise UsageError(f"backbone {backbone!r} cannot run {attn_implementation} attention: "
                         f"{first}", hint="use attn_implementation='eager'") from None
    model = assemble(hf, method, num_labels, num_layers, pooling)
    model.source = backbone
    return model
