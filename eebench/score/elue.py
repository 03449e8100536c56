"""The ELUE score: how far a method's points lie above the reference curve, at their own FLOPs.

    score(method, task) = mean over the method's points p of  main(p) - curve(flops(p))
    overall(method)     = mean over tasks of score(method, task)

The curve is piecewise linear in FLOPs through the reference points (sorted by FLOPs). Outside the
curve's FLOPs range a named policy decides:

- "clamp" (the default): hold the end value. The reference is never asked for a metric it did not
  reach, so a point far outside the range cannot run up or down an unbounded gap, and a method
  pays for extra FLOPs beyond the full model (e.g. exit heads) without being credited for it.
- "linear": extend the first and last segments. Closer to "what the reference would have scored
  at that cost" when the curve is still steep at its ends, but unbounded far outside.

Metrics are in percent, so scores are in percentage points.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from eebench.errors import UsageError
from eebench.score.policy import DEFAULT_EXTRAPOLATE, EXTRAPOLATE


def curve_at(
    curve_flops: Sequence[float],
    curve_main: Sequence[float],
    flops: np.ndarray | Sequence[float] | float,
    extrapolate: str = DEFAULT_EXTRAPOLATE,
) -> np.ndarray:
    """The reference curve's metric at `flops`: linear between reference points, `extrapolate`
    outside them. A one-point curve is flat under both policies (there is no slope to extend)."""
    if extrapolate not in EXTRAPOLATE:
        raise UsageError(f"unknown extrapolation policy {extrapolate!r}", hint="clamp or linear")
    cx = np.asarray(curve_flops, dtype=float)
    cy = np.asarray(curve_main, dtype=float)
    order = np.argsort(cx, kind="stable")
    cx, cy = cx[order], cy[order]
    x = np.asarray(flops, dtype=float)
    y = np.interp(x, cx, cy)  # holds the end values outside: the "clamp" policy
    if extrapolate == "linear" and len(cx) >= 2:
        lo, hi = x < cx[0], x > cx[-1]
        slope_lo = (cy[1] - cy[0]) / (cx[1] - cx[0])
        slope_hi = (cy[-1] - cy[-2]) / (cx[-1] - cx[-2])
        y = np.where(lo, cy[0] + slope_lo * (x - cx[0]), y)
        y = np.where(hi, cy[-1] + slope_hi * (x - cx[-1]), y)
    return y


def elue_deltas(
    curve_flops: Sequence[float],
    curve_main: Sequence[float],
    flops: np.ndarray | Sequence[float],
    main: np.ndarray | Sequence[float],
    extrapolate: str = DEFAULT_EXTRAPOLATE,
) -> np.ndarray:
    """Per point: its metric minus the reference curve at its FLOPs."""
    return np.asarray(main, dtype=float) - curve_at(curve_flops, curve_main, flops, extrapolate)


def overall(per_task: Mapping[str, float]) -> float:
    """A method's overall ELUE score: the mean over the tasks it was scored on."""
    values = [v for v in per_task.values() if np.isfinite(v)]
    return float(np.mean(values)) if values else float("nan")
