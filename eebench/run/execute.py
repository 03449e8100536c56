"""`eebench run`: train (or reuse), one full pass, every sweep point, FLOPs, params, timing, disk.

The run directory is keyed by the hash of its RunConfig. Everything in it is written atomically and
`summary.json` last, so a directory with a summary is complete; rerunning the same command returns
it at once, and an interrupted run resumes (training from its last checkpoint, evaluation anew).
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from eebench.io import atomic_path, atomic_write_text, write_json
from eebench.methods.base import EarlyExitMethod, get_method
from eebench.run import artifacts as R
from eebench.tasks.spec import TaskSpec, get_task

EVAL_SUBSET_SEED = 0  # subsets of the evaluated split do not depend on the run's seed


@dataclass
class RunOptions:
    """What does not change the results: where things go and how they are shown."""

    data_dir: Path | None = None
    out: Path = Path("runs")
    checkpoints: Path = Path("checkpoints")
    overwrite: bool = False
    eval_batch_size: int = 64
    console: Any = None
    progress: Any = None  # a rich Progress, or None


def backbone_layers(model: str) -> int:
    """The backbone's depth, from its config (converted where its family needs it)."""
    from eebench.models.families import load_config

    return int(load_config(model).num_hidden_layers)


def run_dir_for(cfg: R.RunConfig, out: Path) -> Path:
    from eebench.train.checkpoint import model_slug

    return Path(out) / model_slug(cfg.model) / cfg.method / cfg.task / cfg.key()


def execute(cfg: R.RunConfig, opts: RunOptions) -> Path | None:
    """Run one configuration; returns its run directory, or None when another process is running
    it (several `eebench run` processes on one grid share the work this way)."""
    run_dir = run_dir_for(cfg, opts.out)
    if opts.overwrite and run_dir.exists():
        shutil.rmtree(run_dir)
    if (run_dir / R.SUMMARY_FILE).exists():
        R.verify_run(run_dir)
        _say(opts, f"already done: {run_dir}")
        return run_dir
    lock = _claim(run_dir)
    if lock is None:
        return None
    try:
        if (run_dir / R.SUMMARY_FILE).exists():  # finished by another process meanwhile
            R.verify_run(run_dir)
            _say(opts, f"already done: {run_dir}")
            return run_dir
        _execute(cfg, opts, run_dir)
        (run_dir / LOCK_FILE).unlink(missing_ok=True)
    finally:
        lock.close()
    return run_dir


LOCK_FILE = ".lock"


def _claim(run_dir: Path) -> Any:
    """An exclusive lock on the run directory, or None when another process holds it. The lock
    is the operating system's (flock): it goes when its process ends, however it ends."""
    run_dir.mkdir(parents=True, exist_ok=True)
    f = open(run_dir / LOCK_FILE, "w")
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: one process per grid
        return f
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        return None
    return f


def _execute(cfg: R.RunConfig, opts: RunOptions, run_dir: Path) -> None:
    started = time.perf_counter()
    from eebench.measure.env import environment

    spec = get_task(cfg.task)  # evaluated
    trained = get_task(cfg.trained_on)  # the same task, or another one's (--eval-task)
    write_json(run_dir / R.CONFIG_FILE, cfg)
    write_json(run_dir / R.ENV_FILE, environment())

    from eebench.tasks.loaders import load_split

    train_ex = load_split(trained, "train", opts.data_dir)
    dev_ex = load_split(trained, "dev", opts.data_dir)  # training's own dev set
    if trained.name != spec.name:
        eval_ex = load_split(spec, cfg.split, opts.data_dir)
    else:
        eval_ex = dev_ex if cfg.split == "dev" else load_split(spec, cfg.split, opts.data_dir)
    if cfg.split == "test":  # withheld: predictions only, even from a file with labels (IMDb's)
        eval_ex = replace(eval_ex, labels=None)
    if cfg.max_eval_samples is not None and cfg.max_eval_samples < len(eval_ex):
        # the same samples for every seed and method, so their points are paired
        eval_ex = eval_ex.take(cfg.max_eval_samples, EVAL_SUBSET_SEED)

    variants = get_method(cfg.method, **cfg.method_settings).variants(cfg.sweep)
    full_layers = backbone_layers(cfg.model)

    from eebench.run.evaluate import evaluate_variant

    points: list[R.OperatingPoint] = []
    arrays: dict[str, list[np.ndarray]] = {"exit_layer": [], "prediction": []}
    extra: dict[str, np.ndarray] = {}
    records = []
    for variant in variants:
        ckpt_dir = _train(cfg, variant.method, trained, train_ex, dev_ex, opts)
        measured = evaluate_variant(cfg, variant, spec, ckpt_dir, eval_ex, full_layers, opts)
        points += measured.points
        for k in arrays:
            arrays[k].append(measured.arrays[k])
        key = R.logits_key(variant.name, len(variants))
        extra[key] = measured.logits
        if measured.arrays.get("labels") is not None:
            extra["labels"] = measured.arrays["labels"]
        extra["lengths"] = measured.arrays["lengths"]
        records.append(R.VariantRecord(
            name=variant.name, sweep_values=list(variant.values), logits_key=key,
            checkpoint=str(ckpt_dir), **measured.structure))

    _write_predictions(run_dir, arrays, extra)
    atomic_write_text(run_dir / R.IDS_FILE, R.ids_text(eval_ex.ids, eval_ex.source))
    R.write_points(run_dir / R.POINTS_FILE, points)
    summary = _summary(cfg, run_dir, points, len(eval_ex), records)
    summary.files = R.file_hashes(run_dir)  # the summary vouches for what was written
    summary.wall_seconds = round(time.perf_counter() - started, 1)
    write_json(run_dir / R.SUMMARY_FILE, summary)


def _train(cfg: R.RunConfig, method: EarlyExitMethod, spec: TaskSpec, train_ex, dev_ex,
           opts: RunOptions) -> Path:
    from eebench.train.loop import train

    return train(method, spec, cfg.model, train_ex, dev_ex, cfg.train, opts.checkpoints,
                 opts.console, pooling=cfg.pooling)


def _write_predictions(run_dir: Path, arrays: dict[str, list[np.ndarray]],
                       extra: dict[str, np.ndarray]) -> None:
    from safetensors.numpy import save_file

    tensors = {k: np.ascontiguousarray(np.concatenate(v)) for k, v in arrays.items()}
    tensors.update({k: np.ascontiguousarray(v) for k, v in extra.items()})
    with atomic_path(run_dir / R.PREDICTIONS_FILE) as tmp:
        save_file(tensors, str(tmp))


def _summary(cfg: R.RunConfig, run_dir: Path, points: list[R.OperatingPoint], n: int,
             variants: list[R.VariantRecord]) -> R.RunSummary:
    full = max(points, key=lambda p: (p.avg_exit_layer, p.mean_flops))
    mains = [p.main for p in points if p.main is not None]
    return R.RunSummary(
        model=cfg.model, method=cfg.method, task=cfg.task, split=cfg.split, seed=cfg.seed,
        config_hash=run_dir.name, n_samples=n, num_points=len(points),
        full_model={"sweep_value": full.sweep_value, "main": full.main,
                    "mean_mflops": full.mean_mflops, "avg_exit_layer": full.avg_exit_layer},
        best_main=max(mains) if mains else None,
        variants=variants,
    )


def _say(opts: RunOptions, msg: str) -> None:
    if opts.console is not None:
        opts.console.print(msg)
