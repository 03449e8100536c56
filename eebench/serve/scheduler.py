"""Three schedulers over one arrival list, on the real model, in real time.

A request is a sample of the task's split and an arrival time. The serving loop takes arrived
requests into a waiting queue and runs *cohorts* (eebench.serve.cohort: a batch walking the
model's exits); each scheduler differs only in when waiting requests are admitted:

- `full`: dynamic batching of the full model (no exit): when the model is idle, every waiting
  request, up to `max_batch`, forms one batch that runs all its layers;
- `shrink`: batch shrinking, today's dynamic inference: the same admission, but the batch runs
  exit by exit and exited samples leave it (each answered when it exits); new requests wait
  until the whole batch has left;
- `continuous`: continuous rebatching: a queue per exit depth. Each round admits waiting
  requests at the embedding, up to `max_batch` samples in flight in all, as one new cohort, then
  moves every cohort in flight on by one exit, deepest first. Samples that exit free their place
  for the next round's admissions; exit decisions are each cohort's own, unchanged.

Times come from a `Clock`: `WallClock` (the default) is real time; `StepClock` advances by a
fixed cost per model step instead, so that a test can check admissions and refills exactly.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from eebench.data.batching import Encoded, collate
from eebench.errors import UsageError
from eebench.rules.base import ExitRule, FixedRule
from eebench.serve.cohort import Cohort

SCHEDULERS = ("full", "shrink", "continuous")


class Clock(Protocol):
    def now(self) -> float: ...  # seconds

    def sleep_until(self, t: float) -> None: ...

    def ran(self, rows: int) -> None: ...  # a model step on `rows` samples has just run


class WallClock:
    """Real time (time.perf_counter); a cohort's step ends with a device sync where it answers,
    so a request's finish time covers its work on a GPU too."""

    def now(self) -> float:
        return time.perf_counter()

    def sleep_until(self, t: float) -> None:
        wait = t - time.perf_counter()
        if wait > 0:
            time.sleep(wait)

    def ran(self, rows: int) -> None:
        pass


@dataclass
class StepClock:
    """A simulated clock: each model step (an embedding or one exit of a cohort) costs
    `fixed + per_row * rows` seconds, and waiting for an arrival jumps to it. Deterministic."""

    fixed: float = 1.0
    per_row: float = 0.0
    t: float = 0.0

    def now(self) -> float:
        return self.t

    def sleep_until(self, t: float) -> None:
        self.t = max(self.t, t)

    def ran(self, rows: int) -> None:
        self.t += self.fixed + self.per_row * rows


@dataclass
class Served:
    """Per request (in arrival order): its sample, times in seconds from the start, where it
    exited and what it predicted; and the rows of every model step, for the batch sizes run."""

    scheduler: str
    sample: np.ndarray  # [R] row of the split
    arrival: np.ndarray  # [R]
    start: np.ndarray  # [R] admitted (its embedding begins)
    finish: np.ndarray  # [R] answered
    exit_index: np.ndarray  # [R] 0-based exit
    prediction: np.ndarray  # [R]
    step_rows: list[int]

    @property
    def latency(self) -> np.ndarray:
        return self.finish - self.arrival


def admissions(scheduler: str, in_flight: int, max_batch: int) -> int:
    """How many waiting requests a scheduler admits now, with `in_flight` samples running."""
    if scheduler == "continuous":
        return max_batch - in_flight
    return max_batch if in_flight == 0 else 0


def serve(model: Any, make_rule: Callable[[], ExitRule], data: Encoded, samples: np.ndarray,
          arrivals: np.ndarray, scheduler: str, max_batch: int, is_regression: bool,
          clock: Clock | None = None) -> Served:
    """Replay `arrivals` (seconds, sorted; request i asks for row `samples[i]` of `data`) with
    one scheduler; every request is answered, in whatever order it exits."""
    if scheduler not in SCHEDULERS:
        raise UsageError(f"unknown scheduler {scheduler!r}", hint=f"one of {', '.join(SCHEDULERS)}")
    if max_batch < 1:
        raise UsageError(f"--max-batch must be at least 1, got {max_batch}")
    arrivals = np.asarray(arrivals, dtype=np.float64)
    samples = np.asarray(samples, dtype=np.int64)
    if len(samples) != len(arrivals) or np.any(np.diff(arrivals) < 0):
        raise ValueError("one sample per arrival, arrivals in order")  # a caller's bug
    clock = clock or WallClock()
    full = scheduler == "full"
    rule = FixedRule(exit=False) if full else make_rule()
    device = next(model.parameters()).device
    n = len(arrivals)
    start, finish = np.full(n, np.nan), np.full(n, np.nan)
    exit_index, prediction = np.zeros(n, np.int64), np.zeros(n)
    step_rows: list[int] = []
    waiting: deque[int] = deque()
    cohorts: list[Cohort] = []  # oldest (deepest) first
    arrived = answered = 0
    t0 = clock.now()
    while answered < n:
        now = clock.now() - t0
        while arrived < n and arrivals[arrived] <= now:
            waiting.append(arrived)
            arrived += 1
        if not cohorts and not waiting:
            clock.sleep_until(t0 + arrivals[arrived])
            continue
        room = min(admissions(scheduler, sum(map(len, cohorts)), max_batch), len(waiting))
        if room > 0:
            take = np.array([waiting.popleft() for _ in range(room)])
            start[take] = clock.now() - t0
            batch = collate(data, samples[take].tolist(), device)
            cohorts.append(Cohort(model, rule, batch, take, is_regression, full=full))
            clock.ran(room)
        for cohort in cohorts:
            step_rows.append(len(cohort))
            req, e, p = cohort.advance()
            clock.ran(step_rows[-1])
            if len(req):
                finish[req] = clock.now() - t0
                exit_index[req], prediction[req] = e, p
                answered += len(req)
        cohorts = [c for c in cohorts if not c.done]
    return Served(scheduler, samples, arrivals, start, finish, exit_index, prediction, step_rows)
