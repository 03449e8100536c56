"""Exit when the prediction's entropy falls below a threshold: in nats (DeeBERT), or divided by
its largest value ln C (FastBERT's "uncertainty", also what PCEE-BERT's counter reads)."""

from __future__ import annotations

import math
from typing import Any

import torch

from eebench.rules.base import ExitRule, Signals, State, StepResult, meets


def entropy(logits: torch.Tensor) -> torch.Tensor:
    """H(softmax(logits)) per row, in nats."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(-1)


def normalized_entropy(logits: torch.Tensor) -> torch.Tensor:
    """H(softmax(logits)) / ln C per row: 0 for a certain prediction, 1 for a uniform one."""
    return entropy(logits) / math.log(max(int(logits.shape[-1]), 2))


class EntropyRule(ExitRule):
    """Exit where the entropy of the prediction is below the threshold (`normalized`: H / ln C)."""

    def __init__(self, threshold: float, normalized: bool = False, comparison: str = "<"):
        self.threshold = float(threshold)
        self.normalized = normalized
        self.comparison = comparison

    def start(self, n: int, device: Any = None) -> State:
        return {}

    def step(self, state: State, exit_index: int, logits: torch.Tensor,
             signals: Signals | None = None) -> StepResult:
        h = normalized_entropy(logits) if self.normalized else entropy(logits)
        return StepResult(state, meets(h, self.threshold, self.comparison),
                          (h - self.threshold).abs())
