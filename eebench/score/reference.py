"""Reference curves: versioned JSON files of static first-k-layer points, one curve per task.

A curve is what a plain model reaches with its first k layers and nothing else; an early-exit
method earns a positive ELUE score by beating it at equal FLOPs. Curves are built from runs of
single-exit models only (static: one model per k = 1..L; k is read from each point's recorded
variant, averaged over seeds) and carry their provenance, so a score can always say what it was
measured against. The schema is documented in docs/scoring.md;
`schema_version` is a constant of this file, never derived from the package version.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from eebench.errors import DataError
from eebench.io import atomic_write_text, read_json, validated
from eebench.run.records import MAX_FLOPS, Metric
from eebench.score.collect import Run, check_consistent, raw_points
from eebench.score.stats import aggregate_seeds

REFERENCE_SCHEMA_VERSION = 1
class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=(), allow_inf_nan=False,
                              strict=True)


class ReferencePoint(_Data):
    """One k of a curve: finite, possible numbers only (the bounds of a run's points)."""

    layers: int = Field(ge=1)  # k: the first k layers
    flops: float = Field(gt=0, le=MAX_FLOPS)  # FLOPs per sample
    mflops: float = Field(gt=0)  # the same in MFLOPs, for people reading the file
    main: Metric  # main metric in percent, mean over seeds
    main_std: float = Field(0.0, ge=0)  # sample std over seeds (0 for one seed)
    seeds: list[int] = Field(default_factory=list)

    @model_validator(mode="after")
    def _mflops(self) -> ReferencePoint:
        if not math.isclose(self.mflops, self.flops / 1e6, rel_tol=1e-6):
            raise ValueError(f"mflops {self.mflops} is not flops / 1e6")
        return self


class TaskCurve(_Data):
    main_metric: str
    num_layers: int = Field(ge=1)  # L, the full model's depth
    points: list[ReferencePoint] = Field(min_length=1)

    @model_validator(mode="after")
    def _sorted(self) -> TaskCurve:
        self.points = sorted(self.points, key=lambda p: p.flops)
        flops = [p.flops for p in self.points]
        if len(set(flops)) != len(flops):
            raise ValueError("two reference points share the same FLOPs")
        return self

    @property
    def flops(self) -> list[float]:
        return [p.flops for p in self.points]

    @property
    def main(self) -> list[float]:
        return [p.main for p in self.points]


class RunRecord(_Data):
    path: str
    task: str
    seed: int
    config_hash: str
    written: str  # when points.jsonl was written (UTC, ISO 8601)


class Provenance(_Data):
    created: str  # UTC, ISO 8601
    eebench_version: str
    method: str  # the method of the runs (static)
    seeds: list[int]
    runs: list[RunRecord]


class ReferenceCurves(_Data):
    schema_version: int
    name: str
    model: str
    flops_convention: str
    split: str
    provenance: Provenance
    tasks: dict[str, TaskCurve] = Field(min_length=1)

    def curve(self, task: str) -> TaskCurve:
        if task not in self.tasks:
            raise DataError(
                f"reference {self.name!r} has no curve for task {task}",
                hint=f"it has: {', '.join(sorted(self.tasks))}",
            )
        return self.tasks[task]


def iso_time(ts: float | None = None) -> str:
    when = datetime.now(timezone.utc) if ts is None else datetime.fromtimestamp(ts, timezone.utc)
    return when.replace(microsecond=0).isoformat()


def build_reference(runs: Sequence[Run], name: str | None = None) -> ReferenceCurves:
    """One curve per task from static runs; non-static runs, mixed models, splits or FLOPs
    conventions are refused. Several seeds of one k are averaged (seeds.aggregate_seeds)."""
    from eebench import __version__

    if not runs:
        raise DataError("no runs to build a reference from")
    for run in runs:  # single-exit models: every sample of a point exits at its model's one exit
        if not run.variants or any(len(v.exit_layers) != 1 for v in run.variants):
            raise DataError(
                f"{run.path}: a {run.config.method} run, not of single-exit models",
                hint="a reference curve is built from static first-k-layer runs only",
            )
    for what, values in (
        ("models", {r.config.model for r in runs}),
        ("methods", {r.config.method for r in runs}),
        ("FLOPs conventions", {p.flops_convention for r in runs for p in r.points}),
        ("splits", {p.split for r in runs for p in r.points}),
    ):
        if len(values) > 1:
            raise DataError(f"runs of mixed {what}: {', '.join(sorted(values))}",
                            hint="a reference curve holds one model, split and FLOPs convention")
    raw = raw_points(runs)
    check_consistent(raw)
    # Group by k (not by sweep value), so "one run per k" and "one run with every k" agree.
    by_k = [
        replace(rp, point=rp.point.model_copy(update={
            "sweep_param": "layers",
            "sweep_value": float(rp.run.variant_of(rp.point).exit_layers[0])}))
        for rp in raw
    ]
    tasks: dict[str, TaskCurve] = {}
    for task in sorted({rp.point.task for rp in by_k}):
        points = aggregate_seeds([rp for rp in by_k if rp.point.task == task])
        tasks[task] = TaskCurve(
            main_metric=points[0].main_metric,
            num_layers=points[0].num_layers,
            points=[ReferencePoint(layers=int(p.sweep_value), flops=p.flops, mflops=p.mflops,
                                   main=p.main, main_std=p.main_std, seeds=list(p.seeds))
                    for p in points],
        )
    model = runs[0].config.model
    first = runs[0].points[0]
    records = [
        RunRecord(path=str(r.path), task=r.config.task, seed=r.config.seed,
                  config_hash=r.config.key(), written=iso_time(_mtime(r.path / "points.jsonl")))
        for r in runs
    ]
    return ReferenceCurves(
        schema_version=REFERENCE_SCHEMA_VERSION,
        name=name or f"{model.rstrip('/').split('/')[-1]}-static",  # of a path: its last part
        model=model,
        flops_convention=first.flops_convention,
        split=first.split,
        provenance=Provenance(
            created=iso_time(), eebench_version=__version__, method=runs[0].config.method,
            seeds=sorted({r.config.seed for r in runs}), runs=records,
        ),
        tasks=tasks,
    )


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def save_reference(ref: ReferenceCurves, path: Path) -> None:
    atomic_write_text(Path(path), ref.model_dump_json(indent=2) + "\n")


def load_reference(path: Path) -> ReferenceCurves:
    """Read and validate a reference file; any problem is one DataError line naming the file."""
    data = read_json(Path(path))  # missing, a directory, not UTF-8, not JSON: one line each
    if not isinstance(data, dict) or "schema_version" not in data:
        raise DataError(f"{path}: not a reference file (no schema_version)")
    if data["schema_version"] != REFERENCE_SCHEMA_VERSION:
        raise DataError(
            f"{path}: reference schema_version {data['schema_version']!r} is not supported",
            hint=f"this eebench reads schema_version {REFERENCE_SCHEMA_VERSION}",
        )
    return validated(ReferenceCurves, data, path, what="reference file")
