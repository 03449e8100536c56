"""One-pass exit sweep vs re-running the dataset at batch size 1 for every threshold.

The original DeeBERT evaluation runs the whole dev set once per entropy threshold, one sample at a
time, stopping at the exit. eebench runs the model once (batched), keeps every exit's logits and
replays the exit rule for each threshold. This script times both on the same fine-tuned model and
checks that they make the same decisions.

    python benchmarks/sweep_vs_rerun.py --data-dir ../shared/data   # SST-2 dev, MiniLM-L6, DeeBERT
"""

from __future__ import annotations

import time

import numpy as np
from _common import base_parser, hardware, median, setup


def main() -> None:
    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--thresholds", type=int, default=13, help="points in the entropy sweep")
    p.add_argument("--batch-size", type=int, default=64, help="batch size of the one pass")
    args = p.parse_args()

    import torch

    from eebench.data.batching import collate, eval_batches
    from eebench.models.outputs import collect_exit_logits
    from eebench.rules.engine import compare, dynamic_inference, simulate

    model, enc, spec, method, device = setup(args, "deebert")
    top = float(np.log(spec.num_labels))
    thresholds = [top * k / (args.thresholds - 1) for k in range(args.thresholds)]
    n = len(enc)

    def one_pass():
        out = collect_exit_logits(model, eval_batches(enc, args.batch_size, sort_by_length=True,
                                                      device=device))
        return [simulate(method.exit_rule(t, False), out.logits, False) for t in thresholds]

    def rerun():
        decisions = []
        for t in thresholds:
            batches = (collate(enc, [i], device) for i in range(n))
            decisions.append(dynamic_inference(model, method.exit_rule(t, False), batches, n,
                                               False))
        return decisions

    def timed(fn):
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        result = fn()
        if device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t0, result

    one_pass()  # warm-up (allocator, kernels)
    fast, slow = [], []
    for r in range(args.repeats):
        t_fast, sim = timed(one_pass)
        t_slow, real = timed(rerun)
        fast.append(t_fast)
        slow.append(t_slow)
        if r == 0:
            checks = [compare(s, d) for s, d in zip(sim, real)]
            disagree = sum(c.disagreements for c in checks)
            unexplained = sum(c.unexplained for c in checks)
            avg_layers = [float(np.asarray(model.exit_layers)[s.exit_index].mean()) for s in sim]
    print(f"hardware: {hardware()}")
    print(f"task {spec.name} dev, {n} samples, model {args.model}, method deebert, "
          f"{len(thresholds)} entropy thresholds 0..ln({spec.num_labels}), "
          f"avg exit layer {min(avg_layers):.2f}..{max(avg_layers):.2f}")
    print(f"one pass (batch {args.batch_size}) + {len(thresholds)} simulations: "
          f"median {median(fast):.2f} s over {args.repeats} runs {[round(x, 2) for x in fast]}")
    print(f"re-run at batch size 1 per threshold: median {median(slow):.2f} s "
          f"{[round(x, 2) for x in slow]}")
    print(f"same decisions: {n * len(thresholds) - disagree} / {n * len(thresholds)} "
          f"(disagreements {disagree}, of which not near a threshold: {unexplained})")
    print(f"speed-up of the one-pass sweep: {median(slow) / median(fast):.1f}x (target >= 20x)")


if __name__ == "__main__":
    main()
