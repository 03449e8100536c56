"""What the benchmark's early exits do to the predictions: calibration, consistency with full
depth, overthinking, each exit's accuracy, and each method's metric at fixed FLOPs budgets.

Reads the committed runs (`benchmarks/results/elue-minilm`) and computes everything from their
stored arrays (eebench.score.quality, the code `eebench score` runs); prints the tables and writes
them into docs/results.md between its markers.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _common import publish_block  # noqa: E402

from eebench.plot.style import task_title  # noqa: E402
from eebench.score import aggregate_seeds, load_runs, raw_points  # noqa: E402
from eebench.score.quality import (  # noqa: E402
    DEFAULT_BUDGETS,
    budget_table,
    fill_quality,
    full_model_flops,
    param_buckets,
    run_qualities,
)

RUNS = ROOT / "benchmarks" / "results" / "elue-minilm"
DOC = ROOT / "docs" / "results.md"
START, END = "<!-- quality:start -->", "<!-- quality:end -->"
HALF = 50.0
QUALITY = ("ece", "nll", "consistency", "exit_gain", "exit_loss")


def pm(mean: float | None, std: float | None = None, n: int = 1, digits: int = 1) -> str:
    if mean is None:
        return "-"
    mean = round(mean, digits) + 0.0  # no "-0.0"
    return f"{mean:.{digits}f} ± {std:.{digits}f}" if n > 1 else f"{mean:.{digits}f}"


def _task_order(task: str) -> tuple:
    return task.startswith("elue-"), task


def half_budget_table(points, full: dict[str, float]) -> str:
    """Per task and method: the seed-averaged point with the best main metric within half the
    full model's FLOPs, and the full model (static k = L) for comparison."""
    rows = []
    for task in sorted({p.task for p in points}, key=_task_order):
        pts = [p for p in points if p.task == task and p.quality]
        if not pts:
            continue  # regression: nothing to calibrate
        budget = full[task] * HALF / 100
        chosen = []
        for label in sorted({p.label for p in pts}):
            within = [p for p in pts if p.label == label and p.flops <= budget * (1 + 1e-9)]
            if within:
                chosen.append((label, max(within, key=lambda p: p.main)))
        deepest = [p for p in pts if p.label == "static"]
        if deepest:
            chosen.append(("static, full model", max(deepest, key=lambda p: p.flops)))
        for name, p in chosen:
            q = p.quality
            rows.append({
                "task": task_title(task), "method": name,
                "point": f"{p.sweep_param} = {p.sweep_value:g}",
                "MFLOPs": f"{p.mflops:.0f}",
                "main": pm(p.main, p.main_std, len(p.seeds)),
                "ECE %": pm(*q["ece"]), "NLL": pm(*q["nll"], digits=3),
                "consistency %": pm(*q["consistency"]),
                "gain %": pm(*q["exit_gain"]), "loss %": pm(*q["exit_loss"])})
    frame = pd.DataFrame(rows)
    frame = frame[["task", "method", "point", "MFLOPs", "main", "ECE %", "NLL", "consistency %",
                   "gain %", "loss %"]]
    return frame.to_markdown(index=False, colalign=["left"] * 3 + ["right"] * 7,
                             disable_numparse=True)


def per_run_table(quality) -> str:
    rows = []
    for m in sorted(quality, key=lambda m: (_task_order(m.task), m.label)):
        n = len(m.seeds)
        rows.append({"task": task_title(m.task), "method": m.label,
                     **{f"exit {k}": pm(a, s, n) for k, (a, s) in zip(m.exit_layers,
                                                                     m.exit_accuracy,
                                                                     strict=True)},
                     "overthinking %": pm(*m.overthinking, n),
                     "underthinking %": pm(*m.underthinking, n)})
    frame = pd.DataFrame(rows).fillna("-")
    return frame.to_markdown(index=False, colalign=["left"] * 2 + ["right"] * (frame.shape[1] - 2),
                             disable_numparse=True)


def budgets_markdown(budgets) -> str:
    rows: dict[tuple, dict] = {}
    for b in budgets:
        row = rows.setdefault((_task_order(b.task), b.label),
                              {"task": task_title(b.task), "method": b.label})
        row[f"{b.percent:g}%"] = pm(b.main, b.main_std, b.seeds)
    frame = pd.DataFrame([rows[k] for k in sorted(rows)])
    return frame.to_markdown(index=False, colalign=["left"] * 2 + ["right"] * (frame.shape[1] - 2),
                             disable_numparse=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/results.md")
    args = ap.parse_args()

    runs = load_runs([RUNS])
    fill_quality(runs)
    raw = raw_points(runs)
    points = aggregate_seeds(raw)
    full = full_model_flops(raw)
    seeds = sorted({r.config.seed for r in runs})
    buckets = param_buckets(raw)
    bucket_text = "; ".join(f"{label} {n / 1e6:.1f}M ({b})" for label, (n, b) in buckets.items())

    lines = [
        "",
        f"Built by `python benchmarks/report_quality.py` from the {len(runs)} committed runs "
        f"above (seeds {', '.join(map(str, seeds))}), computed from their stored per-sample "
        "arrays; every cell is the mean ± std over seeds. Definitions: "
        "[scoring.md](scoring.md#quality-of-the-exited-predictions). Parameters (ELUE's "
        f"buckets): {bucket_text}.", "",
        f"**Quality at half the FLOPs.** Per task and method, the seed-averaged operating point "
        f"with the best main metric among those costing at most {HALF:g}% of the full model's "
        "FLOPs, and the full model (static k = 6) itself. ECE in percent (15 equal-width bins "
        "of max softmax probability, weighted by bin size), NLL in nats; consistency, gain and "
        "loss against the method's own full-depth prediction (joint methods: their last exit; "
        "static: its k = 6 model). STS-B (regression) has none of these.", "",
        half_budget_table(points, full), "",
        "**Each exit on its own, and overthinking** (per run: every sample leaving at that "
        "exit; static: the k-layer model). Overthinking: samples some earlier exit gets right "
        "and the last exit gets wrong; underthinking, its mirror: some earlier exit wrong, the "
        "last right.", "",
        per_run_table(run_qualities(raw)), "",
        "**Fixed budgets.** The main metric at "
        f"{', '.join(f'{b:g}' for b in DEFAULT_BUDGETS)}% of the full model's FLOPs: per seed "
        "the best operating point within the budget (a step along the method's own Pareto "
        "front, no interpolation between points), then mean ± std over seeds; `-`: some seed "
        "has no point that cheap.", "",
        budgets_markdown(budget_table(raw, DEFAULT_BUDGETS)), "",
    ]
    publish_block(DOC, START, END, lines, write=not args.no_write)


if __name__ == "__main__":
    main()
