"""Statistics over runs: seeds averaged per operating point, a paired bootstrap, a method ranking.

- Seeds: the points of one method, task and sweep value from runs with different seeds become one
  point with the mean and the sample standard deviation (ddof=1; 0 for a single seed) of its
  metric and FLOPs: a groupby of the results frame (eebench.score.table).
- Paired bootstrap: two methods evaluated on the same samples are compared by resampling the
  samples (with replacement) and recomputing the difference of their mean per-sample score
  (correctness in percent, or squared error for regression). Pairing removes the variance that
  the two methods share through the sample set. Seeded, so a rerun gives the same interval.
- Ranking: per task, methods ranked by ELUE score (1 = best, ties share the mean rank); the table
  orders methods by their mean rank over tasks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from eebench.errors import DataError, EebenchError, UsageError
from eebench.score.collect import RawPoint
from eebench.score.elue import overall
from eebench.score.table import QUALITY

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class Point:
    """One operating point of one method on one task, averaged over seeds."""

    label: str
    method: str
    task: str
    split: str
    flops_convention: str
    main_metric: str
    sweep_param: str
    sweep_value: float
    num_layers: int
    flops: float  # FLOPs per sample, mean over seeds
    flops_std: float
    main: float  # main metric in percent, mean over seeds
    main_std: float
    seeds: tuple[int, ...]
    sources: tuple[RawPoint, ...]  # one per seed, in seed order (none for a submission)
    # The quality of its exited predictions (eebench.score.table.QUALITY): name -> (mean, sample
    # std, seeds that have it), over the seeds that have it; absent where no seed has it
    quality: Mapping[str, tuple[float, float, int]] = field(default_factory=dict)

    @property
    def mflops(self) -> float:
        return self.flops / 1e6


def sample_std(values: Sequence[float] | np.ndarray) -> float:
    """The sample standard deviation (ddof=1) of per-seed values, 0 for a single value: the one
    spread every table, error bar and CSV column of eebench reports over seeds."""
    values = np.asarray(values, dtype=float)
    return float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


def _mean(values: Sequence[float] | np.ndarray) -> float:
    # numpy's, not pandas' own (which sums otherwise): the same bits as np.mean everywhere else
    return float(np.mean(np.asarray(values, dtype=float)))


SEED_KEYS = ["label", "task", "sweep_param", "sweep_value"]


def _present(values: pd.Series) -> list[float]:
    return [float(v) for v in values if v is not None and np.isfinite(v)]


def seed_points(frame: pd.DataFrame, sources: Sequence[RawPoint] | None = None) -> list[Point]:
    """Average the seeds of each (method, task, sweep value) of a results frame (see
    eebench.score.table); a seed given twice, or models of different depths, are refused.

    `sources`: the RawPoints the frame's rows were made from, in its order, kept in each Point
    for the statistics that read per-sample predictions; without them (a submission) a Point has
    none. Points come sorted by task, label and FLOPs.
    """
    if frame.empty:
        return []
    # Seeds ascending inside each group (stable: a seed given twice keeps its files' order).
    ordered = frame.assign(source=np.arange(len(frame))).sort_values("seed", kind="stable")
    groups = ordered.groupby(SEED_KEYS, sort=False, dropna=False)
    table = groups.agg(
        first=("source", "min"), members=("source", list), seeds=("seed", list),
        depths=("num_layers", "nunique"), num_layers=("num_layers", "first"),
        method=("method", "first"), split=("split", "first"),
        flops_convention=("flops_convention", "first"), main_metric=("main_metric", "first"),
        flops=("mean_flops", _mean), flops_std=("mean_flops", sample_std),
        main=("main", _mean), main_std=("main", sample_std),
        **{q: (q, _present) for q in QUALITY},
    ).sort_values("first", kind="stable")  # groups in the order they first appear
    out = []
    for g in table.itertuples():
        label, task, sweep_param, sweep_value = g.Index
        where = f"{label} on {task}"
        for i in range(len(g.seeds) - 1):
            if g.seeds[i] == g.seeds[i + 1]:
                a, b = (frame["run"].iat[g.members[j]] for j in (i, i + 1))
                raise DataError(
                    f"{where} at {sweep_param}={sweep_value:g} seed {g.seeds[i]} appears "
                    f"twice: {a} and {b}", hint="score runs of one configuration together")
        if g.depths > 1:
            depths = sorted({int(d) for d in frame["num_layers"].iloc[g.members]})
            raise DataError(f"{where}: runs of models with {depths} layers mixed")
        out.append(Point(
            label=label, method=g.method, task=task, split=g.split,
            flops_convention=g.flops_convention, main_metric=g.main_metric,
            sweep_param=sweep_param, sweep_value=float(sweep_value),
            num_layers=int(g.num_layers), flops=g.flops, flops_std=g.flops_std, main=g.main,
            main_std=g.main_std, seeds=tuple(int(s) for s in g.seeds),
            sources=() if sources is None else tuple(sources[j] for j in g.members),
            quality={q: (_mean(v), sample_std(v), len(v)) for q in QUALITY
                     if (v := getattr(g, q))},
        ))
    out.sort(key=lambda p: (p.task, p.label, p.flops, p.sweep_value))
    return out


def aggregate_seeds(raw: Sequence[RawPoint]) -> list[Point]:
    """Average the seeds of each (method, task, sweep value) of run points (see seed_points)."""
    from eebench.score.table import results_frame, run_records

    return seed_points(results_frame(run_records(raw)), raw)


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
    from eebench.tasks.spec import get_task

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
    from scipy.stats import rankdata

    ranks: dict[str, dict[str, float]] = {label: {} for label in scores}
    tasks = sorted({t for per_task in scores.values() for t in per_task})
    for task in tasks:
        entries = [(lab, s[task]) for lab, s in scores.items() if np.isfinite(s.get(task, np.nan))]
        if not entries:
            continue
        r = rankdata([-v for _, v in entries], method="average")
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
