"""How a method trains, by default: one joint stage (every parameter, every exit's loss), the sum
of the exits' losses. A method changes only what differs (its stages, its loss); what it may
add, calibrating or routing, is in eebench.methods.protocols."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from eebench.methods.stages import Stage, exit_loss, joint

if TYPE_CHECKING:  # torch stays out of `eebench --help`
    import torch


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

