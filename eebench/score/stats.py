"""Statistics over runs: seeds averaged per operating point, a paired bootstrap, a method ranking.

- Seeds: the points of one method, task and sweep value from runs with different seeds become one
  point with the mean and the sample standard deviation (ddof=1; 0 for a single seed) of its
  metric and FLOPs (eebench.score.seeds, imported here).
- Paired bootstrap: two methods evaluated on the same samples are compared by resampling the
  samples (with replacement) and recomputing the difference of their mean per-sample score
  (correctness in percent, or squared error for regression). Pairing removes the variance that
  the two methods share through the sample set. Seeded, so a rerun gives the same interval.
- Ranking: per task, methods ranked by ELUE score (1 = best, ties share the mean rank); the table
  orders methods by their mean rank over tasks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from eebench.errors import DataError, EebenchError, UsageError
from eebench.score.collect import RawPoint
from eebench.score.elue import overall
from eebench.score.seeds import SEED_KEYS, Point, aggregate_seeds, sample_std, seed_points

__all__ = ["SEED_KEYS", "Bootstrap", "Comparison", "Point", "Rank", "aggregate_seeds",
           "compare_methods", "match_by_flops", "paired_bootstrap", "paired_scores",
           "rank_methods", "sample_std", "seed_points"]


# ------------------------------------------------------------------------------ paired bootstrap
@dataclass(frozen=True)
class Bootstrap:
    """mean(a) - mean(b) with a percentile confidence interval and a two-sided p-value."""

    difference: float
    ci_low: float
    ci_high: float
    p_value: float
    n_samples: int
    n_resamples: int
    confidence: float
    seed: int


def paired_bootstrap(
    a: np.ndarray,
    b: np.ndarray,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> Bootstrap:
    """Resample sample indices with replacement; the same indices serve both methods (paired).

    p-value: the share of resampled differences at least as far from the observed difference as
    the observed difference is from 0 (the bootstrap distribution shifted to the null), two-sided,
    with the +1 correction so it is never exactly 0.
    """
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or len(a) == 0:
        raise EebenchError(f"paired bootstrap needs two equal-length samples: {a.shape}, {b.shape}")
    if n_resamples < 1:
        raise EebenchError(f"the number of bootstrap resamples must be positive, got {n_resamples}")
    diff = a - b
    n = len(diff)
    rng = np.random.default_rng(seed)
    chunk = max(1, 4_000_000 // n)  # bound memory: at most ~4M indices at a time
    boot = np.empty(n_resamples)
    for start in range(0, n_resamples, chunk):
        stop = min(start + chunk, n_resamples)
        idx = rng.integers(0, n, size=(stop - start, n))
        boot[start:stop] = diff[idx].mean(axis=1)
    observed = float(diff.mean())
    alpha = 1.0 - confidence
    lo, hi = np.quantile(boot, [alpha / 2, 1 - alpha / 2])
    extreme = np.sum(np.abs(boot - observed) >= abs(observed))
    p = (1 + extreme) / (1 + n_resamples)
    return Bootstrap(
        difference=observed, ci_low=float(lo), ci_high=float(hi), p_value=float(min(p, 1.0)),
        n_samples=n, n_resamples=n_resamples, confidence=confidence, seed=seed,
    )


def _source_scores(rp: RawPoint, regression: bool) -> tuple[np.ndarray, np.ndarray]:
    """(labels, per-sample score) of one seed's point: correctness in percent, or squared error."""
    arrays = rp.run.predictions()
    labels = arrays.get("labels")
    if labels is None or "prediction" not in arrays:
        raise DataError(f"{rp.run.path}: predictions without labels cannot be compared")
    pred = arrays["prediction"]
    if pred.ndim != 2 or rp.row >= pred.shape[0] or pred.shape[1] != len(labels):
        raise DataError(f"{rp.run.path}: prediction array of shape {pred.shape} does not match "
                        f"{len(rp.run.points)} points and {len(labels)} labels")
    p = pred[rp.row]
    if regression:
        return labels, (p.astype(float) - labels.astype(float)) ** 2
    return labels, (p == labels).astype(float) * 100.0


def paired_scores(pa: Point, pb: Point, regression: bool) -> tuple[np.ndarray, np.ndarray, str]:
    """Per-sample scores of A and B, aligned sample by sample, and how they were paired.

    When every seed of both saw the same samples (a whole split), each method's scores are
    averaged over its seeds. Otherwise (a seeded subset per seed) seed s of A is paired with seed
    s of B, which saw the same subset, and the seeds' samples are put one after another."""
    sa = [_source_scores(rp, regression) for rp in pa.sources]
    sb = [_source_scores(rp, regression) for rp in pb.sources]
    first = sa[0][0]
    if all(np.array_equal(labels, first) for labels, _ in sa + sb):
        return (np.mean([x for _, x in sa], axis=0), np.mean([x for _, x in sb], axis=0),
                "same samples, seeds averaged")
    by_seed = {rp.point.seed: scored for rp, scored in zip(pb.sources, sb, strict=True)}
    parts_a, parts_b = [], []
    for rp, (labels, xa) in zip(pa.sources, sa, strict=True):
        if rp.point.seed in by_seed and np.array_equal(labels, by_seed[rp.point.seed][0]):
            parts_a.append(xa)
            parts_b.append(by_seed[rp.point.seed][1])
    if not parts_a:
        raise DataError(
            f"task {pa.task}: {pa.label} and {pb.label} were evaluated on different samples",
            hint="compare runs made with the same split, sample subset and seeds",
        )
    return np.concatenate(parts_a), np.concatenate(parts_b), f"paired by seed ({len(parts_a)})"


def match_by_flops(a_flops: Sequence[float], b_flops: Sequence[float]) -> list[tuple[int, int]]:
    """For each point of A, the point of B nearest in FLOPs (absolute gap; a tie goes to the
    cheaper B point). Returns (index in A, index in B) pairs in A's order."""
    b = np.asarray(b_flops, dtype=float)
    order = np.argsort(b, kind="stable")
    pairs = []
    for i, x in enumerate(np.asarray(a_flops, dtype=float)):
        j = order[int(np.argmin(np.abs(b[order] - x)))]
        pairs.append((i, int(j)))
    return pairs


@dataclass(frozen=True)
class Comparison:
    """A - B on one task: one matched pair of points, or (a, b None) the mean over all pairs."""

    task: str
    a: Point | None
    b: Point | None
    statistic: str  # "accuracy" (percent, higher is better) or "squared error" (lower is better)
    pairing: str  # how the samples were paired (see paired_scores)
    result: Bootstrap


def _is_regression(point: Point) -> bool:
    from eebench.tasks.catalog import get_task

    try:
        return get_task(point.task).is_regression
    except EebenchError:  # a task this installation does not know: judge by the predictions
        pass
    pred = point.sources[0].run.predictions().get("prediction")
    return pred is not None and np.issubdtype(pred.dtype, np.floating)


def compare_methods(
    points: Sequence[Point], a: str, b: str, *, n_resamples: int = 1000, seed: int = 0
) -> list[Comparison]:
    """Paired bootstrap of A against B on every task both were run on, at matched FLOPs: each
    point of A against the point of B nearest in FLOPs (match_by_flops), then, with several
    pairs, all pairs pooled (the mean over pairs of the per-sample differences)."""
    labels = sorted({p.label for p in points})
    for name in (a, b):
        if name not in labels:
            raise UsageError(f"--compare: no method {name!r} among the runs",
                             hint=f"choose from: {', '.join(labels)}")
    out: list[Comparison] = []
    for task in sorted({p.task for p in points}):
        pa = [p for p in points if p.task == task and p.label == a]
        pb = [p for p in points if p.task == task and p.label == b]
        if not pa or not pb:
            continue
        regression = _is_regression(pa[0])
        statistic = "squared error" if regression else "accuracy"
        diffs = []
        for i, j in match_by_flops([p.flops for p in pa], [p.flops for p in pb]):
            sa, sb, pairing = paired_scores(pa[i], pb[j], regression)
            boot = paired_bootstrap(sa, sb, n_resamples=n_resamples, seed=seed)
            out.append(Comparison(task, pa[i], pb[j], statistic, pairing, boot))
            diffs.append(sa - sb)
        if len(diffs) > 1 and len({len(d) for d in diffs}) == 1:  # pairs share one sample layout
            pooled = np.mean(diffs, axis=0)
            boot = paired_bootstrap(pooled, np.zeros_like(pooled), n_resamples=n_resamples,
                                    seed=seed)
            out.append(Comparison(task, None, None, statistic, "all pairs pooled", boot))
    if not out:
        raise DataError(f"--compare: {a} and {b} share no task")
    return out


# ------------------------------------------------------------------------------------- ranking
@dataclass(frozen=True)
class Rank:
    label: str
    mean_rank: float
    overall: float  # mean ELUE score over tasks
    ranks: dict[str, float]  # task -> rank (1 = best)


def rank_methods(scores: Mapping[str, Mapping[str, float]]) -> list[Rank]:
    """scores[label][task] = ELUE score. Rank per task (ties share the mean rank), then order by
    mean rank over the tasks each method was scored on (then by overall score, then name)."""
    from eebench.tasks.metrics import average_ranks

    ranks: dict[str, dict[str, float]] = {label: {} for label in scores}
    tasks = sorted({t for per_task in scores.values() for t in per_task})
    for task in tasks:
        entries = [(lab, s[task]) for lab, s in scores.items() if np.isfinite(s.get(task, np.nan))]
        if not entries:
            continue
        r = average_ranks(np.array([-v for _, v in entries], dtype=float))
        for (lab, _), rank in zip(entries, r, strict=True):
            ranks[lab][task] = float(rank)
    out = []
    for label, per_task in scores.items():
        out.append(Rank(
            label=label,
            mean_rank=float(np.mean(list(ranks[label].values()))) if ranks[label] else float("nan"),
            overall=overall(per_task),
            ranks=ranks[label],
        ))
    def order(r: Rank) -> tuple:
        return (np.nan_to_num(r.mean_rank, nan=np.inf), -np.nan_to_num(r.overall, nan=-np.inf),
                r.label)

    out.sort(key=order)
    return out
