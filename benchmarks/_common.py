"""Shared set-up for the benchmark scripts: a fine-tuned model and its encoded eval data."""

from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def base_parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--data-dir", type=Path,
                   default=Path(os.environ.get("EEBENCH_DATA_DIR", REPO.parent / "shared/data")))
    p.add_argument("--task", default="sst2")
    p.add_argument("--model", default="minilm-l6")
    p.add_argument("--max-train-samples", type=int, default=2000)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--max-seq-length", type=int, default=64)
    p.add_argument("--eval-samples", type=int, default=None, help="default: the whole dev split")
    p.add_argument("--checkpoints", type=Path, default=REPO / "checkpoints")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: all)")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    return p


def parse_with_clock(p: argparse.ArgumentParser) -> argparse.Namespace:
    """`p`'s arguments with `--clock`: wall time, or this process's CPU time (checked: one torch
    thread on the CPU)."""
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="wall: elapsed time; cpu: this process's CPU time (one torch thread, "
                   "CPU only): the same work whatever else the machine runs")
    args = p.parse_args()
    if args.clock == "cpu" and (args.threads != 1 or (args.device or "cpu") != "cpu"):
        p.error("--clock cpu measures one torch thread on the CPU: add --threads 1 --device cpu")
    return args


def setup(args, method_name: str):
    """(model, encoded eval data, spec, method) for a fine-tuned `method_name` on args.task."""
    import torch

    from eebench.data.batching import encode
    from eebench.methods.base import get_method
    from eebench.tasks.catalog import get_task
    from eebench.tasks.loaders import load_split
    from eebench.train.checkpoint import load_trained
    from eebench.train.config import TrainConfig
    from eebench.train.loop import train

    if args.threads:
        torch.set_num_threads(args.threads)
    spec = get_task(args.task)
    method = get_method(method_name)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    # the device is not part of the checkpoint's name: a model trained on one loads on the other
    cfg = TrainConfig(epochs=args.epochs, max_seq_length=args.max_seq_length,
                      max_train_samples=args.max_train_samples, seed=42, device=device)
    train_ex = load_split(spec, "train", args.data_dir)
    dev = load_split(spec, "dev", args.data_dir)
    path = train(method, spec, args.model, train_ex, dev, cfg, args.checkpoints)
    model, tokenizer, _ = load_trained(path)
    model.to(device).eval()
    if args.eval_samples:
        dev = dev.take(args.eval_samples, seed=0)
    enc = encode(dev, tokenizer, args.max_seq_length, spec.is_regression)
    return model, enc, spec, method, device


def hardware() -> str:
    """The machine in words, for the recorded figures."""
    import torch

    from eebench.measure.env import environment

    env = environment()
    cpu = f"{env['cpu']} ({env['cpu_cores']} cores, {torch.get_num_threads()} torch threads)"
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return (f"{gpu}, host {cpu}" if gpu else cpu) + f"; torch {torch.__version__}"


def median(xs) -> float:
    return statistics.median(xs)
