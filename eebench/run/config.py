"""Benchmark configuration files (TOML, read with tomllib) and their validation.

A file can hold defaults for a single `eebench run` and, optionally, the grid of a whole benchmark:

    model = "minilm-l6"
    pooling = "mean"        # how exit heads pool: "cls" or "mean" (default: the backbone's own)
    methods = ["static", "deebert", "pabee"]
    tasks = ["rte", "elue-sst2"]
    seeds = [1, 2, 3]
    split = "dev"
    max_seq_length = 128

    [train]                 # any eebench.train.config.TrainConfig field
    epochs = 2
    max_train_samples = 2000

    [timing]
    samples = 200

    [methods_settings.pabee]
    regression_threshold = 0.1

    [sweeps]                # per-method sweep values (default: the method's own grid)
    deebert = [0.0, 0.1, 0.3, 0.5]

    [tasks_settings.rte]    # per-task budget: max_seq_length, max_eval_samples, train fields
    max_seq_length = 256
    train = { epochs = 3 }
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from eebench.errors import UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class TimingConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    samples: int = Field(200, ge=1)  # samples timed (and checked against the simulation)
    batch_sizes: list[int] = Field(default_factory=lambda: [1, 32])
    warmup: int = Field(5, ge=0)
    repeats: int = Field(1, ge=1)


class TaskSettings(BaseModel):
    """Per-task overrides of the config's budget (long-text tasks want other lengths)."""

    model_config = ConfigDict(extra="forbid")

    max_seq_length: int | None = Field(None, ge=8)
    max_eval_samples: int | None = Field(None, ge=1)
    train: dict[str, Any] = Field(default_factory=dict)


class BenchConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    model: str = "minilm-l6"
    pooling: Literal["cls", "mean"] | None = None  # None: the way the backbone was pretrained
    methods: list[str] = Field(default_factory=list)
    tasks: list[str] = Field(default_factory=list)
    seeds: list[int] = Field(default_factory=lambda: [42])
    split: str = "dev"
    data_dir: str | None = None
    out: str = "runs"
    checkpoints: str = "checkpoints"
    max_seq_length: int = Field(128, ge=8)
    max_eval_samples: int | None = Field(None, ge=1)
    eval_batch_size: int = Field(64, ge=1)
    flops_convention: str = "mac2-matmul"
    train: dict[str, Any] = Field(default_factory=dict)
    timing: TimingConfig = Field(default_factory=TimingConfig)
    methods_settings: dict[str, dict[str, Any]] = Field(default_factory=dict)
    sweeps: dict[str, list[float]] = Field(default_factory=dict)
    tasks_settings: dict[str, TaskSettings] = Field(default_factory=dict)

    def for_task(self, task: str) -> TaskSettings:
        """The task's budget: its own settings over the file's defaults."""
        own = self.tasks_settings.get(task, TaskSettings())
        return TaskSettings(
            max_seq_length=own.max_seq_length or self.max_seq_length,
            max_eval_samples=own.max_eval_samples or self.max_eval_samples,
            train={**self.train, **own.train},
        )


def load_config(path: Path | None) -> BenchConfig:
    if path is None:
        return BenchConfig()
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise UsageError(f"config file {path} not found") from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{path}: not valid TOML: {e}") from None
    try:
        cfg = BenchConfig.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise UsageError(f"{path}: {where}: {err['msg']}") from None
    return cfg
