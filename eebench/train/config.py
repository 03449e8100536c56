"""Training settings (TrainConfig) and the configuration whose hash names a checkpoint.

Kept apart from the training loop (eebench.train.loop): the CLI and config files validate these
settings without importing torch, and every field that changes the trained weights is hashed here.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PrivateAttr,
    SerializationInfo,
    ValidationError,
    model_validator,
)

from eebench.errors import UsageError
from eebench.train.checkpoint import SCHEMA_VERSION

if TYPE_CHECKING:
    from eebench.methods.base import EarlyExitMethod
    from eebench.tasks.spec import TaskSpec

SEED_MAX = 2**32 - 1  # the batch order seeds torch with seed * 1_000_003 + epoch: stays in range

# Bounds shared by a run's settings and a stage's overrides of them.
Epochs = Annotated[int, Field(ge=1, le=1000)]  # more is a typo, not a plan
LearningRate = Annotated[float, Field(gt=0)]
WarmupRatio = Annotated[float, Field(ge=0, lt=1)]
WeightDecay = Annotated[float, Field(ge=0)]
GradNorm = Annotated[float, Field(gt=0)]
Seed = Annotated[int, Field(ge=0, le=SEED_MAX)]


class _Settings(BaseModel):
    """Settings from TOML files and flags: unknown names, wrong types (a bool for a number, text
    for a flag), inf and nan are refused, not converted."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class StageOverrides(_Settings):
    """One stage's own values, e.g. `{"lr": 1e-3, "epochs": 1}`; None keeps the run's."""

    epochs: Epochs | None = None
    lr: LearningRate | None = None
    warmup_ratio: WarmupRatio | None = None
    weight_decay: WeightDecay | None = None
    max_grad_norm: GradNorm | None = None


STAGE_FIELDS = tuple(StageOverrides.model_fields)


class TrainConfig(_Settings):
    """Fine-tuning settings. Defaults follow BERT's GLUE recipe (lr 2e-5, batch 32, 128 tokens)."""

    epochs: Epochs = 3
    batch_size: int = Field(32, ge=1)
    lr: LearningRate = 2e-5
    # A stage that trains exit heads alone on a frozen backbone (DeeBERT's second stage) starts
    # from random heads and needs a larger step than fine-tuning; None uses `lr`.
    heads_lr: LearningRate | None = 5e-4
    warmup_ratio: WarmupRatio = 0.1
    weight_decay: WeightDecay = 0.01
    adam_eps: float = Field(1e-8, gt=0)
    max_grad_norm: GradNorm = 1.0
    max_seq_length: int = Field(128, ge=1)
    max_train_samples: int | None = Field(None, ge=1)  # a seeded subset of the training split
    seed: Seed = 42
    # "bf16": forward passes under bfloat16 autocast (weights, gradients and optimizer stay in
    # float32); about twice as fast on CPUs with AMX/AVX-512-BF16 and on recent GPUs, several
    # times slower elsewhere. "auto": bf16 where the device has it natively, else fp32
    # (eebench.train.precision), resolved by `with_precision` before anything is named. "auto"
    # is what a run gets when its settings give none (BenchConfig.training); a TrainConfig built
    # in code trains in fp32 unless told, on every machine alike.
    precision: Literal["auto", "fp32", "bf16"] = "fp32"
    group_by_length: bool = False  # batch rows of similar length together (less padding)
    # Regression heads start with their bias at the training labels' mean ("label_mean") or at 0
    # ("zero"). From 0, heads that share a pooler (PABEE) can stay at the mean prediction.
    regression_bias_init: Literal["label_mean", "zero"] = "label_mean"
    # stage name -> its overrides, e.g. {"highway": {"lr": 1e-3, "epochs": 1}}
    stage_overrides: dict[str, StageOverrides] = Field(default_factory=dict)
    # These do not change the result, so they stay out of the checkpoint hash:
    eval_every: int = Field(0, ge=0)  # dev evaluation every N steps (0: at each epoch end only)
    save_every: int = Field(200, ge=0)  # checkpoint every N steps (and at epoch and stage ends)
    eval_batch_size: int = Field(64, ge=1)
    device: str | None = None  # None: cuda when available, else cpu

    NOT_HASHED: ClassVar[tuple[str, ...]] = ("eval_every", "save_every", "eval_batch_size",
                                              "device")
    _order: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _remember_order(cls, data: Any, handler: Any) -> TrainConfig:
        """Keep the order the settings were given in: a run's config.json lists them that way."""
        config = handler(data)
        if isinstance(data, dict):
            config._order = tuple(data)
        return config

    @classmethod
    def parse(cls, data: dict[str, Any]) -> TrainConfig:
        """Validated settings, or a one-line UsageError naming the setting."""
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            raise settings_error(e, section=("train",), model=cls) from None

    def given(self, mode: str = "python") -> dict[str, Any]:
        """The settings that were given (defaults left out), in the order given: what a run
        records, so that its name changes only with what was asked for."""
        data = self.model_dump(mode=mode, exclude_unset=True)
        return {k: data[k] for k in dict.fromkeys([*self._order, *data]) if k in data}

    def hashed(self) -> dict[str, Any]:
        """Every setting that changes the trained weights (a stage's overrides as given)."""
        data = self.model_dump(exclude=set(self.NOT_HASHED))
        data["stage_overrides"] = {name: over.model_dump(exclude_none=True)
                                   for name, over in self.stage_overrides.items()}
        return data

    def with_precision(self) -> TrainConfig:
        """This config with the precision it trains in: "auto" resolved on this machine for its
        device. fp32 is then left unrecorded (`given` leaves it out; it is what a run that records
        no precision trained in) and bf16 recorded, however each was asked for: two runs that
        train alike share a name, and a run resolved to bf16 never shares one with an fp32 run."""
        from eebench.train.precision import UNRECORDED, resolve

        value = resolve(self.precision, self.device)
        out = self.model_copy(update={"precision": value})  # `update` marks it given
        if value == UNRECORDED:
            out.__pydantic_fields_set__.discard("precision")
        return out

    def for_stage(self, stage: str, heads_only: bool, stage_lr: float | None = None
                  ) -> TrainConfig:
        """This config with the stage's overrides applied: its learning rate is the override's,
        else the stage's own (`Stage.lr`), else heads_lr for a heads-only stage, else lr."""
        lr = self.heads_lr if heads_only and self.heads_lr is not None else self.lr
        lr = lr if stage_lr is None else stage_lr
        over = self.stage_overrides.get(stage, StageOverrides())
        return self.model_copy(update={"lr": lr, **over.model_dump(exclude_none=True)})


def _given(config: TrainConfig, info: SerializationInfo) -> dict[str, Any]:
    return config.given(info.mode)


# A TrainConfig that serializes as its given settings only (in a config file or a run's record).
GivenTrainConfig = Annotated[TrainConfig, PlainSerializer(_given)]


def settings_error(e: ValidationError, where: str = "", section: tuple[str, ...] = (),
                   model: type[BaseModel] | None = None) -> UsageError:
    """A validation's first error on one line, naming the setting by its place in a config
    (`section` is where the validated table sits): "training setting lr: Input should be a
    finite number", "setting timing.samples: ..." (a position in a list of values left out, one
    in a list of tables counted from 1: "grids[2].timing.points"). An unknown name gets the
    nearest known one of its table as a hint, found in `model` (the validated model)."""
    err = e.errors()[0]
    parts, names = (*section, *err["loc"]), []
    for i, part in enumerate(parts):
        if not isinstance(part, int):
            names.append(str(part))
        elif names and i + 1 < len(parts):  # an entry of a list of tables ([[grids]])
            names[-1] += f"[{part + 1}]"
    kind = "setting"
    if names[:1] == ["train"] and len(names) > 1:
        kind, names = "training setting", names[1:]
    message = err["msg"]
    if err["type"] == "value_error" and "error" in err.get("ctx", {}):
        message = str(err["ctx"]["error"])  # our own validators' words, without "Value error, "
    hint = None
    if err["type"] == "extra_forbidden" and model is not None:
        hint = nearest_setting(model, err["loc"])
    return UsageError(f"{where}{kind} {'.'.join(names)}: {message}", hint=hint)


def nearest_setting(model: type[BaseModel], loc: tuple[int | str, ...]) -> str | None:
    """"did you mean 'epochs'?" for the unknown name at the end of `loc` (a path into `model`),
    or the table's names when none is close; None where the table is not a model."""
    import difflib

    table = _model_at(model, loc[:-1])
    if table is None:
        return None
    known = list(table.model_fields)
    close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else f"its settings are: {', '.join(known)}"


def _model_at(model: Any, loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The pydantic model that the path `loc` leads to from `model` (through its fields, dict
    values and list items), or None."""
    import types
    from typing import Union, get_args, get_origin

    def unwrap(tp: Any) -> Any:
        origin = get_origin(tp)
        if origin is Annotated:
            return unwrap(get_args(tp)[0])
        if origin in (Union, types.UnionType):
            inner = [unwrap(a) for a in get_args(tp) if a is not type(None)]
            return next((a for a in inner if _is_model(a) or get_origin(a) in (dict, list)),
                        inner[0] if inner else None)
        return tp

    current = unwrap(model)
    for part in loc:
        if _is_model(current):
            field = current.model_fields.get(str(part))
            if field is None:
                return None
            current = unwrap(field.annotation)
        elif get_origin(current) in (dict, list):
            current = unwrap(get_args(current)[-1])
        else:
            return None
    return current if _is_model(current) else None


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def run_config(method: EarlyExitMethod, spec: TaskSpec, backbone: str, train_examples: Any,
               cfg: TrainConfig, pooling: str) -> dict[str, Any]:
    """Everything that determines the trained weights; its hash names the checkpoint.
    `pooling` is the resolved choice ("cls" or "mean"): the heads' structure."""
    local = Path(backbone)
    return {
        "schema_version": SCHEMA_VERSION,
        "backbone": str(local.resolve()) if local.is_dir() else backbone,
        "method": method.name,
        "method_settings": method.settings,
        "pooling": pooling,
        "task": spec.name,
        "train": hashed_train(cfg, spec),
        "data": {"n": len(train_examples), "fingerprint": data_fingerprint(train_examples)},
    }


def hashed_train(cfg: TrainConfig, spec: TaskSpec) -> dict[str, Any]:
    """The training settings that determine a task's weights: the regression head's initial bias
    only for regression (so classification checkpoints keep their names)."""
    train = cfg.hashed()
    if not spec.is_regression:
        train.pop("regression_bias_init")
    return train


def data_fingerprint(examples: Any) -> str:
    """A short hash of a training subset (ids, texts, labels): part of the checkpoint key."""
    h = hashlib.sha256()
    labels = examples.labels if examples.labels is not None else [None] * len(examples)
    for i, t, y in zip(examples.ids, examples.texts, labels, strict=True):
        h.update(json.dumps([i, list(t), y]).encode())
    return h.hexdigest()[:16]
