"""How long scoring takes: random operating points, and the committed benchmark end to end.

1. Random points: 1,000 operating points across 6 tasks, held in memory (target: under 1 s):
   average the seeds, every Pareto front, hypervolume and AUC (each method's and the joint
   one), the ELUE score of every point against a reference curve, and the method ranking.
2. The committed benchmark (benchmarks/results/elue-minilm, 132 run directories, against
   leaderboard/references/minilm-l6-static.json), in this process, stage by stage: load (read
   the run directories and the reference, fill the quality fields of runs stored without them),
   aggregate (average the seeds), score (fronts, ELUE scores, ranking, per-seed scores, per-run
   quality, budgets, parameter buckets).
3. The same as a user types it, `eebench score <results> --reference <ref>`, in a subprocess:
   Python's start and every import included (target: under 2 s), its wall and CPU time; and,
   for scale, starting Python and importing the CLI alone.

Reports the median (and min) of several repeats, the hardware and the load average of the
machine (a shared machine's figures vary with it). `--baseline FILE` (the `--json` output of an
earlier run, e.g. of the code before a change) prints those figures and the ratio side by side.

    python benchmarks/score_speed.py [--points 1000] [--repeats 7] [--json] [--baseline before.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from eebench.measure.env import cpu_model, package_versions, usable_cores
from eebench.run.artifacts import JOINT, OperatingPoint, RunConfig, VariantRecord
from eebench.run.upgrade import exit_paths
from eebench.score import Run, aggregate_seeds, build_reference, raw_points, score

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "elue-minilm"
REFERENCE = ROOT / "leaderboard" / "references" / "minilm-l6-static.json"
TASKS = ("rte", "mrpc", "sst2", "elue-scitail", "elue-snli", "elue-imdb")
METHODS = ("deebert", "pabee")
LAYERS = 6
SEEDS = (0, 1)
N_SAMPLES = 500
TARGETS = {"random_points": 1.0, "cli_wall": 2.0}


def _histogram(layer: float) -> list[int]:
    """Exits at the two layers around `layer` (1 <= layer <= LAYERS), in the share that makes
    their mean about `layer`."""
    low = int(layer)
    hist = [0] * LAYERS
    up = round((layer - low) * N_SAMPLES) if low < LAYERS else 0
    hist[low - 1] += N_SAMPLES - up
    if up:
        hist[low] += up
    return hist


def make_run(rng, method: str, task: str, seed: int, values: list[float]) -> Run:
    """A run held in memory: random but plausible points (metric rises with FLOPs)."""
    static = method == "static"
    config = RunConfig(model="bench", method=method, task=task, split="dev", seed=seed,
                       sweep=values, max_seq_length=128, flops_convention="2flops-per-mac")
    points = []
    for v in values:
        hist = _histogram(v if static else rng.uniform(1, LAYERS))
        layer = sum((i + 1) * h for i, h in enumerate(hist)) / N_SAMPLES
        flops = 1.1e9 * layer + rng.uniform(0, 1e7)
        main = 50 + 30 * (1 - np.exp(-layer / 2)) + rng.normal(0, 1.5)
        points.append(OperatingPoint(
            method=method, variant=f"k{int(v)}" if static else JOINT, task=task, split="dev",
            seed=seed, sweep={"layers": int(v)} if static else {"threshold": v},
            n_samples=N_SAMPLES, num_layers=LAYERS, metrics={"accuracy": main},
            main_metric="accuracy", main=main, avg_exit_layer=layer,
            exit_histogram=hist, flops_convention="2flops-per-mac", mean_flops=flops,
            mean_mflops=flops / 1e6, speedup=LAYERS / layer, layer_saving=1 - layer / LAYERS,
            params_total=22_000_000, params_mean_used=2e7,
        ))
    labels = rng.integers(0, 2, N_SAMPLES)  # for the majority-class baseline
    if static:  # one model per depth k, its one exit after layer k
        variants = [VariantRecord(name=f"k{int(v)}", sweep_values=[{"layers": int(v)}],
                                  exit_layers=[int(v)], exit_paths=exit_paths([int(v)], False),
                                  hidden_size=None, pooling="cls",
                                  logits_key=f"exit_logits_k{int(v)}") for v in values]
    else:
        variants = [VariantRecord(name=JOINT, sweep_values=[{"threshold": v} for v in values],
                                  exit_layers=list(range(1, LAYERS + 1)), hidden_size=None,
                                  exit_paths=exit_paths(list(range(1, LAYERS + 1)), False),
                                  pooling="cls", logits_key="exit_logits")]
    return Run(path=Path(f"/bench/{method}/{task}/{seed}"), config=config, points=points,
               arrays={"labels": labels}, variants=variants)


def make_runs(n_points: int, seed: int = 0) -> tuple[list[Run], list[Run]]:
    rng = np.random.default_rng(seed)
    static = [make_run(rng, "static", t, s, [float(k) for k in range(1, LAYERS + 1)])
              for t in TASKS for s in SEEDS]
    n_dynamic = len(TASKS) * len(METHODS) * len(SEEDS)
    per_run = max(1, -(-(n_points - len(static) * LAYERS) // n_dynamic))  # ceil
    dynamic = [make_run(rng, m, t, s, [round(0.01 * i, 2) for i in range(per_run)])
               for t in TASKS for m in METHODS for s in SEEDS]
    return static, dynamic


def _stats(times: list[float]) -> dict[str, float]:
    return {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times)}


def random_points(n_points: int, repeats: int) -> dict:
    static, dynamic = make_runs(n_points)
    reference = build_reference(static, name="bench-static")
    raw = raw_points(static + dynamic)
    report = score(aggregate_seeds(raw), reference)  # warm-up: first imports not timed
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        report = score(aggregate_seeds(raw), reference)
        times.append(time.perf_counter() - start)
    return {"raw_points": len(raw),
            "points_after_seed_mean": sum(len(t.points) for t in report.tasks.values()),
            "tasks": len(report.tasks), "methods": len(report.ranking), **_stats(times)}


def committed_stages(results: Path, reference: Path, repeats: int) -> dict:
    """What `eebench score` computes, stage by stage, in this process (imports done first)."""
    from eebench import score as sc
    from eebench.score import quality as sq

    times: dict[str, list[float]] = {"load": [], "aggregate": [], "score": []}
    for _ in range(repeats + 1):  # the first one imports and warms the file cache: not kept
        t0 = time.perf_counter()
        ref = sc.load_reference(reference)
        runs = sc.load_runs([results])
        sq.fill_quality(runs)
        t1 = time.perf_counter()
        raw = sc.raw_points(runs)
        sc.check_consistent(raw)
        points = sc.aggregate_seeds(raw)
        t2 = time.perf_counter()
        report = sc.score(points, ref)
        sc.elue_by_seed(raw, ref)
        sq.run_qualities(raw)
        sq.budget_table(raw)
        sq.param_buckets(raw)
        t3 = time.perf_counter()
        for name, t in zip(times, (t1 - t0, t2 - t1, t3 - t2), strict=True):
            times[name].append(t)
    for values in times.values():
        del values[0]
    return {"runs": len(runs), "raw_points": len(raw),
            "points_after_seed_mean": sum(len(t.points) for t in report.tasks.values()),
            **{name: _stats(values) for name, values in times.items()}}


def _timed_subprocess(cmd: list[str], repeats: int) -> dict:
    """Wall and CPU (user + system) time of a command, stdout and stderr discarded. It runs
    outside the checkout, so that `python -c` imports eebench as installed (or from PYTHONPATH,
    for a baseline of other code), not from the current directory."""
    walls, cpus = [], []
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(cmd, cwd=tempfile.gettempdir(), stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return {**_stats(walls), "cpu_median_s": statistics.median(cpus)}


def committed_cli(results: Path, reference: Path, repeats: int) -> dict:
    exe = shutil.which("eebench")
    cli = [exe] if exe else [sys.executable, "-m", "eebench"]
    cmd = [*cli, "score", str(results.resolve()), "--reference", str(reference.resolve())]
    shown = [str(a.resolve().relative_to(ROOT)) if a.resolve().is_relative_to(ROOT) else str(a)
             for a in (results, reference)]
    return {"command": f"eebench score {shown[0]} --reference {shown[1]}",
            "cli": _timed_subprocess(cmd, repeats),
            "import_cli": _timed_subprocess([sys.executable, "-c", "import eebench.cli"],
                                            repeats)}


def _rows(result: dict) -> list[tuple[str, dict, str]]:
    """(what, its figures, key into them) of every timed line, in print order."""
    c = result["committed"]
    return [("random points: seeds, fronts, ELUE, ranking", result["random"], "median_s"),
            ("benchmark: load runs + reference, fill quality", c["load"], "median_s"),
            ("benchmark: aggregate seeds", c["aggregate"], "median_s"),
            ("benchmark: score (fronts, ELUE, quality, budgets)", c["score"], "median_s"),
            ("`eebench score` end to end: wall", c["cli"], "median_s"),
            ("`eebench score` end to end: CPU", c["cli"], "cpu_median_s"),
            ("python -c 'import eebench.cli': wall", c["import_cli"], "median_s")]


def _baseline_value(baseline: dict | None, index: int) -> float | None:
    if baseline is None:
        return None
    try:
        figures, key = _rows(baseline)[index][1:]
        return figures[key]
    except (KeyError, IndexError):
        return None


def print_result(result: dict, baseline: dict | None) -> None:
    r, c = result["random"], result["committed"]
    print(f"random points: {r['raw_points']} ({r['points_after_seed_mean']} after averaging "
          f"{len(SEEDS)} seeds) across {r['tasks']} tasks; committed benchmark: {c['runs']} run "
          f"directories, {c['raw_points']} points ({c['points_after_seed_mean']} after averaging "
          f"seeds); `{c['command']}`")
    head = f"{'':52} {'median':>8} {'min':>8}"
    if baseline is not None:
        head += f" {'before':>8} {'before/now':>10}"
    print(head + f" {'target':>8}")
    targets = {0: TARGETS["random_points"], 4: TARGETS["cli_wall"]}
    for i, (what, figures, key) in enumerate(_rows(result)):
        line = f"{what:52} {figures[key]:7.3f}s "
        line += f"{figures['min_s']:7.3f}s" if key == "median_s" else f"{'':8}"
        if baseline is not None:
            before = _baseline_value(baseline, i)
            line += (f" {before:7.3f}s {before / figures[key]:9.1f}x" if before is not None
                     else f" {'-':>8} {'-':>10}")
        if i in targets:
            line += f" {'< ' + format(targets[i], 'g') + ' s':>8}"
        print(line)
    hw = result["hardware"]
    print(f"CPU figures, median of {result['repeats']} repeats: {hw['cpu']} "
          f"({hw['cores_usable']} usable cores), {hw['os']}, Python {hw['python']}, numpy "
          f"{hw['numpy']}; load average {hw['load_average_1min']:.2f} before the run")
    if baseline is not None:
        b = baseline["hardware"]
        print(f"before: {b['cpu']} ({b['cores_usable']} usable cores), load average "
              f"{b['load_average_1min']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--reference", type=Path, default=REFERENCE)
    parser.add_argument("--baseline", type=Path, help="an earlier --json output to compare with")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()

    baseline = json.loads(args.baseline.read_text()) if args.baseline else None
    load = os.getloadavg()[0]
    committed = committed_stages(args.results, args.reference, args.repeats)
    committed.update(committed_cli(args.results, args.reference, args.repeats))
    result = {
        "benchmark": "score_speed",
        "repeats": args.repeats,
        "random": random_points(args.points, args.repeats),
        "committed": committed,
        "targets_s": TARGETS,
        "hardware": {
            "cpu": cpu_model(), "cores_usable": usable_cores(), "os": platform.platform(),
            "python": sys.version.split()[0], "numpy": package_versions().get("numpy"),
            "load_average_1min": load,
        },
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_result(result, baseline)


if __name__ == "__main__":
    main()
