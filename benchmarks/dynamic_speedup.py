"""Does real dynamic inference deliver the speed-up its FLOPs promise?

For a fine-tuned early-exit model and a few operating points, this measures, side by side in one
run, the wall time of the full model (all layers, last head only) and of real dynamic inference
(stop at the exit), at batch size 1 and batched (exited samples leave the batch), and divides the
measured speed-up by the FLOPs speed-up. 1.0 means the FLOPs saving turns fully into time.

    python benchmarks/dynamic_speedup.py --data-dir ../shared/data     # SST-2, MiniLM-L6, PABEE
"""

from __future__ import annotations

import time

import numpy as np
from _common import base_parser, hardware, median, parse_with_clock, setup


def main() -> None:
    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--method", default="pabee")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--time-samples", type=int, default=256)
    p.add_argument("--points", default=None, help="sweep values, comma-separated "
                   "(default: pabee patience 1,2,3; deebert thresholds 0.2,0.4,0.6)")
    args = parse_with_clock(p)

    from eebench.data.batching import collate
    from eebench.measure.cost_table import build_cost_table
    from eebench.measure.timing import Stopwatch
    from eebench.methods.derived import sweep_param
    from eebench.models.outputs import collect_exit_logits
    from eebench.rules.base import FixedRule
    from eebench.rules.engine import dynamic_batch, simulate

    model, enc, spec, method, device = setup(args, args.method)
    default = {"pabee": "1,2,3", "deebert": "0.2,0.4,0.6"}.get(args.method, "1")
    points = [float(v) for v in (args.points or default).split(",")]
    rng = np.random.default_rng(0)
    subset = np.sort(rng.choice(len(enc), size=min(args.time_samples, len(enc)), replace=False))
    sub = enc.__class__(**{**enc.__dict__, **{
        k: [getattr(enc, k)[i] for i in subset]
        for k in ("input_ids", "token_type_ids", "lengths", "labels", "ids")
        if getattr(enc, k) is not None}})
    out = collect_exit_logits(model, (collate(sub, list(range(i, min(i + 64, len(sub)))), device)
                                      for i in range(0, len(sub), 64)))
    table = build_cost_table(model, int(out.lengths.max()))
    full_flops = table.per_sample_flops(np.full(len(sub), model.num_exits - 1), out.lengths)
    # the full model evaluates only its last head: take the other heads' cost out
    full_flops = full_flops - table.head[:-1, out.lengths].sum(0)

    def batches(bs):
        return [collate(sub, list(range(i, min(i + bs, len(sub)))), device)
                for i in range(0, len(sub), bs)]

    def wall(rule, bs, full):
        data = batches(bs)
        for b in data[:3]:
            dynamic_batch(model, rule, b, spec.is_regression, full=full)
        watch = Stopwatch(device, clock=time.process_time if args.clock == "cpu" else
                          time.perf_counter)
        for b in data:
            with watch.time():
                dynamic_batch(model, rule, b, spec.is_regression, full=full)
        return sum(watch.raw_ms) / 1e3

    print(f"hardware: {hardware()}")
    print(f"task {spec.name} dev, {len(sub)} timed samples, model {args.model}, "
          f"method {args.method}, median of {args.repeats} runs, {args.clock} clock")
    header = (f"{'point':>14} {'avg layer':>9} {'FLOPs x':>8} | {'bs=1 wall x':>11} "
              f"{'ratio':>6} | {'bs=' + str(args.batch_size) + ' wall x':>12} {'ratio':>6}")
    print(header)
    for value in points:
        rule = method.exit_rule(value, spec.is_regression)
        dec = simulate(rule, out.logits, spec.is_regression)
        dyn_flops = table.per_sample_flops(dec.exit_index, out.lengths)
        flops_x = full_flops.mean() / dyn_flops.mean()
        ratios = {}
        for bs in (1, args.batch_size):
            speedups = []
            for _ in range(args.repeats):
                t_full = wall(FixedRule(exit=False), bs, True)
                t_dyn = wall(method.exit_rule(value, spec.is_regression), bs, False)
                speedups.append(t_full / t_dyn)
            ratios[bs] = median(speedups)
        avg = float(np.asarray(model.exit_layers)[dec.exit_index].mean())
        print(f"{sweep_param(method) + '=' + format(value, 'g'):>14} {avg:9.2f} {flops_x:8.2f} | "
              f"{ratios[1]:11.2f} {ratios[1] / flops_x:6.2f} | {ratios[args.batch_size]:12.2f} "
              f"{ratios[args.batch_size] / flops_x:6.2f}")
    print("ratio = measured wall-time speed-up / FLOPs speed-up; the batched ratio is dynamic "
          "throughput / (full-model throughput x FLOPs ratio). Targets: >= 0.85 at bs=1 on CPU, "
          ">= 0.8 batched.")


if __name__ == "__main__":
    main()
