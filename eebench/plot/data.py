"""The numbers behind the figures that points.jsonl does not hold, from predictions.safetensors.

points.jsonl gives each operating point's metric, but not how good each exit is on its own.
Every run keeps the logits of every exit for every sample (`exit_logits` [E, N, C]; a static run
one `exit_logits_k<k>` [1, N, C] per k), so the metric of exit j on *all* samples is one argmax
(for regression: the score itself) away, computed by the task's own metric code. The deepest exit
on all samples is the run's full model, the baseline a speed-up's metric drop is measured from.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from eebench.errors import DataError
from eebench.run.artifacts import PREDICTIONS_FILE
from eebench.score import Point, Run
from eebench.tasks.metrics import compute_metrics
from eebench.tasks.spec import TaskSpec

STATIC_KEY = re.compile(r"exit_logits_k(\d+)$")


@dataclass(frozen=True)
class ExitCurve:
    """Every metric of each exit of one run, on all its samples."""

    layers: np.ndarray  # the layer each exit sits after (1-based), ascending
    metrics: tuple[dict[str, float], ...]  # percent, one dict per exit
    by_layer: bool  # False: the exits' layers are unknown and `layers` numbers them 1..E

    def values(self, name: str) -> np.ndarray:
        return np.array([m[name] for m in self.metrics], dtype=float)


def exit_logits(run: Run) -> tuple[list[tuple[int, np.ndarray]], bool]:
    """[(layer, logits [N, C])] for each exit, ascending, and whether the layers are known.

    A multi-exit run with one exit per layer (E == num_layers) has exit j after layer j; with
    fewer exits the layers are not recorded in the run, so exits are numbered 1..E instead."""
    arrays = run.predictions()
    static = sorted((int(m.group(1)), key) for key in arrays if (m := STATIC_KEY.match(key)))
    if static:  # one single-exit model per k: its exit sits after layer k
        return [(k, arrays[key][-1]) for k, key in static], True
    if "exit_logits" not in arrays:
        raise DataError(f"{run.path / PREDICTIONS_FILE}: no exit_logits in it",
                        hint="per-exit figures need the logits `eebench run` stores")
    logits = arrays["exit_logits"]
    num_layers = run.points[0].num_layers
    return [(j + 1, logits[j]) for j in range(logits.shape[0])], logits.shape[0] == num_layers


def exit_curve(run: Run, spec: TaskSpec) -> ExitCurve:
    """The task's metrics of every exit of `run`, each on all samples."""
    labels = run.labels()
    if labels is None:
        raise DataError(f"{run.path / PREDICTIONS_FILE}: no labels in it (an unlabelled split)")
    exits, by_layer = exit_logits(run)
    metrics = []
    for _, logits in exits:
        if logits.shape[0] != len(labels):
            raise DataError(f"{run.path / PREDICTIONS_FILE}: exit logits for {logits.shape[0]} "
                            f"samples, labels for {len(labels)}")
        metrics.append(compute_metrics(spec, logits, labels))
    return ExitCurve(layers=np.array([layer for layer, _ in exits]), metrics=tuple(metrics),
                     by_layer=by_layer)


@dataclass(frozen=True)
class SpeedupPoint:
    """One operating point as speed-up and metric drop, mean and std over seeds."""

    point: Point
    speedup: float  # num_layers / avg exit layer
    speedup_std: float
    drop: float  # full model's main metric - this point's, in points (percent)
    drop_std: float


def _std(values: Sequence[float]) -> float:
    return float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


def speedup_points(points: Sequence[Point], full_main: dict[str, float]) -> list[SpeedupPoint]:
    """Speed-up and metric drop of each point; `full_main` maps a run directory (str) to the
    main metric of its full model. The drop is taken per seed, then averaged."""
    out = []
    for p in points:
        speed = [rp.point.speedup for rp in p.sources]
        drop = [full_main[str(rp.run.path)] - rp.point.main for rp in p.sources]
        out.append(SpeedupPoint(point=p, speedup=float(np.mean(speed)), speedup_std=_std(speed),
                                drop=float(np.mean(drop)), drop_std=_std(drop)))
    return out
