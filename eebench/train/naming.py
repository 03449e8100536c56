"""What a training run would train and where its checkpoint lives, named before anything trains
(the run, the dry run's steps left and a helping worker name it the same way), and the lock that
lets one process at a time train it.

The name is a hash of everything that determines the trained weights (`run_config`): the method
and its settings, the task, the backbone, the training settings with their precision resolved,
and a fingerprint of the examples it fits, calibration examples held out.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eebench.errors import DataError, UsageError
from eebench.io import config_hash
from eebench.io.locks import locked
from eebench.methods.derived import calibration_fraction, check_task
from eebench.train.checkpoint import checkpoint_path
from eebench.train.config import TrainConfig, run_config

if TYPE_CHECKING:
    from eebench.methods import EarlyExitMethod
    from eebench.tasks.spec import TaskSpec


def hold_out(examples: Any, fraction: float, seed: int) -> tuple[Any, Any | None]:
    """(what trains, what is held out for calibration): a seeded `fraction` of the training
    examples, never the dev split; the rest keep their order. No fraction: (examples, None)."""
    if fraction <= 0:
        return examples, None
    import numpy as np

    n = len(examples)
    m = max(1, math.ceil(n * fraction))
    if m >= n:
        raise UsageError(f"cannot hold out {m} of {n} training examples for calibration",
                         hint="train on more examples")
    perm = np.random.default_rng([seed, 1]).permutation(n)
    return examples.select(sorted(perm[m:])), examples.select(sorted(perm[:m]))


@dataclass
class NamedCheckpoint:
    """What a training run would train on and where its checkpoint lives, before it trains."""

    cfg: TrainConfig  # precision resolved
    pooling: str  # resolved: "cls" or "mean"
    train: Any  # the training examples it fits
    held_out: Any | None  # the calibration examples held out of them (None: none)
    config: dict[str, Any]  # everything that determines the weights
    key: str  # its hash
    path: Path


def name_checkpoint(method: EarlyExitMethod, task_spec: TaskSpec, backbone: str,
                    train_examples: Any, cfg: TrainConfig, out_dir: Path,
                    pooling: str | None = None) -> NamedCheckpoint:
    """The checkpoint `train` would write (or resume, or return finished) for these arguments;
    nothing is read or trained."""
    from eebench.models.pooling import resolve_pooling

    pooling = resolve_pooling(backbone, pooling)
    cfg = cfg.with_precision()  # "auto" resolved before the checkpoint is named
    check_task(method, task_spec)
    if train_examples.labels is None:
        raise DataError(f"{task_spec.name}: the training split has no labels")
    if cfg.max_train_samples is not None and cfg.max_train_samples < len(train_examples):
        train_examples = train_examples.take(cfg.max_train_samples, cfg.seed)
    if len(train_examples) == 0:
        raise DataError(f"{task_spec.name}: the training split is empty")
    train_examples, held_out = hold_out(train_examples, calibration_fraction(method), cfg.seed)
    config = run_config(method, task_spec, backbone, train_examples, cfg, pooling)
    key = config_hash(config)
    path = checkpoint_path(out_dir, backbone, method.name, task_spec.name, key)
    return NamedCheckpoint(cfg, pooling, train_examples, held_out, config, key, path)


def lock_file(path: Path) -> Path:
    """The lock of training the checkpoint at `path` (`claimed`). Its holder removes it once the
    checkpoint has finished: a process that opened it before then finds the checkpoint finished
    when it gets the lock, as does one that makes a new one."""
    return path.with_name(f".{path.name}.lock")


@contextmanager
def claimed(path: Path, wait: bool = True) -> Iterator[bool]:
    """Hold the right to write the checkpoint at `path` (train it, or import it): an exclusive
    lock (`eebench.io.locks`: flock on a regular file, never opened through a link) on
    `.<name>.lock` beside it, which the operating system drops when its process ends, however it
    ends. Two processes never write one checkpoint at once (the cascade's runs read static's
    models; a worker helps another with a run of several models; two runs import one
    checkpoint). Yields False at once, without the lock, when another process holds it and
    `wait` is off; with `wait`, blocks until it is free. A holder that saved nothing (refused
    before its first step) leaves nothing behind."""
    made = [d for d in (path.parent, *path.parent.parents) if not d.exists()]  # deepest first
    path.parent.mkdir(parents=True, exist_ok=True)
    held = False
    try:
        with locked(lock_file(path), wait) as ours:
            held = ours
            yield ours
    finally:
        if held and not path.exists():  # nothing saved (refused before its first step)
            lock_file(path).unlink(missing_ok=True)
            for d in made:
                try:
                    d.rmdir()
                except OSError:  # not empty: another checkpoint's
                    break
