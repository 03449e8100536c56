"""Kinds `full-models` (each model's full-depth dev score per task, its margin over the majority
baseline, next to published figures) and `published-curve` (a run set's points on one task in
one figure with a published curve). The published numbers: eebench.reports.published.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from eebench.errors import DataError
from eebench.reports.core import Block, Context, register_kind
from eebench.reports.fmt import markdown, pm_over, title
from eebench.reports.published import Curve, load_published
from eebench.reports.seeds import headers

DASH = "–"


def full_point(run):
    """A static run's full model (k = L), or None."""
    return next((p for p in run.points if p.method == "static"
                 and int(run.variant_of(p).exit_layers[0]) == p.num_layers), None)


def recipe(run) -> str:
    t = run.config.train
    return f"lr {t.lr:g} for {t.epochs} epochs" if t.lr is not None and t.epochs is not None \
        else ""


def full_scores(runs: list, pick: str = "all") -> dict[str, dict[str, Any]]:
    """Per task: the full model's dev score over seeds, the majority baseline of its dev
    labels, and the recipe. With several recipes of a task (a recipe search) `pick` = "best"
    keeps the best one's seeds; "all" expects one."""
    from eebench.tasks.catalog import get_task
    from eebench.tasks.metrics import majority_baseline

    by: dict[tuple[str, str], list] = defaultdict(list)
    for r in runs:
        if r.config.method == "static" and (p := full_point(r)) is not None and p.main is not None:
            by[r.config.task, recipe(r)].append((r, p))
    out: dict[str, dict[str, Any]] = {}
    for (task, rec), got in sorted(by.items()):
        mean = sum(p.main for _, p in got) / len(got)
        if task in out and not (pick == "best" and mean > out[task]["mean"]):
            if pick != "best":
                raise DataError(f"{task}: full models of more than one recipe "
                                f"({out[task]['recipe']}; {rec}): pick one")
            continue
        run, p = got[0]
        floor = majority_baseline(get_task(task), run.labels()).get(p.main_metric)
        out[task] = {"mean": mean, "cell": pm_over([p.main for _, p in got]), "recipe": rec,
                     "seeds": len(got), "majority": floor, "layers": p.num_layers}
    return out


@register_kind("full-models")
def full_models(block: Block, ctx: Context) -> dict:
    """Options: `file` (published figures), `models` (display name -> run set key), `pick`
    (run set key -> "best" for a recipe search), `tasks`, `published_task` (an eebench task ->
    the task whose published figures stand beside it), `published` (the published models, in
    order), `searches` (run set key -> the run set of the recipe search it took its recipes
    from). Each column of eebench's runs says in its header how many seeds its cells have, and
    which seed is the search's own model, picked on this dev set (eebench.reports.seeds)."""
    published = load_published(ctx.path(block.options["file"]))
    figures = {(f.model, f.task): f for f in published.figure}
    alias = block.options.get("published_task", {})
    scores = {name: full_scores(ctx.runs(block.runs[key]), block.options.get("pick", {})
                                .get(key, "all"))
              for name, key in block.options["models"].items()}
    rows, margins = [], []
    for task in block.options["tasks"]:
        got = {name: s[task] for name, s in scores.items() if task in s}
        if not got:
            continue
        floor = next(iter(got.values()))["majority"]
        row = {"task": title(task), "majority": DASH if floor is None else f"{floor:.1f}"}
        for name in scores:
            s = got.get(name)
            if s is None:
                row[name] = DASH
                continue
            # against its own dev labels (a run may score a subset)
            margin = None if s["majority"] is None else s["mean"] - s["majority"]
            margins.append((name, task, margin))
            extra = "" if margin is None else f" ({margin:+.1f})"
            row[name] = f"{s['cell']}{extra}"
        for model in block.options["published"]:
            f = figures.get((model, alias.get(task, task)))
            row[model] = DASH if f is None else f"{f.value:.1f}"
        rows.append(row)
    if not rows:
        return {"table": block.text["none"], "least": DASH, "recipes": DASH, "sources": ""}
    picked = {name for name, key in block.options["models"].items()
              if block.options.get("pick", {}).get(key) == "best"}
    recipes = "; ".join(f"{name}: " + ", ".join(f"{title(t)} {s['recipe']}" for t, s in
                                                 sorted(scores[name].items()) if s["recipe"])
                        for name in scores if name in picked and scores[name]) or DASH
    low = [m for m in margins if m[2] is not None]
    least = min(low, key=lambda m: m[2]) if low else None
    used = sorted({(f.model, f.task) for f in published.figure
                   if f.model in block.options["published"]})
    sources = "\n".join(f"- {m}, {title(t)}: {figures[m, t].source}"
                        + (f" ({figures[m, t].metric})" if figures[m, t].metric else "")
                        for m, t in used)
    shown = block.options["tasks"]
    named = headers(block, ctx, {name: [s["seeds"] for t, s in got.items() if t in shown]
                                 for name, got in scores.items()})
    rows = [{named.get(k, k): v for k, v in row.items()} for row in rows]
    return {"table": markdown(rows, "l" + "r" * (len(rows[0]) - 1)),
            "least": DASH if least is None else
            f"{least[2]:+.1f} ({least[0]}, {title(least[1])})",
            "recipes": recipes, "sources": sources}


@register_kind("published-curve")
def published_curve(block: Block, ctx: Context) -> dict:
    """A run set's points on one task (`task`; `methods`, static first) in one figure with a
    published curve of the same task (`file`, the curve of `model`), and a table of the
    published points beside the run set's static curve and each method's best point at no more
    FLOPs. Options: `file`, `model`, `task`, `methods`, `figure` (the PNG, relative to the
    root)."""
    from eebench.score import aggregate_seeds, build_reference, curve_at, raw_points, score

    o = block.options
    published = load_published(ctx.path(o["file"]))
    curve = next((c for c in published.curve if c.model == o["model"] and c.task == o["task"]),
                 None)
    if curve is None:
        raise DataError(f"{o['file']}: no curve of {o['model']} on {o['task']}")
    runs = [r for r in ctx.runs(block.runs["main"]) if r.config.task == o["task"]
            and r.config.label in o["methods"]]
    static = [r for r in runs if r.config.method == "static"]
    if not static:
        return {"table": block.text["none"], "n_runs": len(runs), "source": curve.source}
    reference = build_reference(static, name="static")
    report = score(aggregate_seeds(raw_points(runs)), reference).tasks[o["task"]]
    ref = reference.curve(o["task"])
    rows = []
    for gflops, value in zip(curve.gflops, curve.values, strict=True):
        flops = gflops * 1e9
        row = {"GFLOPs": f"{gflops:.2f}", f"{curve.model} ({curve.split})": f"{value:.1f}",
               f"static ({report.split})": f"{float(curve_at(ref.flops, ref.main, flops)):.1f}"}
        for label in [m for m in o["methods"] if m != "static"
                      and any(r.config.label == m for r in runs)]:
            fit = [p for p in report.points if p.label == label and p.flops <= flops]
            row[f"{label} ({report.split})"] = DASH if not fit else \
                f"{max(p.main for p in fit):.1f}"
        rows.append(row)
    if ctx.write and ctx.figures:
        _write_curve_figure(ctx.path(o["figure"]), report, reference, curve)
    return {"table": markdown(rows, "r" * len(rows[0])), "n_runs": len(runs),
            "source": curve.source}


def _write_curve_figure(path, report, reference, curve: Curve) -> None:
    from functools import partial

    from eebench.plot.figures import pareto_figure
    from eebench.plot.plan import PlannedFigure, write_figures
    from eebench.plot.style import method_styles

    def build():
        fig = pareto_figure(report, method_styles(p.label for p in report.points), reference)
        ax = fig.axes[0]
        ax.plot([g * 1e3 for g in curve.gflops], curve.values, linestyle=":", marker="s",
                color="black", linewidth=1.2, label=f"{curve.model} ({curve.split}, published)")
        ax.legend(fontsize="small", frameon=True, framealpha=0.9)
        return fig

    write_figures([PlannedFigure(path.stem, "published", report.task,
                                 f"{report.task}: the runs' points and {curve.model}'s "
                                 f"published curve", partial(build))], path.parent)
