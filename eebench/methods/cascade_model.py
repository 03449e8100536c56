"""The cascade of eebench.methods.cascade as one model of the exit protocol
(eebench.models.exits), for a run to measure like any other.

Its exits are its models: `forward` gives each model's final logits [S, B, C] (every model on
every sample, what a sweep simulates from), exit j sits at layer `exit_layers[j]` = model j's
depth, and its walk (`ChainWalk`) runs model 1 on the batch, then each next model, embedding them
anew from their input ids, on the samples that did not exit. `chain()` is its models in order, so
the FLOP and parameter counters charge exit j with models 1..j whole. Kept apart from the
method's file because it needs torch, and listing the methods must not import it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from eebench.models.exits import ChainWalk


class CascadeModel(nn.Module):
    """Complete models of growing depth (MultiExitModels whose last exit is their answer)."""

    def __init__(self, models: Sequence[nn.Module], method_settings: dict[str, Any]):
        super().__init__()
        depths = [int(m.exit_layers[-1]) for m in models]
        if not models or any(a >= b for a, b in zip(depths, depths[1:])):
            raise ValueError(f"a cascade needs models of growing depth, got depths {depths}")
        if len({m.num_labels for m in models}) != 1 or len({m.pooling for m in models}) != 1:
            raise ValueError("the cascade's models differ in their labels or pooling")
        self.models = nn.ModuleList(models)
        self.exit_layers = tuple(depths)  # the depth of the model that answers at exit j
        self.num_labels = int(models[0].num_labels)
        self.pooling = models[0].pooling
        self.config = models[-1].config  # hidden size: one backbone for all
        self.signal_names: tuple[str, ...] = ()
        self.method_settings = dict(method_settings)

    @property
    def num_exits(self) -> int:
        return len(self.models)

    def temperatures(self) -> list[float] | None:
        return None

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None,
                token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Each model's answer (its last exit's logits) for every sample: [S, B, C]."""
        return torch.stack([m(input_ids, attention_mask, token_type_ids)[-1]
                            for m in self.models])

    # -- the exit protocol (eebench.models.exits) ----------------------------------------------
    def exit_walk(self, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor | None = None
                  ) -> ChainWalk:
        return ChainWalk(self.models, ids, mask, types)

    def exit_modules(self, j: int) -> list[nn.Module]:
        """Models 1..j whole: what a sample answered by model j ran."""
        return list(self.models[: j + 1])

    def chain(self) -> list[nn.Module]:
        return list(self.models)
