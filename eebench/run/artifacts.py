"""Results are data: the files of a run directory, each with its own schema_version.

A run directory `runs/<model>/<method>[+<rule>]/<task>/<config-hash>/` holds

- `config.json`        RunConfig: everything that determines the results (its hash names the dir)
- `env.json`           hardware and software versions (written by eebench.measure.env)
- `points.jsonl`       one OperatingPoint per line, one per sweep value
- `predictions.safetensors`  per-sample arrays (no pickle): `labels` [N] (absent for unlabelled
                       test splits), `exit_layer` [P, N] (1-based), `prediction` [P, N] (label id,
                       or the score for regression), `exit_logits` [E, N, C]; row p of the
                       [P, N] arrays belongs to line p of points.jsonl
- `ids.txt`            the sample ids in array order, one per line (a test file's index column,
                       else the row number in the split)
- `summary.json`       RunSummary: the run at a glance, and its variants: the models it trained
                       (one for a joint method, one per k for static), each with its exit
                       layers, hidden size, pooling and the key of its logits
                       (`exit_logits` [E, N, C], or `exit_logits_<variant>` per variant),
                       the temperatures and settings its rule read; and the rule itself (its
                       name, comparison, whether the task is a regression). With each point's
                       sweep value and the stored logits and signals (`<logits key>.<signal>`
                       [E, N]), that is everything needed to rebuild every stored decision from
                       the directory alone (eebench.run.rederive); and the sha256 of its samples
                       (ids with their texts), which `eebench analyze` checks texts against

Metrics are in percent (ELUE's unit), FLOPs are per sample with the convention recorded.
Runs written by earlier versions are read through `upgrade`, the one place that knows their
formats: everything else sees today's schemas.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

from eebench.errors import DataError
from eebench.io import (
    atomic_write_text,
    config_hash,
    read_json,
    read_model,
    read_text,
    sha256_file,
    validated,
)
from eebench.methods.base import JOINT
from eebench.run.config import TimingConfig
from eebench.train.config import GivenTrainConfig, TrainConfig

M = TypeVar("M", bound=BaseModel)

CONFIG_SCHEMA_VERSION = 1  # part of the run directory's hash: changing it renames every run
POINTS_SCHEMA_VERSION = 2  # 2: each point names its variant
SUMMARY_SCHEMA_VERSION = 3  # 2: the variants; 3: the rule and what it read (temperatures...)

CONFIG_FILE = "config.json"
ENV_FILE = "env.json"
POINTS_FILE = "points.jsonl"
PREDICTIONS_FILE = "predictions.safetensors"
IDS_FILE = "ids.txt"
SUMMARY_FILE = "summary.json"


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())


def _left_out(data: dict[str, Any], model: BaseModel, names: tuple[str, ...]) -> dict[str, Any]:
    """Fields added to a record after runs were written, left out while at their default (None):
    a record that does not use them reads as it did."""
    for name in names:
        if getattr(model, name) is None:
            data.pop(name, None)
    return data


class Timing(_Data):
    """Measured wall time of real dynamic inference at one batch size (raw values kept)."""

    device: str  # e.g. "cpu (8 threads)" or "cuda: NVIDIA H100"
    batch_size: int
    mode: str  # "dynamic" (exits taken) or "full" (no exit, the baseline)
    latency_ms: dict[str, float] = Field(default_factory=dict)  # p50/p90/p99/mean/std per batch
    throughput: float | None = None  # samples per second
    peak_memory_mb: float | None = None
    raw_ms: list[float] = Field(default_factory=list)


# No classifier costs an exaFLOP per sample: a larger number is an error, not a measurement.
MAX_FLOPS = 1e18
Metric = Annotated[float, Field(ge=-100, le=100)]  # percent; correlations x100 go down to -100


class OperatingPoint(_Data):
    """One sweep value of one run. Finite numbers only, and consistent with each other (a
    histogram that adds up to the samples and averages to the exit layer): a point that is not is
    refused where it is read, naming the file and line."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=(), allow_inf_nan=False)

    schema_version: int = POINTS_SCHEMA_VERSION
    method: str
    variant: str  # the name of the variant (trained model) this point was measured on
    task: str
    split: str
    seed: int
    sweep_param: str  # e.g. "threshold", "patience", "layers"
    sweep_value: float
    n_samples: int = Field(ge=1)
    num_layers: int = Field(ge=1)  # layers of the full model
    metrics: dict[str, Metric] = Field(default_factory=dict)  # empty for unlabelled splits
    main_metric: str
    main: Metric | None  # metrics[main_metric]
    avg_exit_layer: float
    exit_histogram: list[Annotated[int, Field(ge=0)]]  # samples exiting at layer 1..num_layers
    flops_convention: str
    mean_flops: float = Field(gt=0, le=MAX_FLOPS)  # per sample, along each sample's path
    mean_mflops: float
    speedup: float  # num_layers / avg_exit_layer
    layer_saving: float  # 1 - avg_exit_layer / num_layers
    params_total: int = Field(ge=1)
    params_mean_used: float = Field(gt=0)  # parameters touched, averaged over samples
    timings: list[Timing] = Field(default_factory=list)
    disagreements: int | None = None  # samples where real dynamic inference decided otherwise
    disagreements_near_threshold: int | None = None
    # Quality of the exited predictions (eebench.measure.quality; classification, labelled splits):
    # percent, NLL in nats. None: not computed when the run was made (`eebench score` computes
    # them from predictions.safetensors), or not defined (regression); consistency, exit_gain and
    # exit_loss are left to `eebench score` for methods that train one model per depth.
    ece: float | None = Field(default=None, ge=0, le=100)
    nll: float | None = Field(default=None, ge=0)
    consistency: float | None = Field(default=None, ge=0, le=100)
    exit_gain: float | None = Field(default=None, ge=0, le=100)
    exit_loss: float | None = Field(default=None, ge=0, le=100)

    @model_validator(mode="after")
    def _consistent(self) -> OperatingPoint:
        hist = self.exit_histogram
        checks = [
            (len(hist) == self.num_layers,
             f"exit_histogram has {len(hist)} entries for {self.num_layers} layers"),
            (sum(hist) == self.n_samples,
             f"exit_histogram adds up to {sum(hist)}, not n_samples {self.n_samples}"),
            (math.isclose(self.avg_exit_layer,
                          sum((i + 1) * h for i, h in enumerate(hist)) / self.n_samples,
                          rel_tol=1e-6, abs_tol=1e-6),
             f"avg_exit_layer {self.avg_exit_layer} is not the exit histogram's mean"),
            (math.isclose(self.mean_mflops, self.mean_flops / 1e6, rel_tol=1e-6),
             f"mean_mflops {self.mean_mflops} is not mean_flops / 1e6"),
            (self.main == self.metrics.get(self.main_metric),
             f"main {self.main} is not metrics[{self.main_metric!r}]"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)
        return self


class RunConfig(_Data):
    schema_version: int = CONFIG_SCHEMA_VERSION
    model: str
    # How the exit heads pool the tokens, "cls" or "mean": resolved (the backbone's own pooling
    # unless the user chose), never None. Runs written before it was recorded pooled [CLS].
    pooling: str = "cls"
    method: str
    method_settings: dict[str, Any] = Field(default_factory=dict)
    task: str  # the task evaluated (its split, metrics and ids)
    # Domain shift (`eebench run --eval-task`): the task the model was trained on, when it is not
    # `task`. Left out of config.json (and so of the hash) while None: no earlier run is renamed.
    train_task: str | None = None
    # Another exit rule swept on the method's trained model (`eebench run --rule`): its points
    # are labelled `<method>+<rule>`. Left out of config.json while None (the method's own rule).
    rule: str | None = None
    split: str
    seed: int
    sweep: list[float]  # the values of the run's rule
    # The training settings that were given or filled in for the run (the backbone's lr, the
    # seed...), in that order; a default left alone is not recorded, so adding a setting to
    # TrainConfig renames no run.
    train: GivenTrainConfig = Field(default_factory=TrainConfig)
    max_seq_length: int
    max_eval_samples: int | None = None
    flops_convention: str
    timing: TimingConfig = Field(default_factory=TimingConfig)  # recorded whole

    def key(self) -> str:
        """Hash of everything that determines the results: names the run directory."""
        return config_hash(self.model_dump(mode="json"))

    @property
    def label(self) -> str:
        """What its points, scores and submissions call it: the method, or `<method>+<rule>`."""
        return self.method if self.rule is None else f"{self.method}+{self.rule}"

    @property
    def trained_on(self) -> str:
        """The task whose training split the model learnt from."""
        return self.train_task or self.task

    @model_serializer(mode="wrap")
    def _unset_fields_left_out(self, handler: Any) -> dict[str, Any]:
        return _left_out(handler(self), self, ("train_task", "rule"))


class RuleRecord(_Data):
    """The exit rule a run's points were decided by, as the run used it (with each point's sweep
    value in points.jsonl and each variant's record: what eebench.run.rederive rebuilds it from).
    """

    # a rule of `eebench rules`; None: single-exit models, every sample exits at its model's exit
    name: str | None
    # how the rule's quantity meets its threshold ("<", "<=", ">=", ">"), as the rule tested it
    comparison: str | None = None
    # None: not recorded (runs before summary schema 3); a model with one output is a regression
    is_regression: bool | None = None

    @model_serializer(mode="wrap")
    def _unset_fields_left_out(self, handler: Any) -> dict[str, Any]:
        return _left_out(handler(self), self, ("comparison", "is_regression"))


class VariantRecord(_Data):
    """One trained model of a run: what its points ran through, and what its rule read of it."""

    name: str
    sweep_values: list[float]
    exit_layers: list[int]  # 1-based layers that carry an exit head, ascending
    hidden_size: int | None  # None: not recorded (runs written before summary schema 2)
    pooling: str  # how its exit heads pool: "cls" or "mean"
    logits_key: str  # its [E, N, C] exit logits in predictions.safetensors
    checkpoint: str | None = None  # several, joined by ";", for a cascade
    # Exit j is a complete model of depth exit_layers[j] run after models 1..j-1 (a cascade):
    # a sample that exits there ran each of them whole.
    chained: bool = False
    # What the rule read of the model besides its stored logits and signals (None: nothing, or
    # not recorded by runs before summary schema 3): a temperature per exit, fit after training
    # (maxprob's calibrated heads), and where a recorded value came from when it is not the
    # model itself (a one-off recovery names its evidence); the method settings the model held.
    temperatures: list[float] | None = None
    temperatures_source: str | None = None
    settings: dict[str, Any] | None = None

    @model_serializer(mode="wrap")
    def _unset_fields_left_out(self, handler: Any) -> dict[str, Any]:
        return _left_out(handler(self), self, ("temperatures", "temperatures_source", "settings"))


class RunSummary(_Data):
    schema_version: int = SUMMARY_SCHEMA_VERSION
    model: str
    method: str
    task: str
    split: str
    seed: int
    config_hash: str
    n_samples: int
    num_points: int
    full_model: dict[str, Any] = Field(default_factory=dict)  # the last layer's metrics and FLOPs
    best_main: float | None = None
    variants: list[VariantRecord]
    # sha256 of each file the summary vouches for (name -> digest); empty for runs written before
    # they were recorded
    files: dict[str, str] = Field(default_factory=dict)
    # Wall time of the process that finished the run, training and measurement included (a run
    # resumed from a checkpoint counts what was left); None for runs from before it was recorded.
    wall_seconds: float | None = None
    finished: bool = True
    # The exit rule its points were decided by; None: not known (a plugin method's run written
    # before summary schema 3)
    rule: RuleRecord | None = None
    # sha256 of the evaluated samples, each id with its texts in array order (`samples_hash`):
    # what the texts `eebench analyze` shows are checked against. None: a run written before it
    # was recorded (its texts cannot be checked)
    samples_sha256: str | None = None

    @model_serializer(mode="wrap")
    def _unset_fields_left_out(self, handler: Any) -> dict[str, Any]:
        return _left_out(handler(self), self, ("rule", "samples_sha256"))

    def variant(self, name: str) -> VariantRecord:
        for v in self.variants:
            if v.name == name:
                return v
        raise KeyError(name)


VOUCHED_FILES = (CONFIG_FILE, ENV_FILE, POINTS_FILE, PREDICTIONS_FILE, IDS_FILE)


def file_hashes(run_dir: Path) -> dict[str, str]:
    """The sha256 of every file a finished run's summary vouches for."""
    return {name: sha256_file(run_dir / name) for name in VOUCHED_FILES}


def verify_run(run_dir: Path) -> RunFiles:
    """A finished run, checked rather than trusted: every file parses and matches the sha256 its
    summary recorded (runs from before hashes were recorded: every file present, the arrays
    readable). A damaged run is one line that says what is wrong."""
    hint = "rerun with --overwrite to redo it"
    try:
        run = read_run(run_dir)
    except DataError as e:
        raise DataError(f"finished run damaged: {e.message}", hint=hint) from None
    recorded = run.summary.files if run.summary is not None else {}
    for name in VOUCHED_FILES:
        path = run_dir / name
        if not path.is_file():
            raise DataError(f"{path}: missing from a finished run", hint=hint)
        if name in recorded and sha256_file(path) != recorded[name]:
            raise DataError(f"{path}: does not match the sha256 its run's {SUMMARY_FILE} "
                            "recorded (changed or truncated)", hint=hint)
    if PREDICTIONS_FILE not in recorded:
        _check_arrays(run_dir / PREDICTIONS_FILE, hint)
    return run


def _check_arrays(path: Path, hint: str) -> None:
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="numpy") as f:
            for key in f.keys():
                f.get_tensor(key)
    except Exception as e:  # safetensors raises its own error types for a damaged file
        raise DataError(f"{path}: not a readable safetensors file ({_short(e)})",
                        hint=hint) from None


def _short(e: BaseException) -> str:
    return " ".join(str(e).split())[:160] or type(e).__name__


def ids_text(ids: list[str], source: str) -> str:
    """ids.txt: one sample id a line. An id with a tab or a line break would shift every row of
    the files made from it (ELUE's TSV exports): refused, naming where the ids came from."""
    for row, i in enumerate(ids):
        if "\t" in i or "\n" in i or "\r" in i:
            raise DataError(f"{source}: sample id {i!r} (row {row + 1}) holds a tab or line break",
                            hint="ids are written one a line into tab-separated files")
    return "".join(f"{i}\n" for i in ids)


def samples_hash(ids: list[str], texts: list[tuple[str, ...]]) -> str:
    """The sha256 of a run's samples: each id with its texts, one JSON line each, in array order
    (ids.txt's order). Row numbers alone would match any other file of as many rows."""
    import hashlib

    digest = hashlib.sha256()
    for i, text in zip(ids, texts, strict=True):
        digest.update(json.dumps([str(i), list(text)], ensure_ascii=False).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def logits_key(variant: str, count: int) -> str:
    """Where a variant's exit logits go: `exit_logits` for the one variant of a joint method,
    `exit_logits_<variant>` where a run trains several."""
    return "exit_logits" if count == 1 and variant == JOINT else f"exit_logits_{variant}"


def write_points(path: Path, points: list[OperatingPoint]) -> None:
    atomic_write_text(path, "".join(p.model_dump_json() + "\n" for p in points))


@dataclass
class RunFiles:
    """A run directory's config, points and summary (None while the run is unfinished), in
    today's schemas."""

    path: Path
    config: RunConfig
    points: list[OperatingPoint]
    summary: RunSummary | None


def read_run(run_dir: Path) -> RunFiles:
    """Read a run directory, upgrading what an earlier version wrote; one line per problem."""
    run_dir = Path(run_dir)
    config = read_model(run_dir / CONFIG_FILE, RunConfig)
    lines = _read_lines(run_dir / POINTS_FILE)
    summary_path = run_dir / SUMMARY_FILE
    summary = read_json(summary_path) if summary_path.exists() else None
    from eebench.run.upgrade import upgrade  # the one place that knows earlier formats

    points, summary = upgrade(config, [data for _, data in lines], summary)
    parsed = [validated(OperatingPoint, data, f"{run_dir / POINTS_FILE}:{n}")
              for (n, _), data in zip(lines, points, strict=True)]
    return RunFiles(run_dir, config, parsed,
                    None if summary is None else validated(RunSummary, summary, summary_path))


def _read_lines(path: Path) -> list[tuple[int, dict]]:
    from pydantic_core import from_json  # parses a point's line about 3x faster than json

    out = []
    for n, line in enumerate(read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = from_json(line)
        except ValueError:
            try:  # json's message names what is wrong the way every other refusal does
                data = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"{path}:{n}: not JSON ({e.msg})") from None
        if not isinstance(data, dict):
            raise DataError(f"{path}:{n}: not a JSON object")
        out.append((n, data))
    return out
