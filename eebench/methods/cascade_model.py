"""The cascade of eebench.methods.cascade as one model, for a run to measure like any other.

Its exits are its models: `forward` gives each model's final logits [S, B, C] (every model on
every sample, what a sweep simulates from), exit j sits at layer `exit_layers[j]` = model j's
depth, and `dynamic_batch` is the real thing: model 1 on the batch, then each next model,
embedding them anew from their input ids, on the samples that did not exit. The FLOP and parameter
counters read `cascade` (the models in order) and charge exit j with models 1..j whole. Kept apart
from the method's file because it needs torch, and listing the methods must not import it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from eebench.rules.base import ExitRule, select_state
from eebench.rules.engine import predictions_from_logits


class CascadeModel(nn.Module):
    """Complete models of growing depth (MultiExitModels whose last exit is their answer)."""

    def __init__(self, models: Sequence[nn.Module], method_settings: dict[str, Any]):
        super().__init__()
        depths = [int(m.exit_layers[-1]) for m in models]
        if not models or any(a >= b for a, b in zip(depths, depths[1:])):
            raise ValueError(f"a cascade needs models of growing depth, got depths {depths}")
        if len({m.num_labels for m in models}) != 1 or len({m.pooling for m in models}) != 1:
            raise ValueError("the cascade's models differ in their labels or pooling")
        self.cascade = nn.ModuleList(models)
        self.exit_layers = tuple(depths)  # the depth of the model that answers at exit j
        self.num_labels = int(models[0].num_labels)
        self.pooling = models[0].pooling
        self.config = models[-1].config  # hidden size: one backbone for all
        self.signal_names: tuple[str, ...] = ()
        self.method_settings = dict(method_settings)

    @property
    def num_exits(self) -> int:
        return len(self.cascade)

    def temperatures(self) -> list[float] | None:
        return None

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None,
                token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Each model's answer (its last exit's logits) for every sample: [S, B, C]."""
        return torch.stack([m(input_ids, attention_mask, token_type_ids)[-1]
                            for m in self.cascade])

    @torch.inference_mode()
    def dynamic_batch(self, rule: ExitRule, batch: dict, is_regression: bool, full: bool = False
                      ) -> tuple[torch.Tensor, torch.Tensor]:
        """The cascade on one batch: each model runs on the samples no earlier model let go, the
        padding columns they no longer need cut; the last model takes all that remain. `full`:
        the deepest model alone (the baseline). (exit_index [B], prediction [B]) in batch order.
        """
        device = next(self.parameters()).device
        ids, mask = batch["input_ids"].to(device), batch["attention_mask"].to(device)
        types = batch.get("token_type_ids")
        types = types.to(device) if types is not None else None
        n, last = ids.shape[0], self.num_exits - 1
        alive = torch.arange(n, device=device)
        out_exit = torch.full((n,), last, dtype=torch.long, device=device)
        out_pred = torch.zeros(n, device=device)
        state = rule.start(n, device)
        for j, model in enumerate(self.cascade):
            if full and j != last:
                continue
            logits = model(ids, mask, types)[-1]
            if j == last:
                go = torch.ones(len(alive), dtype=torch.bool, device=device)
            else:
                step = rule.step(state, j, logits, {})
                go, state = step.exit, step.state
            n_exit = int(go.sum())
            if n_exit == 0:
                continue
            out_exit[alive[go]] = j
            out_pred[alive[go]] = predictions_from_logits(logits[go], is_regression).float()
            if n_exit == len(alive):
                break
            keep = ~go
            alive, state, mask = alive[keep], select_state(state, keep), mask[keep]
            width = int(mask.sum(-1).max())  # right padding: the columns no one needs go
            ids, mask = ids[keep, :width], mask[:, :width]
            types = types[keep, :width] if types is not None else None
        return out_exit.cpu(), out_pred.cpu()
