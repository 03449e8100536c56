"""The exit engine: exit decisions for any sweep without re-running the model, and the real thing.

Exit rules only need the logits of exits 1..k, so the model runs once per sample and keeps every
exit's logits (eebench.models.outputs); `simulate` then replays a stepwise exit rule over the
stored logits for each sweep value. `dynamic_inference` is the real thing (batch
shrinking, or batch size 1): it stops computing for samples that exit. Both call the same
`ExitRule.step`, so their decisions agree up to float noise; `compare` counts disagreements and
how many sit within float tolerance of the decision boundary.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import numpy as np
import torch

from eebench.rules.base import ExitRule, select_state

# A disagreement between simulation and real inference is excused only this close to the boundary.
MARGIN_TOLERANCE = 1e-4


@dataclass
class Decisions:
    """Where each sample exits and what it predicts there."""

    exit_index: np.ndarray  # [N] 0-based exit index
    prediction: np.ndarray  # [N] label id, or the score for regression
    margin: np.ndarray  # [N] smallest margin over the steps up to the exit


def predictions_from_logits(logits: torch.Tensor, is_regression: bool) -> torch.Tensor:
    return logits[..., 0] if is_regression else logits.argmax(-1)


def simulate(rule: ExitRule, logits: torch.Tensor, is_regression: bool,
             signals: dict[str, torch.Tensor] | None = None) -> Decisions:
    """Replay the stepwise exit rule over stored logits [E, N, C] (and signals [E, N] by name,
    where the heads have some); the last exit always exits."""
    num_exits, n = logits.shape[:2]
    state = rule.start(n, logits.device)
    exit_index = torch.full((n,), num_exits - 1, dtype=torch.long)
    exited = torch.zeros(n, dtype=torch.bool)
    margin = torch.full((n,), float("inf"))
    for j in range(num_exits):
        step = rule.step(state, j, logits[j], {k: v[j] for k, v in (signals or {}).items()})
        state = step.state
        running = ~exited
        margin[running] = torch.minimum(margin[running], step.margin[running].float())
        now = running & step.exit if j < num_exits - 1 else running
        exit_index[now] = j
        exited |= now
    preds = predictions_from_logits(logits[exit_index, torch.arange(n)], is_regression)
    return Decisions(exit_index.numpy(), preds.numpy(), margin.numpy())


@torch.inference_mode()
def dynamic_batch(model, rule: ExitRule, batch: dict, is_regression: bool, full: bool = False
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """Real early-exit inference on one batch, for any model of the exit protocol
    (eebench.models.exits): the model walks the batch exit by exit, and after each exit the
    samples that exit leave it (with the padding columns no remaining sample needs). `full=True`
    asks only the last exit (a multi-exit model runs all its layers; models run in turn, every
    model whole): the baseline timed the same way. Returns (exit_index [B], prediction [B]) in
    batch order."""
    device = next(model.parameters()).device
    mask = batch["attention_mask"].to(device)
    types = batch["token_type_ids"].to(device) if "token_type_ids" in batch else None
    walk = model.exit_walk(batch["input_ids"].to(device), mask, types)
    n, last = mask.shape[0], model.num_exits - 1
    alive = torch.arange(n, device=device)
    out_exit = torch.full((n,), last, dtype=torch.long, device=device)
    out_pred = torch.zeros(n, device=device)
    state = rule.start(n, device)
    for j in range(model.num_exits):
        out = walk.step(j, emit=not full or j == last)
        if out is None:
            continue
        logits, signals = out
        if j == last:
            go = torch.ones(len(alive), dtype=torch.bool, device=device)
        else:
            step = rule.step(state, j, logits, signals)
            go, state = step.exit, step.state
        n_exit = int(go.sum())  # one device sync per exit
        if n_exit == 0:
            continue  # nobody leaves: no copies
        out_exit[alive[go]] = j
        out_pred[alive[go]] = predictions_from_logits(logits[go], is_regression).float()
        if n_exit == len(alive):
            break
        keep = ~go
        alive, state = alive[keep], select_state(state, keep)
        walk.keep(keep)
    return out_exit.cpu(), out_pred.cpu()


def dynamic_inference(model, rule: ExitRule, batches: Iterable[dict], n: int, is_regression: bool,
                      full: bool = False, timer: Callable[[], AbstractContextManager] | None = None
                      ) -> Decisions:
    """Real early-exit inference over a split of `n` samples, in whatever batch size `batches`
    yields; rows no batch holds stay 0. `timer()` (e.g. a Stopwatch's `time`) brackets each batch,
    so wall time covers the model alone, not the bookkeeping."""
    exit_index = np.zeros(n, dtype=np.int64)
    prediction = np.zeros(n, dtype=np.float64)
    for batch in batches:
        with timer() if timer is not None else nullcontext():
            e, p = dynamic_batch(model, rule, batch, is_regression, full=full)
        idx = batch["index"].cpu().numpy()
        exit_index[idx], prediction[idx] = e.numpy(), p.numpy()
    if not is_regression:
        prediction = prediction.astype(np.int64)
    return Decisions(exit_index, prediction, np.full(n, np.inf))


@dataclass
class Agreement:
    compared: int
    disagreements: int  # exit layer or prediction differ
    near_threshold: int  # of those, how many sit within MARGIN_TOLERANCE of the boundary

    @property
    def unexplained(self) -> int:
        return self.disagreements - self.near_threshold


def compare(simulated: Decisions, real: Decisions, indices: np.ndarray | None = None,
            is_regression: bool = False, atol: float = 1e-4) -> Agreement:
    """Count samples where real dynamic inference decided otherwise than the simulation."""
    idx = np.arange(len(simulated.exit_index)) if indices is None else indices
    same_exit = simulated.exit_index[idx] == real.exit_index[idx]
    if is_regression:
        same_pred = np.isclose(simulated.prediction[idx], real.prediction[idx], atol=atol)
    else:
        same_pred = simulated.prediction[idx] == real.prediction[idx]
    bad = ~(same_exit & same_pred)
    near = bad & (simulated.margin[idx] < MARGIN_TOLERANCE)
    return Agreement(len(idx), int(bad.sum()), int(near.sum()))
