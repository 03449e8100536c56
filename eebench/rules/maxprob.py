"""Exit when the largest class probability reaches a threshold (Schwartz et al. 2020; SWEET and
CascadeBERT read the same confidence), optionally of temperature-scaled logits, one temperature
per exit (softmax(z / T_j), fit after training: eebench.methods.maxprob)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from eebench.rules.base import ExitRule, Signals, State, StepResult, meets


def max_prob(logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """max_c softmax(logits / T)_c per row."""
    return torch.softmax(logits.float() / temperature, dim=-1).max(-1).values


class MaxProbRule(ExitRule):
    """Exit where max softmax(z / T_j) >= threshold (or the `comparison` given); `temperatures[j]`
    is exit j's T (None: 1)."""

    def __init__(self, threshold: float, temperatures: Sequence[float] | None = None,
                 comparison: str = ">="):
        self.threshold = float(threshold)
        self.comparison = comparison
        self.temperatures = None if temperatures is None else [float(t) for t in temperatures]

    def start(self, n: int, device: Any = None) -> State:
        return {}

    def step(self, state: State, exit_index: int, logits: torch.Tensor,
             signals: Signals | None = None) -> StepResult:
        t = 1.0 if self.temperatures is None else self.temperatures[exit_index]
        p = max_prob(logits, t)
        return StepResult(state, meets(p, self.threshold, self.comparison),
                          (p - self.threshold).abs())
