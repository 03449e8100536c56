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

Rerunning on the same runs gives the same page.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import tomllib

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from eebench.run import artifacts as R  # noqa: E402
from eebench.score import (  # noqa: E402
    aggregate_seeds,
    build_reference,
    compare_methods,
    elue_by_seed,
    load_run,
    raw_points,
    save_reference,
    score,
)
from eebench.score.ensemble import ensemble_point  # noqa: E402
from eebench.score.stats import paired_bootstrap, paired_scores  # noqa: E402
from eebench.tasks.spec import get_task  # noqa: E402

CONFIG = ROOT / "benchmarks" / "elue-minilm.toml"
RUNS = ROOT / "benchmarks" / "results" / "elue-minilm"
TEST_RUNS = ROOT / "benchmarks" / "results" / "elue-minilm-test"
EXPORT = ROOT / "benchmarks" / "results" / "elue-export"
DOC = ROOT / "docs" / "results.md"
FIGURES = ROOT / "docs" / "figures" / "results"
REFERENCE = ROOT / "leaderboard" / "references" / "minilm-l6-static.json"
SUBMISSIONS = ROOT / "leaderboard" / "submissions"
START, END = "<!-- generated:start -->", "<!-- generated:end -->"
METHOD_ORDER = ("static", "deebert", "pabee")
N_RESAMPLES = 2000


def finished_runs(root: Path):
    if not root.is_dir():
        return []
    return [load_run(p.parent) for p in sorted(root.rglob(R.SUMMARY_FILE))]


def expected_jobs(cfg: dict) -> int:
    n = 0
    for task in cfg["tasks"]:
        for method in cfg["methods"]:
            if method == "deebert" and get_task(task).is_regression:
                continue
            n += len(cfg["seeds"])
    return n


def pending(runs, rel) -> str:
    waiting = sorted({r.config.task for r in runs} - {r.config.task for r in rel})
    return (f" ({', '.join(waiting)}: finished runs held back until the task's static runs, its "
            "reference, are in)") if waiting else ""


def pm(mean: float, std: float, n: int, digits: int = 1) -> str:
    return f"{mean:.{digits}f} ± {std:.{digits}f}" if n > 1 else f"{mean:.{digits}f}"


def pm_values(values) -> str:
    """mean ± sample std of per-seed values."""
    v = np.asarray(values, dtype=float)
    return pm(float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else 0.0, len(v))


def setting(p) -> str:
    names = {"layers": "k", "threshold": "entropy <", "patience": "patience"}
    value = f"{p.sweep_value:.3f}" if p.sweep_param == "threshold" else f"{p.sweep_value:g}"
    return f"{names.get(p.sweep_param, p.sweep_param)} {value}"


def latency_bs1(p) -> float | None:
    """Dynamic inference at batch size 1, median ms per sample, mean over the point's seeds."""
    values = []
    for rp in p.sources:
        t = next((t for t in rp.point.timings if t.mode == "dynamic" and t.batch_size == 1), None)
        if t is not None and "p50" in t.latency_ms:
            values.append(t.latency_ms["p50"])
    return float(np.mean(values)) if values else None


def method_key(label: str) -> tuple:
    return (METHOD_ORDER.index(label) if label in METHOD_ORDER else len(METHOD_ORDER), label)


def budget_table(cfg: dict) -> list[str]:
    base_train = cfg.get("train", {})
    lines = ["| task | train examples | epochs | max tokens | dev samples scored |",
             "|---|---:|---:|---:|---:|"]
    for task in cfg["tasks"]:
        own = cfg.get("tasks_settings", {}).get(task, {})
        train = {**base_train, **own.get("train", {})}
        spec = get_task(task)
        dev = own.get("max_eval_samples", cfg.get("max_eval_samples")) or "all"
        lines.append(f"| {spec.title} | {train.get('max_train_samples', 'all')} | "
                     f"{train.get('epochs')} | {own.get('max_seq_length', cfg['max_seq_length'])} "
                     f"| {dev} |")
    return lines


def hardware(runs) -> str:
    envs = [json.loads((r.path / R.ENV_FILE).read_text()) for r in runs]
    kinds = sorted({f"{e.get('cpu') or 'CPU'} ({e.get('cpu_cores')} cores)"
                    + (f", GPU {e['gpu']}" if e.get("gpu") else "") for e in envs})
    return "; ".join(kinds)


def elue_table(elue: dict, by_seed: dict, tasks: list[str], methods: list[str]) -> list[str]:
    """The ELUE score of every method on every task, ± its spread over seeds."""
    lines = ["| method | " + " | ".join(get_task(t).title for t in tasks) + " | overall |",
             "|---|" + "---:|" * (len(tasks) + 1)]
    for label in methods:
        mine, seeds = elue.get(label, {}), by_seed.get(label, {})
        cells = []
        for t in tasks:
            per_seed = list(seeds.get(t, {}).values())
            cells.append("-" if t not in mine else f"{mine[t]:+.2f}" + (
                f" ± {np.std(per_seed, ddof=1):.2f}" if len(per_seed) > 1 else ""))
        scored = [t for t in tasks if t in mine]
        # A seed's overall score needs that seed on every task the method is scored on.
        complete = set.intersection(*(set(seeds.get(t, {})) for t in scored)) if scored else set()
        overall = [np.mean([seeds[t][s] for t in scored]) for s in sorted(complete)]
        cells.append(f"{np.mean([mine[t] for t in scored]):+.2f}" + (
            f" ± {np.std(overall, ddof=1):.2f}" if len(overall) > 1 else ""))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines + [""]


def bootstrap_line(label: str, cmp) -> str:
    b = cmp.result
    unit = "pp accuracy" if cmp.statistic == "accuracy" else "squared error"
    sig = "significant" if b.p_value < 0.05 else "not significant"
    return (f"| {label} | {b.difference:+.2f} {unit} | [{b.ci_low:+.2f}, {b.ci_high:+.2f}] | "
            f"{b.p_value:.3f} ({sig}) | {b.n_samples} |")


def pabee_vs_full(points, regression: bool):
    """PABEE's best point against the full model (static k = L), paired bootstrap."""
    static = [p for p in points if p.label == "static"]
    pabee = [p for p in points if p.label == "pabee"]
    if not static or not pabee:
        return None
    full = max(static, key=lambda p: p.sweep_value)
    best = max(pabee, key=lambda p: p.main)
    sa, sb, _ = paired_scores(best, full, regression)
    return best, full, paired_bootstrap(sa, sb, n_resamples=N_RESAMPLES, seed=0)


def task_section(task: str, tr, runs, ensembles) -> list[str]:
    spec = get_task(task)
    metric = tr.main_metric
    pts = sorted(tr.points, key=lambda p: (method_key(p.label), p.flops, p.sweep_value))
    static_full = [p for p in pts if p.label == "static" and p.sweep_value == p.num_layers]
    full_flops = static_full[0].flops if static_full else max(p.flops for p in pts)
    seeds = {label: sorted({s for p in pts if p.label == label for s in p.seeds})
             for label in sorted({p.label for p in pts}, key=method_key)}
    if len({tuple(v) for v in seeds.values()}) == 1:  # every method has the same seeds
        said = "seeds " + ", ".join(map(str, next(iter(seeds.values()))))
    else:
        said = "; ".join(f"{label} seeds {', '.join(map(str, v))}" for label, v in seeds.items())
    out = [f"### {spec.title} ({tr.split}, {metric}, {said})", ""]
    out += [f"![{spec.title}: {metric} against MFLOPs per sample](figures/results/"
            f"{task}-pareto.png)", ""]
    out += ["| method | setting | " + metric + " (mean ± std) | MFLOPs | speed-up | avg exit layer "
            "| latency bs=1 (ms) | vs reference | front |",
            "|---|---|---:|---:|---:|---:|---:|---:|:---:|"]
    index = {id(p): i for i, p in enumerate(tr.points)}
    for p in pts:
        i = index[id(p)]
        delta = tr.deltas[i]
        lat = latency_bs1(p)
        layers = np.mean([rp.point.avg_exit_layer for rp in p.sources])
        out.append(
            f"| {p.label} | {setting(p)} | {pm(p.main, p.main_std, len(p.seeds))} | "
            f"{p.mflops:.1f} | {full_flops / p.flops:.2f}× | {layers:.2f} | "
            f"{'-' if lat is None else f'{lat:.1f}'} | "
            f"{'-' if delta is None else f'{delta:+.2f}'} | {'●' if tr.on_front[i] else ''} |")
    for method, members in sorted(ensembles.items(), key=lambda kv: method_key(kv[0])):
        flops = float(np.mean([e.flops for e in members]))
        out.append(
            f"| {method} ensemble | all {members[0].n_exits} exits averaged | "
            f"{pm_values([e.main for e in members])} | {flops / 1e6:.1f} | "
            f"{full_flops / flops:.2f}× | {members[0].n_exits:.2f} | - | - | |")
    out.append("")
    scores = ", ".join(f"{label} **{m.elue:+.2f}**" for label, m in
                       sorted(tr.methods.items(), key=lambda kv: method_key(kv[0]))
                       if m.elue is not None)
    out += [f"ELUE score (mean of *vs reference* over a method's points): {scores}.", ""]
    return out


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
    static_runs = [r for r in rel if r.config.method == "static"]
    reference = build_reference(static_runs, name="minilm-l6-static")
    # Paths in the shipped reference relative to the repository root.
    for record in reference.provenance.runs:
        record.path = str(Path(record.path).resolve().relative_to(ROOT))
    REFERENCE.parent.mkdir(parents=True, exist_ok=True)
    save_reference(reference, REFERENCE)

    raw = raw_points(rel)
    points = aggregate_seeds(raw)
    report = score(points, reference)
    ensembles: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for r in rel:
        if r.config.method != "static":
            e = ensemble_point(r)
            ensembles[e.task][e.method].append(e)

    tasks = [get_task(t).name for t in cfg["tasks"] if get_task(t).name in report.tasks]
    methods = sorted({p.label for p in points}, key=method_key)
    lines = [START, "",
             f"Built by `python benchmarks/report_elue_minilm.py` from **{len(rel)} of "
             f"{expected_jobs(cfg)} runs** of `benchmarks/elue-minilm.toml`{pending(runs, rel)} "
             f"(`benchmarks/results/elue-minilm/`, one directory per method, task and seed, each "
             f"with its config, points, per-sample predictions and summary). Hardware: "
             f"{hardware(rel)}, one thread per run, two runs at a time.", ""]
    lines += ["## Budget", "",
              f"MiniLM-L6 (all-MiniLM-L6-v2, 6 layers, hidden 384), mean-pooled exit heads, "
              f"lr {cfg['train']['lr']:g}, batch {cfg['train']['batch_size']}, "
              f"{cfg['train']['precision']} autocast, length-grouped batches, seeds "
              f"{', '.join(map(str, cfg['seeds']))}. Training examples are a seeded subset of "
              "the training split; scores are on the dev split (the labelled test sets are "
              "withheld).", ""]
    lines += budget_table(cfg) + [""]

    lines += ["## ELUE scores", "",
              "Mean over a method's operating points of (its metric − the reference curve at its "
              "FLOPs), in points; the reference is the static first-k-layer models of these very "
              "runs (`leaderboard/references/minilm-l6-static.json`, seed-averaged), so static "
              "scores 0 by construction. Curve held flat outside its FLOPs range (`clamp`). With "
              "more than one seed, ± is the standard deviation of the score of each seed's "
              "points on their own; static's spread around 0 is the noise floor.", ""]
    lines += elue_table(report.elue, elue_by_seed(raw, reference), tasks, methods)

    lines += ["## Full model, best point, ensemble", "",
              "The full model is static k = 6. *Best* is a method's best seed-averaged point "
              "(at its MFLOPs). The ensemble averages every exit's class probabilities "
              "(regression: outputs) on every sample: the upper bound of a multi-exit model "
              "that never exits early.", ""]
    lines += ["| task | full model | " + " | ".join(f"{m} best (MFLOPs)" for m in methods
                                                      if m != "static")
              + " | " + " | ".join(f"{m} ensemble" for m in methods if m != "static") + " |",
              "|---|---:|" + "---:|" * 2 * (len(methods) - 1)]
    for t in tasks:
        tr = report.tasks[t]
        full = [p for p in tr.points if p.label == "static" and p.sweep_value == p.num_layers]
        cells = [pm(full[0].main, full[0].main_std, len(full[0].seeds)) if full else "-"]
        for m in methods:
            if m == "static":
                continue
            mp = [p for p in tr.points if p.label == m]
            best = max(mp, key=lambda p: p.main) if mp else None
            cells.append("-" if best is None else
                         f"{pm(best.main, best.main_std, len(best.seeds))} ({best.mflops:.0f})")
        for m in methods:
            if m == "static":
                continue
            es = ensembles.get(t, {}).get(m, [])
            cells.append(pm_values([e.main for e in es]) if es else "-")
        lines.append(f"| {get_task(t).title} | " + " | ".join(cells) + " |")
    lines.append("")

    lines += ["## Significance (paired bootstrap)", "",
              f"Per task, A − B in per-sample accuracy (not the main metric where that is MCC or "
              f"F1-based) over the dev samples, each point of A paired with the point of B "
              f"nearest in FLOPs and the pairs pooled; seeds averaged per sample. {N_RESAMPLES} "
              "resamples, 95% percentile interval, two-sided p. For regression the statistic is "
              "the squared error (lower is better).", ""]
    lines += ["| task: A − B | difference | 95% CI | p | samples |", "|---|---:|---|---|---:|"]
    pairs = [("pabee", "static"), ("deebert", "static"), ("pabee", "deebert")]
    for t in tasks:
        tp = [p for p in points if p.task == t]
        labels = {p.label for p in tp}
        for a, b in pairs:
            if a in labels and b in labels:
                cmps = compare_methods(tp, a, b, n_resamples=N_RESAMPLES, seed=0)
                pooled = [c for c in cmps if c.a is None] or cmps
                lines.append(bootstrap_line(f"{get_task(t).title}: {a} − {b}", pooled[-1]))
    lines.append("")
    lines += ["PABEE's best point (by the main metric) against the full model (static k = 6), "
              "paired; the difference is in per-sample accuracy (squared error for STS-B), "
              "which for CoLA (MCC) and MRPC (mean of accuracy and F1) is not the main metric:",
              "", "| task | PABEE best (patience) | full model | difference | 95% CI | p |",
              "|---|---:|---:|---:|---|---|"]
    for t in tasks:
        tp = [p for p in points if p.task == t]
        res = pabee_vs_full(tp, get_task(t).is_regression)
        if res is None:
            continue
        best, full, b = res
        unit = "squared error" if get_task(t).is_regression else "pp accuracy"
        lines.append(f"| {get_task(t).title} | {best.main:.1f} ({best.sweep_value:g}) | "
                     f"{full.main:.1f} | {b.difference:+.2f} {unit} | [{b.ci_low:+.2f}, "
                     f"{b.ci_high:+.2f}] | {b.p_value:.3f} |")
    lines.append("")

    lines += ["## Per task", "",
              "Every operating point, seed-averaged. *speed-up*: full-model MFLOPs ÷ the point's; "
              "*latency*: real dynamic inference at batch size 1 on the CPU above, median per "
              "sample (timed on the first 100 dev samples, so it is noisier than the FLOPs); *vs "
              "reference*: metric minus the reference curve at the point's FLOPs; ●: on the "
              "task's Pareto front over all methods.", ""]
    for t in tasks:
        lines += task_section(t, report.tasks[t], rel, ensembles.get(t, {}))
    lines.append(END)
    write_doc("\n".join(lines))

    if not args.no_figures:
        from eebench.plot.plan import plan_figures, write_figures

        planned = [f for f in plan_figures(rel, reference) if f.kind == "pareto"]
        write_figures(planned, FIGURES, "png")

    from eebench.submit.build import build_submission, write_submission

    SUBMISSIONS.mkdir(parents=True, exist_ok=True)
    for m in methods:
        dirs = [r.path for r in rel if r.config.method == m]
        sub = build_submission(dirs, data_dir=args.data_dir, reference=REFERENCE,
                               name=f"MiniLM-L6 {m} (CPU)")
        write_submission(sub, SUBMISSIONS / f"minilm-l6-{m}.json")

    if args.export:
        export_tests()
    print(f"wrote {DOC.relative_to(ROOT)}, {REFERENCE.relative_to(ROOT)}, "
          f"{len(methods)} submissions from {len(rel)} runs")


def write_doc(generated: str) -> None:
    text = DOC.read_text() if DOC.exists() else f"# Results\n\n{START}\n{END}\n"
    if START not in text or END not in text:
        raise SystemExit(f"{DOC}: the {START} / {END} markers are missing")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(head + generated + tail)


def export_tests() -> None:
    from eebench.submit.export_elue import export_elue

    manifest = []
    for summary in sorted(TEST_RUNS.rglob(R.SUMMARY_FILE)) if TEST_RUNS.is_dir() else []:
        run_dir = summary.parent
        cfg = R.RunConfig.model_validate_json((run_dir / R.CONFIG_FILE).read_text())
        exp = export_elue(run_dir, EXPORT / cfg.method)
        if not exp.complete:
            raise SystemExit(f"{run_dir}: {exp.rows} test rows, expected {exp.expected_rows}")
        for f in exp.files:
            digest = hashlib.sha256(Path(f.path).read_bytes()).hexdigest()
            manifest.append({"run": str(run_dir.relative_to(ROOT)), "file":
                             str(Path(f.path).relative_to(ROOT)), "rows": f.rows,
                             "sweep": f"{f.sweep_param}={f.sweep_value:g}",
                             "avg_exit_layer": round(f.avg_exit_layer, 4),
                             "mean_mflops": round(f.mean_mflops, 3), "sha256": digest})
    path = TEST_RUNS / "export-manifest.json"
    path.write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"exported {len(manifest)} ELUE test files to {EXPORT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
