"""Exit when the prediction's entropy falls below a threshold (DeeBERT; FastBERT normalises it)."""

from __future__ import annotations

from typing import Any

import torch

from eebench.rules.base import ExitRule, State, StepResult


def entropy(logits: torch.Tensor) -> torch.Tensor:
    """H(softmax(logits)) per row, in nats."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(-1)


class EntropyRule(ExitRule):
    """Exit where the entropy of the prediction is below the threshold."""

    def __init__(self, threshold: float):
        self.threshold = float(threshold)

    def start(self, n: int, device: Any = None) -> State:
        return {}

    def step(self, state: State, exit_index: int, logits: torch.Tensor) -> StepResult:
        h = entropy(logits)
        return StepResult(state, h < self.threshold, (h - self.threshold).abs())
