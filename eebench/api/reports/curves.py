"""Kinds `static-curves` (two models side by side: their static first-k-layer curves, and the
ELUE score of some methods against each model's own static curve) and `run-cost` (what each run
cost: models trained, points, wall time).

Runs: `main` and `other` (the second model's runs, of the first's tasks). Options: `models` (the
display name of each, by run set), `methods` (the rows of the ELUE table).
"""

from __future__ import annotations

from eebench.api.reports.core import Block, Context, kind, page
from eebench.api.reports.fmt import markdown, pm_over, title
from eebench.run.artifacts import read_run
from eebench.score import build_reference, elue_by_seed, raw_points

DASH = "–"


def _static_curve(runs: list, model: str):
    """k, MFLOPs and the main metric of every static point, averaged over seeds."""
    import pandas as pd

    rows = [{"task": r.config.task, "k": int(r.variant_of(p).exit_layers[0]),
             "mflops": p.mean_mflops, "main": p.main}
            for r in runs if r.config.method == "static" for p in r.points]
    return pd.DataFrame(rows).groupby(["task", "k"]).agg(
        **{f"{model} MFLOPs": ("mflops", "mean"),
           f"{model} metric": ("main", lambda v: pm_over(v, none=DASH))}).reset_index()


def _own_elue(runs: list) -> dict[tuple[str, str], str]:
    """(method, task) -> ELUE score against the runs' own static curve, ± over seeds."""
    static = [r for r in runs if r.config.method == "static"]
    if not static:
        return {}
    reference = build_reference(static, name="own-static")
    by_seed = elue_by_seed(raw_points([r for r in runs if r.config.task in reference.tasks]),
                           reference)
    return {(m, t): pm_over(seeds.values(), none=DASH) for m, tasks in by_seed.items()
            for t, seeds in tasks.items()}


@kind("static-curves")
def static_curves(block: Block, ctx: Context) -> dict:
    import pandas as pd

    main = ctx.runs(block.runs["main"])
    other = [r for r in ctx.runs(block.runs["other"]) if r.config.task in
             {r.config.task for r in main}]
    names = block.options["models"]
    tasks = sorted({r.config.task for r in main if r.config.method == "static"})
    if not tasks:
        return {"n_runs": len(main), "tables": block.text["none"]}
    curves = _static_curve(main, names["main"]).merge(
        _static_curve(other, names["other"]), on=["task", "k"], how="left")
    parts = []
    for task in tasks:
        table = curves[curves.task == task].drop(columns="task")
        for col in [c for c in table.columns if c.endswith("MFLOPs")]:  # one decimal, a dash
            table[col] = table[col].map(lambda v: DASH if pd.isna(v) else f"{v:.1f}")
        table = table.fillna(DASH)  # a model with fewer layers
        parts.append(page(block.text["task"], title=title(task),
                          table=markdown(table, numparse=True, floatfmt=".1f")))
    ours, theirs = _own_elue(main), _own_elue(other)
    rows = [{"method": m, "task": title(t),
             f"{names['main']} (own curve)": ours.get((m, t), DASH),
             f"{names['other']} (own curve)": theirs.get((m, t), DASH)}
            for m in block.options["methods"] for t in tasks]
    parts.append(page(block.text["elue"], table=markdown(rows, numparse=True)))
    return {"n_runs": len(main), "tables": "\n\n".join(parts)}


@kind("run-cost")
def run_cost(block: Block, ctx: Context) -> dict:
    import pandas as pd

    def minutes(run) -> float | None:
        summary = read_run(run.path).summary
        return None if summary is None or summary.wall_seconds is None \
            else summary.wall_seconds / 60

    rows = [{"task": r.config.task, "method": r.config.method, "models trained": len(r.variants),
             "points": len(r.points), "wall time (min)": minutes(r)}
            for r in ctx.runs(block.runs["main"])]
    if not rows:
        return {"table": block.text["none"]}
    frame = pd.DataFrame(rows).sort_values(["task", "method"])
    return {"table": markdown(frame, numparse=True, floatfmt=".1f")}
