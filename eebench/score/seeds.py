"""Seeds averaged per operating point: the points of one method, task and sweep value from runs
with different seeds become one Point with the mean and the sample standard deviation (ddof=1; 0
for a single seed) of its metric, FLOPs and quality fields.

The same numbers from either source: `aggregate_seeds(raw)` reads run points directly (what
`eebench score` does: no pandas to import), `seed_points(frame)` reads the results frame
(eebench.score.table; a submission's rows). Both group the rows in plain Python and reduce each
column with numpy over all groups of one size at once; a row of an [groups, seeds] matrix reduced
along its axis is the same bits as np.mean / np.std of that group alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from eebench.errors import DataError
from eebench.score.collect import RawPoint
from eebench.score.table import QUALITY

if TYPE_CHECKING:
    import pandas as pd

SEED_KEYS = ["label", "task", "sweep_param", "sweep_value"]
# The columns a seed average reads (results-frame names; "mean_flops" is a RawPoint's FLOPs).
COLUMNS = ("label", "task", "sweep_param", "sweep_value", "seed", "num_layers", "method", "split",
           "flops_convention", "main_metric", "mean_flops", "main", "run", *QUALITY)


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


def group_mean_std(values: np.ndarray, starts: np.ndarray, counts: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Mean and sample std (0 for one value) of each group of `values`, group g being
    values[starts[g]:starts[g] + counts[g]] (counts >= 1). Groups of one size are reduced
    together, as the rows of one matrix: the same bits as np.mean and sample_std group by group
    (a test holds them together)."""
    mean = np.empty(len(counts))
    std = np.zeros(len(counts))
    for n in np.unique(counts).tolist():
        which = np.flatnonzero(counts == n)
        block = values[starts[which][:, None] + np.arange(n)]  # [groups, n], C-contiguous
        mean[which] = np.mean(block, axis=1)
        if n > 1:
            std[which] = np.std(block, axis=1, ddof=1)
    return mean, std


_NAN = object()


def _key(value: Any) -> Any:
    # NaN sweep values form one group, as in a pandas groupby with dropna=False.
    return _NAN if isinstance(value, float) and math.isnan(value) else value


def _average(cols: Mapping[str, Sequence[Any]], sources: Sequence[RawPoint] | None
             ) -> list[Point]:
    """Seed averages of rows given as columns (COLUMNS, one value per row)."""
    seeds = cols["seed"]
    groups: dict[tuple, list[int]] = {}  # in the order each group first appears
    for i, key in enumerate(zip(cols["label"], cols["task"], cols["sweep_param"],
                                map(_key, cols["sweep_value"]), strict=True)):
        groups.setdefault(key, []).append(i)
    # Seeds ascending inside each group (stable: a seed given twice keeps its files' order).
    members = [sorted(rows, key=seeds.__getitem__) for rows in groups.values()]
    order = np.fromiter((i for rows in members for i in rows), dtype=np.int64, count=len(seeds))
    counts = np.array([len(rows) for rows in members], dtype=np.int64)
    starts = np.cumsum(counts) - counts
    flops = group_mean_std(np.asarray(cols["mean_flops"], dtype=float)[order], starts, counts)
    main = group_mean_std(np.asarray(cols["main"], dtype=float)[order], starts, counts)
    quality = {q: _present_stats(np.asarray(cols[q], dtype=float)[order], starts, counts)
               for q in QUALITY}
    out = []
    for g, rows in enumerate(members):
        first = rows[0]
        label, task = cols["label"][first], cols["task"][first]
        sweep_param, sweep_value = cols["sweep_param"][first], cols["sweep_value"][first]
        where = f"{label} on {task}"
        for a, b in zip(rows, rows[1:]):
            if seeds[a] == seeds[b]:
                raise DataError(
                    f"{where} at {sweep_param}={sweep_value:g} seed {seeds[a]} appears "
                    f"twice: {cols['run'][a]} and {cols['run'][b]}",
                    hint="score runs of one configuration together")
        depths = {int(cols["num_layers"][i]) for i in rows}
        if len(depths) > 1:
            raise DataError(f"{where}: runs of models with {sorted(depths)} layers mixed")
        out.append(Point(
            label=label, method=cols["method"][first], task=task, split=cols["split"][first],
            flops_convention=cols["flops_convention"][first],
            main_metric=cols["main_metric"][first], sweep_param=sweep_param,
            sweep_value=float(sweep_value), num_layers=int(cols["num_layers"][first]),
            flops=float(flops[0][g]), flops_std=float(flops[1][g]), main=float(main[0][g]),
            main_std=float(main[1][g]), seeds=tuple(int(seeds[i]) for i in rows),
            sources=() if sources is None else tuple(sources[i] for i in rows),
            quality={q: (float(m[g]), float(s[g]), int(n[g])) for q, (m, s, n) in quality.items()
                     if n[g]},
        ))
    out.sort(key=lambda p: (p.task, p.label, p.flops, p.sweep_value))
    return out


def _present_stats(values: np.ndarray, starts: np.ndarray, counts: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per group: mean, sample std and number of the finite values (a missing quality field is
    NaN; groups without one get count 0)."""
    ok = np.isfinite(values)
    group = np.repeat(np.arange(len(counts)), counts)
    n = np.bincount(group[ok], minlength=len(counts))
    mean, std = np.zeros(len(counts)), np.zeros(len(counts))
    has = n > 0
    if has.any():
        kept = np.cumsum(n) - n
        m, s = group_mean_std(values[ok], kept[has], n[has])
        mean[has], std[has] = m, s
    return mean, std, n


def seed_points(frame: pd.DataFrame, sources: Sequence[RawPoint] | None = None) -> list[Point]:
    """Average the seeds of each (method, task, sweep value) of a results frame (see
    eebench.score.table); a seed given twice, or models of different depths, are refused.

    `sources`: the RawPoints the frame's rows were made from, in its order, kept in each Point
    for the statistics that read per-sample predictions; without them (a submission) a Point has
    none. Points come sorted by task, label and FLOPs.
    """
    if frame.empty:
        return []
    return _average({c: frame[c].tolist() for c in COLUMNS}, sources)


def aggregate_seeds(raw: Sequence[RawPoint]) -> list[Point]:
    """Average the seeds of each (method, task, sweep value) of run points (see seed_points):
    the numbers of `seed_points(results_frame(run_records(raw)), raw)`, without pandas."""
    if not raw:
        return []
    points = [rp.point for rp in raw]
    cols: dict[str, list[Any]] = {
        name: [getattr(p, name) for p in points]
        for name in ("task", "sweep_param", "sweep_value", "seed", "num_layers", "method",
                     "split", "flops_convention", "main_metric", "mean_flops", "main")}
    cols["label"] = [rp.label for rp in raw]
    cols["run"] = [str(rp.run.path) for rp in raw]
    for q in QUALITY:
        cols[q] = [np.nan if (v := getattr(p, q, None)) is None else v for p in points]
    return _average(cols, raw)
