"""The local backend: a grid's cells one after another in this process.

It is one engine beside Slurm and Ray, driven by the same driver (eebench.run.backends.driver),
with two differences that suit working at a terminal: a cell that fails raises at once (fix the
cause and rerun the same command: finished cells are kept), so nothing is recorded as failed, and
a cell that an earlier backend recorded as failed is simply run again. A cell whose run another
process holds (two `eebench run` processes sharing a grid) comes back `busy`: the caller says so
and does not exit 0.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from eebench.run.backends.cells import (
    Cell,
    CellOutcome,
    WorkerOptions,
    cell_dir,
    clear_error,
    execute_runs,
    run_options,
)
from eebench.run.backends.driver import BackendOptions, Engine, Handle


class LocalEngine(Engine):
    name = "local"
    in_process = True

    def __init__(self, opts: BackendOptions, worker: WorkerOptions, say: Callable[[str], None],
                 console: Any = None, progress: Any = None,
                 on_outcome: Callable[[Cell, CellOutcome], None] | None = None) -> None:
        super().__init__(opts, worker, say)
        self.console, self.progress, self.on_outcome = console, progress, on_outcome

    def start(self, handles: list[Handle]) -> None:
        """Nothing to submit: `wait` runs the cells."""

    def wait(self, handles: list[Handle]) -> dict[str, CellOutcome]:
        opts = run_options(self.worker, console=self.console, progress=self.progress)
        outcomes: dict[str, CellOutcome] = {}
        for h in handles:
            cell, started = h.cell, time.perf_counter()
            rc = cell.config
            shift = f" trained on {rc.train_task}" if rc.train_task else ""
            heads = ("token heads" if rc.method_settings.get("unit") == "token"
                     else f"{rc.pooling} pooling")
            self.say(f"run {cell.label} on {rc.task}{shift} (seed {rc.seed}, {heads})")
            done = execute_runs(cell, opts)
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
