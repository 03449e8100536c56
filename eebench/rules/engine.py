"""The exit engine: exit decisions for any sweep without re-running the model, and the real thing.

Exit rules only need the logits of exits 1..k, so the model runs once per sample and keeps every
exit's logits (eebench.models.outputs); `simulate` then replays a stepwise exit rule over the
stored logits for each sweep value. `dynamic_inference` is the real thing (batch
shrinking, or batch size 1): it stops computing for samples that exit. Both call the same
`ExitRule.step`, so their decisions agree up to float noise; `compare` counts disagreements and
how many sit within float tolerance of the decision boundary.

`exit_loop` is the one dynamic loop for every model and every exit unit (a label per text, a tag
per token, a generated token of a decoder; eebench.models.units): what differs between units (the
shapes, how a rule's state is started and cut, what is recorded, what is carried upward when a
token halts) it asks the unit. Token-level halting (TOKEE, eebench.rules.token_halting) is this
loop over a walk that freezes the halted tokens' states; CALM's decoding
(eebench.rules.calm_decoding) is this loop once per generated position, over a walk whose exited
token's state fills the skipped layers' KV cache.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from eebench.models.exits import ExitWalk
from eebench.models.units import Agreement, Tracker, model_unit, unit_of
from eebench.rules.base import ExitRule

__all__ = ["MARGIN_TOLERANCE", "Agreement", "Decisions", "compare", "dynamic_batch",
           "dynamic_inference", "exit_loop", "predictions_from_logits", "simulate",
           "simulate_pass"]

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


def simulate_pass(rule: ExitRule, out: Any, is_regression: bool = False, unit: Any = None
                  ) -> Any:
    """`simulate` over one full pass's outputs, as its unit reads them: Decisions over a
    sequence model's ExitOutputs, TokenDecisions (eebench.rules.tokens.simulate_tokens) over a
    token model's TokenOutputs (its counting tokens' mask)."""
    if unit_of(unit).per_token:
        from eebench.rules.tokens import simulate_tokens

        return simulate_tokens(rule, out.logits, out.mask)
    return simulate(rule, out.logits, is_regression, out.signals)


@torch.inference_mode()
def exit_loop(model, rule: ExitRule, batch: dict, is_regression: bool = False,
              full: bool = False, counting: torch.Tensor | None = None,
              walk: ExitWalk | None = None) -> Tracker:
    """The one dynamic loop, for any model of the exit protocol (eebench.models.exits) and any
    unit (eebench.models.units: the model's `unit`): the batch walks the model exit by exit; after
    each exit the rule decides, the unit's tracker records what was decided, the unit carries
    what halted upward (a walk that freezes pieces copies their states), and the pieces that are
    done leave the batch (with the padding columns no remaining piece needs). `full=True` asks
    only the last exit (a multi-exit model runs all its layers; models run in turn, every model
    whole): the baseline timed the same way. `counting` (a token batch's counting pieces, bool
    [B, T]) defaults to the unit's reading of the batch; `walk` to the model's own."""
    unit = model_unit(model)
    device = next(model.parameters()).device
    mask = batch["attention_mask"].to(device)
    if walk is None:
        types = batch["token_type_ids"].to(device) if "token_type_ids" in batch else None
        walk = model.exit_walk(batch["input_ids"].to(device), mask, types)
    if counting is None:
        counting = unit.counting(batch)
    if counting is not None:
        counting = counting.to(device).bool()
    n, last = mask.shape[0], model.num_exits - 1
    alive = torch.arange(n, device=device)
    track = unit.tracker(n, counting, last, device, is_regression)
    state = unit.start(rule, n, counting, device)
    for j in range(model.num_exits):
        out = walk.step(j, emit=not full or j == last)
        if out is None:
            continue
        logits, signals = out
        if j == last:
            step, go = None, torch.ones(len(alive), dtype=torch.bool, device=device)
        else:
            step = rule.step(unit.fit(state, logits), j, logits, signals)
            go, state = step.exit, step.state
            unit.carry(walk, step)
        n_exit = int(go.sum())  # one device sync per exit
        track.record(alive, j, logits, step, go, n_exit)
        if n_exit == 0:
            continue  # nobody leaves: no copies
        if n_exit == len(alive):
            break
        keep = ~go
        alive, state = alive[keep], unit.cut(state, keep)
        walk.keep(keep)
    return track


@torch.inference_mode()
def dynamic_batch(model, rule: ExitRule, batch: dict, is_regression: bool = False,
                  full: bool = False, counting: torch.Tensor | None = None,
                  walk: Callable[[dict], ExitWalk] | None = None
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """Real early-exit inference on one batch (`exit_loop`; `walk(batch)` a walk other than the
    model's own, e.g. token halting's). Returns (exit_index [B], prediction: [B] for a sequence
    model, [B, T] for a token model: the argmax where each counting token was decided, -1
    elsewhere), in batch order, on the CPU."""
    return exit_loop(model, rule, batch, is_regression, full, counting,
                     None if walk is None else walk(batch)).answer()


def dynamic_inference(model, rule: ExitRule, batches: Iterable[dict], n: int,
                      is_regression: bool = False, full: bool = False,
                      timer: Callable[[], AbstractContextManager] | None = None,
                      enc: Any = None, walk: Callable[[dict], ExitWalk] | None = None) -> Any:
    """Real early-exit inference over a split of `n` samples, in whatever batch size `batches`
    yields; rows no batch holds stay 0. `timer()` (e.g. a Stopwatch's `time`) brackets each batch,
    so wall time covers the model alone, not the bookkeeping. A sequence model gives Decisions;
    a token model (whose split `enc`, an EncodedWords, says the counting tokens and lengths)
    a TokenRun. `walk` as for `dynamic_batch`."""
    unit = model_unit(model)
    gathered = unit.gather(n, enc, is_regression)
    for batch in batches:
        counting = unit.counting(batch, enc)
        with timer() if timer is not None else nullcontext():
            answer = dynamic_batch(model, rule, batch, is_regression, full=full,
                                   counting=counting, walk=walk)
        gathered.add(batch["index"].cpu().tolist(), answer)
    return gathered.result(Decisions)


def compare(simulated: Any, real: Any, indices: Sequence[int] | None = None,
            is_regression: bool = False, atol: float = 1e-4, unit: Any = None) -> Agreement:
    """Count pieces where real dynamic inference decided otherwise than the simulation (its
    unit's way: samples' exit and prediction, or sentences' exit and every counting token's
    prediction), and how many of them sit within MARGIN_TOLERANCE of the boundary."""
    return unit_of(unit).agreement(simulated, real, indices, is_regression, atol,
                                   MARGIN_TOLERANCE)
