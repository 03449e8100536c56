"""Kinds `static-curves` (two models side by side: their static first-k-layer curves, and the
ELUE score of some methods against each model's own static curve) and `run-cost` (what each run
cost: models, points, training and wall time).

Runs: `main` and `other` (the second model's runs, of the first's tasks). Options: `models` (the
display name of each, by run set), `methods` (the rows of the ELUE table).
"""

from __future__ import annotations

from pathlib import Path

from eebench.reports.core import Block, Context, page, register_kind
from eebench.reports.fmt import markdown, pm_over, title
from eebench.reports.full_models import recipe
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


def own_elue_by_seed(runs: list) -> dict[str, dict[str, dict[int, float]]]:
    """Each method's ELUE score against the runs' own static curve (seed-averaged static runs),
    by_seed[method][task][seed]; empty without static runs."""
    static = [r for r in runs if r.config.method == "static"]
    if not static:
        return {}
    reference = build_reference(static, name="own-static")
    return elue_by_seed(raw_points([r for r in runs if r.config.task in reference.tasks]),
                        reference)


def _own_elue(runs: list) -> dict[tuple[str, str], str]:
    """(method, task) -> ELUE score against the runs' own static curve, ± over seeds."""
    return {(m, t): pm_over(seeds.values(), none=DASH)
            for m, tasks in own_elue_by_seed(runs).items() for t, seeds in tasks.items()}


@register_kind("static-curves")
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


@register_kind("run-cost")
def run_cost(block: Block, ctx: Context) -> dict:
    """Per run: its models (checkpoints), points, the training its models took (over every
    process that trained them; not recorded by runs made before it was) and the wall time of the
    process that finished it. `total`: hours of training where every run records it, a model
    counted once where runs share it (the cascade sweeps static's models), else of wall time (a
    resumed run's wall time counts only what was left). `wall`: hours of wall time in all."""
    import pandas as pd

    def minutes(seconds: float | None) -> float | None:
        return None if seconds is None else seconds / 60

    rows, models = [], []
    for r in ctx.runs(block.runs["main"]):
        summary = read_run(r.path).summary
        # a checkpoint by its last four parts (model/method/task/key): the same on any machine
        ckpts = {"/".join(Path(c).parts[-4:]) for v in r.variants
                 for c in (v.checkpoint or "").split(";") if c}
        models.append(ckpts)
        rows.append({"task": r.config.task, "method": r.config.method, "seed": r.config.seed,
                     **({"recipe": recipe(r)} if block.options.get("recipe") else {}),
                     "models": len(ckpts) or len(r.variants), "points": len(r.points),
                     "training (min)": minutes(summary and summary.train_seconds),
                     "wall time (min)": minutes(summary and summary.wall_seconds)})
    if not rows:
        return {"table": block.text["none"], "total": "0.0", "counted": "wall time",
                "wall": "0.0"}
    # a run whose models an earlier one (the one with more models first) trained adds no training
    seen: set[str] = set()
    shared = [False] * len(rows)
    for i in sorted(range(len(rows)), key=lambda i: (-len(models[i]), i)):
        shared[i] = bool(models[i]) and models[i] <= seen
        seen |= models[i]
    frame = pd.DataFrame(rows)
    trained = frame["training (min)"].notna().all()
    if trained:
        total = frame["training (min)"][[not s for s in shared]].sum() / 60
    else:
        total = frame["wall time (min)"].sum() / 60
    frame = frame.sort_values(["task", "method", "seed"]
                              + (["recipe"] if "recipe" in rows[0] else []))
    if not frame["training (min)"].notna().any():
        frame = frame.drop(columns="training (min)")
    if frame["seed"].nunique() == 1:
        frame = frame.drop(columns="seed")
    counted = "wall time"
    if trained:
        counted = "training" + (", a model counted once where runs share it" if any(shared)
                                else "")
    return {"table": markdown(frame, numparse=True, floatfmt=".1f", missingval="–"),
            "total": f"{total:.1f}", "counted": counted,
            "wall": f"{frame['wall time (min)'].sum() / 60:.1f}"}
