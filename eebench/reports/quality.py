"""Kind `quality`: what early exits do to the predictions (calibration, consistency with full
depth, each exit on its own, overthinking) and each method's metric at fixed FLOPs budgets, from
the runs' stored arrays (eebench.score.quality, the code `eebench score` runs).

Options: `half` (the budget of the first table, percent of the full model's FLOPs).
"""

from __future__ import annotations

from eebench.reports.core import Block, Context, register_kind
from eebench.reports.fmt import markdown, pm, task_order, title
from eebench.score import aggregate_seeds, raw_points
from eebench.score.quality import (
    DEFAULT_BUDGETS,
    budget_table,
    full_model_flops,
    param_buckets,
    run_qualities,
)


@register_kind("quality")
def quality_block(block: Block, ctx: Context) -> dict:
    import pandas as pd

    runs = ctx.runs(block.runs["main"], quality=True)
    raw = raw_points(runs)
    half = block.options["half"]
    per_run = [{"task": title(m.task), "method": m.label,
                **{f"exit {k}": pm(a, s, len(m.seeds))
                   for k, (a, s) in zip(m.exit_layers, m.exit_accuracy, strict=True)},
                "overthinking %": pm(*m.overthinking, len(m.seeds)),
                "underthinking %": pm(*m.underthinking, len(m.seeds))}
               for m in sorted(run_qualities(raw), key=lambda m: (task_order(m.task), m.label))]
    budgets: dict[tuple, dict] = {}
    for b in budget_table(raw, DEFAULT_BUDGETS):
        row = budgets.setdefault((task_order(b.task), b.label),
                                 {"task": title(b.task), "method": b.label})
        row[f"{b.percent:g}%"] = pm(b.main, b.main_std, b.seeds)
    per_run = pd.DataFrame(per_run).fillna("-")
    budgets = pd.DataFrame([budgets[k] for k in sorted(budgets)])
    return {
        "n_runs": len(runs), "seeds": ", ".join(map(str, sorted({r.config.seed for r in runs}))),
        "buckets": "; ".join(f"{label} {n / 1e6:.1f}M ({b})"
                             for label, (n, b) in param_buckets(raw).items()),
        "half": f"{half:g}",
        "half_table": _half_budget_table(aggregate_seeds(raw), full_model_flops(raw), half),
        "exits_table": markdown(per_run, "ll" + "r" * (per_run.shape[1] - 2)),
        "budgets": ", ".join(f"{b:g}" for b in DEFAULT_BUDGETS),
        "budgets_table": markdown(budgets, "ll" + "r" * (budgets.shape[1] - 2))}


def _half_budget_table(points, full: dict[str, float], half: float) -> str:
    """Per task and method: the seed-averaged point with the best main metric within `half`% of
    the full model's FLOPs, and the full model (static k = L) for comparison."""
    rows = []
    for task in sorted({p.task for p in points}, key=task_order):
        pts = [p for p in points if p.task == task and p.quality]
        if not pts:
            continue  # regression: nothing to calibrate
        budget = full[task] * half / 100
        chosen = []
        for label in sorted({p.label for p in pts}):
            within = [p for p in pts if p.label == label and p.flops <= budget * (1 + 1e-9)]
            if within:
                chosen.append((label, max(within, key=lambda p: p.main)))
        deepest = [p for p in pts if p.label == "static"]
        if deepest:
            chosen.append(("static, full model", max(deepest, key=lambda p: p.flops)))
        for name, p in chosen:
            q = p.quality
            rows.append({
                "task": title(task), "method": name,
                "point": f"{p.sweep_param} = {p.sweep_value:g}", "MFLOPs": f"{p.mflops:.0f}",
                "main": pm(p.main, p.main_std, len(p.seeds)),
                "ECE %": pm(*q["ece"]), "NLL": pm(*q["nll"], digits=3),
                "consistency %": pm(*q["consistency"]),
                "gain %": pm(*q["exit_gain"]), "loss %": pm(*q["exit_loss"])})
    return markdown(rows, "lll" + "r" * 7)
