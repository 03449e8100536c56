"""The quality of early-exit predictions, read from run directories, and fixed budgets.

- `fill_quality(runs)`: the per-point fields of eebench.measure.quality (ECE, NLL, consistency,
  exit gain / loss) for the points whose run did not store them, computed from the run's
  predictions.safetensors with the same code `eebench run` uses. The full-depth prediction is
  the method's deepest: a one-model method's last exit, or the deepest variant's (static: the
  deepest k of the run).
- `run_qualities(runs)`: per run, every exit's own accuracy, overthinking and underthinking
  (joint: every exit of its model; several models: each model's last exit, by depth).
- `budget_table(raw, percents)`: each method's main metric at fixed fractions of the full model's
  FLOPs, on its own step Pareto front (the best point with FLOPs <= the budget), seed by seed.
- `param_buckets(raw)`: ELUE's parameter bucket of each method.

Regression tasks have none of the quality quantities (nothing to calibrate or agree on a label);
their budgets are computed like any other task's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from eebench.measure.quality import (
    budget_value,
    exited_logits,
    param_bucket,
    point_quality,
    run_quality,
)
from eebench.score.collect import RawPoint, Run
from eebench.score.table import QUALITY

DEFAULT_BUDGETS = (25.0, 50.0, 75.0, 100.0)


def _exits(run: Run) -> tuple[list[int], list[np.ndarray]] | None:
    """A run's exits by depth: their layers and logits [N, C] (None: regression, or no variants
    or exit logits recorded)."""
    if not run.variants or not run.exit_unit.scores_quality:  # a tag per word: no calibration
        return None
    arrays = run.predictions()
    if any(v.logits_key not in arrays for v in run.variants):
        return None  # exit logits not stored: nothing to compute from
    exits: list[tuple[int, np.ndarray]] = []
    if len(run.variants) == 1:
        v = run.variants[0]
        logits = arrays[v.logits_key]
        exits = [(layer, logits[j]) for j, layer in enumerate(v.exit_layers)]
    else:
        exits = [(v.exit_layers[-1], arrays[v.logits_key][-1]) for v in run.variants]
    exits.sort(key=lambda e: e[0])
    if exits[0][1].shape[-1] < 2:  # one output: a regression score
        return None
    return [e[0] for e in exits], [e[1] for e in exits]


def fill_quality(runs: Iterable[Run]) -> None:
    """Fill each point's missing quality fields from its run's arrays (in place: run.points are
    replaced by copies)."""
    for run in runs:
        if all(all(getattr(p, q) is not None for q in QUALITY) for p in run.points):
            continue
        exits = _exits(run)
        arrays = run.predictions() if exits is not None else {}
        labels = arrays.get("labels")
        if exits is None or labels is None:
            continue
        full = exits[1][-1].argmax(-1)
        new = []
        for row, p in enumerate(run.points):
            if any(getattr(p, q) is None for q in QUALITY):
                v = run.variant_of(p)
                index = np.searchsorted(np.asarray(v.exit_layers), arrays["exit_layer"][row])
                q = point_quality(exited_logits(arrays[v.logits_key], index),
                                  arrays["prediction"][row], full, labels)
                values = {k: getattr(q, k) for k in QUALITY}
                p = p.model_copy(update={k: values[k] if getattr(p, k) is None else getattr(p, k)
                                         for k in QUALITY})
            new.append(p)
        run.points = new


@dataclass(frozen=True)
class MethodQuality:
    """Per run quality, averaged over a method's seeds on one task: (mean, sample std)."""

    label: str
    task: str
    seeds: tuple[int, ...]
    exit_layers: list[int]
    exit_accuracy: list[tuple[float, float]]
    overthinking: tuple[float, float]
    underthinking: tuple[float, float]


def _ms(values: Sequence[float]) -> tuple[float, float]:
    from eebench.score.stats import sample_std

    return float(np.mean(values)), sample_std(values)


def run_qualities(raw: Sequence[RawPoint]) -> list[MethodQuality]:
    """Per (method label, task): the per-run quantities, seed mean and std."""
    groups: dict[tuple[str, str], dict[int, Run]] = {}
    for rp in raw:
        groups.setdefault((rp.label, rp.point.task), {})[rp.point.seed] = rp.run
    out = []
    for (label, task), by_seed in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        results = {}
        for seed, run in sorted(by_seed.items()):
            exits = _exits(run)
            labels = run.labels()
            if exits is None or labels is None:
                continue
            layers, logits = exits
            results[seed] = run_quality(np.stack([lg.argmax(-1) for lg in logits]), labels, layers)
        if not results or len({tuple(r.exit_layers) for r in results.values()}) > 1:
            continue
        rs = list(results.values())
        out.append(MethodQuality(
            label=label, task=task, seeds=tuple(results), exit_layers=rs[0].exit_layers,
            exit_accuracy=[_ms([r.exit_accuracy[j] for r in rs])
                           for j in range(len(rs[0].exit_layers))],
            overthinking=_ms([r.overthinking for r in rs]),
            underthinking=_ms([r.underthinking for r in rs])))
    return out


@dataclass(frozen=True)
class Budget:
    label: str
    task: str
    percent: float  # of the full model's FLOPs
    mflops: float  # the budget
    main: float | None  # seed mean; None when a seed has no point within the budget
    main_std: float | None
    seeds: int


def full_model_flops(raw: Sequence[RawPoint]) -> dict[str, float]:
    """Per task, the full model's FLOPs: the cheapest point whose samples all ran every layer
    (static k = L, a never-exit point), else the largest FLOPs given; seed mean."""
    by_task: dict[str, dict[tuple, list[float]]] = {}
    for rp in raw:
        p = rp.point
        key = (rp.label, p.sweep_param, p.sweep_value, p.avg_exit_layer >= p.num_layers)
        by_task.setdefault(p.task, {}).setdefault(key, []).append(p.mean_flops)
    out = {}
    for task, groups in by_task.items():
        full = [float(np.mean(v)) for k, v in groups.items() if k[3]]
        out[task] = min(full) if full else max(float(np.mean(v)) for v in groups.values())
    return out


def budget_table(raw: Sequence[RawPoint], percents: Sequence[float] = DEFAULT_BUDGETS
                 ) -> list[Budget]:
    """Each method's main metric at each budget (percent of the full model's FLOPs), on its own
    step Pareto front, per seed, then the seed mean and std."""
    full = full_model_flops(raw)
    per: dict[tuple[str, str], dict[int, list[tuple[float, float]]]] = {}
    for rp in raw:
        p = rp.point
        per.setdefault((rp.label, p.task), {}).setdefault(p.seed, []).append(
            (p.mean_flops, p.main))
    out = []
    for (label, task), seeds in sorted(per.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        by_seed = [(np.array([f for f, _ in pts]), np.array([m for _, m in pts]))
                   for pts in seeds.values()]
        out += budgets_of(label, task, by_seed, full[task], percents)
    return out


def budgets_of(label: str, task: str, by_seed: Sequence[tuple[Any, Any]], full_flops: float,
               percents: Sequence[float]) -> list[Budget]:
    """`label`'s best main metric within each budget (a percent of `full_flops`) on its own step
    front, from each seed's (FLOPs, main) arrays: mean ± std over the seeds, None where a seed
    has no point within the budget."""
    out = []
    for pct in percents:
        budget = full_flops * pct / 100
        values = [budget_value(x, y, budget) for x, y in by_seed]
        if any(v is None for v in values):
            mean = std = None
        else:
            mean, std = _ms([float(v) for v in values])
        out.append(Budget(label, task, float(pct), budget / 1e6, mean, std, len(values)))
    return out


def param_buckets(raw: Sequence[RawPoint]) -> dict[str, tuple[int, str]]:
    """Per method label: its model's parameters and ELUE's bucket for them."""
    params: dict[str, int] = {}
    for rp in raw:
        params[rp.label] = max(params.get(rp.label, 0), rp.point.params_total)
    return {label: (n, param_bucket(n)) for label, n in sorted(params.items())}
