"""The local backend: a grid's cells one after another in this process.

It is one engine beside Slurm and Ray, driven by the same driver (eebench.run.backends.driver),
with two differences that suit working at a terminal: a cell that fails raises at once (fix the
cause and rerun the same command: finished cells are kept), so nothing is recorded as failed, and
a cell that an earlier backend recorded as failed is simply run again. A cell whose run another
process holds (two `eebench run` processes sharing a grid) comes back `busy`: the caller says so
and does not exit 0. With `stop_by` (`eebench run --stop-by`), a cell still to do starts only if
its estimate (the dry run's, at this machine's pace once measured: eebench.run.backends.pace)
ends by then; the others come back `deferred`, not started.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from eebench.run.backends.cells import (
    Cell,
    CellOutcome,
    WorkerOptions,
    cell_dir,
    clear_error,
    execute_runs,
    run_options,
    status,
)
from eebench.run.backends.engine import BackendOptions, Engine, Handle
from eebench.run.backends.pace import Pace
from eebench.run.backends.plan import PlannedCell


class LocalEngine(Engine):
    name = "local"
    in_process = True

    def __init__(self, opts: BackendOptions, worker: WorkerOptions, say: Callable[[str], None],
                 console: Any = None, progress: Any = None,
                 on_outcome: Callable[[Cell, CellOutcome], None] | None = None,
                 estimates: Callable[[], dict[str, PlannedCell]] | None = None) -> None:
        super().__init__(opts, worker, say)
        self.console, self.progress, self.on_outcome = console, progress, on_outcome
        # each cell's planned row by key (`eebench.run.backends.plan`), read with stop_by
        self.estimates = estimates
        self._known: dict[str, PlannedCell] | None = None
        self._fresh = False  # no cell has finished since the estimates were read
        self.pace = Pace()

    def start(self, handles: list[Handle]) -> None:
        """Nothing to submit: `wait` runs the cells."""

    def wait(self, handles: list[Handle]) -> dict[str, CellOutcome]:
        from eebench.models.units import unit_of

        opts = run_options(self.worker, console=self.console, progress=self.progress)
        outcomes: dict[str, CellOutcome] = {}
        for h in handles:
            cell, started = h.cell, time.perf_counter()
            rc = cell.config
            shift = f" trained on {rc.train_task}" if rc.train_task else ""
            heads = ("token heads" if unit_of(rc.method_settings.get("unit")).per_token
                     else f"{rc.pooling} pooling")
            late = self._late(cell)
            if late is not None:
                self.say(f"not started: {cell.label} on {rc.task} (seed {rc.seed}): {late}")
                outcome = CellOutcome(cell.key, "deferred", h.attempt, error=late,
                                      run_dir=str(cell_dir(cell, self.worker.out)))
                outcomes[cell.key] = outcome
                if self.on_outcome is not None:
                    self.on_outcome(cell, outcome)
                continue
            self.say(f"run {cell.label} on {rc.task}{shift} (seed {rc.seed}, {heads})")
            measure = self._watch(cell)
            done = execute_runs(cell, opts)
            if measure is not None:
                measure()
            self._fresh = False
            seconds = round(time.perf_counter() - started, 2)
            here = cell_dir(cell, self.worker.out)
            if done is None:
                outcome = CellOutcome(cell.key, "busy", h.attempt, seconds, run_dir=str(here))
            else:
                clear_error(here)
                outcome = CellOutcome(cell.key, "done", h.attempt, seconds, run_dir=str(done))
            outcomes[cell.key] = outcome
            if self.on_outcome is not None:
                self.on_outcome(cell, outcome)
        return outcomes

    def _late(self, cell: Cell) -> str | None:
        """Why the cell is not started before `stop_by` (None: it starts): its estimate ends
        after it, or it has none. A finished cell always "runs" (it says it is done). The
        estimates are read again once a cell has finished since they were: that run may be the
        one a cell's estimate scales, and the models other processes train meanwhile leave it
        fewer steps (a busy cell it would help)."""
        deadline = self.opts.stop_by
        if deadline is None or self.estimates is None:
            return None
        if not self.worker.overwrite and status(cell, self.worker.out) == "done":
            return None
        row = self._row(cell)
        seconds = None if row is None else self.pace.estimate(row)
        by = datetime.fromtimestamp(deadline).strftime("%H:%M")
        if row is None or seconds is None:
            return (f"no estimate to tell whether it ends by {by} (no finished run of its "
                    "method to go by)")
        ends = time.time() + seconds
        if ends > deadline:
            paced = "" if seconds == row.estimate_seconds else (
                f" at this machine's pace so far ({self.pace.factor:.2g}x the recorded runs')")
            return (f"its estimate, ~{seconds / 60:.0f} min{paced}, would end at "
                    f"{datetime.fromtimestamp(ends).strftime('%H:%M')}, after {by}")
        return None

    def _row(self, cell: Cell) -> PlannedCell | None:
        if self._known is None or not self._fresh:
            self._known, self._fresh = self.estimates(), True
        return self._known.get(cell.key)

    def _watch(self, cell: Cell) -> Callable[[], None] | None:
        """With stop_by, what measures this machine's pace on the cell (see Pace.watch)."""
        if self.opts.stop_by is None or self.estimates is None or (
                not self.worker.overwrite and status(cell, self.worker.out) == "done"):
            return None
        row = self._row(cell)
        if row is None:
            return None
        data = Path(self.worker.data_dir) if self.worker.data_dir else None
        return self.pace.watch(cell, row, data, Path(self.worker.checkpoints))
