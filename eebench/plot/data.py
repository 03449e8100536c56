"""The numbers behind the figures that points.jsonl does not hold, from predictions.safetensors.

points.jsonl gives each operating point's metric, but not how good each exit is on its own.
Every run keeps the logits of every exit for every sample, per trained model (its variant records
where: `exit_logits` [E, N, C] for a joint method, `exit_logits_k<k>` [1, N, C] per k for static)
and after which layer each exit sits, so the metric of exit j on *all* samples is one argmax
(for regression: the score itself) away, computed by the task's own metric code. The deepest exit
on all samples is the run's full model, the baseline a speed-up's metric drop is measured from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from eebench.errors import DataError
from eebench.run.artifacts import PREDICTIONS_FILE
from eebench.score import Point, Run, sample_std
from eebench.tasks.metrics import compute_metrics
from eebench.tasks.spec import TaskSpec


@dataclass(frozen=True)
class ExitCurve:
    """Every metric of each exit of one run, on all its samples."""

    layers: np.ndarray  # the layer each exit sits after (1-based), ascending
    metrics: tuple[dict[str, float], ...]  # percent, one dict per exit

    def values(self, name: str) -> np.ndarray:
        return np.array([m[name] for m in self.metrics], dtype=float)


def exit_logits(run: Run) -> list[tuple[int, np.ndarray]]:
    """[(layer, logits [N, C])] for each exit of each of the run's models, by layer: the layers and
    the logits' keys are the run's variant records."""
    arrays = run.predictions()
    out = []
    for v in run.variants:
        if v.logits_key not in arrays:
            raise DataError(f"{run.path / PREDICTIONS_FILE}: no {v.logits_key} in it",
                            hint="per-exit figures need the logits `eebench run` stores")
        out += [(layer, arrays[v.logits_key][j]) for j, layer in enumerate(v.exit_layers)]
    if not out:
        raise DataError(f"{run.path}: no variants recorded (an unfinished run)")
    return sorted(out, key=lambda item: item[0])


def exit_curve(run: Run, spec: TaskSpec) -> ExitCurve:
    """The task's metrics of every exit of `run`, each on all samples."""
    labels = run.labels()
    if labels is None:
        raise DataError(f"{run.path / PREDICTIONS_FILE}: no labels in it (an unlabelled split)")
    exits = exit_logits(run)
    if run.exit_unit.per_token:  # tags at the counted words; a word without a piece is O
        return ExitCurve(layers=np.array([layer for layer, _ in exits]),
                         metrics=tuple(_token_exit_metrics(run, spec, lg, labels)
                                       for _, lg in exits))
    metrics = []
    for _, logits in exits:
        if logits.shape[0] != len(labels):
            raise DataError(f"{run.path / PREDICTIONS_FILE}: exit logits for {logits.shape[0]} "
                            f"samples, labels for {len(labels)}")
        metrics.append(compute_metrics(spec, logits, labels))
    return ExitCurve(layers=np.array([layer for layer, _ in exits]), metrics=tuple(metrics))


def _token_exit_metrics(run: Run, spec: TaskSpec, logits: np.ndarray, labels) -> dict:
    from eebench.tasks.seqlabel import token_metrics

    counted = run.predictions().get("counted")
    if counted is None or int(counted.sum()) != logits.shape[0]:
        raise DataError(f"{run.path / PREDICTIONS_FILE}: a token run's logits without matching "
                        "`counted` words")
    tags = np.zeros(len(counted), dtype=np.int64)
    # a token run stores each exit's tags (int8 [K]); logits [K, C] are read the same way
    tags[counted.astype(bool)] = logits if logits.ndim == 1 else logits.argmax(-1)
    return token_metrics(spec, run.by_sentence(tags), labels)


@dataclass(frozen=True)
class SpeedupPoint:
    """One operating point as speed-up and metric drop, mean and std over seeds."""

    point: Point
    speedup: float  # num_layers / avg exit layer
    speedup_std: float
    drop: float  # full model's main metric - this point's, in points (percent)
    drop_std: float


def speedup_points(points: Sequence[Point], full_main: dict[str, float]) -> list[SpeedupPoint]:
    """Speed-up and metric drop of each point; `full_main` maps a run directory (str) to the
    main metric of its full model. The drop is taken per seed, then averaged."""
    out = []
    for p in points:
        speed = [rp.point.speedup for rp in p.sources]
        drop = [full_main[str(rp.run.path)] - rp.point.main for rp in p.sources]
        out.append(SpeedupPoint(point=p, speedup=float(np.mean(speed)),
                                speedup_std=sample_std(speed), drop=float(np.mean(drop)),
                                drop_std=sample_std(drop)))
    return out
