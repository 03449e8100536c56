"""One small grid on every backend: `eebench run --backend local`, `slurm` and `ray`, side by side.

    python benchmarks/backends.py [--data-dir DIR] [--model minilm-l6] [--max-parallel 2]

Two methods (PABEE, DeeBERT) x two tasks (RTE, SST-2), one seed, a tiny budget (128 training
examples, one epoch, 64 tokens, 128 dev samples, no wall-time measurement), run as the command
line runs it, once per backend, each with its own runs and checkpoint directories (every backend
trains its own models). The predictions must be bit for bit the same on every backend: every array
of every run's predictions.safetensors, logits included. Every cell runs on one torch thread
(`--cpus-per-job 1`; the local run with OMP_NUM_THREADS=1), so the arithmetic is the same.

Printed per backend: the command's wall time; the cells' own time (the sum of each run's
`wall_seconds`, what `execute` took); and the overhead per cell, `(K x wall - cell time) / cells`
with K the cells running at once (1 for local): the slot time not spent inside a cell (process
and interpreter start, imports, scheduling, a cluster's start-up, waiting for the last cell).
Slurm needs SLURM_CONF (`.ci/slurm.sh start`); without it, that backend is left out.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GRID = """model = "{model}"
methods = ["pabee", "deebert"]
tasks = ["rte", "sst2"]
seeds = [1]
max_seq_length = 64
max_eval_samples = 128
[train]
epochs = 1
max_train_samples = 128
batch_size = 16
[timing]
enabled = false
"""


def run_backend(backend: str, config: Path, root: Path, data_dir: Path, parallel: int) -> dict:
    out, ckpt = root / backend / "runs", root / backend / "ckpt"
    command = [sys.executable, "-m", "eebench", "run", "--config", str(config), "--data-dir",
               str(data_dir), "--out", str(out), "--checkpoints", str(ckpt)]
    if backend != "local":
        command += ["--backend", backend, "--max-parallel", str(parallel), "--cpus-per-job", "1"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{backend}: eebench run failed:\n{done.stderr[-3000:]}")
    summaries = sorted(out.rglob("summary.json"))
    cell_seconds = sum(json.loads(p.read_text())["wall_seconds"] for p in summaries)
    return {"backend": backend, "wall": wall, "cells": len(summaries), "cell_seconds": cell_seconds,
            "slots": 1 if backend == "local" else parallel, "out": out}


def predictions(out: Path) -> dict[str, dict]:
    from safetensors.numpy import load_file

    return {str(p.parent.relative_to(out)): load_file(str(p))
            for p in sorted(out.rglob("predictions.safetensors"))}


def identical(a: dict[str, dict], b: dict[str, dict]) -> bool:
    import numpy as np

    return a.keys() == b.keys() and all(
        a[k].keys() == b[k].keys() and all(np.array_equal(a[k][n], b[k][n]) for n in a[k])
        for k in a)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", type=Path,
                   default=Path(os.environ.get("EEBENCH_DATA_DIR", REPO.parent / "shared/data")))
    p.add_argument("--model", default="minilm-l6")
    p.add_argument("--max-parallel", type=int, default=2)
    p.add_argument("--backends", default="local,slurm,ray")
    p.add_argument("--keep", type=Path, default=None, help="keep the runs in this directory")
    args = p.parse_args()
    backends = [b for b in args.backends.split(",") if b]
    if "slurm" in backends and not os.environ.get("SLURM_CONF"):
        print("slurm left out: SLURM_CONF is not set (.ci/slurm.sh start)", file=sys.stderr)
        backends.remove("slurm")
    root = args.keep or Path(tempfile.mkdtemp(prefix="eebench-backends-"))
    config = root / "grid.toml"
    root.mkdir(parents=True, exist_ok=True)
    config.write_text(GRID.format(model=args.model))
    try:
        results = [run_backend(b, config, root, args.data_dir, args.max_parallel)
                   for b in backends]
        reference = predictions(results[0]["out"])
        print(f"{'backend':8} {'wall s':>8} {'cells':>5} {'cell s':>8} {'overhead/cell s':>16}  "
              f"same predictions as {results[0]['backend']}")
        for r in results:
            overhead = (r["slots"] * r["wall"] - r["cell_seconds"]) / r["cells"]
            same = identical(reference, predictions(r["out"]))
            print(f"{r['backend']:8} {r['wall']:8.1f} {r['cells']:5d} {r['cell_seconds']:8.1f} "
                  f"{overhead:16.1f}  {'yes, bit for bit' if same else 'NO'}")
        if not all(identical(reference, predictions(r["out"])) for r in results):
            raise SystemExit("predictions differ between backends")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
