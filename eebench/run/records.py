"""The records of a run directory's config, points and summary (eebench.run.artifacts reads and
writes the files): pydantic models, each file with its own schema_version. Runs written by earlier
versions are read through eebench.run.upgrade, so these are only ever today's schemas.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import cache, cached_property
from typing import Annotated, Any

from pydantic import ConfigDict, Field, model_validator

from eebench.io import AddedLater, config_hash
from eebench.models.convert.source import CheckpointSource
from eebench.run.config import TimingConfig
from eebench.train.config import GivenTrainConfig, TrainConfig

POINTS_SCHEMA_VERSION = 3  # 2: each point names its variant; 3: its named sweep values
# 2: the variants; 3: the rule and what it read (temperatures...); 4: each exit's path (the
# models, layers and heads a sample exiting there ran), named sweep values, the rule's settings
SUMMARY_SCHEMA_VERSION = 4
CONFIG_SCHEMA_VERSION = 1  # part of the run directory's hash: changing it renames every run


class Data(AddedLater):
    """A record of a run directory; fields it gained later are `ADDED_LATER` (eebench.io)."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())


class RunConfig(Data):
    ADDED_LATER = ("train_task", "rule", "weights")  # left out while None: no run renamed
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
    sweep: list[float]  # the values of the run's rule, each written as one number
    # The training settings that were given or filled in for the run (the backbone's lr, the
    # seed...), in that order; a default left alone is not recorded, so adding a setting to
    # TrainConfig renames no run.
    train: GivenTrainConfig = Field(default_factory=TrainConfig)
    max_seq_length: int
    max_eval_samples: int | None = None
    flops_convention: str
    timing: TimingConfig = Field(default_factory=TimingConfig)  # recorded whole
    # Weights made elsewhere, evaluated without training (`eebench run --from-checkpoint`):
    # where they came from and their sha256. Left out of config.json while None.
    weights: CheckpointSource | None = None

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



class Timing(Data):
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


class OperatingPoint(Data):
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
    # its sweep values by name, in the rule's order: {"threshold": 0.3}, {"layers": 3.0},
    # {"patience": 2, "threshold": 0.3} (eebench.rules.sweep)
    sweep: Annotated[dict[str, int | float], Field(min_length=1)]
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

    @property
    def sweep_param(self) -> str:
        """The names of its sweep values, joined by "+": "threshold", "patience+threshold"."""
        return "+".join(self.sweep)

    @cached_property
    def sweep_value(self) -> float:
        """Its one number (eebench.rules.catalog.RuleKind.number): what tables order and group
        points by, and how sweeps are written; never stored."""
        return sweep_number(self.method, self.sweep)


def sweep_number(label: str, values: Mapping[str, Any]) -> float:
    """A point's one number: its value, for one sweep parameter; for several, as the rule of
    `label` (its method's, or the `<rule>` of `<method>+<rule>`) writes its points."""
    if len(values) == 1:
        return float(next(iter(values.values())))
    return _rule_of(label).number(values)


@cache
def _rule_of(label: str) -> Any:
    from eebench.methods.base import get_method
    from eebench.rules.catalog import get_rule

    method, _, rule = label.partition("+")
    return get_rule(rule or get_method(method).rule)



class RuleRecord(Data):
    """The exit rule a run's points were decided by, as the run used it (with each point's sweep
    value in points.jsonl and each variant's record: what eebench.run.rederive rebuilds it from).
    """

    ADDED_LATER = ("comparison", "is_regression", "settings")

    # a rule of `eebench rules`; None: single-exit models, every sample exits at its model's exit
    name: str | None
    # how the rule's quantity meets its threshold ("<", "<=", ">=", ">"), as the rule tested it
    comparison: str | None = None
    # None: not recorded (runs before summary schema 3); a model with one output is a regression
    is_regression: bool | None = None
    # the rule's own settings as the run gave them (RuleKind.Settings, e.g. patience's
    # regression_threshold); None: a rule without settings
    settings: dict[str, Any] | None = None



class ModelRun(Data):
    """One complete model run on a sample's way to an exit (eebench.models.exits.ModelRun): its
    layers 1..`layers` and the exit heads after the layers `heads` (the last one answers)."""

    layers: int = Field(ge=1)
    heads: list[Annotated[int, Field(ge=1)]] = Field(min_length=1)

    @model_validator(mode="after")
    def _heads_in_order(self) -> ModelRun:
        h = self.heads
        if any(a >= b for a, b in zip(h, h[1:])) or h[-1] > self.layers:
            raise ValueError(f"heads {h} are not ascending layers within 1..{self.layers}")
        return self


class VariantRecord(Data):
    """One trained model of a run: what its points ran through, and what its rule read of it."""

    ADDED_LATER = ("temperatures", "temperatures_source", "settings")

    name: str
    sweep_values: list[dict[str, int | float]]  # each point's named values, as in points.jsonl
    exit_layers: list[int]  # 1-based layers that answer at each exit, ascending
    # Per exit, what a sample exiting there ran: the complete models in turn, each with its
    # layers and heads (one model: its layers 1..exit_layers[j] and heads 0..j; complete models
    # of growing depth: models 1..j whole). Exit j answers at its last run's last head.
    exit_paths: list[list[ModelRun]]
    hidden_size: int | None  # None: not recorded (runs written before summary schema 2)
    pooling: str  # how its exit heads pool: "cls" or "mean"
    logits_key: str  # its [E, N, C] exit logits in predictions.safetensors
    checkpoint: str | None = None  # one per model it runs, joined by ";"
    # What the rule read of the model besides its stored logits and signals (None: nothing, or
    # not recorded by runs before summary schema 3): a temperature per exit, fit after training
    # (maxprob's calibrated heads), and where a recorded value came from when it is not the
    # model itself (a one-off recovery names its evidence); the method settings the model held.
    temperatures: list[float] | None = None
    temperatures_source: str | None = None
    settings: dict[str, Any] | None = None


    @model_validator(mode="after")
    def _paths_answer_at_exits(self) -> VariantRecord:
        answers = [path[-1].heads[-1] if path else None for path in self.exit_paths]
        if answers != self.exit_layers:
            raise ValueError(f"exit_paths answer after layers {answers}, not the exit layers "
                             f"{self.exit_layers}")
        return self


class ModelOrigin(Data):
    """One trained model a run read: its checkpoint's key (the hash of everything that
    determined its weights, the name of its directory), the seed it was trained with, and the
    sha256 of its weights file as read, so that a later reader can tell which weights made it."""

    checkpoint: str
    seed: int | None  # None: a checkpoint whose state does not record one (weights imported)
    weights_sha256: str | None  # None: no weights file of eebench's own in the checkpoint


class Provenance(Data):
    """Which models made a test-split twin (`--test-out`): the key of its dev twin, the run the
    same cell made on the dev split right before it, and each model both of them read. The test
    split has no labels to check a twin against; this says it is the dev run's models."""

    dev_run: str
    models: list[ModelOrigin] = Field(min_length=1)


class RunSummary(Data):
    ADDED_LATER = ("rule", "samples_sha256", "train_seconds", "provenance")
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
    # Wall time that training its models took, over every process that trained them (resumes
    # included; a checkpoint reused as it was counts the time it took then); None for runs from
    # before it was recorded, 0 for weights made elsewhere.
    train_seconds: float | None = None
    # The exit rule its points were decided by; None: not known (a plugin method's run written
    # before summary schema 3)
    rule: RuleRecord | None = None
    # sha256 of the evaluated samples, each id with its texts in array order (`samples_hash`):
    # what the texts `eebench analyze` shows are checked against. None: a run written before it
    # was recorded (its texts cannot be checked)
    samples_sha256: str | None = None
    # A test-split twin's dev twin and models (`Provenance`); None: not a twin, or a twin made
    # before it was recorded
    provenance: Provenance | None = None


    def variant(self, name: str) -> VariantRecord:
        for v in self.variants:
            if v.name == name:
                return v
        raise KeyError(name)


