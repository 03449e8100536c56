"""PABEE (Zhou et al., NeurIPS 2020): exit when the prediction stops changing ("patience").

    head i  = shared pooler (one module, from the pretrained pooler) -> dropout -> linear_i
    train:    loss = sum_i i * L_i / sum_i i          (i = 1..L; L_i = CE, or MSE for regression)
              (setting loss_weights = "equal": the plain mean of the L_i; "descending":
               sum_i (L + 1 - i) * L_i / sum_i i;
               shared_pooler = false: a pooler per head)
    infer:    counter = 0
              for i = 1..L:
                  if i >= 2 and pred_i == pred_{i-1}: counter += 1   (regression: |delta| < tau)
                  else: counter = 0
                  if counter == patience: exit at layer i
              (the last layer always exits)

Patience p exits at layer p + 1 at the earliest; p >= L never exits early. The counter follows
the authors' code. Regression compares successive outputs with `regression_threshold` (tau).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from eebench.methods.base import (
    EarlyExitMethod,
    MethodSettings,
    Stage,
    exit_loss,
    register_method,
)

if TYPE_CHECKING:
    import torch


@register_method("pabee")
class PABEE(EarlyExitMethod):
    paper = ("Zhou et al., BERT Loses Patience: Fast and Robust Inference with Early Exit, "
             "NeurIPS 2020")
    description = "shared pooler + classifier per layer, weighted loss, exit on patience"
    rule = "patience"

    class Settings(MethodSettings):
        regression_threshold: float = Field(0.1, ge=0)  # |delta| below which scores are equal
        # "layer" weighs exit i by i (the paper), "equal" every exit alike, "descending" exit i
        # of n by n + 1 - i (the early exits most)
        loss_weights: Literal["layer", "equal", "descending"] = "layer"
        shared_pooler: bool = True  # one pooler for every exit (the paper), or one per exit
        RECORDED_WHEN_CHANGED = ("loss_weights", "shared_pooler")  # added after the paper runs

    def shares_pooler(self) -> bool:
        return self.config.shared_pooler  # one pooler for every exit (the paper), or a copy each

    def loss(self, exit_logits: Sequence[torch.Tensor], labels: torch.Tensor, stage: Stage,
             is_regression: bool, step: int = 0) -> torch.Tensor:
        exits = stage.exit_indices(len(exit_logits))
        weights = loss_weights(self.config.loss_weights, exits, len(exit_logits))
        total = sum(w * exit_loss(exit_logits[j], labels, is_regression)
                    for w, j in zip(weights, exits, strict=True))
        return total / sum(weights)


def loss_weights(kind: str, exits: list[int], num_exits: int) -> list[int]:
    """Each exit's weight (exits 0-based): i (layer), 1 (equal), or n + 1 - i (descending), for
    exit i = j + 1 of n; the loss divides by their sum (sum_i i = sum_i (n + 1 - i))."""
    if kind == "layer":
        return [j + 1 for j in exits]
    if kind == "descending":
        return [num_exits - j for j in exits]
    return [1 for _ in exits]
