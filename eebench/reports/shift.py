"""Kind `shift`: models trained on one task evaluated on others (`eebench run --eval-task`): per
method and setting, the metric, average exit layer, ECE and consistency with full depth on each.

Runs: `main`. Options: `trained_on`, `evaluated` (in-domain first), `methods`, `setting` (how a
sweep parameter reads), `shown` (at most this many settings, evenly spaced).
"""

from __future__ import annotations

from eebench.reports.core import Block, Context, page, register_kind
from eebench.reports.fmt import markdown
from eebench.tasks.catalog import get_task


def _table(runs: list, method: str, o: dict) -> str:

    by_task = {r.config.task: r for r in runs if r.config.method == method}
    missing = [t for t in o["evaluated"] if t not in by_task]
    if missing:
        return f"({method}: no run on {', '.join(missing)} yet)"
    trained = by_task[o["trained_on"]]
    values = [p.sweep_value for p in trained.points]
    if len(values) > o["shown"]:
        values = values[::(len(values) - 1) // (o["shown"] - 1)]
    first = trained.points[0]
    rows = []
    for v in values:
        row = {"setting": f"{o['setting'].get(first.sweep_param, first.sweep_param)} {v:.3g}"}
        for t in o["evaluated"]:
            [p] = [p for p in by_task[t].points if p.sweep_value == v]
            name = get_task(t).title + (" (in domain)" if t == o["trained_on"] else "")
            row[name] = (f"{p.main:.1f} / {p.avg_exit_layer:.2f} / {p.ece:.1f} / "
                         f"{p.consistency:.1f}")
        rows.append(row)
    return markdown(rows, "l" + "r" * len(o["evaluated"]), numparse=True)


@register_kind("shift")
def shift_block(block: Block, ctx: Context) -> dict:

    o = block.options
    runs = ctx.runs(block.runs["main"], quality=True, required=True)
    n = {t: next(r.points[0].n_samples for r in runs if r.config.task == t)
         for t in o["evaluated"] if any(r.config.task == t for r in runs)}
    return {"evaluated": ", ".join(f"{get_task(t).title} ({k} dev samples)" for t, k in n.items()),
            "trained_on": get_task(o["trained_on"]).title,
            "tables": "\n\n".join(page(block.text["method"], method=m, table=_table(runs, m, o))
                                  for m in o["methods"])}
