"""Kind `difficulty`: `eebench analyze` (Spearman's ρ of the exit layer with a sample's
confidence, length, agreement and correctness at the point nearest half the full model's FLOPs)
and `eebench select` (a threshold with a consistency guarantee) on one seed's runs of some
methods and tasks; with the data, one run's easiest and hardest samples with their texts.

Runs: `main` (one seed). Options: `tasks`, `methods`, `consistency`, `delta`, `split_seed`,
`examples` ([method, task, how many]).
"""

from __future__ import annotations

from eebench.errors import DataError
from eebench.reports.core import Block, Context, page, register_kind
from eebench.reports.fmt import markdown, title
from eebench.score.difficulty import analyze, attach_texts, load_samples
from eebench.score.select import select
from eebench.tasks.loaders import load_split


def _rho(c) -> str:
    if c.rho is None:
        return "-"
    return f"{c.rho:+.2f}" + ("" if c.p_value < 1e-3 else f" (p = {c.p_value:.2g})")


def _rho_row(a, task: str, method: str) -> dict:

    rho = {c.quantity: c for c in a.correlations}
    return {"task": title(task), "method": method,
            "point": f"{a.sweep_param} = {a.sweep_value:.3g}",
            "MFLOPs (full)": f"{a.mean_mflops:.0f} ({a.full_mflops:.0f})",
            "avg layer": f"{a.avg_exit_layer:.2f}",
            "ρ confidence": _rho(rho["first_exit_confidence"]), "ρ length": _rho(rho["length"]),
            "ρ agreement": _rho(rho["agreement"]), "ρ correct": _rho(rho["correct"])}


def _select_row(s, task: str, method: str) -> dict:

    full, c = s.full["test"], s.chosen
    dash = c is None
    return {"task": title(task), "method": method,
            "chosen": "none" if dash else f"{s.sweep_param} = {c['sweep_value']:.3g}",
            "tested": f"{len(s.steps)} ({sum(x.passed for x in s.steps)} passed)",
            "MFLOPs (full)": "-" if dash else f"{c['mean_mflops']:.0f} ({c['full_mflops']:.0f})",
            "test consistency": "-" if dash else f"{c['test']['consistency']:.3f}",
            "test accuracy (full)": "-" if dash
            else f"{c['test']['main']:.1f} ({full['main']:.1f})",
            "test avg layer": "-" if dash else f"{c['test']['avg_exit_layer']:.2f}"}


@register_kind("difficulty")
def difficulty_block(block: Block, ctx: Context) -> dict:

    o, spec = block.options, block.runs["main"]
    method_shown, task_shown, top = o["examples"]
    rho_rows, select_rows, examples = [], [], ""
    for task in o["tasks"]:
        for method in o["methods"]:
            found = [r for r in ctx.runs(spec) if (r.config.method, r.config.task) ==
                     (method, task)]
            if not found:
                raise DataError(f"no finished {method} run of {task}, seeds {spec.seeds}, "
                                f"under {spec.folder}")
            samples = load_samples(found[0].path)
            a = analyze(samples, top=top)
            rho_rows.append(_rho_row(a, task, method))
            if (method, task) == (method_shown, task_shown):
                if ctx.data_dir is not None and ctx.data_dir.is_dir():
                    ex = load_split(task, samples.run.config.split, ctx.data_dir)
                    attach_texts(a, dict(zip(ex.ids, ex.texts, strict=True)))
                rows = [{"": name, "id": it["id"], "layer": it["exit_layer"],
                         "first-exit conf.": f"{it['first_exit_confidence']:.3f}",
                         "label / pred.": f"{it['label']} / {it['prediction']}",
                         "text": it.get("text") or "(no data: ids only)"}
                        for name, items in (("easiest", a.easiest), ("hardest", a.hardest))
                        for it in items]
                examples = "\n\n" + page(
                    block.text["examples"], title=title(a.task), method=a.method,
                    setting=f"{a.sweep_param} = {a.sweep_value:.3g}",
                    table=markdown(rows, numparse=True))
            s = select(samples, o["consistency"], o["delta"], o["split_seed"])
            select_rows.append(_select_row(s, task, method))
    return {"seed": ", ".join(map(str, spec.seeds)), "consistency": o["consistency"],
            "delta": o["delta"], "split_seed": o["split_seed"],
            "confidence": f"{1 - o['delta']:g}", "rho_table": markdown(rho_rows, numparse=True),
            "select_table": markdown(select_rows, numparse=True), "examples": examples}
