"""A run's points as its own predictions give them: each point's metrics recomputed from the
stored per-sample predictions and labels, its exit histogram from the stored exit layers.

A submission records the sha256 of a run's predictions next to the points it copies from
points.jsonl, so the two must say the same thing. The hashes a run's summary records catch a
file changed after the run (eebench.run.artifacts.verify_run); this catches points that were
never what the predictions give (a summary rewritten with the edited file's hash, or a run
written by something other than eebench). A point whose numbers differ is refused in one line
naming the run's points.jsonl, the line, and the predictions file.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from eebench.errors import DataError, EebenchError
from eebench.run.artifacts import POINTS_FILE, PREDICTIONS_FILE
from eebench.score.collect import Run

if TYPE_CHECKING:
    from eebench.tasks.spec import TaskSpec

# Metrics are recomputed from the very arrays they were computed from: they agree to float
# rounding (summation order), far below the 0.01 points any table shows.
METRIC_TOLERANCE = 1e-6  # percentage points


def check_points(run: Run) -> None:
    """Refuse the first point of `run` whose exit histogram or (labelled splits) metrics are not
    what its row of the stored arrays gives."""
    from eebench.tasks.catalog import get_task

    arrays = run.predictions()
    where = run.path / PREDICTIONS_FILE
    exit_layer = _rows(arrays, "exit_layer", run, where)
    prediction = _rows(arrays, "prediction", run, where)
    labels = run.labels() if any(p.metrics for p in run.points) else None
    spec = get_task(run.config.task)
    for row, point in enumerate(run.points):
        line = f"{run.path / POINTS_FILE}:{row + 1}"
        layers = np.asarray(exit_layer[row], dtype=np.int64)
        if layers.size != point.n_samples:
            raise DataError(f"{line}: {point.n_samples} samples, where row {row} of {where} "
                            f"holds {layers.size} exit layers")
        if not np.all((layers >= 1) & (layers <= point.num_layers)):
            raise DataError(f"{where}: row {row} holds exit layers outside 1..{point.num_layers}")
        histogram = np.bincount(layers, minlength=point.num_layers + 1)[1:].tolist()
        if histogram != point.exit_histogram:
            raise DataError(f"{line}: exit_histogram {point.exit_histogram} is not what its "
                            f"exit layers in {where} give ({histogram})")
        if point.metrics:
            _check_metrics(run, spec, point.metrics, prediction[row], labels, line, where)


def _rows(arrays: dict[str, np.ndarray], key: str, run: Run, where: Path) -> np.ndarray:
    """The [P, N] array `key`: a row per point."""
    rows = arrays.get(key)
    if rows is None or rows.ndim != 2 or len(rows) != len(run.points):
        shape = None if rows is None else rows.shape
        raise DataError(f"{where}: {key} {shape} is not a row for each of the "
                        f"{len(run.points)} points of {run.path / POINTS_FILE}")
    return rows


def _check_metrics(run: Run, spec: TaskSpec, claimed: dict[str, float], predicted: np.ndarray,
                   labels, line: str, where: Path) -> None:
    """Every metric the point claims, as its row of predictions gives it (within
    METRIC_TOLERANCE)."""
    from eebench.tasks.metrics import compute_metrics

    if labels is None:
        raise DataError(f"{line}: metrics given, but {where} holds no labels to give them")
    rows = run.by_sentence(predicted) if run.exit_unit.per_token else predicted
    try:
        given = compute_metrics(spec, rows, labels)
    except EebenchError as e:  # the arrays do not fit together (sizes)
        raise DataError(f"{where}: {e.message}") from None
    for name, value in claimed.items():
        got = given.get(name)
        if got is None or not math.isclose(value, got, rel_tol=0, abs_tol=METRIC_TOLERANCE):
            shown = "no value" if got is None else f"{got:.6g}"
            raise DataError(f"{line}: {name} {value:.6g} is not what its predictions in "
                            f"{where} give ({shown})",
                            hint="the points were changed after the run: rerun it")
