"""How a method trains, by default: one joint stage (every parameter, every exit's loss), the sum
of the exits' losses. A method changes only what differs (its stages, its loss).

Two optional protocols, not on the base class: a method that fits something after training
(maxprob's temperatures) implements `Calibrates`; one that acts on the gradient's way between
layers and heads while a stage trains (SWEET's detaching, ElasticBERT's gradient equilibrium)
implements `Routes`. Nothing else is needed: the trainer asks eebench.methods.derived
(`calibration_fraction`, `route`), which checks for them with isinstance, in one place."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from eebench.methods.stages import Stage, exit_loss, joint

if TYPE_CHECKING:  # torch stays out of `eebench --help`
    import torch
    from torch import nn

    from eebench.models.multi_exit import Route


class TrainingDefaults:
    """The training part of EarlyExitMethod."""

    def stages(self) -> list[Stage]:
        """One joint stage: every parameter, every exit's loss (named by a method's
        `joint_stage`, "joint" by default)."""
        return [joint(getattr(self, "joint_stage", "joint"))]

    def loss(self, exit_logits: Sequence[torch.Tensor], labels: torch.Tensor, stage: Stage,
             is_regression: bool, step: int = 0) -> torch.Tensor:
        """Loss over the exits of `stage` (exit_logits[j] is [batch, num_labels], followed by
        the head's signal columns where it has some); `step` is the batch's index in its epoch,
        from 0 (for schedules such as BERxiT's alternating one). Default: the sum of the exits'
        losses."""
        from eebench.methods.derived import check_regression

        check_regression(self, is_regression)
        return sum(exit_loss(exit_logits[j], labels, is_regression)
                   for j in stage.exit_indices(len(exit_logits)))


@runtime_checkable
class Calibrates(Protocol):
    """A method that fits what its rule needs after training, on a held-out slice."""

    def calibration_fraction(self) -> float:
        """The share of the training split held out of training for `calibrate` (> 0)."""

    def calibrate(self, model: nn.Module, outputs: Any) -> None:
        """Fit on the held-out slice (`outputs`: its ExitOutputs, every exit's logits and the
        labels)."""


@runtime_checkable
class Routes(Protocol):
    """A method that acts on the hidden states' way to the heads and the next layer."""

    def route(self, stage: Stage, num_exits: int) -> Route | None:
        """How the hidden states reach the heads and the next layer while `stage` trains a
        model of `num_exits` exits (see MultiExitModel.forward); None: unchanged."""
