"""Scoring decoder runs: Pareto fronts per task (main metric vs FLOPs per token), an ELUE-style
score of each method against the run's own static truncation, FLOPs budgets, and a paired
bootstrap over samples.

The reference curve of a decoder run is its own: the model truncated at each exit k (its
`static` points: the first k layers and exit k's head, decoded greedily or read teacher-forced)
and the full model (k = L), joined piecewise linearly in FLOPs per token. Every other point of
the run is scored against it with eebench.score.elue's formula (its main metric minus the curve
at its FLOPs, `extrapolate` outside the curve's range), the mean over a method's points is its
score. Runs of one task whose curves differ (another model) keep their own: a curve is
seed-averaged over the runs of one model and exit head, as a reference file averages its seeds.
A run whose exits EE-Tuning trained has no static points (its truncations are the `ee-tuning`
method's): it is scored against the static truncation of a run with untrained exits of the same
model, task, split and samples, given with it. Self-speculation costs more FLOPs per token than
the full model (every token runs all L layers, and drafts pay for exit heads): under the default
"clamp" the curve holds the full model's value there, so a lossless point scores 0 and a lossy
one below.

Hypervolume and AUC are measured from the full model's FLOPs per token and 0 % agreement.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from eebench.errors import DataError, UsageError
from eebench.run.decoding import DecodeRun
from eebench.score.decoder_labels import REFERENCE_METHODS
from eebench.score.decoder_table import (
    decoder_frame,
    decoder_label,
    decoder_sweep,
    several_models,
)
from eebench.score.elue import elue_deltas
from eebench.score.policy import DEFAULT_EXTRAPOLATE
from eebench.score.report import HvReference, ScoreReport
from eebench.score.seeds import Point, seed_points

if TYPE_CHECKING:
    from eebench.score.reference import ReferenceCurves, TaskCurve

FLOPS_UNIT = "MFLOPs per token"
OWN_REFERENCE = "own static truncation"
FULL_BUDGETS = (25.0, 50.0, 75.0, 100.0)


@dataclass(frozen=True)
class Curve:
    """One reference curve: a model and exit head's static and full points on one task."""

    static_label: str
    full_label: str
    flops: list[float]
    main: list[float]


@dataclass
class DecoderScore:
    """What scoring decoder runs gives beyond the ScoreReport: each label's curve, the frame."""

    report: ScoreReport
    curves: dict[tuple[str, str], Curve]  # (task, label) -> the curve the label is scored on
    frame: Any  # the results table (pandas)
    points: list[Point]


def _groups(runs: Sequence[DecodeRun]) -> dict[str, tuple[str, str]]:
    """label -> (its curve's static label, full label): the run's own static and full points
    (a label seen in several runs, as "full" of a lens and an adapter run, keeps the first). A
    run with no static points (exits EE-Tuning trained: its truncations are `ee-tuning`) is
    scored against the static truncation of a run of the same model, task, split and samples;
    without one among `runs` it cannot be scored (one line)."""
    many = several_models(runs)

    def same(run: DecodeRun) -> tuple:
        c = run.config
        return (c.model, c.task, c.split, c.data.model_dump_json())

    own: dict[tuple, tuple[str, str]] = {}
    for run in runs:
        static = next((p for p in run.points if p.method == "static"), None)
        full = next(p for p in run.points if p.method == "full")
        if static is not None:
            own.setdefault(same(run), (decoder_label(run, static, many),
                                       decoder_label(run, full, many)))
    out: dict[str, tuple[str, str]] = {}
    for run in runs:
        pair = own.get(same(run))
        if pair is None:
            raise DataError(f"{run.path}: no static truncation to score it against (its exits "
                            f"were trained: its truncations are {run.points[1].method!r})",
                            hint="score it with a run of untrained exits (--head lens) of the "
                                 "same model, task and samples")
        for p in run.points:
            out.setdefault(f"{p.task}\0{decoder_label(run, p, many)}", pair)
    return out


def _curves(points: Sequence[Point], groups: dict[str, tuple[str, str]]
            ) -> dict[tuple[str, str], Curve]:
    made: dict[tuple[str, str, str], Curve] = {}
    out = {}
    for p in points:
        static_label, full_label = groups[f"{p.task}\0{p.label}"]
        key = (p.task, static_label, full_label)
        if key not in made:
            members = sorted([q for q in points if q.task == p.task and q.label in
                              (static_label, full_label)], key=lambda q: q.flops)
            made[key] = Curve(static_label, full_label, [q.flops for q in members],
                              [q.main for q in members])
        out[(p.task, p.label)] = made[key]
    return out


def _reference(runs: Sequence[DecodeRun], points: Sequence[Point],
               curves: dict[tuple[str, str], Curve]) -> ReferenceCurves:
    """The curves as a ReferenceCurves named OWN_REFERENCE (what tables and figures name); a
    task with several curves shows the first (each label is still scored on its own)."""
    from eebench import __version__
    from eebench.score.reference import (
        REFERENCE_SCHEMA_VERSION,
        Provenance,
        ReferenceCurves,
        ReferencePoint,
        RunRecord,
        TaskCurve,
        iso_time,
    )

    tasks: dict[str, TaskCurve] = {}
    for (task, _), curve in sorted(curves.items()):
        if task in tasks:
            continue
        members = [p for p in points if p.task == task and p.label in
                   (curve.static_label, curve.full_label)]
        tasks[task] = TaskCurve(
            main_metric=members[0].main_metric, num_layers=members[0].num_layers,
            points=[ReferencePoint(layers=int(round(p.sweep_value)), flops=p.flops,
                                   mflops=p.flops / 1e6, main=p.main, main_std=p.main_std,
                                   seeds=list(p.seeds)) for p in members])
    first = runs[0]
    return ReferenceCurves(
        schema_version=REFERENCE_SCHEMA_VERSION, name=OWN_REFERENCE,
        model=", ".join(sorted({r.config.model for r in runs})),
        flops_convention=first.config.flops_convention, split=first.config.split,
        provenance=Provenance(
            created=iso_time(), eebench_version=__version__, method="static",
            seeds=sorted({r.config.data.seed for r in runs}),
            runs=[RunRecord(path=str(r.path), task=r.config.task, seed=r.config.data.seed,
                            config_hash=r.config.key(),
                            written=iso_time((r.path / "points.jsonl").stat().st_mtime))
                  for r in runs]),
        tasks=tasks)


def _check_mixed(frame) -> None:
    for task, rows in frame.groupby("task", sort=True):
        for column, what in (("split", "splits"), ("flops_convention", "FLOPs conventions"),
                             ("main_metric", "main metrics")):
            values = sorted(set(rows[column]))
            if len(values) > 1:
                raise DataError(f"task {task}: decoder runs of mixed {what} {values}",
                                hint="score runs of one split and one FLOPs convention together")


def score_decoder(runs: Sequence[DecodeRun], extrapolate: str = DEFAULT_EXTRAPOLATE
                  ) -> DecoderScore:
    """Fronts, hypervolumes and ELUE-style scores (against each run's own static truncation) of
    decoder runs, seed-averaged per (label, task, sweep value)."""
    from eebench.score.report import score
    from eebench.score.stats import rank_methods

    if not runs:
        raise DataError("no decoder runs to score")
    frame = decoder_frame(runs)
    _check_mixed(frame)
    points = seed_points(frame)
    curves = _curves(points, _groups(runs))
    hv_refs = {}
    for task in sorted({p.task for p in points}):
        full = [p.flops for p in points if p.task == task and p.method == "full"]
        hv_refs[task] = HvReference(flops=min(full), metric=0.0, flops_source="full model",
                                    metric_source="no agreement (0 %)")
    report = score(points, None, extrapolate, hv_refs)
    report.flops_unit = FLOPS_UNIT
    for t in report.tasks.values():
        t.deltas = [float(elue_deltas(c.flops, c.main, [p.flops], [p.main], extrapolate)[0])
                    if (c := curves[(p.task, p.label)]).flops else None for p in t.points]
        for label, m in t.methods.items():
            values = [d for p, d in zip(t.points, t.deltas, strict=True)
                      if p.label == label and d is not None]
            m.elue = float(np.mean(values)) if values else None
    report.reference = _reference(runs, points, curves)
    report.extrapolate = extrapolate
    report.ranking = rank_methods(report.elue)
    return DecoderScore(report, curves, frame, points)


def elue_by_seed(runs: Sequence[DecodeRun], extrapolate: str = DEFAULT_EXTRAPOLATE
                 ) -> dict[str, dict[str, dict[int, float]]]:
    """Each run's (seed's) own ELUE score of each method: by_seed[label][task][seed]."""
    many = several_models(runs)
    out: dict[str, dict[str, dict[int, list[float]]]] = {}
    for run in runs:
        ref = sorted((p.flops_per_token, p.main) for p in run.points
                     if p.method in REFERENCE_METHODS)
        fx, fy = [f for f, _ in ref], [m for _, m in ref]
        for p in run.points:
            d = float(elue_deltas(fx, fy, [p.flops_per_token], [p.main], extrapolate)[0])
            (out.setdefault(decoder_label(run, p, many), {}).setdefault(p.task, {})
             .setdefault(run.config.data.seed, []).append(d))
    return {label: {task: {seed: float(np.mean(v)) for seed, v in sorted(seeds.items())}
                    for task, seeds in tasks.items()} for label, tasks in out.items()}


def budget_table(frame, points: Sequence[Point], percents: Sequence[float] = FULL_BUDGETS) -> list:
    """Each method's main metric within each budget (percent of the full model's FLOPs per
    token), per seed on its own points, then the seed mean and std (eebench.score.quality)."""
    from eebench.score.quality import budgets_of

    full = {p.task: p.flops for p in points if p.method == "full"}
    out = []
    for (task, label), rows in frame.groupby(["task", "label"], sort=True):
        by_seed = [(g["mean_flops"].to_numpy(), g["main"].to_numpy())
                   for _, g in rows.groupby("seed")]
        out += budgets_of(label, task, by_seed, full[task], percents)
    return out


def compare_decoder(runs: Sequence[DecodeRun], points: Sequence[Point], a: str, b: str, *,
                    n_resamples: int = 1000, seed: int = 0) -> list:
    """Paired bootstrap of label A against label B on every task both have, each point of A
    against the point of B nearest in FLOPs per token, over the samples' own main metric
    (DecoderPoint.sample_main), seed by seed on the same samples; several pairs are pooled."""
    from eebench.score.stats import Comparison, match_by_flops, paired_bootstrap

    labels = sorted({p.label for p in points})
    for name in (a, b):
        if name not in labels:
            raise UsageError(f"--compare: no method {name!r} among the runs",
                             hint=f"choose from: {', '.join(labels)}")
    many = several_models(runs)
    samples: dict[tuple[str, str, float, int], tuple[list[str], Any, Any]] = {}
    for run in runs:
        for p in run.points:
            key = (p.task, decoder_label(run, p, many), decoder_sweep(p)[1], run.config.data.seed)
            samples[key] = (run.summary.sample_ids, p.sample_main, run.path)
    out: list = []
    for task in sorted({p.task for p in points}):
        pa = [p for p in points if p.task == task and p.label == a]
        pb = [p for p in points if p.task == task and p.label == b]
        if not pa or not pb:
            continue
        diffs = []
        for i, j in match_by_flops([p.flops for p in pa], [p.flops for p in pb]):
            xa, xb, pairing = _paired(samples, pa[i], pb[j])
            boot = paired_bootstrap(xa, xb, n_resamples=n_resamples, seed=seed)
            out.append(Comparison(task, pa[i], pb[j], pa[i].main_metric, pairing, boot))
            diffs.append(xa - xb)
        if len(diffs) > 1 and len({len(d) for d in diffs}) == 1:
            pooled = np.mean(diffs, axis=0)
            boot = paired_bootstrap(pooled, np.zeros_like(pooled), n_resamples=n_resamples,
                                    seed=seed)
            out.append(Comparison(task, None, None, pa[0].main_metric, "all pairs pooled", boot))
    if not out:
        raise DataError(f"--compare: {a} and {b} share no task")
    return out


def _paired(samples, pa: Point, pb: Point) -> tuple[np.ndarray, np.ndarray, str]:
    parts_a, parts_b = [], []
    for s in pa.seeds:
        ida, xa, path_a = samples[(pa.task, pa.label, pa.sweep_value, s)]
        if s not in pb.seeds:
            continue
        idb, xb, path_b = samples[(pb.task, pb.label, pb.sweep_value, s)]
        for x, path in ((xa, path_a), (xb, path_b)):
            if x is None:
                raise DataError(f"--compare: {path}: its points record no per-sample "
                                "main metric (sample_main)",
                                hint="rerun it with `eebench decode --overwrite`")
        if ida != idb or len(xa) != len(ida) or len(xb) != len(idb):
            continue
        parts_a.append(np.asarray(xa, dtype=float))
        parts_b.append(np.asarray(xb, dtype=float))
    if not parts_a:
        raise DataError(f"task {pa.task}: {pa.label} and {pb.label} were evaluated on different "
                        "samples", hint="compare runs made with the same samples and seeds")
    pairing = "same samples" if len(parts_a) == 1 else f"paired by seed ({len(parts_a)})"
    return np.concatenate(parts_a), np.concatenate(parts_b), pairing
