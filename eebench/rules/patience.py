"""Patience rules: exit once the prediction has stopped changing for `patience` exits (PABEE), or
once `patience` consecutive exits were confident (PCEE-BERT)."""

from __future__ import annotations

from typing import Any

import torch

from eebench.rules.base import ExitRule, Signals, State, StepResult, meets
from eebench.rules.entropy import normalized_entropy


class PatienceRule(ExitRule):
    """Exit once the prediction has stayed the same for `patience` consecutive layers."""

    def __init__(self, patience: int, regression_threshold: float | None = None):
        self.patience = patience
        self.tau = regression_threshold  # None: classification

    def start(self, n: int, device: Any = None) -> State:
        return {"count": torch.zeros(n, dtype=torch.long, device=device),
                "prev": torch.zeros(n, device=device),  # last prediction (label id or score)
                "seen": torch.zeros(n, dtype=torch.bool, device=device)}

    def step(self, state: State, exit_index: int, logits: torch.Tensor,
             signals: Signals | None = None) -> StepResult:
        logits = logits.float()
        if self.tau is None:
            pred = logits.argmax(-1).float()
            same = state["seen"] & (pred == state["prev"])
            top2 = logits.topk(2, dim=-1).values
            margin = top2[:, 0] - top2[:, 1]  # how close the prediction was to flipping
        else:
            pred = logits[:, 0]
            delta = (pred - state["prev"]).abs()
            same = state["seen"] & (delta < self.tau)
            margin = torch.where(state["seen"], (delta - self.tau).abs(), float("inf"))
        count = torch.where(same, state["count"] + 1, torch.zeros_like(state["count"]))
        new = {"count": count, "prev": pred, "seen": torch.ones_like(state["seen"])}
        return StepResult(new, count >= self.patience, margin)


class ConfidentPatienceRule(ExitRule):
    """Count consecutive confident exits (normalised entropy H / ln C below `threshold`); a
    not-confident exit resets the count; exit once it reaches `patience`."""

    def __init__(self, threshold: float, patience: int, comparison: str = "<"):
        self.threshold = float(threshold)
        self.patience = int(patience)
        self.comparison = comparison

    def start(self, n: int, device: Any = None) -> State:
        return {"count": torch.zeros(n, dtype=torch.long, device=device)}

    def step(self, state: State, exit_index: int, logits: torch.Tensor,
             signals: Signals | None = None) -> StepResult:
        h = normalized_entropy(logits)
        confident = meets(h, self.threshold, self.comparison)
        count = torch.where(confident, state["count"] + 1, torch.zeros_like(state["count"]))
        return StepResult({"count": count}, count >= self.patience, (h - self.threshold).abs())
