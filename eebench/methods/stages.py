"""A method's training stages (which parameters learn, which exits' losses count) and the loss of
one exit."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eebench.data.batching import IGNORE

if TYPE_CHECKING:  # torch stays out of `eebench --help`
    import torch
    from torch import nn


@dataclass(frozen=True)
class Stage:
    """One training stage: which parameters train and which exits' losses count."""

    name: str
    trainable: Callable[[Any], list[nn.Parameter]]  # MultiExitModel -> parameters to optimise
    # Exit indices whose logits enter the loss: None = all, a tuple (negative counts from the
    # end), or a slice (e.g. slice(None, -1): every exit but the last). A stage is written
    # before the number of exits is known; `exit_indices` resolves it.
    exits: tuple[int, ...] | slice | None = None
    # The stage's own peak learning rate (e.g. PALBERT's lambda layers); None: the run's (or
    # heads_lr where the stage trains heads alone). A `--stage NAME.lr=...` override beats it.
    lr: float | None = None

    def __post_init__(self) -> None:
        if self.lr is not None and not (isinstance(self.lr, (int, float)) and 0 < self.lr < 1e3):
            raise ValueError(f"stage {self.name!r}: lr must be a positive number, got {self.lr!r}")

    def exit_indices(self, num_exits: int) -> list[int]:
        """The 0-based exit indices of this stage for a model with `num_exits` exits."""
        every = list(range(num_exits))
        if self.exits is None:
            return every
        if isinstance(self.exits, slice):
            return every[self.exits]
        return [every[j] for j in self.exits]


def joint(name: str) -> Stage:
    """One stage that trains every parameter on every exit's loss."""
    return Stage(name, lambda model: list(model.parameters()))


def backbone_then_heads(second: str) -> list[Stage]:
    """Two stages (DeeBERT's, FastBERT's): the backbone with the last exit's head on its loss,
    then, the backbone frozen, every other head (`second` names that stage)."""
    return [Stage("backbone", lambda m: [*m.backbone_parameters(), *m.heads[-1].parameters()],
                  exits=(-1,)),
            Stage(second, lambda m: [p for h in m.heads[:-1] for p in h.parameters()],
                  exits=slice(None, -1))]  # every head but the last


def exit_loss(logits: torch.Tensor, labels: torch.Tensor, is_regression: bool) -> torch.Tensor:
    """One exit's loss: cross-entropy over classes, or MSE on the single output for regression.
    Token logits [B, T, C] with labels [B, T]: the mean cross-entropy over the tokens that count
    (label -100 on the others, as eebench.data.batching.collate pads them); 0 where none does."""
    import torch.nn.functional as F

    if logits.ndim == 3:  # a tag per token
        if is_regression:
            raise ValueError("token heads classify: no regression over tokens")
        counts = labels != IGNORE
        if not bool(counts.any()):
            return logits.sum() * 0.0  # keeps the graph; a batch with no counting token
        return F.cross_entropy(logits[counts].float(), labels[counts])
    if is_regression:
        return F.mse_loss(logits[:, 0].float(), labels.float())
    return F.cross_entropy(logits.float(), labels)

