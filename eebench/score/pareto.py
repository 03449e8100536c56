"""Pareto fronts over (FLOPs, metric) and two summaries of a front: hypervolume and area under it.

A point is better when it costs fewer FLOPs and scores a higher metric. Point a dominates b when
a is no worse in both and strictly better in one; two identical points do not dominate each other,
so both stay on the front.

Both summaries are measured inside the box [0, ref_flops] x [ref_metric, 100] and divided by its
area, so 0 means "nothing better than the reference point" and 1 means "100% at zero cost":

- hypervolume: the area dominated by the front (a staircase). At a FLOPs budget b, the best
  metric you can get by picking one operating point with FLOPs <= b.
- AUC: the area under the front joined by straight lines (held flat after its last point). Mixing
  two operating points at random per sample reaches every point on the segment between them
  (exactly for accuracy), so this is the attainable curve when mixing is allowed;
  AUC >= hypervolume.
"""

from __future__ import annotations

import numpy as np

METRIC_MAX = 100.0  # metrics are in percent


def pareto_mask(flops: np.ndarray, metric: np.ndarray) -> np.ndarray:
    """True for the points no other point dominates (minimise FLOPs, maximise metric).

    O(n log n): sort by FLOPs, then a point survives when it tops its equal-FLOPs group and
    beats the best metric of every strictly cheaper group."""
    x = np.asarray(flops, dtype=float)
    y = np.asarray(metric, dtype=float)
    n = len(x)
    if n == 0:
        return np.zeros(0, dtype=bool)
    order = np.lexsort((-y, x))  # by FLOPs ascending, then metric descending
    xs, ys = x[order], y[order]
    starts = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1]])  # first index of each equal-FLOPs group
    group = np.cumsum(np.r_[True, xs[1:] != xs[:-1]]) - 1
    group_max = ys[starts]  # metric descending inside a group, so the first is the max
    best_before = np.r_[-np.inf, np.maximum.accumulate(group_max)[:-1]]  # at fewer FLOPs
    # Dominated by a cheaper point with metric >= mine, or by an equal-FLOPs point with more metric.
    keep = (ys == group_max[group]) & (group_max[group] > best_before[group])
    mask = np.zeros(n, dtype=bool)
    mask[order[keep]] = True
    return mask


def front(flops: np.ndarray, metric: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct front points sorted by FLOPs (metric then rises strictly)."""
    x = np.asarray(flops, dtype=float)
    y = np.asarray(metric, dtype=float)
    m = pareto_mask(x, y)
    pts = np.unique(np.stack([x[m], y[m]], axis=1), axis=0)  # sorted by FLOPs; drops duplicates
    return pts[:, 0], pts[:, 1]


def _clipped_front(flops, metric, ref_flops: float, ref_metric: float):
    """Front points strictly inside the reference box (others add no area)."""
    fx, fy = front(flops, metric)
    inside = (fx < ref_flops) & (fy > ref_metric)
    return fx[inside], fy[inside]


def _box(ref_flops: float, ref_metric: float) -> float:
    return max(ref_flops, 0.0) * max(METRIC_MAX - ref_metric, 0.0)


def hypervolume(
    flops: np.ndarray, metric: np.ndarray, ref_flops: float, ref_metric: float
) -> float:
    """Area dominated by the points, bounded by the reference point (FLOPs unit x metric unit)."""
    fx, fy = _clipped_front(flops, metric, ref_flops, ref_metric)
    if len(fx) == 0:
        return 0.0
    widths = np.diff(np.r_[fx, ref_flops])  # point i holds the best metric until point i+1
    return float(np.sum(widths * (fy - ref_metric)))


def front_auc(
    flops: np.ndarray, metric: np.ndarray, ref_flops: float, ref_metric: float
) -> float:
    """Area between the straight-line front and ref_metric, from the first front point to
    ref_flops (flat after the last point) (FLOPs unit x metric unit)."""
    fx, fy = _clipped_front(flops, metric, ref_flops, ref_metric)
    if len(fx) == 0:
        return 0.0
    h = fy - ref_metric
    between = np.sum(np.diff(fx) * (h[1:] + h[:-1]) / 2.0)  # trapezoids between front points
    tail = (ref_flops - fx[-1]) * h[-1]
    return float(between + tail)


def normalized(area: float, ref_flops: float, ref_metric: float) -> float:
    """An area divided by the box [0, ref_flops] x [ref_metric, 100]: a number in [0, 1]."""
    box = _box(ref_flops, ref_metric)
    return float(area / box) if box > 0 else 0.0
