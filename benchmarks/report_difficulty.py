"""Input difficulty and thresholds with a guarantee on the committed benchmark runs.

Runs `eebench analyze` (Spearman's rho of the exit layer at the point nearest half the full
model's FLOPs) and `eebench select` (consistency >= 0.95 with confidence 0.95, split seed 0) on
the DeeBERT and PABEE runs of seed 1 on SST-2, ELUE SST-2 and SciTail in
`benchmarks/results/elue-minilm`, prints the tables, and writes them into docs/results.md between
its difficulty markers. With the GLUE/ELUE data (--data-dir, $EEBENCH_DATA_DIR, else
../shared/data) it also lists the easiest and hardest SST-2 dev sentences of DeeBERT.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _common import publish_block  # noqa: E402

from eebench.plot.style import task_title  # noqa: E402
from eebench.run import artifacts as R  # noqa: E402
from eebench.score.difficulty import analyze, attach_texts, load_samples  # noqa: E402
from eebench.score.select import select  # noqa: E402
from eebench.tasks.loaders import load_split  # noqa: E402

RUNS = ROOT / "benchmarks" / "results" / "elue-minilm"
DOC = ROOT / "docs" / "results.md"
START, END = "<!-- difficulty:start -->", "<!-- difficulty:end -->"
TASKS = ("sst2", "elue-sst2", "elue-scitail")
METHODS = ("deebert", "pabee")
SEED = 1
CONSISTENCY, DELTA, SPLIT_SEED = 0.95, 0.05, 0
EXAMPLES = ("deebert", "sst2", 3)  # whose easiest and hardest samples are listed, how many


def run_of(method: str, task: str) -> Path:
    for path in sorted((RUNS / "minilm-l6" / method / task).glob(f"*/{R.SUMMARY_FILE}")):
        if R.read_run(path.parent).config.seed == SEED:
            return path.parent
    sys.exit(f"no finished {method} run of {task}, seed {SEED}, under {RUNS}")


def fmt_rho(c) -> str:
    if c.rho is None:
        return "-"
    stars = "" if c.p_value < 1e-3 else f" (p = {c.p_value:.2g})"
    return f"{c.rho:+.2f}{stars}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=None)
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/results.md")
    args = ap.parse_args()
    data_dir = args.data_dir or Path(os.environ.get("EEBENCH_DATA_DIR")
                                     or ROOT.parent / "shared" / "data")

    rho_rows, select_rows, examples = [], [], None
    for task in TASKS:
        for method in METHODS:
            samples = load_samples(run_of(method, task))
            a = analyze(samples, top=EXAMPLES[2])
            rho = {c.quantity: c for c in a.correlations}
            rho_rows.append({
                "task": task_title(task), "method": method,
                "point": f"{a.sweep_param} = {a.sweep_value:.3g}",
                "MFLOPs (full)": f"{a.mean_mflops:.0f} ({a.full_mflops:.0f})",
                "avg layer": f"{a.avg_exit_layer:.2f}",
                "ρ confidence": fmt_rho(rho["first_exit_confidence"]),
                "ρ length": fmt_rho(rho["length"]), "ρ agreement": fmt_rho(rho["agreement"]),
                "ρ correct": fmt_rho(rho["correct"])})
            if (method, task) == EXAMPLES[:2]:
                examples = a
                if data_dir.is_dir():
                    ex = load_split(task, samples.run.config.split, data_dir)
                    attach_texts(a, dict(zip(ex.ids, ex.texts, strict=True)))
            s = select(samples, CONSISTENCY, DELTA, SPLIT_SEED)
            full = s.full["test"]
            c = s.chosen
            select_rows.append({
                "task": task_title(task), "method": method,
                "chosen": "none" if c is None else f"{s.sweep_param} = {c['sweep_value']:.3g}",
                "tested": f"{len(s.steps)} ({sum(x.passed for x in s.steps)} passed)",
                "MFLOPs (full)": "-" if c is None
                else f"{c['mean_mflops']:.0f} ({c['full_mflops']:.0f})",
                "test consistency": "-" if c is None else f"{c['test']['consistency']:.3f}",
                "test accuracy (full)": "-" if c is None
                else f"{c['test']['main']:.1f} ({full['main']:.1f})",
                "test avg layer": "-" if c is None else f"{c['test']['avg_exit_layer']:.2f}"})

    lines = ["",
             "Built by `python benchmarks/report_difficulty.py` from the DeeBERT and PABEE runs "
             f"of seed {SEED} (`eebench analyze RUN` and `eebench select RUN --consistency "
             f"{CONSISTENCY} --delta {DELTA} --seed {SPLIT_SEED}` on each).", "",
             "**Spearman's ρ with the exit layer** at the point nearest half the full model's "
             "FLOPs (p < 0.001 unless given):", "",
             pd.DataFrame(rho_rows).to_markdown(index=False), "",
             f"**Selected thresholds**: consistency with the full model ≥ {CONSISTENCY} with "
             f"confidence {1 - DELTA:g}, chosen on a calibration half, realised on the other "
             "half:", "",
             pd.DataFrame(select_rows).to_markdown(index=False), ""]
    if examples is not None:
        rows = [{"": name, "id": it["id"], "layer": it["exit_layer"],
                 "first-exit conf.": f"{it['first_exit_confidence']:.3f}",
                 "label / pred.": f"{it['label']} / {it['prediction']}",
                 "text": it.get("text") or "(no data: ids only)"}
                for name, items in (("easiest", examples.easiest), ("hardest", examples.hardest))
                for it in items]
        lines += [f"**Easiest and hardest {task_title(examples.task)} dev sentences** "
                  f"({examples.method}, {examples.sweep_param} = {examples.sweep_value:.3g}):",
                  "", pd.DataFrame(rows).to_markdown(index=False), ""]
    publish_block(DOC, START, END, lines, write=not args.no_write)


if __name__ == "__main__":
    main()
