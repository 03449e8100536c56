"""PABEE's shallow exits: the paper's training against equal loss weights and a pooler per exit.

Reads the benchmark's PABEE runs (`benchmarks/results/elue-minilm`, the paper's settings) and the
variants' runs (`benchmarks/results/pabee-ablation`, made by `benchmarks/pabee_ablation.sh`) on
the same tasks, seeds and budget; prints each exit's dev metric and the ELUE score against the
shipped static reference, and writes the table into docs/results.md between its markers.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _common import publish_block  # noqa: E402

from eebench.plot.data import exit_curve  # noqa: E402
from eebench.plot.style import task_title  # noqa: E402
from eebench.run import artifacts as R  # noqa: E402
from eebench.score import (  # noqa: E402
    Run,
    elue_by_seed,
    load_reference,
    load_run,
    raw_points,
    sample_std,
)
from eebench.tasks.spec import get_task  # noqa: E402

PAPER_RUNS = ROOT / "benchmarks" / "results" / "elue-minilm"
VARIANT_RUNS = ROOT / "benchmarks" / "results" / "pabee-ablation"
REFERENCE = ROOT / "leaderboard" / "references" / "minilm-l6-static.json"
DOC = ROOT / "docs" / "results.md"
START, END = "<!-- pabee-ablation:start -->", "<!-- pabee-ablation:end -->"
PAPER = {"loss_weights": "layer", "shared_pooler": True}
STATIC = "static: exit k is a separate k-layer model"


def variant(settings: dict) -> str:
    """A run's training variant, named by what differs from the paper."""
    changed = [f"{k} = {str(settings[k]).lower()}" for k in PAPER
               if k in settings and settings[k] != PAPER[k]]
    return ", ".join(changed) or "paper (j-weighted loss, shared pooler)"


def finished(root: Path, methods: tuple[str, ...] = ("pabee",)) -> list[Run]:
    return [r for r in (load_run(p.parent) for p in sorted(root.rglob(R.SUMMARY_FILE)))
            if r.config.method in methods] if root.is_dir() else []


def pm(values: pd.Series) -> str:
    a = values.to_numpy(dtype=float)
    mean = round(float(np.mean(a)), 1) + 0.0  # no "-0.0"
    return f"{mean:.1f} ± {sample_std(a):.1f}" if len(a) > 1 else f"{mean:.1f}"


def seed_values(run: Run, reference) -> list[dict]:
    """One row per exit of a run (its dev metric on all samples), and one for its ELUE score."""
    spec = get_task(run.config.task)
    name = STATIC if run.config.method == "static" else variant(run.config.method_settings)
    row = {"task": spec.name, "training": name, "seed": run.config.seed}
    elue = elue_by_seed(raw_points([run]), reference)[run.config.method][spec.name]
    exits = exit_curve(run, spec).values(spec.main_metric)
    return ([{**row, "column": f"exit {j}", "value": v} for j, v in enumerate(exits, 1)]
            + [{**row, "column": "ELUE score", "value": elue[run.config.seed]}])


def task_table(values: pd.DataFrame, seeds: list[int]) -> str:
    """Per training variant: each exit's metric and the ELUE score, mean ± std over seeds."""
    runs = values[values.column == "ELUE score"]  # one row per run
    for name, got in runs.groupby("training")["seed"].agg(lambda s: sorted(s.tolist())).items():
        if got != seeds:
            sys.exit(f"{values.task.iat[0]}, {name}: runs for seeds {got}, expected {seeds}")
    table = values.groupby(["training", "column"], sort=False)["value"].agg(pm).unstack()
    order = {STATIC: 0, variant({}): 1}
    table = table.sort_index(key=lambda names: [(order.get(n, 2), n) for n in names])
    exits = [c for c in values.column.unique() if c != "ELUE score"]
    return table[[*exits, "ELUE score"]].reset_index().to_markdown(
        index=False, colalign=["left"] + ["right"] * (len(exits) + 1), disable_numparse=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/results.md")
    args = ap.parse_args()

    variants = finished(VARIANT_RUNS)
    if not variants:
        sys.exit(f"no finished runs under {VARIANT_RUNS}: run benchmarks/pabee_ablation.sh first")
    lines = ablation_lines(
        "report_pabee_ablation.py", variants, finished(PAPER_RUNS, ("pabee", "static")),
        seed_values, task_table, "Each exit's dev metric on all samples, mean ± std over seeds; "
        "the ELUE score of the sweep against the shipped static reference (static's own: its "
        "seeds' spread around the seed-averaged curve).")
    publish_block(DOC, START, END, lines, write=not args.no_write)


def ablation_lines(script: str, variants: list[Run], baseline: list[Run], seed_values,
                   task_table, what: str) -> list[str]:
    """An ablation's block: the variants' runs and the baseline's runs of the same tasks and
    seeds, one table per task (`task_table` of the rows `seed_values` gives per run)."""
    tasks = sorted({r.config.task for r in variants}, key=lambda t: (t.startswith("elue-"), t))
    seeds = sorted({r.config.seed for r in variants})
    baseline = [r for r in baseline if r.config.task in tasks and r.config.seed in seeds]
    reference = load_reference(REFERENCE)
    values = pd.DataFrame([row for r in baseline + variants for row in seed_values(r, reference)])
    lines = ["", f"Built by `python benchmarks/{script}` from {len(baseline)} + {len(variants)} "
             f"runs (seeds {', '.join(map(str, seeds))}; the benchmark's budget above). {what}",
             ""]
    for task in tasks:
        spec = get_task(task)
        lines += [f"**{task_title(spec.name)}** ({spec.main_metric})", "",
                  task_table(values[values.task == spec.name], seeds), ""]
    return lines

if __name__ == "__main__":
    main()
