"""Domain shift: DeeBERT and PABEE trained on GLUE SST-2 (MiniLM-L6, the benchmark's budget, seed
1) and evaluated on their own dev split, on ELUE SST-2 (the same kind of sentences, other data)
and on IMDb reviews (another domain, much longer texts): accuracy, average exit layer and ECE
and consistency with the full-depth prediction at each setting, side by side.

The runs are `eebench run --eval-task` runs (benchmarks/results/shift-minilm; the commands are in
docs/results.md). Prints the tables and writes them into docs/results.md between its markers.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _common import write_block  # noqa: E402

from eebench.score import load_runs  # noqa: E402
from eebench.score.quality import fill_quality  # noqa: E402
from eebench.tasks.spec import get_task  # noqa: E402

RUNS = ROOT / "benchmarks" / "results" / "shift-minilm"
DOC = ROOT / "docs" / "results.md"
START, END = "<!-- shift:start -->", "<!-- shift:end -->"
TRAINED_ON = "sst2"
EVALUATED = ("sst2", "elue-sst2", "elue-imdb")  # in domain first
SETTING = {"threshold": "entropy <", "patience": "patience"}
SHOWN_THRESHOLDS = 6  # DeeBERT's 21 thresholds: every fourth is shown


def cell(p) -> str:
    return f"{p.main:.1f} / {p.avg_exit_layer:.2f} / {p.ece:.1f} / {p.consistency:.1f}"


def method_table(runs, method: str) -> str:
    by_task = {r.config.task: r for r in runs if r.config.method == method}
    missing = [t for t in EVALUATED if t not in by_task]
    if missing:
        return f"({method}: no run on {', '.join(missing)} yet)"
    values = [p.sweep_value for p in by_task[TRAINED_ON].points]
    if len(values) > SHOWN_THRESHOLDS:
        step = (len(values) - 1) // (SHOWN_THRESHOLDS - 1)
        values = values[::step]
    rows = []
    for v in values:
        first = by_task[TRAINED_ON].points[0]
        row = {"setting": f"{SETTING.get(first.sweep_param, first.sweep_param)} {v:.3g}"}
        for t in EVALUATED:
            [p] = [p for p in by_task[t].points if p.sweep_value == v]
            row[f"{get_task(t).title}{' (in domain)' if t == TRAINED_ON else ''}"] = cell(p)
        rows.append(row)
    return pd.DataFrame(rows).to_markdown(index=False, colalign=["left"] + ["right"] * 3)


def main() -> None:
    runs = load_runs([RUNS]) if RUNS.is_dir() else []
    if not runs:
        sys.exit(f"no runs under {RUNS}: run the domain-shift commands in docs/results.md")
    fill_quality(runs)
    n = {t: len({r.points[0].n_samples for r in runs if r.config.task == t}) and
         next(r.points[0].n_samples for r in runs if r.config.task == t)
         for t in EVALUATED if any(r.config.task == t for r in runs)}
    parts = [START, "", "Each cell: accuracy (%) / average exit layer / ECE (%) / consistency "
             "with the model's own full-depth prediction (%), on "
             + ", ".join(f"{get_task(t).title} ({k} dev samples)" for t, k in n.items())
             + f". Trained on {get_task(TRAINED_ON).title} only, seed 1."]
    for method in ("deebert", "pabee"):
        parts += ["", f"**{method}**", "", method_table(runs, method)]
    parts += ["", END]
    block = "\n".join(parts)
    write_block(DOC, START, END, block, heading="## Domain shift")
    print(block)


if __name__ == "__main__":
    main()
