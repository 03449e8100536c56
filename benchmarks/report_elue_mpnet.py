"""The 12-layer slice in docs/results.md and its cost per run in docs/benchmarks.md.

    python benchmarks/report_elue_mpnet.py [--export]

Reads the finished runs of `benchmarks/elue-mpnet.toml` (benchmarks/results/elue-mpnet, made by
`benchmarks/elue_mpnet.sh`) and the MiniLM-L6 benchmark's runs of the same tasks, and writes,
between markers: the 12-point static curve of MPNet-base next to MiniLM-L6's 6 points, the ELUE
score of DeeBERT and PABEE on each model against that model's own static curve, and the wall time
of each run (the cost model of a full 12-layer benchmark on a CPU). A task appears once its static
run has finished.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _common import export_tests, write_block  # noqa: E402

from eebench.plot.style import task_title  # noqa: E402
from eebench.run import artifacts as R  # noqa: E402
from eebench.score import (  # noqa: E402
    Run,
    build_reference,
    elue_by_seed,
    load_run,
    raw_points,
    sample_std,
)

MPNET_RUNS = ROOT / "benchmarks" / "results" / "elue-mpnet"
TEST_RUNS = ROOT / "benchmarks" / "results" / "elue-mpnet-test"  # DeeBERT, PABEE on test splits
EXPORT = ROOT / "benchmarks" / "results" / "elue-export-mpnet"
MINILM_RUNS = ROOT / "benchmarks" / "results" / "elue-minilm"
RESULTS, BENCHMARKS = ROOT / "docs" / "results.md", ROOT / "docs" / "benchmarks.md"
MARKERS = ("<!-- mpnet-slice:start -->", "<!-- mpnet-slice:end -->")
COST_MARKERS = ("<!-- mpnet-cost:start -->", "<!-- mpnet-cost:end -->")
METHODS = ("static", "deebert", "pabee")


def finished(root: Path, tasks: set[str] | None = None) -> list[Run]:
    runs = [load_run(p.parent) for p in sorted(root.rglob(R.SUMMARY_FILE))] if root.is_dir() \
        else []
    return [r for r in runs if tasks is None or r.config.task in tasks]


def pm(values) -> str:
    a = np.asarray(list(values), dtype=float)
    if not len(a):
        return "–"
    mean = round(float(a.mean()), 1) + 0.0  # no "-0.0"
    return f"{mean:.1f} ± {sample_std(a):.1f}" if len(a) > 1 else f"{mean:.1f}"


def static_curves(runs: list[Run], model: str) -> pd.DataFrame:
    """k, MFLOPs and the main metric of every static point, averaged over seeds."""
    rows = [{"task": r.config.task, "k": int(r.variant_of(p).exit_layers[0]),
             "mflops": p.mean_mflops, "main": p.main}
            for r in runs if r.config.method == "static" for p in r.points]
    frame = pd.DataFrame(rows)
    return frame.groupby(["task", "k"]).agg(
        **{f"{model} MFLOPs": ("mflops", "mean"), f"{model} metric": ("main", pm)}).reset_index()


def elue_scores(runs: list[Run]) -> dict[tuple[str, str], str]:
    """(method, task) -> ELUE score against the runs' own static curve, ± over seeds."""
    static = [r for r in runs if r.config.method == "static"]
    if not static:
        return {}
    reference = build_reference(static, name="own-static")
    by_seed = elue_by_seed(raw_points([r for r in runs if r.config.task in reference.tasks]),
                           reference)
    return {(m, t): pm(seeds.values()) for m, tasks in by_seed.items()
            for t, seeds in tasks.items()}


def section(mpnet: list[Run], minilm: list[Run]) -> str:
    tasks = sorted({r.config.task for r in mpnet if r.config.method == "static"})
    lines = [MARKERS[0], "",
             f"Built by `python benchmarks/report_elue_mpnet.py` from {len(mpnet)} MPNet-base "
             "runs of `benchmarks/elue-mpnet.toml` (one seed, 2,000 training examples, 2 epochs, "
             "lr 5e-5, bf16, 64 tokens for ELUE SST-2 and 128 for SciTail) and the MiniLM-L6 "
             "benchmark's runs of the same tasks (three seeds; 2,500 and 2,000 training examples). "
             "CPU only.", ""]
    if not tasks:
        return "\n".join([*lines, "No finished static run yet.", "", MARKERS[1]])
    curves = static_curves(mpnet, "MPNet-base").merge(
        static_curves(minilm, "MiniLM-L6"), on=["task", "k"], how="left")
    for task in tasks:
        table = curves[curves.task == task].drop(columns="task")
        for col in [c for c in table.columns if c.endswith("MFLOPs")]:  # one decimal, and a dash
            table[col] = table[col].map(lambda v: "–" if pd.isna(v) else f"{v:.1f}")
        table = table.fillna("–")  # MiniLM has 6 layers, not 12
        lines += [f"**{task_title(task)}: the static curve (first k layers, dev)**", "",
                  table.to_markdown(index=False, floatfmt=".1f"), ""]
    ours, theirs = elue_scores(mpnet), elue_scores(minilm)
    rows = [{"method": m, "task": task_title(t), "MPNet-base (own curve)": ours.get((m, t), "–"),
             "MiniLM-L6 (own curve)": theirs.get((m, t), "–")}
            for m in METHODS[1:] for t in tasks]
    lines += ["**ELUE score against each model's own static curve (points, dev)**", "",
              pd.DataFrame(rows).to_markdown(index=False), "", MARKERS[1]]
    return "\n".join(lines)


def cost_table(mpnet: list[Run]) -> str:
    rows = [{"task": r.config.task, "method": r.config.method,
             "models trained": len(r.variants), "points": len(r.points),
             "wall time (min)": wall_minutes(r)} for r in mpnet]
    body = pd.DataFrame(rows).sort_values(["task", "method"]).to_markdown(
        index=False, floatfmt=".1f") if rows else "No finished run yet."
    return "\n".join([COST_MARKERS[0], "", body, "", COST_MARKERS[1]])


def wall_minutes(run: Run) -> float | None:
    summary = R.read_run(run.path).summary
    return None if summary is None or summary.wall_seconds is None else summary.wall_seconds / 60


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--export", action="store_true",
                    help="also write the ELUE test files of the test-split runs")
    args = ap.parse_args()
    mpnet = finished(MPNET_RUNS)
    minilm = finished(MINILM_RUNS, {r.config.task for r in mpnet})
    write_block(RESULTS, *MARKERS, section(mpnet, minilm),
                heading="## A 12-layer slice: MPNet-base against MiniLM-L6")
    write_block(BENCHMARKS, *COST_MARKERS, cost_table(mpnet),
                heading="## The cost of a 12-layer benchmark on a CPU: MPNet-base runs\n\n"
                "Wall time of each run of `benchmarks/elue-mpnet.toml` (training, the one-pass "
                "sweep, FLOPs and timing included), one worker process with one thread on a "
                "2-core machine, as its `summary.json` records it.")
    print(f"wrote {RESULTS.relative_to(ROOT)} and {BENCHMARKS.relative_to(ROOT)} from "
          f"{len(mpnet)} MPNet-base runs")
    if args.export:
        export_tests(TEST_RUNS, EXPORT)


if __name__ == "__main__":
    main()
