"""How long each paper setting of benchmarks/literature/ takes on one GPU, by a cost model.

The training steps are the dry run's (`eebench run --config X --dry-run`: ceil(examples / batch)
x epochs, summed over a method's stages and models); a training split that is not on disk counts
with its published size (SIZES). A step costs

    3 x forward FLOPs of a batch padded to max_seq_length / THROUGHPUT + OVERHEAD

(the backward pass costs about twice the forward; every batch padded to the full length, while
eebench pads each batch to its longest row only, so short-sentence tasks cost less; heads-only
stages, which skip the backbone's backward, are counted as full steps). Forward FLOPs are
eebench's convention for a 12-layer, 768-wide encoder (2 FLOPs per multiply-add, per layer
4nd^2 + 2nd*d_ff + 2n^2d; 22.3 GFLOPs per sequence at 128 tokens, docs/flops.md). Each cell
adds EVAL_SECONDS for loading, the dev pass and the timed samples. The rates are assumptions,
not measurements (no GPU was at hand): an A100/H100-class GPU under bf16 autocast (what
precision "auto" picks there) sustaining THROUGHPUT, with OVERHEAD per step for kernel launches,
the optimizer and the data. Change them with the flags.

    python benchmarks/literature/gpu_time.py --data-dir ../shared/data
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Training-split sizes of tasks that may not be on disk (GLUE: Wang et al. 2019; SNLI: Bowman et
# al. 2015, pairs with a gold label, as ELUE uses them).
SIZES = {"qnli": 104_743, "qqp": 363_846, "mnli": 392_702, "elue-snli": 549_367}


def forward_flops(tokens: int, layers: int = 12, d: int = 768, d_ff: int = 3072) -> float:
    per_layer = 4 * tokens * d * d + 2 * tokens * d * d_ff + 2 * tokens * tokens * d
    return 2.0 * per_layer * layers


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", type=Path, default=None)
    p.add_argument("--tflops", type=float, default=60.0, help="sustained TFLOP/s [60]")
    p.add_argument("--overhead-ms", type=float, default=30.0, help="fixed cost per step [30]")
    p.add_argument("--eval-seconds", type=float, default=120.0, help="per cell [120]")
    args = p.parse_args()

    from eebench.run.backends import cells_of, plan
    from eebench.run.backends.plan import train_steps
    from eebench.run.config import load_config
    from eebench.run.grid import expand

    print(f"| config | cells | training steps | GPU hours (at {args.tflops:g} TFLOP/s "
          f"+ {args.overhead_ms:g} ms/step) |")
    print("| --- | ---: | ---: | ---: |")
    for path in sorted(HERE.glob("*.toml")):
        config = load_config(path)
        grid = expand(config)
        cells = cells_of(grid.runs, grid.in_domain)
        rows = plan(cells, Path("/nonexistent"), args.data_dir)
        steps_total, seconds = 0, 0.0
        for cell, row in zip(cells, rows, strict=True):
            train = cell.config.train
            steps = row.train_steps
            if steps is None:  # not on disk: the published size, counted as the dry run counts
                n = min(SIZES[cell.config.trained_on], train.max_train_samples or math.inf)
                steps = train_steps(with_subset(cell, int(n)), None)
            step_flops = 3 * forward_flops(train.max_seq_length) * train.batch_size
            seconds += steps * (step_flops / (args.tflops * 1e12) + args.overhead_ms / 1e3)
            seconds += args.eval_seconds
            steps_total += steps
        print(f"| {path.stem} | {len(cells)} | {steps_total:,} | {seconds / 3600:.1f} |")


def with_subset(cell, n: int):
    """The cell with a training subset of exactly n examples: the dry run counts its steps
    without the split on disk."""
    from dataclasses import replace

    rc = cell.config
    rc = rc.model_copy(update={"train": rc.train.model_copy(update={"max_train_samples": n})})
    return replace(cell, runs=(rc, *cell.runs[1:]))


if __name__ == "__main__":
    main()
