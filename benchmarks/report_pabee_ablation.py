"""PABEE's shallow exits: the paper's training against equal loss weights and a pooler per exit.

Reads the benchmark's PABEE runs (`benchmarks/results/elue-minilm`, the paper's settings) and the
variants' runs (`benchmarks/results/pabee-ablation`, made by `benchmarks/pabee_ablation.sh`) on
the same tasks, seeds and budget; prints each exit's dev metric and the ELUE score against the
shipped static reference, and writes the table into docs/results.md between its markers.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from eebench.plot.data import exit_curve  # noqa: E402
from eebench.plot.style import task_title  # noqa: E402
from eebench.run import artifacts as R  # noqa: E402
from eebench.score import elue_by_seed, load_reference, load_run, raw_points  # noqa: E402
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


def finished(root: Path, methods: tuple[str, ...] = ("pabee",)) -> list[R.Run]:
    return [r for r in (load_run(p.parent) for p in sorted(root.rglob(R.SUMMARY_FILE)))
            if r.config.method in methods] if root.is_dir() else []


def pm(values: list[float]) -> str:
    a = np.asarray(values, dtype=float)
    mean = round(float(a.mean()), 1) + 0.0  # no "-0.0"
    return f"{mean:.1f} ± {a.std(ddof=1):.1f}" if len(a) > 1 else f"{mean:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/results.md")
    args = ap.parse_args()

    variants = finished(VARIANT_RUNS)
    if not variants:
        sys.exit(f"no finished runs under {VARIANT_RUNS}: run benchmarks/pabee_ablation.sh first")
    tasks = sorted({r.config.task for r in variants}, key=lambda t: (t.startswith("elue-"), t))
    seeds = sorted({r.config.seed for r in variants})
    # the paper's settings and the static models: the benchmark's runs of those tasks and seeds
    paper = [r for r in finished(PAPER_RUNS, ("pabee", "static"))
             if r.config.task in tasks and r.config.seed in seeds]
    reference = load_reference(REFERENCE)

    groups: dict[tuple[str, str], list[R.Run]] = defaultdict(list)
    for r in paper + variants:
        name = STATIC if r.config.method == "static" else variant(r.config.method_settings)
        groups[(r.config.task, name)].append(r)

    lines = [START, "",
             f"Built by `python benchmarks/report_pabee_ablation.py` from {len(paper)} + "
             f"{len(variants)} runs (seeds {', '.join(map(str, seeds))}; the benchmark's budget "
             "above). Each exit's dev metric on all samples, mean ± std over seeds; the ELUE "
             "score of the sweep against the shipped static reference (static's own: its seeds' "
             "spread around the seed-averaged curve).", ""]
    for task in tasks:
        spec = get_task(task)
        lines += [f"**{task_title(spec.name)}** ({spec.main_metric})", "",
                  "| training | exit 1 | exit 2 | exit 3 | exit 4 | exit 5 | exit 6 | ELUE score |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        order = {STATIC: 0, variant({}): 1}
        for (t, name), runs in sorted(groups.items(), key=lambda kv: (order.get(kv[0][1], 2),
                                                                      kv[0][1])):
            if t != task:
                continue
            if sorted(r.config.seed for r in runs) != seeds:
                sys.exit(f"{task}, {name}: runs for seeds {[r.config.seed for r in runs]}, "
                         f"expected {seeds}")
            per_exit = np.array([exit_curve(r, spec).values(spec.main_metric) for r in runs])
            elue = elue_by_seed(raw_points(runs), reference)[runs[0].config.method][spec.name]
            cells = [pm(per_exit[:, j].tolist()) for j in range(per_exit.shape[1])]
            lines.append(f"| {name} | {' | '.join(cells)} | {pm(list(elue.values()))} |")
        lines.append("")
    lines.append(END)
    block = "\n".join(lines)
    print(block)
    if not args.no_write:
        doc = DOC.read_text()
        head, sep, rest = doc.partition(START)
        _, sep2, tail = rest.partition(END)
        if not (sep and sep2):
            sys.exit(f"{DOC}: no {START} ... {END} block to replace")
        DOC.write_text(head + block + tail)


if __name__ == "__main__":
    main()
