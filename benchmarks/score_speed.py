"""How long scoring takes: 1,000 random operating points across 6 tasks (target: under 1 s).

Times what `eebench score` does after reading the files: average the seeds, find every Pareto
front, hypervolume and AUC (each method's and the joint one), the ELUE score of every point
against a reference curve, and the method ranking. Reports the median of several repeats and the
hardware it ran on.

    python benchmarks/score_speed.py [--points 1000] [--repeats 7] [--json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from eebench.measure.env import cpu_model, package_versions, usable_cores
from eebench.run.artifacts import OperatingPoint, RunConfig
from eebench.score import Run, aggregate_seeds, build_reference, raw_points, score

TASKS = ("rte", "mrpc", "sst2", "elue-scitail", "elue-snli", "elue-imdb")
METHODS = ("deebert", "pabee")
LAYERS = 6
SEEDS = (0, 1)
N_SAMPLES = 500


def make_run(rng, method: str, task: str, seed: int, values: list[float]) -> Run:
    """A run held in memory: random but plausible points (metric rises with FLOPs)."""
    static = method == "static"
    config = RunConfig(model="bench", method=method, task=task, split="dev", seed=seed,
                       sweep=values, max_seq_length=128, flops_convention="2flops-per-mac")
    points = []
    for v in values:
        layer = v if static else rng.uniform(1, LAYERS)
        flops = 1.1e9 * layer + rng.uniform(0, 1e7)
        main = 50 + 30 * (1 - np.exp(-layer / 2)) + rng.normal(0, 1.5)
        points.append(OperatingPoint(
            method=method, task=task, split="dev", seed=seed,
            sweep_param="layers" if static else "threshold", sweep_value=v,
            n_samples=N_SAMPLES, num_layers=LAYERS, metrics={"accuracy": main},
            main_metric="accuracy", main=main, avg_exit_layer=layer,
            exit_histogram=[0] * LAYERS, flops_convention="2flops-per-mac", mean_flops=flops,
            mean_mflops=flops / 1e6, speedup=LAYERS / layer, layer_saving=1 - layer / LAYERS,
            params_total=22_000_000, params_mean_used=2e7,
        ))
    labels = rng.integers(0, 2, N_SAMPLES)  # for the majority-class baseline
    return Run(path=Path(f"/bench/{method}/{task}/{seed}"), config=config, points=points,
               arrays={"labels": labels})


def make_runs(n_points: int, seed: int = 0) -> tuple[list[Run], list[Run]]:
    rng = np.random.default_rng(seed)
    static = [make_run(rng, "static", t, s, [float(k) for k in range(1, LAYERS + 1)])
              for t in TASKS for s in SEEDS]
    n_dynamic = len(TASKS) * len(METHODS) * len(SEEDS)
    per_run = max(1, -(-(n_points - len(static) * LAYERS) // n_dynamic))  # ceil
    dynamic = [make_run(rng, m, t, s, [round(0.01 * i, 2) for i in range(per_run)])
               for t in TASKS for m in METHODS for s in SEEDS]
    return static, dynamic


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()

    static, dynamic = make_runs(args.points)
    reference = build_reference(static, name="bench-static")
    runs = static + dynamic
    raw = raw_points(runs)
    score(aggregate_seeds(raw), reference)  # warm-up: imports (scipy, task catalog) not timed

    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        report = score(aggregate_seeds(raw), reference)
        times.append(time.perf_counter() - start)
    result = {
        "benchmark": "score_speed",
        "raw_points": len(raw),
        "points_after_seed_mean": sum(len(t.points) for t in report.tasks.values()),
        "tasks": len(report.tasks),
        "methods": len(report.ranking),
        "repeats": args.repeats,
        "median_s": statistics.median(times),
        "min_s": min(times),
        "max_s": max(times),
        "target_s": 1.0,
        "hardware": {
            "cpu": cpu_model(), "cores_usable": usable_cores(), "os": platform.platform(),
            "python": sys.version.split()[0],
            "numpy": package_versions().get("numpy"),
        },
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"scored {result['raw_points']} points ({result['points_after_seed_mean']} after "
              f"averaging {len(SEEDS)} seeds) across {result['tasks']} tasks: median "
              f"{result['median_s'] * 1e3:.1f} ms over {args.repeats} repeats "
              f"(min {result['min_s'] * 1e3:.1f}, max {result['max_s'] * 1e3:.1f}; target < 1 s)")
        hw = result["hardware"]
        print(f"on {hw['cpu']} ({hw['cores_usable']} usable cores), {hw['os']}, "
              f"Python {hw['python']}, numpy {hw['numpy']}")


if __name__ == "__main__":
    main()
