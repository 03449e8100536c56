"""Choosing an exit threshold with a guarantee: the cheapest sweep value whose consistency with
the full model is at least 1 - epsilon, with confidence 1 - delta.

A sample is consistent at a sweep value when its exited prediction is the full-depth prediction
(the deepest model's last exit: a joint method's own last exit). The dev samples are split, with
a seed, into a calibration half and a test half. On the calibration half, the sweep values are
tested from the most conservative (most FLOPs, as the run's points record them) down: value j
passes when the one-sided Clopper-Pearson lower bound of its consistency,

    L_j = Beta.ppf(delta; k_j, n - k_j + 1)   (0 when k_j = 0),

is at least 1 - epsilon, where k_j of the n calibration samples are consistent. Testing stops at
the first value that fails; the chosen value is the last that passed. This is fixed-sequence
testing: each null hypothesis "the consistency of value j is below 1 - epsilon" is tested at
level delta, in an order fixed before the consistencies are looked at, and a hypothesis is tested
only when all before it were rejected. The chance that any value with consistency below
1 - epsilon passes is then at most delta, without a Bonferroni correction: the first true null
in the order is the only gate, and it passes with probability at most delta. So with probability
at least 1 - delta over the calibration samples, the chosen value's consistency on fresh samples
from the same distribution is at least 1 - epsilon. The test half then reports what it realises:
consistency, the main metric and the average exit layer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from eebench.errors import UsageError
from eebench.score.difficulty import Samples
from eebench.tasks.catalog import get_task


def clopper_pearson_lower(k: int, n: int, delta: float) -> float:
    """One-sided lower confidence bound (level 1 - delta) of a binomial proportion, k of n."""
    from scipy.stats import beta

    if n <= 0:
        raise ValueError("no samples")
    return 0.0 if k <= 0 else float(beta.ppf(delta, k, n - k + 1))


@dataclass
class Step:
    """One sweep value tested on the calibration half."""

    sweep_value: float
    mean_mflops: float  # the point's, over all its samples, as the run recorded it
    consistent: int
    n: int
    lower_bound: float
    passed: bool


def fixed_sequence(consistent: np.ndarray, order: Sequence[int], epsilon: float,
                   delta: float) -> tuple[int | None, list[tuple[int, int, float, bool]]]:
    """`consistent` [P, n] (bool) on the calibration samples; `order` the points from the most
    conservative down. Returns the chosen point (None: not even the first passed) and, for each
    point tested, (point, consistent count, lower bound, passed); testing stops at a failure."""
    n = consistent.shape[1]
    chosen, tested = None, []
    for j in order:
        k = int(consistent[j].sum())
        bound = clopper_pearson_lower(k, n, delta)
        ok = bound >= 1 - epsilon
        tested.append((j, k, bound, ok))
        if not ok:
            break
        chosen = j
    return chosen, tested


SEED_MAX = 2**32 - 1  # numpy's seeds


def split_halves(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A seeded split of n samples into a calibration half (n // 2) and a test half."""
    perm = np.random.default_rng(seed).permutation(n)
    return np.sort(perm[: n // 2]), np.sort(perm[n // 2:])


@dataclass
class Selection:
    run: str
    method: str
    task: str
    sweep_param: str
    target: float  # 1 - epsilon
    delta: float
    seed: int
    n_calibration: int
    n_test: int
    steps: list[Step]
    chosen: dict | None  # the chosen value and what the test half realises; None: none passed
    full: dict  # the full model on the test half
    rule: str = ("fixed-sequence testing from the most conservative value down, one-sided "
                 "Clopper-Pearson lower bound at level 1 - delta")
    extra: dict = field(default_factory=dict)


def select(samples: Samples, consistency: float = 0.95, delta: float = 0.05,
           seed: int = 0) -> Selection:
    config = samples.run.config
    spec = get_task(config.task)
    if not 0 < consistency < 1:
        raise UsageError(f"--consistency {consistency:g}: must lie strictly between 0 and 1")
    if not 0 < delta < 1:
        raise UsageError(f"--delta {delta:g}: must lie strictly between 0 and 1")
    if not 0 <= seed <= SEED_MAX:
        raise UsageError(f"--seed {seed}: must be in 0..{SEED_MAX}")
    if spec.is_regression:
        raise UsageError(f"{spec.name} is a regression task: consistency compares class "
                         "predictions", hint="select works on classification runs")
    if samples.labels is None:
        raise UsageError(f"{samples.run.path}: the run has no labels ({config.split} split): "
                         "select reports the metric on the test half",
                         hint="use a run on the dev split")
    n = len(samples.ids)
    if n < 4:
        raise UsageError(f"{samples.run.path}: {n} samples are too few to split in two halves")
    from eebench.tasks.metrics import compute_metrics

    points = samples.points
    full_pred = samples.full_prediction()
    consistent = samples.prediction.astype(np.int64) == full_pred[None, :].astype(np.int64)
    cal, test = split_halves(n, seed)
    order = sorted(range(len(points)),
                   key=lambda i: (-points[i].mean_flops, -points[i].avg_exit_layer))
    epsilon = 1 - consistency
    chosen, tested = fixed_sequence(consistent[:, cal], order, epsilon, delta)
    steps = [Step(points[j].sweep_value, points[j].mean_mflops, k, len(cal), round(b, 6), ok)
             for j, k, b, ok in tested]

    def on_test(pred: np.ndarray, layers: np.ndarray | None) -> dict:
        metrics = compute_metrics(spec, pred[test], samples.labels[test])
        out = {"consistency": float((pred[test] == full_pred[test]).mean()),
               "main_metric": spec.main_metric, "main": metrics[spec.main_metric]}
        if layers is not None:
            out["avg_exit_layer"] = float(layers[test].mean())
        return out

    picked = None
    if chosen is not None:
        p = points[chosen]
        picked = {"sweep_value": p.sweep_value, "mean_mflops": p.mean_mflops,
                  "full_mflops": max(q.mean_mflops for q in points),
                  "test": on_test(samples.prediction[chosen].astype(np.int64),
                                  samples.exit_layer[chosen])}
    return Selection(
        run=str(samples.run.path), method=config.label, task=spec.name,
        sweep_param=points[0].sweep_param, target=consistency, delta=delta, seed=seed,
        n_calibration=len(cal), n_test=len(test), steps=steps, chosen=picked,
        full={"test": on_test(full_pred, None)})
