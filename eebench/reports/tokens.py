"""Kind `token-benchmark`: early exit for sequence labelling (CoNLL-2003, WNUT-17).

Per task: the static curve (first k layers, entity F1 ± seeds), each method's ELUE score against
it, its best point within FLOPs budgets, and, for token-level halting, where words exit: entity
words (gold tag not `O`) against the others.

Runs: `main` (static and the methods' own rules), `rules` (other rules on the same models,
`--rule`: TOKEE on the SENTEE and DeeBERT models). Options: `methods` (the order of the rows),
`budgets` (fractions of the full model's FLOPs), `word_points` (TOKEE thresholds shown).
"""

from __future__ import annotations

import json

from eebench.reports.core import Block, Context, page, register_kind
from eebench.reports.fmt import in_order, markdown, pm, pm_over, signed
from eebench.score import aggregate_seeds, build_reference, elue_by_seed, raw_points, score
from eebench.tasks.catalog import get_task


def _static_table(points, task: str) -> str:
    rows = [{"k": int(p.sweep_value), "MFLOPs": f"{p.mflops:.1f}",
             "entity F1": pm(p.main, p.main_std, len(p.seeds))}
            for p in sorted((p for p in points if p.task == task and p.label == "static"),
                            key=lambda p: p.sweep_value)]
    return markdown(rows, "rrr")


def _budget_table(points, task: str, methods: list[str], budgets: list[float]) -> str:
    """Each method's best seed-averaged point within each FLOPs budget (share of the full
    model's, static k = L)."""
    mine = [p for p in points if p.task == task]
    full = max((p for p in mine if p.label == "static"), key=lambda p: p.sweep_value)
    rows = []
    for m in methods:
        row = {"method": m}
        for b in budgets:
            inside = [p for p in mine if p.label == m and p.mflops <= b * full.mflops
                      + 1e-9]
            best = max(inside, key=lambda p: p.main, default=None)
            row[f"≤ {b:.0%} FLOPs"] = "-" if best is None else (
                f"{pm(best.main, best.main_std, len(best.seeds))} "
                f"({full.mflops / best.mflops:.1f}×)")
        rows.append(row)
    return markdown(rows, "l" + "r" * len(budgets))


def _elue_table(elue: dict, by_seed: dict, tasks: list[str], methods: list[str]) -> str:
    rows = [{"method": m, **{get_task(t).title: signed(elue.get(m, {}).get(t), by_seed.get(
        m, {}).get(t, {}).values()) for t in tasks}} for m in methods]
    return markdown(rows, "l" + "r" * len(tasks))


def _word_exits(runs, task: str, thresholds: list[float]) -> str:
    """For token-level halting (TOKEE) runs: mean exit layer of entity words and of the others,
    and the share of words decided before the last layer, ± over seeds."""
    rows = []
    tokee = [r for r in runs if r.config.task == task and "tokee" in (r.config.rule,
                                                                       r.config.method)]
    for run in sorted(tokee,
                      key=lambda r: (r.config.method, r.config.seed)):
        arrays = run.predictions()
        gold = arrays["labels"].astype(int)
        entity = gold != 0  # tag 0 is O in every token task's label set
        last = run.points[0].num_layers
        for row, p in enumerate(run.points):
            t = p.sweep["threshold"]
            if not any(abs(t - x) < 1e-9 for x in thresholds):
                continue
            layers = arrays["token_exit_layer"][row].astype(float)
            counted = layers > 0
            label = run.config.method + ("+tokee" if run.config.rule else "")
            rows.append({"method": label, "threshold": t,
                         "seed": run.config.seed, "F1": p.main,
                         "entity": layers[entity & counted].mean(),
                         "other": layers[~entity & counted].mean(),
                         "early": (layers[counted] < last).mean() * 100})
    if not rows:
        return "(no TOKEE run yet)"
    import pandas as pd

    frame = pd.DataFrame(rows)
    out = []
    for (m, t), g in frame.groupby(["method", "threshold"], sort=True):
        out.append({"model + rule": m, "threshold": f"{t:g}", "entity F1": pm_over(g.F1),
                    "entity words' layer": pm_over(g.entity, 2),
                    "other words' layer": pm_over(g.other, 2),
                    "words decided early (%)": pm_over(g.early)})
    return markdown(out, "lrrrrr")


@register_kind("token-benchmark")
def token_page(block: Block, ctx: Context) -> dict:
    o = block.options
    runs = ctx.runs(block.runs["main"], required=True)
    # the rules swept on the methods' models (their own rules' runs beside them are in `main`)
    rule_runs = [r for r in ctx.runs(block.runs["rules"]) if r.config.rule] \
        if "rules" in block.runs else []
    tasks = [t for t in o["tasks"] if any(r.config.task == t and r.config.method == "static"
                                          for r in runs)]
    static = [r for r in runs if r.config.method == "static" and r.config.task in tasks]
    scored = [r for r in runs + rule_runs if r.config.task in tasks]
    if not static:
        return {"n_runs": 0, "tasks": block.text["none"], "hardware": "-", "seeds": "-",
                "elue": "-"}
    reference = build_reference(static, name=o["reference_name"])
    raw = raw_points(scored)
    points = aggregate_seeds(raw)
    report = score(points, reference)
    methods = sorted({p.label for p in points}, key=lambda m: in_order(m, o["methods"]))
    envs = [json.loads((r.path / "env.json").read_text()) for r in scored]
    sections = []
    for t in tasks:
        spec = get_task(t)
        sections.append(page(block.text["task"], title=spec.title,
                             static=_static_table(points, t),
                             budgets=_budget_table(points, t, methods, o["budgets"]),
                             words=_word_exits(scored, t, o["word_points"])))
    hardware = {f"{e.get('cpu') or 'CPU'} ({e.get('cpu_cores')} cores, "
                f"{e.get('training_precision') or 'fp32'})" for e in envs}
    return {"n_runs": len(scored), "hardware": "; ".join(sorted(hardware)),
            "seeds": ", ".join(map(str, sorted({r.config.seed for r in scored}))),
            "elue": _elue_table(report.elue, elue_by_seed(raw, reference), tasks, methods),
            "tasks": "\n\n".join(sections)}

