"""What timing real inference costs, for the dry run's estimates (eebench.run.backends.plan).

A finished run's timing is in its own files: each timed point's `timings` keep the raw time of
every batch (`raw_ms`), of real dynamic inference and of the full model, at each batch size, so
their sum is what it spent timed. Each timed side of a point also ran `[timing] warmup` batches
of the same subset before (untimed, so not in `raw_ms`); they are counted as that many batches
of the timing's mean, at most a repeat's batches (at batch size 32, 100 samples are 4 batches,
so its warm-up costs as much again as the timed pass). With the full model timed once per model
(`baseline = "once"`) every point repeats the one measurement: it counts once per model.

A point that is not timed (`[timing] points`, or timing off) still runs real inference once,
unwarmed, at the largest batch size, to check the simulation: it is counted as a timed point's
dynamic pass at that batch size (one repeat), the mean over the run's timed points.

A cell's estimate takes a source run's measured timing out of its time and puts the cell's own
in: the source's timing per timed point times the points the cell times, and a check for each
point it does not (`estimate`). A source that timed nothing tells nothing about timing: its time
is carried over as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from eebench.errors import EebenchError

if TYPE_CHECKING:
    from eebench.run.artifacts import RunConfig
    from eebench.run.config import TimingConfig


@dataclass(frozen=True)
class TimingCost:
    """A finished run's timing, as its points record it."""

    seconds: float  # timed batches and their warm-up
    timed: int  # points timed
    untimed: int  # points only checked, untimed
    check: float  # one untimed check, in seconds (see the module docstring)
    resumed: bool = False  # its recorded time is its training alone (its summary: trained > wall)


def points_of(rc: RunConfig) -> tuple[int, int]:
    """The points a run would time and those it would only check (`[timing] points`)."""
    timed = len(rc.timing.timed_values(rc.sweep))
    return timed, len(rc.sweep) - timed


def timing_cost(run_dir: str | Path) -> TimingCost | None:
    """The timing a finished run recorded (None: not finished, or not readable as a run); read
    once per version of its summary (a run done again is read again)."""
    from eebench.run.artifacts import SUMMARY_FILE

    try:
        written = (Path(run_dir) / SUMMARY_FILE).stat().st_mtime_ns
    except OSError:
        return None
    return _timing_cost(str(run_dir), written)


@cache
def _timing_cost(run_dir: str, written: int) -> TimingCost | None:
    from eebench.run.artifacts import read_run

    try:
        run = read_run(Path(run_dir))
    except EebenchError:
        return None
    timing, seconds, checks, shared = run.config.timing, 0.0, [], set()
    for p in run.points:
        dynamic = [t for t in p.timings if t.mode == "dynamic"]
        if not dynamic:
            continue
        for t in p.timings:
            if t.mode == "full" and timing.baseline == "once":  # the model's one measurement
                if (p.variant, t.batch_size) in shared:
                    continue
                shared.add((p.variant, t.batch_size))
            seconds += _with_warmup(t.raw_ms, timing)
        largest = max(dynamic, key=lambda t: t.batch_size)
        checks.append(sum(largest.raw_ms) / 1e3 / timing.repeats)
    summary = run.summary
    resumed = (summary is not None and summary.train_seconds is not None
               and summary.wall_seconds is not None
               and summary.train_seconds > summary.wall_seconds)
    return TimingCost(seconds, len(checks), len(run.points) - len(checks),
                      sum(checks) / len(checks) if checks else 0.0, resumed)


def _with_warmup(raw_ms: list[float], timing: TimingConfig) -> float:
    """One timing's seconds: its raw batch times and the warm-up batches before them."""
    if not raw_ms:
        return 0.0
    batches = len(raw_ms) / timing.repeats
    mean = sum(raw_ms) / len(raw_ms)
    return (sum(raw_ms) + mean * min(timing.warmup, batches)) / 1e3


def estimate(seconds: float, trained: float | None, by_steps: float, cost: TimingCost | None,
             timed: int, untimed: int) -> float:
    """A cell's time from a source run's: `seconds` (its recorded time) of which `trained` went
    to training (None: unknown, or the run was resumed), training scaled by `by_steps`, the
    rest carried over with the source's timing (`cost`) replaced by the cell's, which times
    `timed` points and checks `untimed` others. Where the training part is unknown, all of the
    source's time but its timing scales by steps; a resumed run's time is its training alone."""
    if cost is None or cost.timed == 0:  # nothing known of its timing: as it is
        return seconds * by_steps if trained is None else seconds - trained + trained * by_steps
    had = cost.seconds + cost.check * cost.untimed
    own = cost.seconds / cost.timed * timed + cost.check * untimed
    if trained is not None:
        return trained * by_steps + max(0.0, seconds - trained - had) + own
    if cost.resumed:
        return seconds * by_steps + own
    return max(0.0, seconds - had) * by_steps + own
