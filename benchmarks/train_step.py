"""How fast is one training step, and what do bf16 autocast and the fused AdamW buy?

Times one MiniLM-L6 training step (forward over every exit, PABEE's weighted loss, backward,
gradient clipping, AdamW) on real GLUE SST-2 rows, side by side in one run, for:

- fp32 with the per-tensor AdamW loop (what training did before),
- fp32 with the fused AdamW (what `eebench train` does now),
- bf16 autocast with the fused AdamW (`--precision bf16`),

each on random batches and on length-grouped batches (`--group-by-length`). Prints the median step
time of each and its ratio to the first. `--settings` and `--batches` pick a subset; the setting
`auto` trains in the precision `--precision auto` resolves to on the device (bf16 where it is
native, else fp32). On a CPU without native bf16 (AVX2 only) a bf16 step takes minutes, so compare
fewer steps there. `--device cuda` times the step on the GPU (synchronised), e.g.

    python benchmarks/train_step.py --data-dir ../shared/data --threads 1
    python benchmarks/train_step.py --threads 1 --settings fp32,bf16 --batches random --steps 3
    python benchmarks/train_step.py --threads 1 --model mpnet-base --settings fp32 --batches random
    python benchmarks/train_step.py --device cuda --settings fp32,auto
"""

from __future__ import annotations

import time

from _common import base_parser, hardware, median

from eebench.measure.env import cpu_bf16, cpu_capability


def main() -> None:
    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=12, help="timed steps per setting")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first, per setting")
    p.add_argument("--settings", default="loop,fp32,bf16",
                   help="comma-separated: loop (fp32, AdamW loop), fp32, bf16 and auto (fused "
                   "AdamW; auto: the device's `--precision auto`)")
    p.add_argument("--batches", choices=("random", "grouped", "both"), default="both")
    args = p.parse_args()

    import torch

    from eebench.data.batching import collate, encode, epoch_batches
    from eebench.methods.base import get_method
    from eebench.models.backbones import load_tokenizer
    from eebench.models.build import build_model
    from eebench.tasks.catalog import get_task
    from eebench.tasks.loaders import load_split
    from eebench.train.loop import optimizer_groups
    from eebench.train.precision import resolve

    if args.threads:
        torch.set_num_threads(args.threads)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    kind = torch.device(device).type

    def sync() -> None:
        if kind == "cuda":
            torch.cuda.synchronize(device)

    spec = get_task(args.task)
    method = get_method("pabee")
    stage = method.stages()[0]
    rows = load_split(spec, "train", args.data_dir).take(args.batch_size * 50, seed=0)
    data = encode(rows, load_tokenizer(args.model), args.max_seq_length, spec.is_regression)

    known = {"loop": ("fp32, AdamW loop", "fp32", False),
             "fp32": ("fp32, fused AdamW", "fp32", True),
             "bf16": ("bf16, fused AdamW", "bf16", True)}
    auto = resolve("auto", device)
    known["auto"] = (f"auto ({auto}), fused AdamW", auto, True)
    wanted = [s.strip() for s in args.settings.split(",") if s.strip()]
    if not wanted or any(s not in known for s in wanted):
        p.error(f"--settings: choose from {', '.join(known)}")
    settings = [known[s] for s in wanted]
    kinds = {"random": (False,), "grouped": (True,), "both": (False, True)}[args.batches]
    native = ", ".join(cpu_bf16()) or "no native bf16"
    print(f"{hardware()}; CPU capability {cpu_capability()} ({native}); device {device}")
    print(f"{args.model}, {args.task}, batch {args.batch_size}, max {args.max_seq_length} tokens, "
          f"median of {args.steps} steps after {args.warmup} warm-up")
    print(f"{'setting':<26} {'batches':<9} {'median s/step':>14} {'ratio':>7}")
    base = None
    for grouped in kinds:
        batches = epoch_batches(data.lengths, args.batch_size, seed=0, epoch=0,
                                group_by_length=grouped)[:args.steps + args.warmup]
        tokens = sum(len(b) * max(data.lengths[i] for i in b) for b in batches[args.warmup:])
        for name, precision, fused in settings:
            torch.manual_seed(0)
            model = build_model(args.model, method, spec.num_labels).to(device)
            model.train()
            params = [q for q in model.parameters() if q.requires_grad]
            opt = torch.optim.AdamW(optimizer_groups(model, params, 0.01), lr=1e-5,
                                    fused=fused or None)
            times = []
            for i, idx in enumerate(batches):
                batch = collate(data, idx, device)
                sync()
                t0 = time.perf_counter()
                with torch.autocast(kind, dtype=torch.bfloat16, enabled=precision == "bf16"):
                    logits = model(input_ids=batch["input_ids"],
                                   attention_mask=batch["attention_mask"]).float()
                loss = method.loss(list(logits), batch["labels"], stage, spec.is_regression)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, 1.0)
                opt.step()
                opt.zero_grad(set_to_none=True)
                sync()
                if i >= args.warmup:
                    times.append(time.perf_counter() - t0)
            m = median(times)
            base = base or m
            label = "grouped" if grouped else "random"
            print(f"{name:<26} {label:<9} {m:>14.3f} {base / m:>6.2f}x"
                  f"   ({tokens / len(times):.0f} padded tokens per batch; "
                  f"steps {', '.join(f'{t:.2f}' for t in times)} s)", flush=True)


if __name__ == "__main__":
    main()
