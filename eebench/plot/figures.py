"""The four figures, each a function from scored data to a matplotlib Figure (nothing is saved).

- pareto_figure:    main metric vs MFLOPs per method, the Pareto front, the reference curve
- histogram_figure: where samples exit, per operating point of one run (sweep value x layer)
- exits_figure:     the metric of each exit on all samples, per method
- speedup_figure:   speed-up vs metric drop from the full model, per method

Returning the Figure lets a caller save it in any format, and lets tests read the plotted data
back from the artists (tagged with gids, see eebench.plot.style) instead of from pixels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import LogFormatter

from eebench.plot.data import ExitCurve, SpeedupPoint
from eebench.plot.style import (
    FRONT_COLOR,
    GID_FRONT,
    GID_METHOD,
    GID_REFERENCE,
    REFERENCE_COLOR,
    MethodStyle,
    flops_label,
    metric_label,
    metric_short,
    new_figure,
    task_title,
)
from eebench.run.artifacts import OperatingPoint
from eebench.score import ReferenceCurves, TaskReport, sample_std

ANNOTATE_CELLS = 160  # write the count into each heatmap cell up to this many cells


def _legend(ax, error_bars: bool = False) -> None:
    title = "error bars: ±1 std over seeds" if error_bars else None
    ax.legend(fontsize="small", frameon=True, framealpha=0.9, title=title,
              title_fontsize="x-small")


def pareto_figure(report: TaskReport, styles: Mapping[str, MethodStyle],
                  reference: ReferenceCurves | None = None, log_flops: bool = False) -> Figure:
    """Main metric vs MFLOPs for each method (mean ± std over seeds as error bars), the Pareto
    front across methods as a staircase (a front point holds until the next one is affordable),
    and the reference curve (static first-k layers) when given."""
    fig, ax = new_figure()
    x = np.array([p.mflops for p in report.points])
    y = np.array([p.main for p in report.points])
    seeds = max(len(p.seeds) for p in report.points)
    for label in sorted({p.label for p in report.points}):
        pts = sorted((p for p in report.points if p.label == label),
                     key=lambda p: (p.flops, p.main))
        px, py = [p.mflops for p in pts], [p.main for p in pts]
        style = styles[label]
        name = label
        elue = report.methods[label].elue if label in report.methods else None
        if elue is not None:
            name = f"{label} (ELUE {elue:+.2f})"
        (line,) = ax.plot(px, py, marker=style.marker, color=style.color, linewidth=1.2,
                          markersize=5, label=name, zorder=3)
        line.set_gid(GID_METHOD + label)
        if any(len(p.seeds) > 1 for p in pts):
            ax.errorbar(px, py, xerr=[p.flops_std / 1e6 for p in pts],
                        yerr=[p.main_std for p in pts], fmt="none", ecolor=style.color,
                        elinewidth=0.8, capsize=2, alpha=0.8, zorder=2)
    on = np.asarray(report.on_front, dtype=bool)
    front = np.unique(np.stack([x[on], y[on]], axis=1), axis=0)  # by FLOPs, duplicates dropped
    (step,) = ax.step(front[:, 0], front[:, 1], where="post", color=FRONT_COLOR, linewidth=4,
                      alpha=0.25, label="Pareto front (all methods)", zorder=3.5)
    step.set_gid(GID_FRONT)
    ax.scatter(front[:, 0], front[:, 1], s=110, facecolors="none", edgecolors=FRONT_COLOR,
               linewidths=0.9, zorder=4)
    if reference is not None:
        curve = reference.curve(report.task)
        rx = np.array(curve.flops) / 1e6
        (ref,) = ax.plot(rx, curve.main, linestyle="--", marker="x", color=REFERENCE_COLOR,
                         linewidth=1.2, label=f"reference {reference.name} (first k layers)",
                         zorder=2)
        ref.set_gid(GID_REFERENCE)
        for p, px in zip(curve.points, rx):
            ax.annotate(f"k={p.layers}", (px, p.main), textcoords="offset points",
                        xytext=(3, -10), fontsize="x-small", color=REFERENCE_COLOR)
    if log_flops:  # plain numbers (2, 3, 10, 100), minor ticks labelled within a decade
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(LogFormatter(labelOnlyBase=False))
        ax.xaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(1, 0.4)))
    ax.set_xlabel(flops_label(report.flops_convention, log_flops))
    ax.set_ylabel(metric_label(report.main_metric))
    ax.set_title(f"{task_title(report.task)} ({report.split}): "
                 f"{metric_short(report.main_metric)} vs FLOPs")
    _legend(ax, seeds > 1)
    return fig


QUALITY_AXES = {"ece": "expected calibration error (%, 15 bins)",
                "consistency": "consistency with full depth (% of samples)"}
QUALITY_TITLES = {"ece": "calibration (ECE) vs FLOPs", "consistency": "consistency vs FLOPs"}


def quality_figure(report: TaskReport, quantity: str, styles: Mapping[str, MethodStyle],
                   log_flops: bool = False) -> Figure:
    """One quality quantity of the exited predictions (`ece` or `consistency`, seed mean ± std
    as error bars) against MFLOPs, a line per method; points without it are left out."""
    fig, ax = new_figure()
    seeds = 1
    for label in sorted({p.label for p in report.points}):
        pts = sorted((p for p in report.points if p.label == label and quantity in p.quality),
                     key=lambda p: (p.flops, p.sweep_value))
        if not pts:
            continue
        style = styles[label]
        px = [p.mflops for p in pts]
        py = [p.quality[quantity][0] for p in pts]
        (line,) = ax.plot(px, py, marker=style.marker, color=style.color, linewidth=1.2,
                          markersize=5, label=label, zorder=3)
        line.set_gid(GID_METHOD + label)
        seeds = max(seeds, max(p.quality[quantity][2] for p in pts))
        if any(p.quality[quantity][2] > 1 for p in pts):
            ax.errorbar(px, py, yerr=[p.quality[quantity][1] for p in pts], fmt="none",
                        ecolor=style.color, elinewidth=0.8, capsize=2, alpha=0.8, zorder=2)
    if log_flops:
        ax.set_xscale("log")
    ax.set_xlabel(flops_label(report.flops_convention, log_flops))
    ax.set_ylabel(QUALITY_AXES[quantity])
    ax.set_title(f"{task_title(report.task)} ({report.split}): {QUALITY_TITLES[quantity]}")
    _legend(ax, seeds > 1)
    return fig


def histogram_figure(points: Sequence[OperatingPoint], label: str, seed: int) -> Figure:
    """A heatmap of where the samples of one run exit: a row per operating point (sweep value),
    a column per layer, the colour the share of samples and the count written in the cell."""
    num_layers = points[0].num_layers
    counts = np.array([p.exit_histogram for p in points], dtype=float)
    share = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)
    fig, ax = new_figure(width=max(4.8, 1.2 + 0.45 * num_layers),
                         height=max(2.6, 1.4 + 0.28 * len(points)))
    ax.grid(False)
    image = ax.imshow(share * 100, aspect="auto", cmap="viridis", vmin=0, vmax=100,
                      interpolation="nearest")
    image.set_gid("exit-histogram")
    if counts.size <= ANNOTATE_CELLS:
        for (row, col), n in np.ndenumerate(counts):
            ax.text(col, row, f"{int(n)}", ha="center", va="center", fontsize="x-small",
                    color="black" if share[row, col] > 0.6 else "white")
    ax.set_xticks(range(num_layers), [str(j + 1) for j in range(num_layers)])
    ax.set_yticks(range(len(points)),
                  [f"{p.sweep_value:g} (avg {p.avg_exit_layer:.2f})" for p in points],
                  fontsize="small" if len(points) <= 24 else "xx-small")
    ax.set_xlabel("exit layer")
    ax.set_ylabel(f"{points[0].sweep_param} (average exit layer)")
    ax.set_title(f"{task_title(points[0].task)}: {label}, seed {seed}: where samples exit",
                 fontsize="medium")
    bar = fig.colorbar(image, ax=ax, fraction=0.05)
    bar.set_label(f"samples exiting (% of {points[0].n_samples})")
    return fig


def exits_figure(task: str, label: str, curves: Sequence[ExitCurve], main_metric: str,
                 style: MethodStyle, floor: float | None = None,
                 floor_name: str = "majority class") -> Figure:
    """The metric of each exit on all samples (one curve per seed averaged: mean ± std), the
    accuracy too when the main metric is another, and the floor of a constant prediction (the
    majority class; for regression the mean score) every trained exit should clear."""
    fig, ax = new_figure(width=5.6, height=4.0)
    # Seeds of a static method may sweep different k: each layer is averaged over the seeds
    # that have it.
    layers = np.unique(np.concatenate([c.layers for c in curves]))
    shown = [main_metric] + (["accuracy"] if main_metric != "accuracy"
                             and "accuracy" in curves[0].metrics[0] else [])
    for i, name in enumerate(shown):
        per_layer = [[v for c in curves for lay, v in zip(c.layers, c.values(name)) if lay == layer]
                     for layer in layers]
        mean = np.array([np.mean(v) for v in per_layer])
        (line,) = ax.plot(layers, mean, marker=style.marker, color=style.color,
                          linestyle="-" if i == 0 else ":", label=metric_short(name))
        line.set_gid(GID_METHOD + label + ("" if i == 0 else f":{name}"))
        if len(curves) > 1:
            std = [sample_std(v) for v in per_layer]
            ax.errorbar(layers, mean, yerr=std, fmt="none", ecolor=style.color, capsize=2,
                        elinewidth=0.8)
    if floor is not None:
        ax.axhline(floor, color=REFERENCE_COLOR, linestyle="--", linewidth=1,
                   label=f"{floor_name} ({metric_short(main_metric)})")
    ax.set_xticks(layers)
    ax.set_xlabel("exit layer")
    ax.set_ylabel(metric_label(main_metric))
    n = len(curves)
    seeds = f"mean ± std of {n} seeds" if n > 1 else "one seed"
    ax.set_title(f"{task_title(task)}: {label}, each exit on all samples ({seeds})",
                 fontsize="medium")
    _legend(ax, len(curves) > 1)
    return fig


def speedup_figure(task: str, points: Sequence[SpeedupPoint], main_metric: str,
                   styles: Mapping[str, MethodStyle]) -> Figure:
    """Speed-up (layers saved, L / average exit layer) vs the main metric lost from each
    method's own full model; below the zero line an early exit scores better than no exit."""
    fig, ax = new_figure()
    for label in sorted({sp.point.label for sp in points}):
        pts = sorted((sp for sp in points if sp.point.label == label),
                     key=lambda sp: (sp.speedup, sp.drop))
        style = styles[label]
        sx, sy = [sp.speedup for sp in pts], [sp.drop for sp in pts]
        (line,) = ax.plot(sx, sy, marker=style.marker, color=style.color, linewidth=1.2,
                          markersize=5, label=label, zorder=3)
        line.set_gid(GID_METHOD + label)
        if any(len(sp.point.seeds) > 1 for sp in pts):
            ax.errorbar(sx, sy, xerr=[sp.speedup_std for sp in pts],
                        yerr=[sp.drop_std for sp in pts], fmt="none", ecolor=style.color,
                        elinewidth=0.8, capsize=2, alpha=0.8, zorder=2)
    ax.axhline(0, color=REFERENCE_COLOR, linewidth=1, linestyle="--", zorder=1)
    ax.set_xlabel("speed-up (× fewer layers: L / average exit layer)")
    ax.set_ylabel(f"{metric_short(main_metric)} drop from full model (points)")
    ax.set_title(f"{task_title(task)}: speed-up vs {metric_short(main_metric)} drop",
                 fontsize="medium")
    _legend(ax, any(len(sp.point.seeds) > 1 for sp in points))
    return fig
