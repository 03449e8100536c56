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


def setup(args, method_name: str):
    """(model, encoded eval data, spec, method) for a fine-tuned `method_name` on args.task."""
    import torch

    from eebench.data.batching import encode
    from eebench.methods.base import get_method
    from eebench.tasks.loaders import load_split
    from eebench.tasks.spec import get_task
    from eebench.train.checkpoint import load_trained
    from eebench.train.config import TrainConfig
    from eebench.train.loop import train

    if args.threads:
        torch.set_num_threads(args.threads)
    spec = get_task(args.task)
    method = get_method(method_name)
    cfg = TrainConfig(epochs=args.epochs, max_seq_length=args.max_seq_length,
                      max_train_samples=args.max_train_samples, seed=42)
    train_ex = load_split(spec, "train", args.data_dir)
    dev = load_split(spec, "dev", args.data_dir)
    path = train(method, spec, args.model, train_ex, dev, cfg, args.checkpoints)
    model, tokenizer, _ = load_trained(path)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
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


def write_block(path: Path, start: str, end: str, block: str, heading: str | None = None) -> None:
    """Put `block` (which begins with `start` and ends with `end`) in place of the text between
    the markers in the document `path`, atomically; a document without the markers gets the
    block appended under `heading`, or the script stops with one line when there is none."""
    from eebench.io import atomic_write_text

    doc = path.read_text(encoding="utf-8")
    head, sep, rest = doc.partition(start)
    _, sep2, tail = rest.partition(end)
    if not (sep and sep2):
        if heading is None:
            raise SystemExit(f"{path}: no {start} ... {end} block to replace")
        head, tail = doc.rstrip("\n") + f"\n\n{heading}\n\n", "\n"
    atomic_write_text(path, head + block + tail)


def export_tests(test_runs: Path, export: Path) -> None:
    """Every finished test-split run under `test_runs` exported as ELUE test files into
    `export/<method>/`, and a manifest of the files (rows, sweep value, sha256) written as
    `test_runs/export-manifest.json`. A run whose rows do not cover its test split stops it."""
    import hashlib
    import json

    from eebench.run import artifacts as R
    from eebench.submit.export_elue import export_elue

    root = REPO
    manifest = []
    for summary in sorted(test_runs.rglob(R.SUMMARY_FILE)) if test_runs.is_dir() else []:
        run_dir = summary.parent
        cfg = R.RunConfig.model_validate_json((run_dir / R.CONFIG_FILE).read_text())
        exp = export_elue(run_dir, export / cfg.method)
        if not exp.complete:
            raise SystemExit(f"{run_dir}: {exp.rows} test rows, expected {exp.expected_rows}")
        for f in exp.files:
            digest = hashlib.sha256(Path(f.path).read_bytes()).hexdigest()
            manifest.append({"run": str(run_dir.relative_to(root)), "file":
                             str(Path(f.path).relative_to(root)), "rows": f.rows,
                             "sweep": f"{f.sweep_param}={f.sweep_value:g}",
                             "avg_exit_layer": round(f.avg_exit_layer, 4),
                             "mean_mflops": round(f.mean_mflops, 3), "sha256": digest})
    path = test_runs / "export-manifest.json"
    path.write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"exported {len(manifest)} ELUE test files to {export.relative_to(root)}")


def publish_block(path: Path, start: str, end: str, lines: list[str], write: bool) -> str:
    """The block `start`, `lines`, `end`: printed, and put in place in `path` when `write`."""
    block = "\n".join([start, *lines, end])
    print(block)
    if write:
        write_block(path, start, end, block)
    return block
