"""SWEET with its exits where the paper puts them, against an exit after every layer.

Reads the benchmark's SWEET runs (`benchmarks/results/elue-minilm`, an exit after each of the six
layers) and those with exits after layers 1, 2, 4 and 6 only (`benchmarks/results/sweet-exits`,
made by `benchmarks/sweet_exits.sh`: the paper's four exits, so the layers between two exits
learn from the deeper one) on the same tasks, seeds and budget; prints each layer's dev metric
and the ELUE score against the shipped static reference, and writes the table into
docs/results.md between its markers.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _common import publish_block  # noqa: E402
from report_pabee_ablation import ablation_lines, finished, pm  # noqa: E402

from eebench.plot.data import exit_curve  # noqa: E402
from eebench.score import Run, elue_by_seed, raw_points  # noqa: E402
from eebench.tasks.spec import get_task  # noqa: E402

EVERY_LAYER_RUNS = ROOT / "benchmarks" / "results" / "elue-minilm"
PLACED_RUNS = ROOT / "benchmarks" / "results" / "sweet-exits"
DOC = ROOT / "docs" / "results.md"
START, END = "<!-- sweet-exits:start -->", "<!-- sweet-exits:end -->"


def exits_name(run: Run) -> str:
    layers = run.config.method_settings.get("exit_layers")
    return "after every layer" if layers is None else "after " + ", ".join(map(str, layers))


def seed_values(run: Run, reference) -> list[dict]:
    """One row per exit of a run (its dev metric on all samples, by layer), one for its ELUE
    score."""
    spec = get_task(run.config.task)
    row = {"task": spec.name, "exits": exits_name(run), "seed": run.config.seed}
    elue = elue_by_seed(raw_points([run]), reference)[run.config.method][spec.name]
    curve = exit_curve(run, spec)
    return ([{**row, "column": f"layer {k}", "value": v}
             for k, v in zip(curve.layers, curve.values(spec.main_metric), strict=True)]
            + [{**row, "column": "ELUE score", "value": elue[run.config.seed]}])


def task_table(values: pd.DataFrame, seeds: list[int]) -> str:
    """Per placement: each exit's metric and the ELUE score, mean ± std over seeds."""
    runs = values[values.column == "ELUE score"]
    for name, got in runs.groupby("exits")["seed"].agg(lambda s: sorted(s.tolist())).items():
        if got != seeds:
            sys.exit(f"{values.task.iat[0]}, {name}: runs for seeds {got}, expected {seeds}")
    table = values.groupby(["exits", "column"], sort=False)["value"].agg(pm).unstack()
    layers = sorted((c for c in values.column.unique() if c != "ELUE score"),
                    key=lambda c: int(c.split()[1]))
    table = table.reindex(columns=[*layers, "ELUE score"]).fillna("-")
    table = table.sort_index(key=lambda names: [(n != "after every layer", n) for n in names])
    return table.reset_index().to_markdown(
        index=False, colalign=["left"] + ["right"] * (len(layers) + 1), disable_numparse=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/results.md")
    args = ap.parse_args()

    placed = finished(PLACED_RUNS, ("sweet",))
    if not placed:
        sys.exit(f"no finished runs under {PLACED_RUNS}: run benchmarks/sweet_exits.sh first")
    lines = ablation_lines(
        "report_sweet_exits.py", placed, finished(EVERY_LAYER_RUNS, ("sweet",)), seed_values,
        task_table, "Each exit's dev metric on all samples (by the layer it follows), mean ± "
        "std over seeds; the ELUE score of the threshold sweep against the shipped static "
        "reference.")
    publish_block(DOC, START, END, lines, write=not args.no_write)

if __name__ == "__main__":
    main()
