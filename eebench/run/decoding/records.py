"""The records of a decoder run directory: its config, one point per line, its summary.

The encoder `OperatingPoint` (eebench.run.records) cannot hold a decoder point: it counts FLOPs
per sample and exits per sample (a histogram over layers that adds up to the samples), where a
decoder decides per generated token, and it has no place for self-speculation's acceptance or a
real decode's check against the simulation. `DecoderPoint` is its decoder twin, with its own
schema_version; metrics are in percent (perplexity a plain number), FLOPs per generated (or
predicted) token in the project's convention (mac2-matmul).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from eebench.io import config_hash
from eebench.models.decoder_exits import ExitSettings
from eebench.run.records import Data
from eebench.tasks.catalog import get_task
from eebench.tasks.lm import LMSettings

DECODE_CONFIG_SCHEMA_VERSION = 1
DECODER_POINT_SCHEMA_VERSION = 1
DECODE_SUMMARY_SCHEMA_VERSION = 1
FLOPS_CONVENTION = "mac2-matmul"

# the point methods of eebench's own decoder run, in table order: the full model, then the
# registered decoder methods (eebench.methods.derived.decoder_methods; plugins add theirs)
METHODS = ("full", "static", "ee-tuning", "self-spec", "self-spec-adaptive", "calm")


class DecodeConfig(Data):
    """Everything that determines a decoder run's results: its hash names the directory."""

    schema_version: int = DECODE_CONFIG_SCHEMA_VERSION
    # what tells a decoder run directory from an encoder one (eebench.score.collect skips it)
    kind: Literal["decoder"] = "decoder"
    model: str
    task: Literal["imdb-lm", "humaneval-gen"]
    split: str = "test"
    data: LMSettings = Field(default_factory=LMSettings)
    exits: ExitSettings
    # EE-Tuning of adapter exits on the frozen backbone (steps 0: untrained, i.e. the logit
    # lens); its texts are imdb-lm's training reviews, `tuning_samples` windows of max_tokens
    tuning_steps: int = Field(0, ge=0, le=100_000)
    tuning_lr: float = Field(1e-3, gt=0, le=1.0)
    tuning_samples: int = Field(32, ge=1)
    # humaneval-gen: the exits self-speculation drafts with (None: every exit), draft lengths,
    # the first tokens an adaptive decode probes before it picks its k
    ks: tuple[int, ...] | None = None
    draft_lengths: tuple[int, ...] = (1, 2, 4)
    adaptive_probe: int = Field(8, ge=1)
    # CALM: confidence thresholds (oracle simulation at each), the measure, and the thresholds
    # also decoded for real (None: the lowest, the middle and the highest one)
    thresholds: tuple[float, ...] = (0.5, 0.7, 0.8, 0.9, 0.95, 0.99)
    measure: Literal["maxprob", "margin"] = "maxprob"
    calm_real: tuple[float, ...] | None = None
    # self-spec points decoded for real and checked against the simulation, as (k, d) pairs
    # (None: every k at the longest draft)
    spec_checks: tuple[tuple[int, int], ...] | None = None
    timing: bool = False
    timing_prompts: int = Field(2, ge=1)
    timing_repeats: int = Field(3, ge=1)
    flops_convention: str = FLOPS_CONVENTION
    # the registered decoder methods whose points the run makes, sorted (None: every one that
    # does the task and fits the exits); left out of the hash when None, so the runs made before
    # the field keep their names
    methods: tuple[str, ...] | None = None
    # humaneval-gen with timing: also time the points whose method's decoding batches (the full
    # model, static, ee-tuning) at this batch size, over the first prompts cut to one length
    # (None: batch size 1 only); left out of the hash when None, as `methods`
    timing_batch: int | None = Field(None, ge=2)

    @field_validator("methods")
    @classmethod
    def _sorted(cls, v: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return None if v is None else tuple(sorted(set(v)))

    def key(self) -> str:
        data = self.model_dump(mode="json")
        for name in ("methods", "timing_batch"):  # added later: absent while None
            if data[name] is None:
                del data[name]
        return config_hash(data)

    def candidate_ks(self) -> tuple[int, ...]:
        return tuple(self.ks) if self.ks is not None else tuple(self.exits.layers)

    def checked_spec_points(self) -> tuple[tuple[int, int], ...]:
        if self.spec_checks is not None:
            return tuple(tuple(p) for p in self.spec_checks)  # type: ignore[misc]
        return tuple((k, max(self.draft_lengths)) for k in self.candidate_ks())

    def real_thresholds(self) -> tuple[float, ...]:
        if self.calm_real is not None:
            return tuple(self.calm_real)
        t = sorted(self.thresholds)
        return tuple(dict.fromkeys((t[0], t[len(t) // 2], t[-1])))


class DecodeTiming(Data):
    """Wall time of one decoding path at batch size 1 (raw values kept): a first (cold) call
    apart, then `repeats` timed calls per prompt after it, each of exactly `new_tokens`."""

    device: str
    new_tokens: int = Field(ge=1)
    prompts: int = Field(ge=1)
    first_call_ms: float
    ms_per_token: float = Field(gt=0)
    tokens_per_s: float = Field(gt=0)
    wall_speedup: float | None = None  # full greedy's ms per token over this one's
    raw_ms: list[float] = Field(default_factory=list)  # per timed call (whole decode)
    same_tokens: bool | None = None  # output equals the full model's greedy tokens
    # prompts decoded at once: above 1, `ms_per_token` is per token of the whole batch (its
    # wall time over batch x new_tokens), `prompts` the batch, and `wall_speedup` is over the
    # full model decoding the same cut prompts one at a time
    batch: int = Field(1, ge=1)


class DecoderPoint(Data):
    """One operating point of a decoder run."""

    model_config = Data.model_config | {"allow_inf_nan": False}

    schema_version: int = DECODER_POINT_SCHEMA_VERSION
    method: str  # one of METHODS, or "hf-early-exit" (transformers' peer, timed only)
    task: str
    split: str
    decoding: Literal["greedy", "teacher-forced"]
    # its setting by name: {"k": 12}, {"k": 12, "d": 4}, {"threshold": 0.9, "measure": ...}
    setting: dict[str, int | float | str] = Field(default_factory=dict)
    n_samples: int = Field(ge=1)
    n_tokens: int = Field(ge=1)  # generated (greedy) or predicted (teacher-forced) tokens
    num_layers: int = Field(ge=1)
    metrics: dict[str, float]
    main_metric: str
    main: float
    flops_convention: str = FLOPS_CONVENTION
    flops_per_token: float = Field(gt=0)  # mean over prompts of each decode's per-token FLOPs
    mflops_per_token: float
    flops_speedup: float  # the full model's FLOPs per token over this point's
    mean_exit_layer: float | None = None  # static: k; CALM: mean over tokens
    acceptance_rate: float | None = None  # self-spec: accepted drafts / drafts made (%)
    mean_accepted: float | None = None  # self-spec: accepted drafts per round
    tokens_per_round: float | None = None
    # self-spec-adaptive: how often each k was chosen ({"6": 3, "12": 5})
    chosen_k: dict[str, int] | None = None
    # a real decode checked against the simulation (self-spec: tokens equal greedy and
    # accepted lengths equal the simulated ones, prompt by prompt); None: not checked
    agrees: bool | None = None
    check: dict[str, Any] | None = None
    # CALM at a threshold also decoded for real: the real decode's token agreement, FLOPs and
    # exit layer, and the real minus the oracle token agreement (a figure, not an error)
    real: dict[str, float] | None = None
    oracle_gap: float | None = None
    timing: DecodeTiming | None = None
    # self-spec: transformers' `assistant_early_exit` at the same k and d, timed beside it
    peer_timing: DecodeTiming | None = None
    # the point decoded at batch size DecodeConfig.timing_batch (a method whose decoding batches)
    batch_timing: DecodeTiming | None = None
    # the main metric of each sample (prompt or review) at this point, in the summary's sample
    # order: per-prompt token agreement, per-review top-1 agreement (paired bootstrap)
    sample_main: list[float] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> DecoderPoint:
        if self.main != self.metrics.get(self.main_metric):
            raise ValueError(f"main {self.main} is not metrics[{self.main_metric!r}]")
        if abs(self.mflops_per_token - self.flops_per_token / 1e6) > 1e-6 * self.mflops_per_token:
            raise ValueError("mflops_per_token is not flops_per_token / 1e6")
        if self.sample_main is not None and len(self.sample_main) != self.n_samples:
            raise ValueError(f"sample_main has {len(self.sample_main)} values for "
                             f"{self.n_samples} samples")
        return self


class DecodeSummary(Data):
    """A finished decoder run at a glance; written last (a directory with one is complete)."""

    schema_version: int = DECODE_SUMMARY_SCHEMA_VERSION
    model: str
    task: str
    split: str
    config_hash: str
    num_layers: int
    exit_layers: list[int]
    head: str
    n_samples: int
    sample_ids: list[str]
    # tokens of each sample in id order: a prompt (humaneval-gen) or a cut review (imdb-lm)
    sample_tokens: list[int]
    num_points: int
    full_model: dict[str, Any]
    tuning_losses: list[float] = Field(default_factory=list)
    # EE-Tuning's key (its folder, eebench.run.decoding.run.tuning_dir) and its wall time, in
    # this run or in the earlier run that trained the same exits
    tuning_key: str | None = None
    tuning_seconds: float | None = None
    exits_file: str | None = None  # trained exit heads (safetensors), in the run directory
    all_checks_agree: bool | None = None  # every checked self-spec point agrees (None: none)
    files: dict[str, str] = Field(default_factory=dict)  # sha256 of config, env, points
    wall_seconds: float


def decoder_point(cfg: DecodeConfig, main_metric: str, method: str, setting: dict[str, Any],
                  metrics: dict[str, float], flops_per_token: float, full_flops: float,
                  n_samples: int, n_tokens: int, num_layers: int, **extra: Any) -> DecoderPoint:
    """A point of `cfg`'s run, its main metric, MFLOPs and speed-up filled in."""
    return DecoderPoint(
        method=method, task=cfg.task, split=cfg.split,
        decoding=get_task(cfg.task).decoding,
        setting=setting, n_samples=n_samples, n_tokens=n_tokens, num_layers=num_layers,
        metrics=metrics, main_metric=main_metric, main=metrics[main_metric],
        flops_convention=cfg.flops_convention, flops_per_token=float(flops_per_token),
        mflops_per_token=float(flops_per_token) / 1e6,
        flops_speedup=float(full_flops) / float(flops_per_token), **extra)


class Tuning(Data):
    """Exits EE-Tuning trained, kept for the runs that tune alike (`tuning.json` beside them)."""

    key: str
    losses: list[float]
    wall_seconds: float
    exits_sha256: str
