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
    test_out = "runs-test"  # optional: each cell's models on the test split too, run at once

    [train]                 # any eebench.train.config.TrainConfig field
    epochs = 2
    max_train_samples = 2000

    [timing]
    samples = 200
    baseline = "paired"     # the full model timed beside each point, not once per model

    [methods_settings.pabee]
    regression_threshold = 0.1

    rules = ["maxprob"]     # optional: other exit rules swept on each method's model

    [sweeps]                # per-method sweep values (default: the method's own grid), and
    deebert = [0.0, 0.1, 0.3, 0.5]  # per method+rule
    "pabee+entropy" = [0.1, 0.2]

    [tasks_settings.rte]    # per-task budget: max_seq_length, max_eval_samples, train fields
    max_seq_length = 256
    train = { epochs = 3 }

    [backend]               # where the cells run (the Backends flags of `eebench run`)
    name = "slurm"
    partition = "gpu"

    [[grids]]               # optional: several grids, each over the fields above (subgrids)
    seeds = [2, 3]
    timing = { enabled = false }

Every table is a model (TrainConfig, TimingConfig, TaskSettings, BackendConfig), so a bad name or
value fails when the file is read, with the nearest known name as a hint; so do the names the
tables are keyed by (a method, a method+rule, a task: `check_names`), a method's settings (its
own Settings model), an empty list, a duplicate (a seed, a sweep value, a rule, a batch size
given twice), a file over MAX_CONFIG_BYTES and a grid of more than MAX_GRID_RUNS runs. The
command line's flags go over a file's through `merge`, the one function `eebench run` and
`eebench train` share; eebench.run.grid turns the result into validated runs.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_serializer,
)

from eebench.errors import UsageError
from eebench.io import read_text
from eebench.run.names import check_names
from eebench.run.subgrids import SELECTION, select_cells
from eebench.train.config import GivenTrainConfig, Seed, TrainConfig, settings_error

if TYPE_CHECKING:
    from eebench.tasks.spec import TaskSpec

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


MAX_CONFIG_BYTES = 1 << 20  # a config is a few kB; 1 MiB of TOML takes a second to parse
MAX_SWEEP = 1000  # values in one sweep (a submission holds at most 1000 points a run)
MAX_BATCH = 1 << 16
MAX_GRIDS = 100  # [[grids]] entries: a plan has a few


def _each_once(values: list[Any]) -> list[Any]:
    """A list whose items are all different (a value given twice is a typo, or double work)."""
    seen: set[Any] = set()
    for v in values:
        if v in seen:
            raise ValueError(f"{v!r} is given twice")
        seen.add(v)
    return values


EachOnce = AfterValidator(_each_once)
BatchSize = Annotated[int, Field(ge=1, le=MAX_BATCH)]
Sweep = Annotated[list[float], Field(min_length=1, max_length=MAX_SWEEP), EachOnce]


class TimingConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    samples: int = Field(200, ge=1)  # samples timed (and checked against the simulation)
    batch_sizes: Annotated[list[BatchSize], Field(min_length=1), EachOnce] = Field(
        default_factory=lambda: [1, 32])
    warmup: int = Field(5, ge=0)
    repeats: int = Field(1, ge=1)
    # When the full model is timed: "once" per trained model, before its sweep (every point is
    # set against that one measurement), or "paired", beside each point batch by batch (the full
    # model on a batch, then the point on it), so that a change in the machine's load between
    # points moves both sides of a ratio. Left out of config.json at "once" (no run is renamed)
    # and when nothing is timed (a run without timing is the same run either way).
    baseline: Literal["once", "paired"] = "once"
    # Real inference timed at this many points of a run's sweep (None: at every point), the
    # others checked against the simulation as with timing off (`timed_values`). Left out of
    # config.json while None (no run is renamed) and, like `baseline`, when nothing is timed.
    points: int | None = Field(None, ge=2)

    ADDED_LATER: ClassVar[dict[str, Any]] = {"baseline": "once", "points": None}

    def timed_values(self, sweep: Sequence[float]) -> list[float]:
        """The sweep values whose real inference is timed: none with timing off, every one
        without `points`, else `points` of them in the sweep's order, at positions
        round(i (n - 1) / (points - 1)), i = 0 .. points - 1, halves rounded up: the first and
        the last value and the others evenly between (12 values, 5 points: positions 0, 3, 6,
        8, 11). Static's one model per value is timed where its value is."""
        n, k = len(sweep), self.points
        if not self.enabled or k is None or k >= n:
            return list(sweep) if self.enabled else []
        return [sweep[(2 * i * (n - 1) + k - 1) // (2 * (k - 1))] for i in range(k)]

    def at(self, value: float, sweep: Sequence[float]) -> TimingConfig:
        """The timing of the point at `value`: this one where the point is timed, else timing
        off (its real inference run once, unwarmed, at the largest batch size: the check)."""
        if value in self.timed_values(sweep):
            return self
        return self.model_copy(update={"enabled": False})

    @property
    def full_once(self) -> bool:
        """Whether the full model is timed once, before the sweep."""
        return self.enabled and self.baseline == "once"

    @property
    def full_beside(self) -> bool:
        """Whether the full model is timed beside each point, batch by batch."""
        return self.enabled and self.baseline == "paired"

    @model_serializer(mode="wrap")
    def _leave_out_added_later(self, handler):
        data = handler(self)
        for name, default in self.ADDED_LATER.items():
            if name in data and data[name] == default:
                data.pop(name)
        if not self.enabled:  # nothing timed: when and where it would be timed names nothing
            for name in self.ADDED_LATER:
                data.pop(name, None)
        return data


class TaskSettings(BaseModel):
    """Per-task overrides of the config's budget (long-text tasks want other lengths)."""

    model_config = ConfigDict(extra="forbid")

    max_seq_length: int | None = Field(None, ge=8)
    max_eval_samples: int | None = Field(None, ge=1)
    train: GivenTrainConfig = Field(default_factory=TrainConfig)


class BackendConfig(BaseModel):
    """Where a grid's cells run: `[backend]`, under the Backends flags of `eebench run` (which go
    over it key by key, as every flag does). Nothing here changes a result: no run records it."""

    model_config = ConfigDict(extra="forbid")

    name: str = "local"  # local, slurm or ray (eebench.run.backends.engine refuses another)
    max_parallel: int | None = Field(None, ge=1)  # cells at once (slurm: the array's %K)
    retries: int | None = Field(None, ge=0)
    rerun_failed: bool = False
    cpus_per_job: int | None = Field(None, ge=1)
    gpus_per_job: int | None = Field(None, ge=0)
    partition: str | None = None
    time_limit: int | None = Field(None, ge=1)  # minutes
    account: str | None = None
    slurm_options: dict[str, str] = Field(default_factory=dict)  # extra #SBATCH options
    exclusive: bool = False
    wait: bool = True
    ray_address: str | None = None
    # local: start no cell whose estimate would end after this time: HH:MM, a date and time, or
    # a time from now (2h30m), read when the run starts
    stop_by: str | None = None


class GridEntry(BaseModel):
    """One of a config's `[[grids]]`: the fields it gives go over the config's own for its
    cells (tables key by key, as flags do); eebench.run.subgrids."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    methods: Annotated[list[str], EachOnce] = Field(default_factory=list)
    tasks: Annotated[list[str], EachOnce] = Field(default_factory=list)
    seeds: Annotated[list[Seed], Field(min_length=1), EachOnce] = Field(default_factory=list)
    sweeps: dict[str, Sweep] = Field(default_factory=dict)
    timing: TimingConfig = Field(default_factory=TimingConfig)
    methods_settings: dict[str, dict[str, Any]] = Field(default_factory=dict)


class BenchConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=(), allow_inf_nan=False)

    model: str = "minilm-l6"
    # Evaluate these weights instead of training (an authors' checkpoint or an exported model: a
    # folder or a hub id); `model` is then not read.
    from_checkpoint: str | None = None
    pooling: Literal["cls", "mean"] | None = None  # None: the way the backbone was pretrained
    methods: Annotated[list[str], EachOnce] = Field(default_factory=list)
    tasks: Annotated[list[str], EachOnce] = Field(default_factory=list)
    # Domain shift: evaluate the models trained on each of `tasks` on this task's split instead
    # (same labels, same kind of input); None: each task's own split.
    eval_task: str | None = None
    seeds: Annotated[list[Seed], Field(min_length=1), EachOnce] = Field(
        default_factory=lambda: [42])
    split: str = "dev"
    data_dir: str | None = None
    out: str = "runs"
    # Also run every cell's models on the test split (labels withheld, nothing timed) into this
    # folder, right after the cell's own dev runs, while their checkpoints are at hand: the runs
    # `--split test --no-timing --out TEST_OUT` would make, without training again.
    test_out: str | None = None
    checkpoints: str = "checkpoints"
    max_seq_length: int = Field(128, ge=8)
    max_eval_samples: int | None = Field(None, ge=1)
    eval_batch_size: int = Field(64, ge=1)
    flops_convention: str = "mac2-matmul"
    train: GivenTrainConfig = Field(default_factory=TrainConfig)
    timing: TimingConfig = Field(default_factory=TimingConfig)
    methods_settings: dict[str, dict[str, Any]] = Field(default_factory=dict)
    sweeps: dict[str, Sweep] = Field(default_factory=dict)  # by method or method+rule
    # Other exit rules to sweep on each method's trained model, in the same pass (eebench rules)
    rules: Annotated[list[str], EachOnce] = Field(default_factory=list)
    tasks_settings: dict[str, TaskSettings] = Field(default_factory=dict)
    backend: BackendConfig = Field(default_factory=BackendConfig)  # where the cells run
    # Several grids in one: each entry over the fields above, the grid their cells' union
    grids: Annotated[list[GridEntry], Field(max_length=MAX_GRIDS)] = Field(default_factory=list)

    def for_task(self, task: str) -> TaskSettings:
        """The task's budget: its own settings (under any of its names) over the config's.
        Every name in tasks_settings is checked, so a typo fails before any work."""
        from eebench.tasks.catalog import get_task

        name = get_task(task).name
        matches = [s for key, s in self.tasks_settings.items() if get_task(key).name == name]
        own = matches[0] if matches else TaskSettings()
        return TaskSettings(
            max_seq_length=own.max_seq_length or self.max_seq_length,
            max_eval_samples=own.max_eval_samples or self.max_eval_samples,
            train={**self.train.given(), **own.train.given()},
        )

    def length_setting(self, task: str) -> str:
        """The setting that gives the task's max_seq_length (for a message): its own
        [tasks_settings] table's, else the top level's."""
        from eebench.tasks.catalog import get_task

        name = get_task(task).name
        for key, own in self.tasks_settings.items():
            if own.max_seq_length and get_task(key).name == name:
                return f"tasks_settings.{key}.max_seq_length"
        return "max_seq_length"

    def training(self, task: TaskSpec, seed: int) -> TrainConfig:
        """One run's training settings: the task's budget, the run's seed and length, the
        backbone's own learning rate where none is given, for a regression task the heads'
        initial bias, and the precision resolved ("auto" where none is given: bf16 on hardware
        with native bf16, else fp32; `TrainConfig.with_precision`). What is filled in here is
        recorded, so the run's name changes with it."""
        from eebench.models.backbones import recommended_lr

        budget = self.for_task(task.name)
        train = {**budget.train.given(), "seed": seed, "max_seq_length": budget.max_seq_length}
        if "lr" not in train and (lr := recommended_lr(self.model)) is not None:
            train["lr"] = lr
        if task.is_regression:
            train.setdefault("regression_bias_init", budget.train.regression_bias_init)
        train.setdefault("precision", "auto")
        return TrainConfig.parse(train).with_precision()


def merge(config: BenchConfig, overrides: dict[str, Any]) -> BenchConfig:
    """The command line's settings over a config's, validated again as one config.

    Tables merge key by key (a flag changes one training setting, not all of [train]); None is a
    flag not given. A budget on the command line (max_seq_length, max_eval_samples, train) also
    wins over each task's own. A config's evaluation budget is for dev: another split evaluates
    every row unless the command line gives one.
    """
    data = config.model_dump(exclude_unset=True)
    if data.get("grids"):  # over each entry too; --method, --task, --seed select its cells
        rest = {k: v for k, v in overrides.items() if k not in SELECTION}
        over = {k: v for k, v in rest.items() if k in GridEntry.model_fields}
        data["grids"] = select_cells(config, [overlay(e, over) for e in data["grids"]],
                                     overrides)
        overrides = rest  # the config's lists stay the entries' defaults
    tasks = data.get("tasks_settings", {})
    if (overrides.get("split") or config.split) != "dev":
        for table in (data, *tasks.values()):
            table.pop("max_eval_samples", None)
    budget = {k: v for k, v in overrides.items() if k in TaskSettings.model_fields}
    for name, own in tasks.items():
        tasks[name] = overlay(own, budget)
    try:
        merged = BenchConfig.model_validate(overlay(data, overrides))
    except ValidationError as e:
        raise settings_error(e, model=BenchConfig) from None
    check_names(merged)
    return merged


def overlay(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` on `base`: tables merged key by key, a key keeping its place; None left out."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict):
            out[key] = overlay(out.get(key) or {}, value)
        elif value is not None:
            out[key] = value
    return out


def load_config(path: Path | None) -> BenchConfig:
    if path is None:
        return BenchConfig()
    if not Path(path).exists():
        raise UsageError(f"config file {path} not found")
    # a directory, a FIFO, a device, over the bound, not UTF-8: one line naming the file
    text = read_text(Path(path), max_bytes=MAX_CONFIG_BYTES)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{path}: not valid TOML: {e}") from None
    except RecursionError:
        raise UsageError(f"{path}: not valid TOML eebench reads: nested too deeply") from None
    try:
        config = BenchConfig.model_validate(data)
    except ValidationError as e:
        raise settings_error(e, where=f"{path}: ", model=BenchConfig) from None
    except RecursionError:
        raise UsageError(f"{path}: nested too deeply") from None
    check_names(config, where=f"{path}: ", own=True)
    if config.grids:
        check_grids(config, where=f"{path}: ")
    return config


def entry_configs(config: BenchConfig, where: str = "") -> list[BenchConfig]:
    """Each entry of the config's [[grids]] as a config of its own: the entry over the config,
    validated and checked (a name, a setting) as the command line over a file is."""
    base = config.model_copy(update={"grids": []})
    out = []
    for i, entry in enumerate(config.grids, 1):
        try:
            out.append(merge(base, entry.model_dump(exclude_unset=True)))
        except UsageError as e:
            raise UsageError(f"{where}grids[{i}]: {e.message}", hint=e.hint) from None
    return out


def check_grids(config: BenchConfig, where: str = "") -> None:
    """A file's [[grids]], before any work: each entry a valid config, and its own settings
    for a method (methods_settings, sweeps) for one of the methods it runs."""
    for i, (entry, own) in enumerate(zip(config.grids, entry_configs(config, where), strict=True),
                                     1):
        given = entry.model_dump(exclude_unset=True)
        probe = BenchConfig(methods=own.methods, tasks=own.tasks, rules=own.rules,
                            methods_settings=given.get("methods_settings", {}),
                            sweeps=given.get("sweeps", {}))
        check_names(probe, where=f"{where}grids[{i}]: ", own=True)
