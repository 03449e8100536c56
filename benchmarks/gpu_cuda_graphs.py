"""Do CUDA graphs pay for the batch-size-1 per-layer path?

At batch size 1 a GPU mostly waits for kernel launches: a MiniLM layer is a few dozen small
kernels. Real early exit cannot put the whole model in one graph, because after each exit the host
reads the decision (one synchronise per exit, eebench.rules.engine). What it can do is replay one
captured graph per step: the embeddings, then each layer with the exit head after it. This captures
those graphs (torch.cuda.graph) for one sequence length and times one sample walking every layer,
reading each exit's logits on the host as the exit decision does, eagerly and by graph replay, side
by side; checks that both give the same logits; and says whether the graphs pay (speed-up of at
least `--pays`). A real implementation needs one set of graphs per sequence length (or length
bucket); `--seq-lengths` times a few.

Needs CUDA; elsewhere it runs the eager path once (to check it) and prints "skipped: no CUDA".

    python benchmarks/gpu_cuda_graphs.py --device cuda --json cuda_graphs.json
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
    p.add_argument("--method", default="pabee", help="whose exit heads (one after every layer)")
    p.add_argument("--device", default=None, help="cuda (default when available) or cpu")
    p.add_argument("--seq-lengths", default="16,64")
    p.add_argument("--iters", type=int, default=200, help="timed samples per length and mode")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--pays", type=float, default=1.2, help="the speed-up that counts as paying")
    p.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = p.parse_args()

    import torch

    from eebench.measure.timing import device_description
    from eebench.methods.base import get_method
    from eebench.models.build import build_model

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    cuda = torch.device(device).type == "cuda" and torch.cuda.is_available()
    torch.manual_seed(0)
    model = build_model(args.model, get_method(args.method), 2).to(device).eval()
    exit_after = {layer - 1: j for j, layer in enumerate(model.exit_layers)}  # 0-based layer

    def embed(ids, mask):
        hidden, inputs = model.embed(ids, mask)
        return hidden, inputs

    def step(i, hidden, inputs, mask):
        """Layer i, and the exit head after it if there is one: what bs 1 runs per layer."""
        hidden = model.layer(i, hidden, inputs)
        j = exit_after.get(i)
        return hidden, (model.head(j, hidden, mask) if j is not None else None)

    def eager_path(ids, mask):
        hidden, inputs = embed(ids, mask)
        logits = []
        for i in range(model.num_layers):
            hidden, out = step(i, hidden, inputs, mask)
            if out is not None:
                float(out.max())  # the host reads the exit's outputs: one synchronise per exit
                logits.append(out)
        return torch.stack(logits)

    lengths = [int(n) for n in args.seq_lengths.split(",")]
    vocab = model.config.vocab_size
    if not cuda:
        with torch.no_grad():
            ids = torch.randint(5, vocab, (1, lengths[0]), device=device)
            out = eager_path(ids, torch.ones_like(ids))
        print(f"eager per-layer path checked on {device}: {tuple(out.shape)} exit logits")
        print("skipped: no CUDA")
        return

    def capture(fn):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            result = fn()
        return graph, result

    def captured_path(ids, mask):
        """The graphs of the path for this shape (the embeddings, then each layer and its exit
        head, each reading the previous one's output buffers), and a function that replays them
        on new inputs."""
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm up off the default stream before capturing
            for _ in range(3):
                eager_path(ids, mask)
        torch.cuda.current_stream().wait_stream(side)
        static_ids, static_mask = ids.clone(), mask.clone()
        g, (hidden, inputs) = capture(lambda: embed(static_ids, static_mask))
        graphs = [(g, None)]
        for i in range(model.num_layers):
            g, (hidden, out) = capture(lambda i=i, h=hidden: step(i, h, inputs, static_mask))
            graphs.append((g, out))

        def replay(ids, mask):
            static_ids.copy_(ids)
            static_mask.copy_(mask)
            logits = []
            for g, out in graphs:
                g.replay()
                if out is not None:
                    float(out.max())  # the same host read per exit
                    logits.append(out.clone())
            return torch.stack(logits)

        return replay

    rows = []
    print(f"bs-1 per-layer path on {device_description(device)}: {args.model}, {args.method} "
          f"({model.num_layers} layers, {model.num_exits} exits), median of {args.iters} samples")
    print(f"{'tokens':>6} {'eager ms':>9} {'graphs ms':>10} {'speed-up':>9} {'max diff':>9}"
          "  verdict")
    with torch.no_grad():
        for n in lengths:
            ids = torch.randint(5, vocab, (1, n), device=device)
            mask = torch.ones_like(ids)
            graph_path = captured_path(ids, mask)
            diff = float((eager_path(ids, mask) - graph_path(ids, mask)).abs().max())
            times = {"eager": [], "graphs": []}
            for k in range(args.warmup + args.iters):
                sample = torch.randint(5, vocab, (1, n), device=device)
                for mode, fn in (("eager", eager_path), ("graphs", graph_path)):
                    torch.cuda.synchronize(device)
                    t0 = time.perf_counter()
                    fn(sample, mask)
                    torch.cuda.synchronize(device)
                    if k >= args.warmup:
                        times[mode].append((time.perf_counter() - t0) * 1e3)
            eager_ms, graph_ms = (statistics.median(times[m]) for m in ("eager", "graphs"))
            speedup = eager_ms / graph_ms
            pays = speedup >= args.pays and diff <= 1e-3
            rows.append({"seq_length": n, "eager_ms": eager_ms, "graphs_ms": graph_ms,
                         "speedup": speedup, "max_abs_diff": diff, "pays": pays,
                         "eager_raw_ms": times["eager"], "graphs_raw_ms": times["graphs"]})
            print(f"{n:6d} {eager_ms:9.3f} {graph_ms:10.3f} {speedup:8.2f}x {diff:9.1e}  "
                  f"{'pays' if pays else 'does not pay'}")
    if args.json:
        args.json.write_text(json.dumps({
            "schema_version": 1, "device": device_description(device), "model": args.model,
            "method": args.method, "num_layers": model.num_layers, "iters": args.iters,
            "pays_at": args.pays, "results": rows}, indent=1))
    if any(r["max_abs_diff"] > 1e-3 for r in rows):
        raise SystemExit("graph replay and eager steps give different logits")
    print(f"CUDA graphs {'pay' if all(r['pays'] for r in rows) else 'do not pay everywhere'} "
          f"for the bs-1 per-layer path (threshold {args.pays}x)")


if __name__ == "__main__":
    main()
