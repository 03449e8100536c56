"""Figures of decoder runs (`eebench decode`): per task, the main metric vs MFLOPs per token.

    planned = plan_decoder_figures(load_decoder_runs(paths))
    write_figures(planned, Path("figures"), "png")   # <task>-pareto.png + index.md

One curve per method (seed mean, error bars over seeds), the Pareto front across methods, the
run's own reference curve (its static truncation at each exit k and the full model, dashed) and
the full model marked with a star. The figure is eebench.plot.figures.pareto_figure on the
decoder score (eebench.score.decoder), its FLOPs axis per token.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from matplotlib.figure import Figure

from eebench.errors import DataError
from eebench.plot.figures import pareto_figure
from eebench.plot.plan import PlannedFigure
from eebench.plot.style import FRONT_COLOR, method_styles, metric_short, slug, task_title
from eebench.run.decoding import DecodeRun
from eebench.score.report import TaskReport

GID_FULL = "full-model"


def decoder_pareto_figure(report: TaskReport, styles, reference, log_flops: bool = False
                          ) -> Figure:
    """pareto_figure with the FLOPs axis per token and the full model marked."""
    fig = pareto_figure(report, styles, reference, log_flops)
    ax = fig.axes[0]
    scale = ", log scale" if log_flops else ""
    ax.set_xlabel(f"MFLOPs per token ({report.flops_convention}{scale})")
    ax.set_ylabel(f"{report.main_metric} (%, against the full model)")
    full = [p for p in report.points if p.method == "full"]
    if full:
        (star,) = ax.plot([p.mflops for p in full], [p.main for p in full], linestyle="none",
                          marker="*", markersize=14, color=FRONT_COLOR, label="full model",
                          zorder=5)
        star.set_gid(GID_FULL)
        ax.legend(fontsize="small", frameon=True, framealpha=0.9)
    return fig


def plan_decoder_figures(runs: Sequence[DecodeRun], log_flops: bool = False,
                         extrapolate: str = "clamp") -> list[PlannedFigure]:
    """The Pareto figure of each task of decoder runs (`<task>-pareto`)."""
    from eebench.score.decoder import score_decoder

    if not runs:
        raise DataError("no runs to plot")
    scored = score_decoder(runs, extrapolate)
    report = scored.report
    styles = method_styles(p.label for p in scored.points)
    planned = []
    for task, tr in report.tasks.items():
        labels = sorted(tr.methods)
        planned.append(PlannedFigure(
            f"{slug(task)}-pareto", "pareto", task,
            f"{task_title(task)} ({tr.split}): {metric_short(tr.main_metric)} vs MFLOPs per "
            f"token of {', '.join(labels)}; black staircase: Pareto front; dashed: the runs' "
            "own static truncation (first k layers and exit k's head) and the full model "
            "(star)", partial(decoder_pareto_figure, tr, styles, report.reference, log_flops)))
    return planned
