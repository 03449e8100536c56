"""Kind `ablation`: a method's variants against its baseline runs of the same tasks and seeds, one
table per task: each exit's dev metric on all samples and the ELUE score of the sweep against a
shipped reference, mean ± std over seeds.

Runs: `variants` and `baseline`. Options: `reference` (the reference file); `name_by` how a run's
row is named: "settings" (by the method settings that differ from `paper`; the paper's own is
`paper_name`, a static run `static_name`) or "exit_layers" (by where its exits are,
`every_layer_name` when after every layer); `row_header`; `first` (the rows shown first, in
order); `column` (a column's name from the exit's number `j` or the layer `k` it follows).
"""

from __future__ import annotations

from eebench.errors import DataError
from eebench.reports.core import Block, Context, page, register_kind
from eebench.reports.fmt import in_order, markdown, pm_over, task_order, title
from eebench.score import elue_by_seed, load_reference, raw_points
from eebench.tasks.catalog import get_task


def _row_name(run, o: dict) -> str:
    settings = run.config.method_settings
    if o["name_by"] == "exit_layers":
        layers = settings.get("exit_layers")
        return o["every_layer_name"] if layers is None else "after " + ", ".join(map(str, layers))
    if run.config.method == "static":
        return o["static_name"]
    paper = o["paper"]
    changed = [f"{k} = {str(settings[k]).lower()}" for k in paper
               if k in settings and settings[k] != paper[k]]
    return ", ".join(changed) or o["paper_name"]


def _seed_values(run, reference, o: dict) -> list[dict]:
    """One row per exit of a run (its dev metric on all samples), one for its ELUE score."""
    from eebench.plot.data import exit_curve

    spec = get_task(run.config.task)
    row = {"task": spec.name, "name": _row_name(run, o), "seed": run.config.seed}
    elue = elue_by_seed(raw_points([run]), reference)[run.config.method][spec.name]
    curve = exit_curve(run, spec)
    exits = zip(curve.layers, curve.values(spec.main_metric), strict=True)
    by_layer = "{k}" in o["column"]
    return ([{**row, "column": o["column"].format(j=j, k=k), "number": k if by_layer else j,
              "value": v}
             for j, (k, v) in enumerate(exits, 1)]
            + [{**row, "column": "ELUE score", "number": None, "value": elue[run.config.seed]}])


@register_kind("ablation")
def ablation_block(block: Block, ctx: Context) -> dict:
    import pandas as pd

    o = block.options
    variants = ctx.runs(block.runs["variants"], required=True)
    tasks = sorted({r.config.task for r in variants}, key=task_order)
    seeds = sorted({r.config.seed for r in variants})
    baseline = [r for r in ctx.runs(block.runs["baseline"])
                if r.config.task in tasks and r.config.seed in seeds]
    reference = load_reference(ctx.path(o["reference"]))
    values = pd.DataFrame([row for r in baseline + variants
                           for row in _seed_values(r, reference, o)])
    parts = []
    for task in tasks:
        spec, mine = get_task(task), values[values.task == task]
        for name, got in mine[mine.column == "ELUE score"].groupby("name")["seed"].agg(
                lambda s: sorted(s.tolist())).items():
            if got != seeds:
                raise DataError(f"{task}, {name}: runs for seeds {got}, expected {seeds}")
        table = mine.groupby(["name", "column"], sort=False)["value"].agg(pm_over).unstack()
        exits = mine[mine.number.notna()].sort_values("number", kind="stable")
        columns = [*exits.column.unique(), "ELUE score"]
        table = table.reindex(columns=columns).fillna("-").sort_index(
            key=lambda names: [in_order(n, o["first"]) for n in names])
        table = table.rename_axis(index=o["row_header"]).reset_index()
        parts.append(page(block.text["task"], title=title(spec.name),
                          metric=spec.main_metric, table=markdown(table, "l" + "r" * len(columns))))
    return {"n_baseline": len(baseline), "n_variants": len(variants),
            "seeds": ", ".join(map(str, seeds)), "tasks": "\n\n".join(parts)}
