"""Does eebench's timer agree with the wall clock? CUDA events against a synchronised stopwatch.

eebench times a block with `Stopwatch` (eebench.measure.timing): on CUDA, events recorded around
the block and synchronised at its end; on CPU, time.perf_counter. This times the same full-model
forward passes (every exit) both ways at once, the wall clock outside the Stopwatch's block and
read after its synchronise, and checks that their medians agree within `--tolerance` (relative)
plus `--slack-ms`. On CUDA it also shows the wall time of the same forward without a synchronise:
the kernel launches only, which is what timing a GPU without events or a synchronise would
report. On CPU both clocks are perf_counter, so the check is of the harness itself.

    python benchmarks/gpu_timing.py --device cuda --json timing.json
    python benchmarks/gpu_timing.py --device cpu --model DIR --batch-sizes 1,8 --iters 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="minilm-l6")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: all)")
    p.add_argument("--batch-sizes", default="1,32")
    p.add_argument("--seq-length", type=int, default=64)
    p.add_argument("--iters", type=int, default=50, help="timed forward passes per batch size")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--tolerance", type=float, default=0.25,
                   help="largest |event - wall| / wall of the medians")
    p.add_argument("--slack-ms", type=float, default=0.1, help="absolute allowance on top")
    p.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = p.parse_args()

    import torch

    from eebench.measure.timing import Stopwatch, device_description
    from eebench.methods.base import get_method
    from eebench.models.build import build_model

    if args.threads:
        torch.set_num_threads(args.threads)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    cuda = torch.device(device).type == "cuda"

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    torch.manual_seed(0)
    model = build_model(args.model, get_method("pabee"), 2).to(device).eval()
    vocab = model.config.vocab_size
    rows, ok = [], True
    print(f"timer check on {device_description(device)}, {args.model}, {args.seq_length} tokens, "
          f"median of {args.iters} forward passes after {args.warmup} warm-up")
    print(f"{'batch':>5} {'timer ms':>9} {'wall ms':>9} {'diff':>7} {'launch ms':>10}  verdict")
    for bs in (int(b) for b in args.batch_sizes.split(",")):
        ids = torch.randint(5, vocab, (bs, args.seq_length), device=device)
        mask = torch.ones_like(ids)
        watch, wall, launch = Stopwatch(device), [], []
        with torch.inference_mode():
            for i in range(args.warmup + args.iters):
                sync()
                t0 = time.perf_counter()
                with watch.time():
                    model(ids, mask)
                sync()  # the Stopwatch synchronised its end event already; this is cheap
                t1 = time.perf_counter()
                model(ids, mask)  # the same pass again, not synchronised: launches only
                t2 = time.perf_counter()
                sync()
                if i >= args.warmup:
                    wall.append((t1 - t0) * 1e3)
                    launch.append((t2 - t1) * 1e3)
        timer = statistics.median(watch.raw_ms[args.warmup:])
        wall_ms = statistics.median(wall)
        diff = abs(timer - wall_ms)
        agree = (diff <= args.tolerance * wall_ms + args.slack_ms
                 and timer <= wall_ms + args.slack_ms)  # events lie inside the wall interval
        ok &= agree
        launch_ms = statistics.median(launch) if cuda else None
        rows.append({"batch_size": bs, "timer_ms": timer, "wall_ms": wall_ms,
                     "launch_only_ms": launch_ms, "agree": agree,
                     "timer_raw_ms": watch.raw_ms[args.warmup:], "wall_raw_ms": wall})
        shown = f"{launch_ms:10.3f}" if launch_ms is not None else f"{'-':>10}"
        print(f"{bs:5d} {timer:9.3f} {wall_ms:9.3f} {diff / wall_ms:6.1%} {shown}  "
              f"{'agree' if agree else 'DISAGREE'}")
    if args.json:
        args.json.write_text(json.dumps({
            "schema_version": 1, "device": device_description(device), "model": args.model,
            "seq_length": args.seq_length, "iters": args.iters, "tolerance": args.tolerance,
            "slack_ms": args.slack_ms, "timer": "cuda events" if cuda else "perf_counter",
            "results": rows}, indent=1))
    if not ok:
        raise SystemExit("the timer and the wall clock disagree beyond the tolerance")
    print("the timer agrees with the synchronised wall clock"
          + ("; without a synchronise the wall clock sees only the launches" if cuda else ""))


if __name__ == "__main__":
    main()
