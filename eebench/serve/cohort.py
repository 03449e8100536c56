"""Requests admitted together: one batch walking a model's exits, shrinking as samples exit.

A cohort is real dynamic inference on one batch (eebench.rules.engine.dynamic_batch) taken one
exit at a time, so that a scheduler can run other cohorts between its steps and answer each
request the moment it exits: `advance()` runs the model on to the next exit, asks the exit rule,
and returns the requests that exit there (their exit index and prediction); the others stay in
the batch, with the padding columns no remaining sample needs cut (the walk's `keep`). The exit
rule and the walk are the engine's and the model's own (eebench.models.exits), so a cohort
decides exactly as `dynamic_batch` does; a test holds the two together.

`full=True` asks only the last exit: the full model, timed the same way.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from eebench.rules.base import ExitRule, select_state
from eebench.rules.engine import predictions_from_logits

Exited = tuple[np.ndarray, np.ndarray, np.ndarray]  # requests, exit index, prediction


class Cohort:
    """One batch of requests (`requests[i]` is row i of `batch`) on its way through `model`."""

    def __init__(self, model: Any, rule: ExitRule, batch: dict, requests: np.ndarray,
                 is_regression: bool, full: bool = False):
        device = next(model.parameters()).device
        mask = batch["attention_mask"].to(device)
        types = batch["token_type_ids"].to(device) if "token_type_ids" in batch else None
        self.model, self.rule, self.full, self.is_regression = model, rule, full, is_regression
        self.requests = np.asarray(requests)
        with torch.inference_mode():
            self.walk = model.exit_walk(batch["input_ids"].to(device), mask, types)  # embeds
        self.state = rule.start(len(self.requests), device)
        self.exit = 0  # the next exit this cohort reaches
        self.last = model.num_exits - 1

    def __len__(self) -> int:
        return len(self.requests)

    @property
    def done(self) -> bool:
        return len(self.requests) == 0

    @torch.inference_mode()
    def advance(self) -> Exited:
        """Run on to the next exit; the requests that exit there (none at an exit nobody asks)."""
        j, self.exit = self.exit, self.exit + 1
        none = (self.requests[:0], np.zeros(0, np.int64), np.zeros(0))
        out = self.walk.step(j, emit=not self.full or j == self.last)
        if out is None:
            return none
        logits, signals = out
        if j == self.last:
            go = torch.ones(len(self.requests), dtype=torch.bool, device=logits.device)
        else:
            step = self.rule.step(self.state, j, logits, signals)
            go, self.state = step.exit, step.state
        go_np = go.cpu().numpy()  # one device sync per exit
        if not go_np.any():
            return none
        pred = predictions_from_logits(logits[go], self.is_regression).float().cpu().numpy()
        exited = (self.requests[go_np], np.full(int(go_np.sum()), j, np.int64), pred)
        if go_np.all():
            self.requests = self.requests[:0]
            return exited
        keep = ~go
        self.requests, self.state = self.requests[~go_np], select_state(self.state, keep)
        self.walk.keep(keep)
        return exited
