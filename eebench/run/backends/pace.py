"""This machine's pace against a grid's estimates (`eebench run --stop-by`).

A cell's estimate is the recorded time of a run finished earlier (`eebench.run.backends.plan`),
perhaps on another machine or under another load, so a grid that spans machines can start a
cell that ends long after `--stop-by`. A local grid process therefore measures, for each cell it
runs whose estimate comes from a run that finished before the process started, the training the
cell's models did meanwhile (optimizer steps and seconds, read from their checkpoints, whichever
process of this machine trained them) against what the estimate's run took for as many steps.
The ratio of the sums is the pace: a later estimate from a run that finished before the process
started is multiplied by it, one from a run finished since (on this machine) is taken as it is.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from eebench.run.backends.cells import Cell
from eebench.run.backends.plan import PlannedCell, trained_models


@dataclass
class Pace:
    started: float = field(default_factory=time.time)
    seconds: float = 0.0  # training seconds measured here
    expected: float = 0.0  # what the estimates' runs took for as many steps

    @property
    def factor(self) -> float | None:
        """Training here takes `factor` times what the estimates' runs took (None: unmeasured)."""
        return self.seconds / self.expected if self.seconds > 0 and self.expected > 0 else None

    def foreign(self, row: PlannedCell) -> bool:
        """Whether the row's estimate comes from a run finished before this process started."""
        return row.estimate_written is not None and row.estimate_written < self.started

    def estimate(self, row: PlannedCell) -> float | None:
        """The row's estimate at this machine's pace."""
        factor = self.factor
        if row.estimate_seconds is None or factor is None or not self.foreign(row):
            return row.estimate_seconds
        return row.estimate_seconds * factor

    def watch(self, cell: Cell, row: PlannedCell, data_dir: Path | None, checkpoints: Path
              ) -> Callable[[], None] | None:
        """Called before the cell runs: what to call after it, to add the training its models
        did meanwhile to the pace (None: the cell cannot measure it, its estimate being this
        machine's own or having no training part)."""
        per_step = seconds_per_step(row)
        before = None if per_step is None or not self.foreign(row) else _progress(
            cell, data_dir, checkpoints)
        if before is None:
            return None

        def after() -> None:
            for path, (steps, seconds) in (_progress(cell, data_dir, checkpoints) or {}).items():
                steps0, seconds0 = before.get(path, (0, 0.0))
                if steps > steps0 and seconds > seconds0:
                    self.seconds += seconds - seconds0
                    self.expected += (steps - steps0) * per_step

        return after


def seconds_per_step(row: PlannedCell) -> float | None:
    """The training seconds per optimizer step that the row's estimate assumes."""
    steps = row.train_steps
    if row.estimate_from != row.key and row.train_steps_left is not None:
        steps = row.train_steps_left  # the steps another run's training part is scaled to
    if row.estimate_train_seconds is None or not steps:
        return None
    return row.estimate_train_seconds / steps


def _progress(cell: Cell, data_dir: Path | None, checkpoints: Path
              ) -> dict[Path, tuple[int, float]] | None:
    """Each of the cell's models: the optimizer steps its checkpoint has taken and the seconds
    they took (none yet: (0, 0))."""
    models = trained_models(cell, data_dir, checkpoints)
    if models is None:
        return None
    return {m.path: (m.state.global_step, m.state.train_seconds) if m.state is not None
            else (0, 0.0) for m in models}
