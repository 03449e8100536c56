"""Exit when a learned exit score is low enough (BERxiT's learning-to-exit head): the head predicts
how likely exit j is to be wrong (classification) or how far off (regression), and a sample exits
at the first exit whose score is below the threshold."""

from __future__ import annotations

from typing import Any

import torch

from eebench.errors import EebenchError
from eebench.rules.base import ExitRule, Signals, State, StepResult, meets

EXIT_SCORE = "exit_score"  # the signal's name in a model's head outputs and in stored runs


class LearnedExitRule(ExitRule):
    """Exit where the model's own exit score (signal `exit_score`, in [0, 1]) < threshold."""

    def __init__(self, threshold: float, comparison: str = "<"):
        self.threshold = float(threshold)
        self.comparison = comparison

    def start(self, n: int, device: Any = None) -> State:
        return {}

    def step(self, state: State, exit_index: int, logits: torch.Tensor,
             signals: Signals | None = None) -> StepResult:
        if not signals or EXIT_SCORE not in signals:  # a method bug: the rule checks first
            raise EebenchError("the learned exit rule needs the model's exit score")
        score = signals[EXIT_SCORE].float()
        return StepResult(state, meets(score, self.threshold, self.comparison),
                          (score - self.threshold).abs())
