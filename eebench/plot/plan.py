"""Which figures a set of runs gets, under which file names, and writing them with an index.

Planning is separate from drawing: `plan_figures` scores the runs once (eebench.score: seeds
averaged, fronts, the reference checked against every task) and returns every figure's stable
name, caption and a `build()` that draws it. Names and captions are known before anything is
drawn, so `write_figures` can draw one figure at a time, save it and let it go.

File names (the extension is the format):

    <task>-pareto          main metric vs MFLOPs, all methods, Pareto front, reference curve
    <task>-speedup         speed-up vs metric drop from the full model, all methods
    <task>-calibration     expected calibration error of the exited predictions vs MFLOPs
    <task>-consistency     agreement of the exited predictions with full depth vs MFLOPs
                           (these two for classification tasks whose runs store exit logits)
    <task>-<method>-exits  metric of each exit on all samples (seeds averaged)
    <task>-<method>-s<seed>-exit-histogram   where samples exit, per operating point of a run
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from eebench.errors import DataError, EebenchError, UsageError, os_error
from eebench.io import atomic_files
from eebench.plot.data import ExitCurve, exit_curve, speedup_points
from eebench.plot.figures import (
    exits_figure,
    histogram_figure,
    pareto_figure,
    quality_figure,
    speedup_figure,
)
from eebench.plot.style import method_styles, metric_short, slug, task_title
from eebench.score import (
    ReferenceCurves,
    Run,
    TaskReport,
    aggregate_seeds,
    check_consistent,
    raw_points,
    score,
)

FORMATS = ("png", "svg", "pdf")
INDEX_FILE = "index.md"
# No creation dates written into SVG and PDF files: rerunning changes no date stamp.
_METADATA = {"png": None, "svg": {"Date": None}, "pdf": {"CreationDate": None}}


@dataclass(frozen=True)
class PlannedFigure:
    name: str  # file name without the extension, e.g. "rte-pareto"
    kind: str  # "pareto", "speedup", "calibration", "consistency", "exits", "exit-histogram"
    task: str
    caption: str  # one line, for index.md
    build: Callable[[], Figure]


class _Curves:
    """Each run's per-exit metrics, computed once (they need the run's logits)."""

    def __init__(self) -> None:
        self._cache: dict[str, ExitCurve] = {}

    def get(self, run: Run) -> ExitCurve:
        key = str(run.path)
        if key not in self._cache:
            from eebench.tasks.catalog import get_task

            self._cache[key] = exit_curve(run, get_task(run.config.task))
        return self._cache[key]


def plan_figures(runs: Sequence[Run], reference: ReferenceCurves | None = None,
                 log_flops: bool = False) -> list[PlannedFigure]:
    """Every figure for `runs`, in index order: per task the front, the speed-ups, then per
    method its exits and per run its exit histogram."""
    if not runs:
        raise DataError("no runs to plot")
    from eebench.score.quality import fill_quality

    fill_quality(runs)  # calibration and consistency, from the arrays of runs that lack them
    raw = raw_points(runs)
    check_consistent(raw)
    report = score(aggregate_seeds(raw), reference)
    styles = method_styles(rp.label for rp in raw)
    curves = _Curves()
    planned: list[PlannedFigure] = []
    for task, tr in report.tasks.items():
        title, metric = task_title(task), metric_short(tr.main_metric)
        labels = sorted(tr.methods)
        ref_text = f"; dashed: reference '{reference.name}'" if reference is not None else ""
        planned.append(PlannedFigure(
            f"{slug(task)}-pareto", "pareto", task,
            f"{title} ({tr.split}): {metric} vs MFLOPs per sample of {', '.join(labels)}; "
            f"black staircase: Pareto front{ref_text}",
            partial(pareto_figure, tr, styles, reference, log_flops)))
        planned.append(PlannedFigure(
            f"{slug(task)}-speedup", "speedup", task,
            f"{title}: speed-up (L / average exit layer) vs {metric} drop from each method's "
            "full model (its deepest exit on every sample)",
            partial(_speedup, tr, styles, curves)))
        for kind, quantity, what in (
                ("calibration", "ece", "expected calibration error (15 equal-width bins of max "
                 "softmax probability, weighted by bin size)"),
                ("consistency", "consistency", "consistency (share of samples whose exited "
                 "prediction equals the method's full-depth prediction)")):
            if any(quantity in p.quality for p in tr.points):
                planned.append(PlannedFigure(
                    f"{slug(task)}-{kind}", kind, task,
                    f"{title} ({tr.split}): {what} vs MFLOPs per sample, seed mean ± std",
                    partial(quality_figure, tr, quantity, styles, log_flops)))
        task_runs = {str(rp.run.path): (rp.label, rp.run) for rp in raw if rp.point.task == task}
        for label in labels:
            members = [run for lab, run in task_runs.values() if lab == label]
            members.sort(key=lambda r: r.config.seed)
            seeds = ", ".join(str(r.config.seed) for r in members)
            planned.append(PlannedFigure(
                f"{slug(task)}-{slug(label)}-exits", "exits", task,
                f"{title}: {metric} of each exit of {label} on all samples "
                f"(seed{'s' if len(members) > 1 else ''} {seeds})",
                partial(_exits, task, label, members, tr.main_metric, styles[label], curves)))
        planned += _histograms(task, title, sorted(task_runs.values(), key=_run_order))
    return planned


def _run_order(item: tuple[str, Run]):
    label, run = item
    return label, run.config.seed, str(run.path)


def _histograms(task: str, title: str, runs: list[tuple[str, Run]]) -> list[PlannedFigure]:
    names = [f"{slug(task)}-{slug(label)}-s{run.config.seed}-exit-histogram"
             for label, run in runs]
    clash = Counter(names)
    out = []
    for name, (label, run) in zip(names, runs):
        if clash[name] > 1:  # the same method and seed with another configuration
            name = f"{name}-{run.config.key()}"
        out.append(PlannedFigure(
            name, "exit-histogram", task,
            f"{title}: share of samples exiting at each layer, per "
            f"{run.points[0].sweep_param}, {label} seed {run.config.seed} ({run.path})",
            partial(histogram_figure, run.points, label, run.config.seed)))
    return out


def _exits(task, label, members, main_metric, style, curves: _Curves) -> Figure:
    from eebench.tasks.catalog import get_task
    from eebench.tasks.metrics import majority_baseline

    spec = get_task(task)
    majority = [majority_baseline(spec, r.labels())[main_metric] for r in members]
    return exits_figure(task, label, [curves.get(r) for r in members], main_metric, style,
                        floor=float(np.mean(majority)),
                        floor_name="mean score" if spec.is_regression else "majority class")


def _speedup(report: TaskReport, styles, curves: _Curves) -> Figure:
    full = {str(rp.run.path): curves.get(rp.run).values(report.main_metric)[-1]
            for p in report.points for rp in p.sources}
    return speedup_figure(report.task, speedup_points(report.points, full), report.main_metric,
                          styles)


def write_figures(planned: Iterable[PlannedFigure], out: Path, fmt: str = "png",
                  on_saved: Callable[[Path], None] | None = None) -> list[Path]:
    """Draw and save each figure as `<out>/<name>.<fmt>`, then `<out>/index.md` listing them;
    returns the figure paths. Figures are drawn one at a time, each to a temporary file; they
    replace the previous ones together at the end, so a failure (a full disk) changes nothing."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown figure format {fmt!r}", hint=f"use one of {', '.join(FORMATS)}")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise EebenchError(f"{out}: exists and is not a directory")
    planned = list(planned)
    try:
        with atomic_files() as staging:
            paths = []
            for f in planned:
                path = out / f"{f.name}.{fmt}"
                fig = f.build()
                with staging.path(path) as tmp:
                    fig.savefig(tmp, format=fmt, metadata=_METADATA[fmt])
                paths.append(path)
                if on_saved is not None:
                    on_saved(path)
            staging.write_text(out / INDEX_FILE, index_markdown(planned, fmt))
    except OSError as e:
        err = os_error(e, "cannot write")
        if err is None:
            raise
        raise err from e
    return paths


def index_markdown(planned: Sequence[PlannedFigure], fmt: str) -> str:
    """index.md: every figure as a link with its one-line caption, grouped by task."""
    lines = ["# Figures", "",
             "Made by `eebench plot`. Metrics in percent (correlations ×100), FLOPs in MFLOPs "
             "per sample (per token for decoder runs).", ""]
    for task in dict.fromkeys(f.task for f in planned):
        lines += [f"## {task_title(task)}", ""]
        lines += [f"- [{f.name}.{fmt}]({f.name}.{fmt}): {f.caption}"
                  for f in planned if f.task == task]
        lines.append("")
    return "\n".join(lines)
