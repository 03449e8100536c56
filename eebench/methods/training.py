"""How a method trains, by default: one joint stage (every parameter, every exit's loss), the sum
of the exits' losses, the hidden states unchanged on their way, nothing fit after training. A
method changes only what differs (its stages, its loss, a route for the gradient, a calibration)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from eebench.methods.stages import Stage, exit_loss, joint

if TYPE_CHECKING:  # torch stays out of `eebench --help`
    import torch
    from torch import nn

    from eebench.models.multi_exit import Route


class TrainingDefaults:
    """The training part of EarlyExitMethod."""

    joint_stage: ClassVar[str] = "joint"  # the name of the one stage of `stages()`' default

    def stages(self) -> list[Stage]:
        """One joint stage: every parameter, every exit's loss."""
        return [joint(self.joint_stage)]

    def loss(self, exit_logits: Sequence[torch.Tensor], labels: torch.Tensor, stage: Stage,
             is_regression: bool, step: int = 0) -> torch.Tensor:
        """Loss over the exits of `stage` (exit_logits[j] is [batch, num_labels], followed by
        the head's signal columns where it has some); `step` is the batch's index in its epoch,
        from 0 (for schedules such as BERxiT's alternating one). Default: the sum of the exits'
        losses."""
        self.check_regression(is_regression)
        return sum(exit_loss(exit_logits[j], labels, is_regression)
                   for j in stage.exit_indices(len(exit_logits)))

    def route(self, stage: Stage, num_exits: int) -> Route | None:
        """How the hidden states reach the heads and the next layer while `stage` trains a model
        of `num_exits` exits (see MultiExitModel.forward); None: unchanged."""
        return None

    def calibration_fraction(self) -> float:
        """The share of the training split held out of training for `calibrate` (0: none)."""
        return 0.0

    def calibrate(self, model: nn.Module, outputs: Any) -> None:
        """After training: fit what the rule needs on the held-out slice (`outputs`: its
        ExitOutputs, every exit's logits and the labels). Called only with a fraction > 0."""
