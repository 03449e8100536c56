"""The benchmark's page (kind `elue-benchmark`): budget, ELUE scores, best points and ensembles,
significance, every rule on every model, every point of every task; beside it the reference curve
it is scored against, the Pareto figures and one submission per method.
Its options are read in benchmarks/reports.py.
"""

from __future__ import annotations

from pathlib import Path

from eebench.errors import DataError
from eebench.methods.base import get_method
from eebench.methods.derived import supports_regression
from eebench.reports.core import Block, Context, page, register_kind
from eebench.reports.fmt import in_order, markdown, pm, pm_over, signed
from eebench.rules.catalog import get_rule
from eebench.score import (
    aggregate_seeds,
    build_reference,
    compare_methods,
    elue_by_seed,
    load_reference,
    raw_points,
    results_frame,
    run_records,
    save_reference,
    score,
)
from eebench.score.ensemble import ensemble_point
from eebench.score.stats import SEED_KEYS, paired_bootstrap, paired_scores
from eebench.submit.build import build_submission
from eebench.tasks.catalog import get_task


@register_kind("elue-benchmark")
def benchmark_page(block: Block, ctx: Context) -> dict:
    import json

    import pandas as pd
    import tomllib

    o = block.options
    cfg = tomllib.loads(ctx.path(o["config"]).read_text())
    runs = ctx.runs(block.runs["main"], required=True)
    # A task is reported once its static runs (the reference) are in.
    with_reference = {r.config.task for r in runs if r.config.method == "static"}
    if not with_reference:
        raise DataError(f"block {block.name}: no task has its static runs, the reference, yet",
                        hint="declare the block once the first static run is in")
    rel = [r for r in runs if r.config.task in with_reference]
    reference = build_reference([r for r in rel if r.config.method == "static"],
                                name=o["reference_name"])
    for record in reference.provenance.runs:  # paths relative to the repository root
        record.path = str(Path(record.path).resolve().relative_to(ctx.root.resolve()))
    # Submissions pin the reference by sha256, so it ships once, whole: until every static run
    # of the config is in, the page scores against the curve so far and writes no reference
    # or submission.
    static_due = len(cfg["tasks"]) * len(cfg["seeds"]) if "static" in cfg["methods"] else 0
    static_in = sum(r.config.method == "static" for r in runs)
    whole = static_in >= static_due
    if whole:
        reference = _keep_if_unchanged(reference, ctx, o["reference"])

    order = [*o["classic"], *o["field"]]
    key = lambda label: in_order(label, order)  # noqa: E731
    raw = raw_points(rel)
    points = aggregate_seeds(raw)
    report = score(points, reference)
    scored = report.to_dataframe()  # the seed-averaged points
    frame = results_frame(run_records(raw))  # every point of every run
    ensembles = pd.DataFrame([vars(ensemble_point(r)) for r in rel if r.config.method != "static"])
    tasks = [get_task(t).name for t in cfg["tasks"] if get_task(t).name in report.tasks]
    methods = sorted({p.label for p in points}, key=key)
    rule_runs = [r for r in ctx.runs(block.runs["rules"]) if r.config.task in with_reference]
    envs = [json.loads((r.path / "env.json").read_text()) for r in rel]
    waiting = sorted({r.config.task for r in runs} - with_reference)
    sections = [_task_section(block, report.tasks[t], scored[scored.task == t],
                              frame[frame.task == t], ensembles[ensembles.task == t], key)
                for t in tasks]
    if ctx.write:
        _write_artifacts(block, ctx, rel, reference, methods, ship=whole)
    held = [f"{', '.join(waiting)}: finished runs held back until the task's static runs, its "
            "reference, are in"] if waiting else []
    if not whole:
        held.append(f"scored against the reference curve so far, from {static_in} of the "
                    f"{static_due} static runs; `{o['reference']}` and the submissions are "
                    "written once all are in")
    return {
        "n_runs": len(rel), "n_jobs": _expected_jobs(cfg, o),
        "pending": f" ({'; '.join(held)})" if held else "",
        "hardware": "; ".join(sorted({f"{e.get('cpu') or 'CPU'} ({e.get('cpu_cores')} cores)"
                                      + (f", GPU {e['gpu']}" if e.get("gpu") else "")
                                      for e in envs})),
        **{k: cfg["train"].get(k) for k in ("lr", "batch_size", "precision")},
        "seeds": ", ".join(map(str, cfg["seeds"])), "budget": _budget_table(cfg),
        "elue": _elue_table(report.elue, elue_by_seed(raw, reference), tasks, methods),
        "summary": _summary_table(scored, ensembles, tasks, methods),
        "n_resamples": o["n_resamples"],
        "significance": _significance_table(points, tasks, o),
        "pabee": _pabee_table(points, tasks, o["n_resamples"]),
        "rules": (page(block.text["rules"], n=len(rule_runs), table=_rules_table(
            score(aggregate_seeds(raw_points(rule_runs)), reference).elue,
            elue_by_seed(raw_points(rule_runs), reference), tasks, o))
            if rule_runs else block.text["no_rules"]),
        "tasks": "\n\n".join(sections)}


def _keep_if_unchanged(reference, ctx: Context, where: str):
    """The shipped reference, kept byte for byte when the runs give the same curves: submissions
    pin it by sha256, so only new numbers (or new runs) may change the file."""
    path = ctx.path(where)
    if path.is_file():
        shipped = load_reference(path)
        same = shipped.model_dump(exclude={"provenance"}) == reference.model_dump(
            exclude={"provenance"})
        runs = [(r.path, r.config_hash) for r in shipped.provenance.runs]
        if same and runs == [(r.path, r.config_hash) for r in reference.provenance.runs]:
            return shipped
    if ctx.write:
        save_reference(reference, path)
        ctx.say(f"wrote {where}")
    return reference


def _write_artifacts(block: Block, ctx: Context, runs, reference, methods, ship: bool) -> None:
    """The Pareto figures and, once the reference ships (`ship`), one submission per method."""
    from eebench.reports.files import write_submission_if_changed

    o = block.options
    if ctx.figures:
        from eebench.plot.plan import plan_figures, write_figures

        planned = [f for f in plan_figures(runs, reference) if f.kind == "pareto"]
        write_figures(planned, ctx.path(o["figures"]), "png")
    if not ship:
        return
    written = 0
    for m in methods:
        sub = build_submission([r.path for r in runs if r.config.label == m],
                               data_dir=ctx.data_dir, reference=ctx.path(o["reference"]),
                               name=o["submission_name"].format(method=m))
        out = ctx.path(o["submissions"]) / o["submission_file"].format(method=m)
        written += write_submission_if_changed(sub, out)
    ctx.say(f"{written} of {len(methods)} submissions changed and written (from {len(runs)} runs)")


def _expected_jobs(cfg: dict, o: dict) -> int:

    field_seeds = o.get("field_seeds", cfg["seeds"])  # the field's methods may run fewer seeds
    return sum(len(cfg["seeds"] if method in o["classic"] else field_seeds)
               for task in cfg["tasks"] for method in cfg["methods"]
               if (method in o["classic"] or task in o["field_tasks"])
               and (supports_regression(get_method(method)) or not get_task(task).is_regression))


def _budget_table(cfg: dict) -> str:

    rows = []
    for task in cfg["tasks"]:
        own = cfg.get("tasks_settings", {}).get(task, {})
        train = {**cfg.get("train", {}), **own.get("train", {})}
        rows.append({"task": get_task(task).title,
                     "train examples": train.get("max_train_samples", "all"),
                     "epochs": train.get("epochs"), "lr": f"{train['lr']:g}" if "lr" in train
                     else "the backbone's",
                     "max tokens": own.get("max_seq_length", cfg["max_seq_length"]),
                     "dev samples scored": own.get("max_eval_samples",
                                                   cfg.get("max_eval_samples")) or "all"})
    return markdown(rows, "lrrrrr")


def _elue_table(elue: dict, by_seed: dict, tasks: list[str], methods: list[str]) -> str:
    """Each method's ELUE score per task ± its spread over seeds; overall: the mean over the tasks
    it is scored on ± the spread of each seed's mean over them (seeds run on all of them)."""
    import pandas as pd

    seeds = pd.DataFrame([(m, t, s, v) for m, per_task in by_seed.items()
                          for t, per_seed in per_task.items() for s, v in per_seed.items()],
                         columns=["method", "task", "seed", "elue"])
    seeds = seeds.pivot(index=["method", "seed"], columns="task", values="elue")
    mean = pd.DataFrame(elue).T.reindex(index=methods, columns=tasks)
    rows = []
    for m in methods:
        mine, scored = seeds.loc[m].reindex(columns=tasks), mean.loc[m].dropna().index
        rows.append({"method": m,
                     **{get_task(t).title: signed(mean.at[m, t], mine[t].dropna()) for t in tasks},
                     "overall": signed(mean.loc[m, scored].mean(),
                                       mine[scored].dropna().mean(axis=1))})
    return markdown(rows, "l" + "r" * (len(tasks) + 1))


def _full_models(points):
    """Each task's full model, static k = L (seed-averaged), indexed by task."""
    static = points[(points.method == "static") & (points.sweep_value == points.num_layers)]
    return static.set_index("task")


def _summary_table(points, ensembles, tasks: list[str], methods: list[str]) -> str:
    """Per task: the full model, each method's best seed-averaged point, its ensemble."""
    import pandas as pd

    others = [m for m in methods if m != "static"]
    dynamic = points[points.method != "static"]
    best = dynamic.loc[dynamic.groupby(["task", "method"], sort=False)["main"].idxmax()]
    best = best.assign(cell=[f"{pm(p.main, p.main_std, p.n_seeds)} ({p.mflops:.0f})"
                             for p in best.itertuples()]).pivot(index="task", columns="method",
                                                                values="cell")
    ensemble = ensembles.groupby(["task", "method"])["main"].agg(pm_over).unstack()
    full = _full_models(points)
    table = pd.DataFrame({
        "task": [get_task(t).title for t in tasks],
        "full model": [pm(*full.loc[t, ["main", "main_std", "n_seeds"]]) if t in full.index
                       else "-" for t in tasks],
        **{f"{m} best (MFLOPs)": best.reindex(index=tasks, columns=others)[m] for m in others},
        **{f"{m} ensemble": ensemble.reindex(index=tasks, columns=others)[m] for m in others},
    }, index=tasks).fillna("-")
    return markdown(table, "l" + "r" * (1 + 2 * len(others)))


def _bootstrap_cells(b, regression: bool) -> dict[str, str]:
    unit = "squared error" if regression else "pp accuracy"
    return {"difference": f"{b.difference:+.2f} {unit}",
            "95% CI": f"[{b.ci_low:+.2f}, {b.ci_high:+.2f}]"}


def _significance_table(points, tasks: list[str], o: dict) -> str:
    """A − B per task: each point of A paired with B's nearest in FLOPs, the pairs pooled."""
    rows = []
    for t in tasks:
        tp = [p for p in points if p.task == t]
        for a, b in [tuple(p) for p in o["pairs"]]:
            if {a, b} <= {p.label for p in tp}:
                cmps = compare_methods(tp, a, b, n_resamples=o["n_resamples"], seed=0)
                c = ([c for c in cmps if c.a is None] or cmps)[-1]  # pooled, when several
                sig = "significant" if c.result.p_value < 0.05 else "not significant"
                rows.append({"task: A − B": f"{get_task(t).title}: {a} − {b}",
                             **_bootstrap_cells(c.result, c.statistic != "accuracy"),
                             "p": f"{c.result.p_value:.3f} ({sig})",
                             "samples": c.result.n_samples})
    return markdown(rows, "lrllr")


def _pabee_table(points, tasks: list[str], n_resamples: int) -> str:
    """PABEE's best point against the full model (static k = L), paired bootstrap."""
    rows = []
    for t in tasks:
        static = [p for p in points if p.task == t and p.label == "static"]
        pabee = [p for p in points if p.task == t and p.label == "pabee"]
        if not static or not pabee:
            continue
        full = max(static, key=lambda p: p.sweep_value)
        best = max(pabee, key=lambda p: p.main)
        regression = get_task(t).is_regression
        b = paired_bootstrap(*paired_scores(best, full, regression)[:2], n_resamples=n_resamples,
                             seed=0)
        rows.append({"task": get_task(t).title,
                     "PABEE best (patience)": f"{best.main:.1f} ({best.sweep_value:g})",
                     "full model": f"{full.main:.1f}", **_bootstrap_cells(b, regression),
                     "p": f"{b.p_value:.3f}"})
    return markdown(rows, "lrrrll")


def _rules_table(elue: dict, by_seed: dict, tasks: list[str], o: dict) -> str:
    """Per task and training scheme: the ELUE score of each rule on its models."""
    rows = []
    for t in tasks:
        for scheme in o["schemes"]:
            cells = {}
            for rule in o["rules"]:
                label = scheme if get_method(scheme).rule == rule else f"{scheme}+{rule}"
                value = elue.get(label, {}).get(t)
                cells[rule] = signed(value, by_seed.get(label, {}).get(t, {}).values())
            if any(c != "-" for c in cells.values()):
                rows.append({"task": get_task(t).title, "trained as": scheme, **cells})
    return markdown(rows, "ll" + "r" * len(o["rules"]))


def _setting(label: str, value: float, names: dict[str, str]) -> str:
    """A point's sweep value as the table shows it: "entropy < 0.035", "patience 2", "k 3"."""
    method, _, rule = label.partition("+")
    if not (rule or get_method(method).rule):
        return f"k {value:g}"  # static: one model per k
    rule = get_rule(rule or get_method(method).rule)
    if rule.name in names:
        shown = f"{value:g}" if rule.sweep_param == "patience" else f"{value:.3f}"
        return f"{names[rule.name]} {shown}"
    return rule.label(value)


def _task_section(block: Block, tr, points, runs, ensembles, key) -> str:
    """Every seed-averaged point of one task and each method's ensemble, with its figure."""
    import numpy as np
    import pandas as pd

    def in_method_order(frame):
        return frame.sort_values("method", kind="stable", key=lambda m: m.map(key))

    metric, full_name = tr.main_metric, "latency bs=1 (ms)"
    seeds = in_method_order(runs.groupby("label")["seed"].unique().map(sorted).rename_axis(
        "method").reset_index())
    said = ("seeds " + ", ".join(map(str, seeds.seed.iat[0]))
            if seeds.seed.map(tuple).nunique() == 1  # every method has the same seeds
            else "; ".join(f"{s.method} seeds {', '.join(map(str, s.seed))}"
                           for s in seeds.itertuples()))
    # per point, the mean over its seeds of the exit layer and of the bs=1 latency where timed
    per_seed = runs.groupby(SEED_KEYS)[["avg_exit_layer", "latency_bs1_ms"]].mean()
    points = in_method_order(points.sort_values(["mflops", "sweep_value"], kind="stable")).join(
        per_seed.rename_axis(["method", *SEED_KEYS[1:]]), on=["method", *SEED_KEYS[1:]])
    full = _full_models(points)
    full_mflops = full.at[tr.task, "mflops"] if tr.task in full.index else points.mflops.max()
    rows = [{"method": p.method,
             "setting": _setting(p.method, p.sweep_value, block.options["setting"]),
             f"{metric} (mean ± std)": pm(p.main, p.main_std, p.n_seeds),
             "MFLOPs": f"{p.mflops:.1f}", "speed-up": f"{full_mflops / p.mflops:.2f}×",
             "avg exit layer": f"{p.avg_exit_layer:.2f}",
             full_name: "-" if pd.isna(p.latency_bs1_ms) else f"{p.latency_bs1_ms:.1f}",
             "vs reference": signed(p.elue_delta), "front": "●" if p.pareto else ""}
            for p in points.itertuples()]
    for method, e in in_method_order(ensembles).groupby("method", sort=False):
        mflops, n = float(np.mean(e.flops.to_numpy())) / 1e6, e.n_exits.iat[0]
        rows.append({"method": f"{method} ensemble", "setting": f"all {n} exits averaged",
                     f"{metric} (mean ± std)": pm_over(e.main), "MFLOPs": f"{mflops:.1f}",
                     "speed-up": f"{full_mflops / mflops:.2f}×", "avg exit layer": f"{n:.2f}",
                     full_name: "-", "vs reference": "-", "front": ""})
    scores = ", ".join(f"{label} **{tr.methods[label].elue:+.2f}**"
                       for label in sorted(tr.methods, key=key)
                       if tr.methods[label].elue is not None)
    return page(block.text["task"], title=get_task(tr.task).title, split=tr.split, metric=metric,
                seeds=said, task=tr.task, table=markdown(rows, "llrrrrrrc"), scores=scores)
