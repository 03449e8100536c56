"""Does token-level early exit (TOKEE) deliver the speed-up its FLOPs promise?

For a trained token model (a checkpoint of `eebench run` on conll2003 or wnut17), this measures,
side by side in one run, the wall time of the full model (every layer on every token, the last
head only) and of TOKEE live (each layer computes its live tokens only, halted words' states
copied, finished sentences leave the batch: eebench.rules.token_halting), at batch size 1 and
batched, and divides the measured speed-up by the FLOPs speed-up (per token,
eebench.measure.token_flops). 1.0 means the FLOPs saving turns fully into time.

    python benchmarks/token_speedup.py --checkpoint checkpoints/minilm-l6/sentee/conll2003/<key>
    python benchmarks/token_speedup.py --checkpoint ... --threads 1 --clock cpu --points 0.1,0.2
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from _common import base_parser, hardware, median, parse_with_clock


def main() -> None:
    p = base_parser(__doc__.splitlines()[0])
    p.set_defaults(task="conll2003", max_seq_length=128)
    p.add_argument("--checkpoint", type=Path, required=True, help="a token model's checkpoint")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--time-samples", type=int, default=256)
    p.add_argument("--points", default="0.05,0.1,0.2,0.3", help="TOKEE thresholds")
    p.add_argument("--window", type=int, default=5)
    args = parse_with_clock(p)

    import torch

    from eebench.data.batching import collate
    from eebench.data.tokens import encode_words
    from eebench.measure.cost_table import build_cost_table
    from eebench.measure.timing import Stopwatch
    from eebench.measure.token_flops import build_live_costs
    from eebench.rules.catalog import ModelFacts, get_rule
    from eebench.rules.token_halting import halting_batch, halting_inference
    from eebench.tasks.loaders import load_split
    from eebench.train.checkpoint import load_trained

    if args.threads:
        torch.set_num_threads(args.threads)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    model, tokenizer, _ = load_trained(args.checkpoint)
    model.to(device).eval()
    if model.unit != "token":
        p.error(f"{args.checkpoint} is not a token model")
    dev = load_split(args.task, "dev", args.data_dir)
    dev = dev.take(min(args.time_samples, len(dev)), seed=0)
    enc = encode_words(dev, tokenizer, args.max_seq_length)
    n, width = len(enc), max(enc.lengths)
    lengths = np.asarray(enc.lengths)
    table = build_cost_table(model, width)
    live_costs = build_live_costs(model, "mac2-matmul")
    # the full model: every layer on every token, the last head only
    full_flops = (table.embedding[lengths] + table.layer[:, lengths].sum(0)
                  + table.head[-1, lengths])
    facts = ModelFacts(False, model.num_labels, num_exits=model.num_exits,
                       rule_settings={"window": args.window})
    kind = get_rule("tokee")

    def counting(batch):
        rows, w = batch["index"].tolist(), batch["input_ids"].shape[1]
        return enc.counting_mask(rows, w), enc.piece_owner(rows, w)

    def batches(bs):
        order = np.argsort(lengths, kind="stable")  # length-grouped, as eval batches are
        return [collate(enc, order[i:i + bs].tolist(), device) for i in range(0, n, bs)]

    clock = time.process_time if args.clock == "cpu" else time.perf_counter

    @torch.inference_mode()
    def full(b):
        hidden, inputs = model.embed(b["input_ids"], b["attention_mask"], b.get("token_type_ids"))
        for i in range(model.exit_layers[-1]):
            hidden = model.layer(i, hidden, inputs)
        return model.head(model.num_exits - 1, hidden, b["attention_mask"])

    def wall(step, bs):
        data = batches(bs)
        for b in data[:3]:
            step(b)
        watch = Stopwatch(device, clock=clock)
        for b in data:
            with watch.time():
                step(b)
        return sum(watch.raw_ms) / 1e3

    print(f"hardware: {hardware()}")
    print(f"task {args.task} dev, {n} timed sentences, checkpoint {args.checkpoint}, TOKEE window "
          f"{args.window}, median of {args.repeats} runs, {args.clock} clock")
    print(f"{'threshold':>9} {'avg layer':>9} {'live pieces':>11} {'FLOPs x':>8} | "
          f"{'bs=1 wall x':>11} {'ratio':>6} | {'bs=' + str(args.batch_size) + ' wall x':>12} "
          f"{'ratio':>6}")
    for value in (float(v) for v in args.points.split(",")):
        rule = kind.build(value, facts)
        run = halting_inference(model, rule, batches(64), n, width, counting)
        flops = live_costs.sentence_flops(table, run.decisions.exit_index.numpy(), lengths,
                                          run.live_pieces)
        flops_x = full_flops.mean() / flops.mean()
        live_share = run.live_pieces.sum() / (lengths.sum() * run.live_pieces.shape[1])
        ratios = {}
        for bs in (1, args.batch_size):
            speedups = []
            for _ in range(args.repeats):
                t_full = wall(full, bs)
                t_dyn = wall(lambda b, r=rule: halting_batch(model, r, b, *counting(b), live=True),
                             bs)
                speedups.append(t_full / t_dyn)
            ratios[bs] = median(speedups)
        layers = np.asarray(model.exit_layers)[run.decisions.exit_index.numpy()]
        print(f"{value:9g} {layers.mean():9.2f} {live_share:11.1%} {flops_x:8.2f} | "
              f"{ratios[1]:11.2f} {ratios[1] / flops_x:6.2f} | {ratios[args.batch_size]:12.2f} "
              f"{ratios[args.batch_size] / flops_x:6.2f}")
    print("ratio = measured wall-time speed-up / FLOPs speed-up (FLOPs counted per token: each "
          "layer at its live pieces, every head up to the sentence's exit).")


if __name__ == "__main__":
    main()
