"""A score report: Pareto fronts, hypervolume/AUC and, against a reference curve, ELUE scores
and the method ranking, task by task, from seed-averaged points.

`score(points, reference)` builds the ScoreReport; `eebench score` prints it, `--json` dumps
`ScoreReport.to_dict()`, `--csv` writes `ScoreReport.to_dataframe()`. Metrics are in percent and
FLOPs in MFLOPs per sample, as ELUE reports them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from eebench.errors import DataError, EebenchError
from eebench.run.artifacts import OperatingPoint
from eebench.score.collect import RawPoint
from eebench.score.elue import DEFAULT_EXTRAPOLATE, elue_deltas, overall
from eebench.score.pareto import front_auc, hypervolume, normalized, pareto_mask
from eebench.score.reference import ReferenceCurves
from eebench.score.stats import Point, Rank, rank_methods

if TYPE_CHECKING:
    import pandas as pd

REPORT_SCHEMA_VERSION = 1
# ScoreReport.to_dataframe's columns (and `eebench score --csv`'s): new ones go at the end.
POINT_COLUMNS = ("task", "method", "sweep_param", "sweep_value", "n_seeds", "mflops",
                 "mflops_std", "main_metric", "main", "main_std", "pareto", "elue_delta", "split",
                 "flops_convention", "num_layers")


@dataclass(frozen=True)
class HvReference:
    """The point hypervolume and AUC are measured from: the full model's FLOPs and the metric of
    always predicting the majority class; each falls back to the points given when unknown."""

    flops: float
    metric: float
    flops_source: str  # "full model" or "largest FLOPs given"
    metric_source: str  # "majority-class baseline" or "lowest metric given"


def _majority_metric(points: Sequence[Point]) -> float | None:
    try:
        from eebench.tasks.catalog import get_task
        from eebench.tasks.metrics import majority_baseline
    except ImportError:
        return None
    try:
        spec = get_task(points[0].task)
    except EebenchError:  # a task this installation does not know: no baseline
        return None
    runs = {rp.run.path: rp.run for p in points for rp in p.sources}  # each run once
    values = []
    for run in runs.values():
        labels = run.labels()
        if labels is None or not len(labels):
            continue
        try:
            value = majority_baseline(spec, labels).get(points[0].main_metric)
        except EebenchError:
            return None
        if value is None or not math.isfinite(value):
            return None
        values.append(float(value))
    # Seeds evaluated on different subsets have different majorities: take their mean.
    return float(np.mean(values)) if values else None


def _runs_full_depth(p: Point) -> bool:
    # A point without its runs (a submission's) is not known to be the full model.
    return bool(p.sources) and all(rp.point.avg_exit_layer >= rp.point.num_layers
                                   for rp in p.sources)


def hv_reference(points: Sequence[Point]) -> HvReference:
    """The hypervolume reference point of one task's points (see HvReference). The full model is
    the cheapest point whose every sample ran all layers (e.g. static k = L)."""
    full = [p.flops for p in points if _runs_full_depth(p)]
    majority = _majority_metric(points)
    return HvReference(
        flops=min(full) if full else max(p.flops for p in points),
        metric=majority if majority is not None else min(p.main for p in points),
        flops_source="full model" if full else "largest FLOPs given",
        metric_source="majority-class baseline" if majority is not None else "lowest metric given",
    )


@dataclass
class MethodTask:
    """One method on one task."""

    n_points: int
    best_main: float
    elue: float | None
    hypervolume: float  # normalised, the method's own front
    auc: float  # normalised


@dataclass
class TaskReport:
    task: str
    main_metric: str
    split: str
    flops_convention: str
    points: list[Point]
    on_front: list[bool]
    deltas: list[float | None]  # main - reference curve at the point's FLOPs
    hv_ref: HvReference
    hypervolume: float  # normalised, the front of all methods together
    auc: float  # normalised
    methods: dict[str, MethodTask] = field(default_factory=dict)


@dataclass
class ScoreReport:
    tasks: dict[str, TaskReport]
    extrapolate: str
    reference: ReferenceCurves | None
    ranking: list[Rank]
    # per-seed ELUE, comparisons, quality, budgets, parameter buckets (eebench.score.sections),
    # where computed: `eebench score` and eebench.api.score compute them
    sections: Any = None
    # what the FLOPs are counted over: a sample, or a token (decoder runs)
    flops_unit: str = "MFLOPs per sample"

    @property
    def elue(self) -> dict[str, dict[str, float]]:
        """elue[method][task]; empty without a reference."""
        out: dict[str, dict[str, float]] = {}
        for t in self.tasks.values():
            for label, m in t.methods.items():
                if m.elue is not None:
                    out.setdefault(label, {})[t.task] = m.elue
        return out

    def to_dict(self) -> dict:
        """Everything `eebench score --json` prints."""
        data = _report_dict(self)
        return data if self.sections is None else {**data, **self.sections.to_dict(self)}

    def to_dataframe(self) -> pd.DataFrame:
        """One row per seed-averaged point, task by task (POINT_COLUMNS): `method` is the label,
        `pareto` 1 on the task's front across methods, `elue_delta` the point's metric minus the
        reference curve (empty without a reference)."""
        import pandas as pd

        rows = [
            {"task": t.task, "method": p.label, "sweep_param": p.sweep_param,
             "sweep_value": p.sweep_value, "n_seeds": len(p.seeds), "mflops": p.mflops,
             "mflops_std": p.flops_std / 1e6, "main_metric": t.main_metric, "main": p.main,
             "main_std": p.main_std, "pareto": int(on), "elue_delta": d, "split": t.split,
             "flops_convention": t.flops_convention, "num_layers": p.num_layers}
            for t in self.tasks.values()
            for p, on, d in zip(t.points, t.on_front, t.deltas, strict=True)
        ]
        return pd.DataFrame.from_records(rows, columns=POINT_COLUMNS).astype(
            {"elue_delta": "float64"})


def score(
    points: Sequence[Point],
    reference: ReferenceCurves | None = None,
    extrapolate: str = DEFAULT_EXTRAPOLATE,
    hv_refs: dict[str, HvReference] | None = None,
) -> ScoreReport:
    """Fronts, hypervolumes and (with a reference) ELUE scores and ranks, task by task."""
    if not points:
        raise DataError("no operating points to score")
    tasks: dict[str, TaskReport] = {}
    for task in sorted({p.task for p in points}):
        tp = [p for p in points if p.task == task]
        first = tp[0]
        x = np.array([p.flops for p in tp])
        y = np.array([p.main for p in tp])
        deltas: list[float | None] = [None] * len(tp)
        if reference is not None:
            curve = _checked_curve(reference, first)
            deltas = elue_deltas(curve.flops, curve.main, x, y, extrapolate).tolist()
        ref = (hv_refs or {}).get(task) or hv_reference(tp)
        report = TaskReport(
            task=task, main_metric=first.main_metric, split=first.split,
            flops_convention=first.flops_convention, points=list(tp),
            on_front=pareto_mask(x, y).tolist(), deltas=deltas, hv_ref=ref,
            hypervolume=normalized(hypervolume(x, y, ref.flops, ref.metric), ref.flops, ref.metric),
            auc=normalized(front_auc(x, y, ref.flops, ref.metric), ref.flops, ref.metric),
        )
        for label in sorted({p.label for p in tp}):
            idx = [i for i, p in enumerate(tp) if p.label == label]
            mx, my = x[idx], y[idx]
            report.methods[label] = MethodTask(
                n_points=len(idx), best_main=float(my.max()),
                elue=float(np.mean([deltas[i] for i in idx])) if reference is not None else None,
                hypervolume=normalized(hypervolume(mx, my, ref.flops, ref.metric),
                                       ref.flops, ref.metric),
                auc=normalized(front_auc(mx, my, ref.flops, ref.metric), ref.flops, ref.metric),
            )
        tasks[task] = report
    result = ScoreReport(tasks=tasks, extrapolate=extrapolate, reference=reference, ranking=[])
    if reference is not None:
        result.ranking = rank_methods(result.elue)
    return result


def elue_by_seed(
    raw: Sequence[RawPoint],
    reference: ReferenceCurves,
    extrapolate: str = DEFAULT_EXTRAPOLATE,
) -> dict[str, dict[str, dict[int, float]]]:
    """The ELUE score of each seed's points on their own: by_seed[method][task][seed].

    Their spread is the error bar of the seed-averaged score. Against a reference averaged over
    the same seeds, the reference method's own seeds scatter around 0: the noise floor.
    """
    groups: dict[tuple[str, str, int], list[RawPoint]] = {}
    for rp in raw:
        groups.setdefault((rp.label, rp.point.task, rp.point.seed), []).append(rp)
    out: dict[str, dict[str, dict[int, float]]] = {}
    for (label, task, seed), members in sorted(groups.items()):
        curve = _checked_curve(reference, members[0].point)
        deltas = elue_deltas(curve.flops, curve.main, [rp.point.mean_flops for rp in members],
                             [rp.point.main for rp in members], extrapolate)
        out.setdefault(label, {}).setdefault(task, {})[seed] = float(np.mean(deltas))
    return out


def _checked_curve(reference: ReferenceCurves, p: Point | OperatingPoint):
    """The task's curve, refusing a reference made on another split, convention or metric."""
    curve = reference.curve(p.task)
    for what, ref_value, value in (
        ("split", reference.split, p.split),
        ("FLOPs convention", reference.flops_convention, p.flops_convention),
        ("main metric", curve.main_metric, p.main_metric),
    ):
        if ref_value != value:
            raise DataError(
                f"task {p.task}: reference {reference.name!r} has {what} {ref_value!r}, "
                f"the runs {value!r}"
            )
    return curve


def _num(v: float | None, digits: int = 6) -> float | None:
    return None if v is None or not math.isfinite(v) else round(float(v), digits)


def _report_dict(r: ScoreReport) -> dict:
    elue = r.elue
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "units": {"metric": "percent", "flops": r.flops_unit},
        "extrapolate": r.extrapolate if r.reference is not None else None,
        "reference": None if r.reference is None else {
            "name": r.reference.name, "model": r.reference.model,
            "schema_version": r.reference.schema_version,
        },
        "tasks": {
            t.task: {
                "main_metric": t.main_metric, "split": t.split,
                "flops_convention": t.flops_convention,
                "hypervolume": _num(t.hypervolume), "auc": _num(t.auc),
                "hv_reference": {
                    "mflops": _num(t.hv_ref.flops / 1e6), "metric": _num(t.hv_ref.metric),
                    "mflops_source": t.hv_ref.flops_source,
                    "metric_source": t.hv_ref.metric_source,
                },
                "methods": {
                    label: {"n_points": m.n_points, "best_main": _num(m.best_main),
                            "elue": _num(m.elue), "hypervolume": _num(m.hypervolume),
                            "auc": _num(m.auc)}
                    for label, m in t.methods.items()
                },
                "points": [
                    {"method": p.label, "sweep_param": p.sweep_param,
                     "sweep_value": p.sweep_value, "seeds": list(p.seeds),
                     "mflops": _num(p.mflops), "mflops_std": _num(p.flops_std / 1e6),
                     "main": _num(p.main), "main_std": _num(p.main_std),
                     "pareto": front, "elue_delta": _num(d)}
                    for p, front, d in zip(t.points, t.on_front, t.deltas, strict=True)
                ],
            }
            for t in r.tasks.values()
        },
        "overall": {label: _num(overall(per_task)) for label, per_task in elue.items()},
        "ranking": [
            {"method": k.label, "mean_rank": _num(k.mean_rank), "overall": _num(k.overall),
             "ranks": k.ranks}
            for k in r.ranking
        ],
    }
