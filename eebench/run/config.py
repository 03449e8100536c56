"""Benchmark configuration files (TOML, read with tomllib) and their validation.

A file can hold defaults for a single `eebench run` and, optionally, the grid of a whole benchmark:

    model = "minilm-l6"
    pooling = "mean"        # how exit heads pool: "cls" or "mean" (default: the backbone's own)
    methods = ["static", "deebert", "pabee"]
    tasks = ["rte", "elue-sst2"]
    seeds = [1, 2, 3]
    split = "dev"
    max_seq_length = 128

    eval_task = "elue-imdb" # optional: evaluate on another task with the same labels

    [train]                 # any eebench.train.config.TrainConfig field
    epochs = 2
    max_train_samples = 2000

    [timing]
    samples = 200

    [methods_settings.pabee]
    regression_threshold = 0.1

    rules = ["maxprob"]     # optional: other exit rules swept on each method's model

    [sweeps]                # per-method sweep values (default: the method's own grid), and
    deebert = [0.0, 0.1, 0.3, 0.5]  # per method+rule
    "pabee+entropy" = [0.1, 0.2]

    [tasks_settings.rte]    # per-task budget: max_seq_length, max_eval_samples, train fields
    max_seq_length = 256
    train = { epochs = 3 }

Every table is a model (TrainConfig, TimingConfig, TaskSettings), so a bad name or value fails
when the file is read. The command line's flags go over a file's through `merge`, the one
function `eebench run` and `eebench train` share; eebench.run.grid turns the result into
validated runs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from eebench.errors import UsageError
from eebench.io import read_text
from eebench.train.config import GivenTrainConfig, Seed, TrainConfig, settings_error

if TYPE_CHECKING:
    from eebench.tasks.spec import TaskSpec

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
    train: GivenTrainConfig = Field(default_factory=TrainConfig)


class BenchConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=(), allow_inf_nan=False)

    model: str = "minilm-l6"
    pooling: Literal["cls", "mean"] | None = None  # None: the way the backbone was pretrained
    methods: list[str] = Field(default_factory=list)
    tasks: list[str] = Field(default_factory=list)
    # Domain shift: evaluate the models trained on each of `tasks` on this task's split instead
    # (same labels, same kind of input); None: each task's own split.
    eval_task: str | None = None
    seeds: list[Seed] = Field(default_factory=lambda: [42])
    split: str = "dev"
    data_dir: str | None = None
    out: str = "runs"
    checkpoints: str = "checkpoints"
    max_seq_length: int = Field(128, ge=8)
    max_eval_samples: int | None = Field(None, ge=1)
    eval_batch_size: int = Field(64, ge=1)
    flops_convention: str = "mac2-matmul"
    train: GivenTrainConfig = Field(default_factory=TrainConfig)
    timing: TimingConfig = Field(default_factory=TimingConfig)
    methods_settings: dict[str, dict[str, Any]] = Field(default_factory=dict)
    sweeps: dict[str, list[float]] = Field(default_factory=dict)  # by method or method+rule
    # Other exit rules to sweep on each method's trained model, in the same pass (eebench rules)
    rules: list[str] = Field(default_factory=list)
    tasks_settings: dict[str, TaskSettings] = Field(default_factory=dict)

    def for_task(self, task: str) -> TaskSettings:
        """The task's budget: its own settings (under any of its names) over the config's.
        Every name in tasks_settings is checked, so a typo fails before any work."""
        from eebench.tasks.spec import get_task

        name = get_task(task).name
        matches = [s for key, s in self.tasks_settings.items() if get_task(key).name == name]
        own = matches[0] if matches else TaskSettings()
        return TaskSettings(
            max_seq_length=own.max_seq_length or self.max_seq_length,
            max_eval_samples=own.max_eval_samples or self.max_eval_samples,
            train={**self.train.given(), **own.train.given()},
        )

    def training(self, task: TaskSpec, seed: int) -> TrainConfig:
        """One run's training settings: the task's budget, the run's seed and length, the
        backbone's own learning rate where none is given, and for a regression task the heads'
        initial bias. What is filled in here is recorded, so the run's name changes with it."""
        from eebench.models.backbones import recommended_lr

        budget = self.for_task(task.name)
        train = {**budget.train.given(), "seed": seed, "max_seq_length": budget.max_seq_length}
        if "lr" not in train and (lr := recommended_lr(self.model)) is not None:
            train["lr"] = lr
        if task.is_regression:
            train.setdefault("regression_bias_init", budget.train.regression_bias_init)
        return TrainConfig.parse(train)


def merge(config: BenchConfig, overrides: dict[str, Any]) -> BenchConfig:
    """The command line's settings over a config's, validated again as one config.

    Tables merge key by key (a flag changes one training setting, not all of [train]); None is a
    flag not given. A budget on the command line (max_seq_length, max_eval_samples, train) also
    wins over each task's own. A config's evaluation budget is for dev: another split evaluates
    every row unless the command line gives one.
    """
    data = config.model_dump(exclude_unset=True)
    tasks = data.get("tasks_settings", {})
    if (overrides.get("split") or config.split) != "dev":
        for table in (data, *tasks.values()):
            table.pop("max_eval_samples", None)
    budget = {k: v for k, v in overrides.items() if k in TaskSettings.model_fields}
    for name, own in tasks.items():
        tasks[name] = _merged(own, budget)
    try:
        return BenchConfig.model_validate(_merged(data, overrides))
    except ValidationError as e:
        raise settings_error(e) from None


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` on `base`: tables merged key by key, a key keeping its place; None left out."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict):
            out[key] = _merged(out.get(key) or {}, value)
        elif value is not None:
            out[key] = value
    return out


def load_config(path: Path | None) -> BenchConfig:
    if path is None:
        return BenchConfig()
    if not Path(path).exists():
        raise UsageError(f"config file {path} not found")
    text = read_text(Path(path))  # a directory, unreadable, not UTF-8: one line naming the file
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{path}: not valid TOML: {e}") from None
    try:
        return BenchConfig.model_validate(data)
    except ValidationError as e:
        raise settings_error(e, where=f"{path}: ") from None
