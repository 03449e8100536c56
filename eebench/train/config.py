"""Training settings (TrainConfig) and the configuration whose hash names a checkpoint.

Kept apart from the training loop (eebench.train.loop): the CLI and config files validate these
settings without importing torch, and every field that changes the trained weights is hashed here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from eebench.errors import UsageError
from eebench.train import checkpoint as ckpt

if TYPE_CHECKING:
    from eebench.methods.base import EarlyExitMethod
    from eebench.tasks.spec import TaskSpec

PRECISIONS = ("fp32", "bf16")
BIAS_INITS = ("label_mean", "zero")
STAGE_FIELDS = ("epochs", "lr", "warmup_ratio", "weight_decay", "max_grad_norm")


@dataclass
class TrainConfig:
    """Fine-tuning settings. Defaults follow BERT's GLUE recipe (lr 2e-5, batch 32, 128 tokens)."""

    epochs: int = 3
    batch_size: int = 32
    lr: float = 2e-5
    # A stage that trains exit heads alone on a frozen backbone (DeeBERT's second stage) starts
    # from random heads and needs a larger step than fine-tuning; None uses `lr`.
    heads_lr: float | None = 5e-4
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    adam_eps: float = 1e-8
    max_grad_norm: float = 1.0
    max_seq_length: int = 128
    max_train_samples: int | None = None  # a seeded subset of the training split
    seed: int = 42
    # "bf16": forward passes under bfloat16 autocast (weights, gradients and optimizer stay in
    # float32); about twice as fast on CPUs with AMX/AVX-512-BF16 and on recent GPUs.
    precision: str = "fp32"
    group_by_length: bool = False  # batch rows of similar length together (less padding)
    # Regression heads start with their bias at the training labels' mean ("label_mean") or at 0
    # ("zero"). From 0, heads that share a pooler (PABEE) can stay at the mean prediction.
    regression_bias_init: str = "label_mean"
    # stage name -> overrides of STAGE_FIELDS, e.g. {"highway": {"lr": 1e-3, "epochs": 1}}
    stage_overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    # These do not change the result, so they stay out of the checkpoint hash:
    eval_every: int = 0  # dev evaluation every N steps (0: at the end of each epoch only)
    save_every: int = 200  # checkpoint every N steps (and at every epoch and stage end)
    eval_batch_size: int = 64
    device: str | None = None  # None: cuda when available, else cpu

    NOT_HASHED: ClassVar[tuple[str, ...]] = ("eval_every", "save_every", "eval_batch_size",
                                              "device")

    def validate(self) -> None:
        """Refuse impossible settings with one line (they may come from a TOML file)."""
        ints = ("epochs", "batch_size", "max_seq_length", "seed", "eval_every", "save_every",
                "eval_batch_size", "max_train_samples")
        floats = ("lr", "heads_lr", "warmup_ratio", "weight_decay", "adam_eps", "max_grad_norm")
        for name in ints + floats:
            value = getattr(self, name)
            kinds = int if name in ints else (int, float)
            if value is None and name in ("max_train_samples", "heads_lr"):
                continue
            if isinstance(value, bool) or not isinstance(value, kinds):
                raise UsageError(f"training setting {name} must be a number, got {value!r}")
        checks = [
            (self.max_train_samples is None or self.max_train_samples > 0,
             f"--max-train-samples must be positive, got {self.max_train_samples}"),
            (self.precision in PRECISIONS,
             f"--precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}"),
            (self.regression_bias_init in BIAS_INITS,
             f"regression_bias_init must be one of {', '.join(BIAS_INITS)}, got "
             f"{self.regression_bias_init!r}"),
            (isinstance(self.group_by_length, bool),
             f"group_by_length must be true or false, got {self.group_by_length!r}"),
            (min(self.epochs, self.batch_size, self.max_seq_length, self.eval_batch_size) >= 1,
             "epochs, batch_size, max_seq_length and eval_batch_size must be at least 1"),
            (min(self.lr, self.adam_eps, self.max_grad_norm,
                 self.lr if self.heads_lr is None else self.heads_lr) > 0,
             "lr, heads_lr, adam_eps and max_grad_norm must be positive"),
            (0 <= self.warmup_ratio < 1, f"warmup_ratio must be in [0, 1): {self.warmup_ratio}"),
            (min(self.weight_decay, self.save_every, self.eval_every) >= 0,
             "weight_decay, save_every and eval_every must not be negative"),
        ]
        for ok, message in checks:
            if not ok:
                raise UsageError(message)
        for stage, over in self.stage_overrides.items():
            bad = set(over) - set(STAGE_FIELDS) if isinstance(over, dict) else {"?"}
            if bad:
                raise UsageError(f"stage {stage!r}: cannot override {sorted(bad)[0]!r}",
                                 hint=f"stage settings are: {', '.join(STAGE_FIELDS)}")
            replace(self, **over, stage_overrides={}).validate()

    def hashed(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k not in self.NOT_HASHED}

    def for_stage(self, stage: str, heads_only: bool) -> TrainConfig:
        """This config with the stage's overrides applied (heads_lr for a heads-only stage)."""
        lr = self.heads_lr if heads_only and self.heads_lr is not None else self.lr
        return replace(self, **{"lr": lr, **self.stage_overrides.get(stage, {})})


def run_config(method: EarlyExitMethod, spec: TaskSpec, backbone: str, train_examples: Any,
               cfg: TrainConfig, pooling: str) -> dict[str, Any]:
    """Everything that determines the trained weights; its hash names the checkpoint.
    `pooling` is the resolved choice ("cls" or "mean"): the heads' structure."""
    local = Path(backbone)
    return {
        "schema_version": ckpt.SCHEMA_VERSION,
        "backbone": str(local.resolve()) if local.is_dir() else backbone,
        "method": method.name,
        "method_settings": method.settings,
        "pooling": pooling,
        "task": spec.name,
        "train": hashed_train(cfg, spec),
        "data": {"n": len(train_examples), "fingerprint": ckpt.data_fingerprint(train_examples)},
    }


def hashed_train(cfg: TrainConfig, spec: TaskSpec) -> dict[str, Any]:
    """The training settings that determine a task's weights: the regression head's initial bias
    only for regression (so classification checkpoints keep their names)."""
    train = cfg.hashed()
    if not spec.is_regression:
        train.pop("regression_bias_init")
    return train
