"""docs/results.md from the benchmark's run directories: tables, ELUE scores, significance, figures.

    python benchmarks/report_elue_minilm.py [--data-dir ../shared/data]

Reads the finished runs under benchmarks/results/elue-minilm (those with a summary.json) and
writes, from them alone:

- leaderboard/references/minilm-l6-static.json: the reference curve built from the static runs
  (`eebench reference build`), the one every ELUE score below is measured against;
- docs/results.md: between its `generated` markers (the hand-written reading around them is kept);
- docs/figures/results/: the Pareto figure of every task (`eebench plot`);
- leaderboard/submissions/minilm-l6-<method>.json: one submission per method (`eebench submit`);
- with --export: the ELUE test files of the test-split runs under
  benchmarks/results/elue-minilm-test (`eebench export-elue`), into benchmarks/results/elue-export
  (not committed: they are large and made again by this command), with a manifest that is.

The tables are grouped and pivoted from two DataFrames: every point of every run (the results
table, eebench.score.table) and the scored seed-averaged points (ScoreReport.to_dataframe).
Rerunning on the same runs gives the same page.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import tomllib

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _common import export_tests  # noqa: E402

from eebench.run import artifacts as R  # noqa: E402
from eebench.score import (  # noqa: E402
    aggregate_seeds,
    build_reference,
    compare_methods,
    elue_by_seed,
    load_reference,
    load_run,
    raw_points,
    results_frame,
    run_records,
    sample_std,
    save_reference,
    score,
)
from eebench.score.ensemble import ensemble_point  # noqa: E402
from eebench.score.stats import SEED_KEYS, paired_bootstrap, paired_scores  # noqa: E402
from eebench.tasks.spec import get_task  # noqa: E402

CONFIG = ROOT / "benchmarks" / "elue-minilm.toml"
RUNS = ROOT / "benchmarks" / "results" / "elue-minilm"
TEST_RUNS = ROOT / "benchmarks" / "results" / "elue-minilm-test"
RULE_RUNS = ROOT / "benchmarks" / "results" / "elue-minilm-rules"  # every rule on some models
EXPORT = ROOT / "benchmarks" / "results" / "elue-export"
DOC = ROOT / "docs" / "results.md"
FIGURES = ROOT / "docs" / "figures" / "results"
REFERENCE = ROOT / "leaderboard" / "references" / "minilm-l6-static.json"
SUBMISSIONS = ROOT / "leaderboard" / "submissions"
START, END = "<!-- generated:start -->", "<!-- generated:end -->"
CLASSIC = ("static", "deebert", "pabee")  # on every task of the config
# the field's other methods, on these tasks (benchmarks/elue_minilm.sh)
FIELD = ("maxprob", "fastbert", "pcee", "elasticbert", "sweet", "berxit", "cascade")
FIELD_TASKS = ("sst2", "elue-mrpc", "elue-scitail")
METHOD_ORDER = CLASSIC + FIELD
# how a point's setting reads, by the rule it was swept with
SETTING = {"entropy": "entropy <", "normalized-entropy": "H/ln C <", "maxprob": "max p ≥",
           "calibrated-maxprob": "max p(z/T) ≥", "learned": "exit score <",
           "patience": "patience"}
PAIRS = (("pabee", "static"), ("deebert", "static"), ("pabee", "deebert"),
         *((m, "deebert") for m in FIELD))
N_RESAMPLES = 2000

# The page between the markers. Paragraphs are wrapped here and unwrapped on the page (see
# page); each {table} is a markdown table.
PAGE = """\
Built by `python benchmarks/report_elue_minilm.py` from **{n_runs} of {n_jobs} runs** of
`benchmarks/elue-minilm.toml`{pending} (`benchmarks/results/elue-minilm/`, one directory per
method, task and seed, each with its config, points, per-sample predictions and summary).
Hardware: {hardware}, one thread per run, two runs at a time.

## Budget

MiniLM-L6 (all-MiniLM-L6-v2, 6 layers, hidden 384), mean-pooled exit heads, lr {lr:g}, batch
{batch_size}, {precision} autocast, length-grouped batches, seeds {seeds}. Training examples are
a seeded subset of the training split; scores are on the dev split (the labelled test sets are
withheld).

{budget}

## ELUE scores

Mean over a method's operating points of (its metric − the reference curve at its FLOPs), in
points; the reference is the static first-k-layer models of these very runs
(`leaderboard/references/minilm-l6-static.json`, seed-averaged), so static scores 0 by
construction. Curve held flat outside its FLOPs range (`clamp`). With more than one seed, ± is
the standard deviation of the score of each seed's points on their own; static's spread around 0
is the noise floor.

{elue}

## Full model, best point, ensemble

The full model is static k = 6. *Best* is a method's best seed-averaged point (at its MFLOPs).
The ensemble averages every exit's class probabilities (regression: outputs) on every sample: the
upper bound of a multi-exit model that never exits early.

{summary}

## Significance (paired bootstrap)

Per task, A − B in per-sample accuracy (not the main metric where that is MCC or F1-based) over
the dev samples, each point of A paired with the point of B nearest in FLOPs and the pairs
pooled; seeds averaged per sample. {n_resamples} resamples, 95% percentile interval, two-sided p.
For regression the statistic is the squared error (lower is better).

{significance}

PABEE's best point (by the main metric) against the full model (static k = 6), paired; the
difference is in per-sample accuracy (squared error for STS-B), which for CoLA (MCC) and MRPC
(mean of accuracy and F1) is not the main metric:

{pabee}

## Every rule on every model

The ELUE score of each exit rule swept on each training scheme's models (`eebench run --rule`:
one pass over each model serves its own rule and the others), per task, ± over seeds, against
the same reference. A row is how the models were trained, a column how they exit.

{rules}

## Per task

Every operating point, seed-averaged. *speed-up*: full-model MFLOPs ÷ the point's; *latency*:
real dynamic inference at batch size 1 on the CPU above, median per sample (timed on the first
100 dev samples, so it is noisier than the FLOPs); *vs reference*: metric minus the reference
curve at the point's FLOPs; ●: on the task's Pareto front over all methods.

{tasks}"""

TASK = """\
### {title} ({split}, {metric}, {seeds})

![{title}: {metric} against MFLOPs per sample](figures/results/{task}-pareto.png)

{table}

ELUE score (mean of *vs reference* over a method's points): {scores}."""


def page(template: str, **values) -> str:
    """`template` with each paragraph on one line, then filled in."""
    return "\n\n".join(" ".join(p.splitlines()) for p in template.split("\n\n")).format(**values)


def keep_if_unchanged(reference, path: Path):
    """The shipped reference, kept byte for byte when the runs give the same curves: submissions
    pin it by sha256, so only new numbers (or new runs) may change the file."""
    if path.is_file():
        shipped = load_reference(path)
        same = shipped.model_dump(exclude={"provenance"}) == reference.model_dump(
            exclude={"provenance"})
        runs = [(r.path, r.config_hash) for r in shipped.provenance.runs]
        if same and runs == [(r.path, r.config_hash) for r in reference.provenance.runs]:
            return shipped
    save_reference(reference, path)
    return reference


def finished_runs(root: Path):
    if not root.is_dir():
        return []
    return [load_run(p.parent) for p in sorted(root.rglob(R.SUMMARY_FILE))]


def expected_jobs(cfg: dict) -> int:
    from eebench.methods.base import get_method

    return sum(len(cfg["seeds"]) for task in cfg["tasks"] for method in cfg["methods"]
               if (method in CLASSIC or task in FIELD_TASKS)
               and (get_method(method).supports_regression or not get_task(task).is_regression))


def pending(runs, rel) -> str:
    waiting = sorted({r.config.task for r in runs} - {r.config.task for r in rel})
    return (f" ({', '.join(waiting)}: finished runs held back until the task's static runs, its "
            "reference, are in)") if waiting else ""


def hardware(runs) -> str:
    envs = [json.loads((r.path / R.ENV_FILE).read_text()) for r in runs]
    return "; ".join(sorted({f"{e.get('cpu') or 'CPU'} ({e.get('cpu_cores')} cores)"
                             + (f", GPU {e['gpu']}" if e.get("gpu") else "") for e in envs}))


def pm(mean: float, std: float, n: int) -> str:
    return f"{mean:.1f} ± {std:.1f}" if n > 1 else f"{mean:.1f}"


def pm_seeds(values) -> str:
    """mean ± sample std of per-seed values."""
    values = np.asarray(values, dtype=float)
    return pm(float(np.mean(values)), sample_std(values), len(values))


def signed(value: float, seeds: pd.Series) -> str:
    """A score, ± the sample std of its seeds' own scores when there are two or more."""
    if pd.isna(value):
        return "-"
    return f"{value:+.2f}" + (f" ± {sample_std(seeds):.2f}" if len(seeds) > 1 else "")


def method_key(label: str) -> tuple:
    return (METHOD_ORDER.index(label) if label in METHOD_ORDER else len(METHOD_ORDER), label)


def in_method_order(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows by METHOD_ORDER, then label; rows of one method keep their order."""
    return frame.sort_values("method", kind="stable", key=lambda m: m.map(method_key))


def markdown(rows, align: str) -> str:
    """A pipe table of text cells (no number parsing: "+0.00" stays as written); `align` has a
    letter per column: l(eft), r(ight) or c(enter)."""
    names = {"l": "left", "r": "right", "c": "center"}
    return pd.DataFrame(rows).astype(str).to_markdown(
        index=False, colalign=[names[a] for a in align], disable_numparse=True)


def budget_table(cfg: dict) -> str:
    rows = []
    for task in cfg["tasks"]:
        own = cfg.get("tasks_settings", {}).get(task, {})
        train = {**cfg.get("train", {}), **own.get("train", {})}
        rows.append({"task": get_task(task).title,
                     "train examples": train.get("max_train_samples", "all"),
                     "epochs": train.get("epochs"),
                     "max tokens": own.get("max_seq_length", cfg["max_seq_length"]),
                     "dev samples scored": own.get("max_eval_samples",
                                                   cfg.get("max_eval_samples")) or "all"})
    return markdown(rows, "lrrrr")


def elue_table(elue: dict, by_seed: dict, tasks: list[str], methods: list[str]) -> str:
    """Each method's ELUE score per task ± its spread over seeds; overall: the mean over the tasks
    it is scored on ± the spread of each seed's mean over them (seeds run on all of them)."""
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


def summary_table(points: pd.DataFrame, ensembles: pd.DataFrame, tasks: list[str],
                  methods: list[str]) -> str:
    """Per task: the full model, each method's best seed-averaged point, its ensemble."""
    others = [m for m in methods if m != "static"]
    dynamic = points[points.method != "static"]
    best = dynamic.loc[dynamic.groupby(["task", "method"], sort=False)["main"].idxmax()]
    best = best.assign(cell=[f"{pm(p.main, p.main_std, p.n_seeds)} ({p.mflops:.0f})"
                             for p in best.itertuples()]).pivot(index="task", columns="method",
                                                                values="cell")
    ensemble = ensembles.groupby(["task", "method"])["main"].agg(pm_seeds).unstack()
    full = full_models(points)
    table = pd.DataFrame({
        "task": [get_task(t).title for t in tasks],
        "full model": [pm(*full.loc[t, ["main", "main_std", "n_seeds"]]) if t in full.index
                       else "-" for t in tasks],
        **{f"{m} best (MFLOPs)": best.reindex(index=tasks, columns=others)[m] for m in others},
        **{f"{m} ensemble": ensemble.reindex(index=tasks, columns=others)[m] for m in others},
    }, index=tasks).fillna("-")
    return markdown(table, "l" + "r" * (1 + 2 * len(others)))


def full_models(points: pd.DataFrame) -> pd.DataFrame:
    """Each task's full model, static k = L (seed-averaged), indexed by task."""
    static = points[(points.method == "static") & (points.sweep_value == points.num_layers)]
    return static.set_index("task")


def bootstrap_cells(b, regression: bool) -> dict[str, str]:
    unit = "squared error" if regression else "pp accuracy"
    return {"difference": f"{b.difference:+.2f} {unit}",
            "95% CI": f"[{b.ci_low:+.2f}, {b.ci_high:+.2f}]"}


def significance_table(points, tasks: list[str]) -> str:
    """A − B per task: each point of A paired with B's nearest in FLOPs, the pairs pooled."""
    rows = []
    for t in tasks:
        tp = [p for p in points if p.task == t]
        for a, b in PAIRS:
            if {a, b} <= {p.label for p in tp}:
                cmps = compare_methods(tp, a, b, n_resamples=N_RESAMPLES, seed=0)
                c = ([c for c in cmps if c.a is None] or cmps)[-1]  # pooled, when several
                sig = "significant" if c.result.p_value < 0.05 else "not significant"
                rows.append({"task: A − B": f"{get_task(t).title}: {a} − {b}",
                             **bootstrap_cells(c.result, c.statistic != "accuracy"),
                             "p": f"{c.result.p_value:.3f} ({sig})",
                             "samples": c.result.n_samples})
    return markdown(rows, "lrllr")


SCHEMES = ("deebert", "pabee", "elasticbert")
RULES = ("entropy", "maxprob", "patience")


def runs_with(root: Path, tasks: set[str]) -> list:
    return [r for r in finished_runs(root) if r.config.task in tasks]


def rules_section(runs, reference, tasks: list[str]) -> str:
    """The rule-by-scheme table from the rule runs (their own directory: each model's own rule
    and the others from one pass over the same model), scored against the same reference."""
    if not runs:
        return "(no rule runs yet: benchmarks/elue_minilm.sh runs them)"
    raw = raw_points(runs)
    scored = score(aggregate_seeds(raw), reference)
    return (f"From {len(runs)} runs in `benchmarks/results/elue-minilm-rules/`.\n\n"
            + rules_table(scored.elue, elue_by_seed(raw, reference), tasks))


def rules_table(elue: dict, by_seed: dict, tasks: list[str]) -> str:
    """Per task and training scheme: the ELUE score of each rule on its models."""
    from eebench.methods.base import get_method

    rows = []
    for t in tasks:
        for scheme in SCHEMES:
            cells = {}
            for rule in RULES:
                label = scheme if get_method(scheme).rule == rule else f"{scheme}+{rule}"
                score = elue.get(label, {}).get(t)
                seeds = pd.Series(by_seed.get(label, {}).get(t, {}), dtype=float)
                cells[rule] = "-" if score is None else signed(score, seeds)
            if any(c != "-" for c in cells.values()):
                rows.append({"task": get_task(t).title, "trained as": scheme, **cells})
    return markdown(rows, "ll" + "r" * len(RULES))


def pabee_table(points, tasks: list[str]) -> str:
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
        b = paired_bootstrap(*paired_scores(best, full, regression)[:2], n_resamples=N_RESAMPLES,
                             seed=0)
        rows.append({"task": get_task(t).title,
                     "PABEE best (patience)": f"{best.main:.1f} ({best.sweep_value:g})",
                     "full model": f"{full.main:.1f}", **bootstrap_cells(b, regression),
                     "p": f"{b.p_value:.3f}"})
    return markdown(rows, "lrrrll")


def setting(label: str, value: float) -> str:
    """A point's sweep value as the table shows it: "entropy < 0.035", "patience 2", "k 3"."""
    from eebench.methods.base import get_method
    from eebench.rules.catalog import get_rule

    method, _, rule = label.partition("+")
    if not (rule or get_method(method).rule):
        return f"k {value:g}"  # static: one model per k
    kind = get_rule(rule or get_method(method).rule)
    if kind.name in SETTING:
        shown = f"{value:g}" if kind.sweep_param == "patience" else f"{value:.3f}"
        return f"{SETTING[kind.name]} {shown}"
    return kind.label(value)


def task_section(tr, points: pd.DataFrame, runs: pd.DataFrame, ensembles: pd.DataFrame) -> str:
    """Every seed-averaged point of one task and each method's ensemble, with its figure."""
    metric = tr.main_metric
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
    full = full_models(points)
    full_mflops = full.at[tr.task, "mflops"] if tr.task in full.index else points.mflops.max()
    rows = [{"method": p.method,
             "setting": setting(p.method, p.sweep_value),
             f"{metric} (mean ± std)": pm(p.main, p.main_std, p.n_seeds),
             "MFLOPs": f"{p.mflops:.1f}", "speed-up": f"{full_mflops / p.mflops:.2f}×",
             "avg exit layer": f"{p.avg_exit_layer:.2f}",
             "latency bs=1 (ms)": "-" if pd.isna(p.latency_bs1_ms) else f"{p.latency_bs1_ms:.1f}",
             "vs reference": "-" if pd.isna(p.elue_delta) else f"{p.elue_delta:+.2f}",
             "front": "●" if p.pareto else ""} for p in points.itertuples()]
    for method, e in in_method_order(ensembles).groupby("method", sort=False):
        mflops, n = float(np.mean(e.flops.to_numpy())) / 1e6, e.n_exits.iat[0]
        rows.append({"method": f"{method} ensemble", "setting": f"all {n} exits averaged",
                     f"{metric} (mean ± std)": pm_seeds(e.main), "MFLOPs": f"{mflops:.1f}",
                     "speed-up": f"{full_mflops / mflops:.2f}×", "avg exit layer": f"{n:.2f}",
                     "latency bs=1 (ms)": "-", "vs reference": "-", "front": ""})
    scores = ", ".join(f"{label} **{tr.methods[label].elue:+.2f}**"
                       for label in sorted(tr.methods, key=method_key)
                       if tr.methods[label].elue is not None)
    return page(TASK, title=get_task(tr.task).title, split=tr.split, metric=metric, seeds=said,
                task=tr.task, table=markdown(rows, "llrrrrrrc"), scores=scores)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=None,
                    help="data directory (for the data-file hashes in the submissions)")
    ap.add_argument("--export", action="store_true", help="also write the ELUE test files")
    ap.add_argument("--no-figures", action="store_true")
    args = ap.parse_args()

    cfg = tomllib.loads(CONFIG.read_text())
    runs = finished_runs(RUNS)
    if not runs:
        sys.exit(f"no finished runs under {RUNS}: run benchmarks/elue_minilm.sh first")
    # A task is reported once its static runs (the reference) are in.
    with_reference = {r.config.task for r in runs if r.config.method == "static"}
    rel = [r for r in runs if r.config.task in with_reference]
    reference = build_reference([r for r in rel if r.config.method == "static"],
                                name="minilm-l6-static")
    # Paths in the shipped reference relative to the repository root.
    for record in reference.provenance.runs:
        record.path = str(Path(record.path).resolve().relative_to(ROOT))
    reference = keep_if_unchanged(reference, REFERENCE)

    raw = raw_points(rel)
    points = aggregate_seeds(raw)
    report = score(points, reference)
    scored = report.to_dataframe()  # the seed-averaged points
    frame = results_frame(run_records(raw))  # every point of every run
    ensembles = pd.DataFrame([vars(ensemble_point(r)) for r in rel if r.config.method != "static"])
    tasks = [get_task(t).name for t in cfg["tasks"] if get_task(t).name in report.tasks]
    methods = sorted({p.label for p in points}, key=method_key)
    sections = [task_section(report.tasks[t], scored[scored.task == t], frame[frame.task == t],
                             ensembles[ensembles.task == t]) for t in tasks]
    write_doc(page(
        PAGE, n_runs=len(rel), n_jobs=expected_jobs(cfg), pending=pending(runs, rel),
        hardware=hardware(rel), **{k: cfg["train"][k] for k in ("lr", "batch_size", "precision")},
        seeds=", ".join(map(str, cfg["seeds"])), budget=budget_table(cfg),
        elue=elue_table(report.elue, elue_by_seed(raw, reference), tasks, methods),
        summary=summary_table(scored, ensembles, tasks, methods), n_resamples=N_RESAMPLES,
        significance=significance_table(points, tasks), pabee=pabee_table(points, tasks),
        rules=rules_section(runs_with(RULE_RUNS, with_reference), reference, tasks),
        tasks="\n\n".join(sections)))

    if not args.no_figures:
        from eebench.plot.plan import plan_figures, write_figures

        planned = [f for f in plan_figures(rel, reference) if f.kind == "pareto"]
        write_figures(planned, FIGURES, "png")

    from eebench.submit.build import build_submission, write_submission

    SUBMISSIONS.mkdir(parents=True, exist_ok=True)
    for m in methods:
        dirs = [r.path for r in rel if r.config.label == m]
        sub = build_submission(dirs, data_dir=args.data_dir, reference=REFERENCE,
                               name=f"MiniLM-L6 {m} (CPU)")
        write_submission(sub, SUBMISSIONS / f"minilm-l6-{m}.json")

    if args.export:
        export_tests(TEST_RUNS, EXPORT)
    print(f"wrote {DOC.relative_to(ROOT)}, {REFERENCE.relative_to(ROOT)}, "
          f"{len(methods)} submissions from {len(rel)} runs")


def write_doc(generated: str) -> None:
    text = DOC.read_text() if DOC.exists() else f"# Results\n\n{START}\n{END}\n"
    if START not in text or END not in text:
        raise SystemExit(f"{DOC}: the {START} / {END} markers are missing")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(f"{head}{START}\n\n{generated}\n\n{END}{tail}")
if __name__ == "__main__":
    main()
