"""The ensemble of all exits: every exit's prediction averaged, on every sample.

It is the upper bound that a multi-exit model offers without exiting early (asked of PABEE by its
reviewers): classification averages the exits' class probabilities (softmax), regression their
outputs. Its cost is the full model with every exit head run, which is the deepest operating
point of a run of a stepwise method (every head runs at full depth). It needs the per-exit logits
that `eebench run` stores for dynamic methods (`exit_logits` [exits, samples, classes]).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eebench.errors import DataError
from eebench.score.collect import Run


@dataclass(frozen=True)
class EnsemblePoint:
    task: str
    method: str
    seed: int
    metrics: dict[str, float]  # percent
    main: float
    flops: float  # per sample: the full model with every exit head
    n_exits: int


def ensemble_prediction(logits: np.ndarray, regression: bool) -> np.ndarray:
    """[E, N, C] per-exit logits -> [N] predictions of the averaged exits."""
    logits = np.asarray(logits, dtype=np.float64)
    if logits.ndim != 3 or logits.shape[0] == 0:
        raise DataError(f"per-exit logits must be [exits, samples, classes], got {logits.shape}")
    if regression:
        return logits[..., 0].mean(axis=0)
    z = logits - logits.max(axis=-1, keepdims=True)
    probs = np.exp(z)
    probs /= probs.sum(axis=-1, keepdims=True)
    return probs.mean(axis=0).argmax(axis=-1)


def ensemble_point(run: Run) -> EnsemblePoint:
    """The ensemble of all exits of one run of a dynamic method (labels needed)."""
    from eebench.tasks.catalog import get_task
    from eebench.tasks.metrics import compute_metrics

    spec = get_task(run.config.task)
    arrays = run.predictions()
    if "exit_logits" not in arrays:
        raise DataError(f"{run.path}: no per-exit logits (a static run has one exit per model)")
    labels = arrays.get("labels")
    if labels is None:
        raise DataError(f"{run.path}: the split has no labels; an ensemble cannot be scored")
    logits = arrays["exit_logits"]
    pred = ensemble_prediction(logits, spec.is_regression)
    metrics = compute_metrics(spec, pred, list(labels))
    deepest = max(run.points, key=lambda p: (p.avg_exit_layer, p.mean_flops))
    return EnsemblePoint(
        task=spec.name, method=run.config.label, seed=run.config.seed,
        metrics={k: float(v) for k, v in metrics.items()}, main=float(metrics[spec.main_metric]),
        flops=float(deepest.mean_flops), n_exits=int(logits.shape[0]),
    )
