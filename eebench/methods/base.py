"""What an early-exit method is: exit heads, a loss over exits, training stages and an exit rule.

The evaluator and the trainer never branch on a method's name: they only call this interface.
A method's exit rule follows the stepwise, batched contract of eebench.rules.base.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from eebench.registry import Lazy, Registry

if TYPE_CHECKING:  # torch stays out of `eebench --help`
    import torch
    from torch import nn

    from eebench.models.multi_exit import ExitHeads
    from eebench.rules.base import ExitRule


@dataclass(frozen=True)
class Stage:
    """One training stage: which parameters train and which exits' losses count."""

    name: str
    trainable: Callable[[Any], list[nn.Parameter]]  # MultiExitModel -> parameters to optimise
    # Exit indices whose logits enter the loss: None = all, a tuple (negative counts from the
    # end), or a slice (e.g. slice(None, -1): every exit but the last). A stage is written
    # before the number of exits is known; `exit_indices` resolves it.
    exits: tuple[int, ...] | slice | None = None

    def exit_indices(self, num_exits: int) -> list[int]:
        """The 0-based exit indices of this stage for a model with `num_exits` exits."""
        every = list(range(num_exits))
        if self.exits is None:
            return every
        if isinstance(self.exits, slice):
            return every[self.exits]
        return [every[j] for j in self.exits]


JOINT = "all"  # the name of a joint method's one variant


@dataclass(frozen=True)
class Variant:
    """One model a method trains, with its own settings, and the sweep values it serves."""

    name: str  # JOINT, or e.g. "k3" (static, first 3 layers); names the logits in a run
    method: EarlyExitMethod
    values: tuple[float, ...]


class MethodSettings(BaseModel):
    """A method's settings, declared as a model on the method (`class Settings(MethodSettings)`):
    bounds, Literals, finite floats; unknown names and wrong types are refused, not converted."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)
    # Settings added after runs were made with the method: recorded (and so part of a run's name)
    # only when they differ from their default, so the earlier runs keep their names.
    RECORDED_WHEN_CHANGED: ClassVar[tuple[str, ...]] = ()

    def recorded(self) -> dict[str, Any]:
        """The settings a run records: all of them, but those RECORDED_WHEN_CHANGED at their
        default."""
        return {name: value for name, value in self.model_dump().items()
                if not (name in self.RECORDED_WHEN_CHANGED
                        and value == type(self).model_fields[name].default)}


class EarlyExitMethod:
    """Base class; a method subclass is registered with `@register_method("name")`."""

    name: ClassVar[str] = ""
    paper: ClassVar[str] = ""
    description: ClassVar[str] = ""
    sweep_param: ClassVar[str] = ""  # e.g. "threshold", "patience", "layers"
    supports_regression: ClassVar[bool] = True
    # What `variants` trains, in words (`eebench methods` shows it).
    trains: ClassVar[str] = "one model"
    Settings: ClassVar[type[MethodSettings]] = MethodSettings  # none, unless a method has some

    def __init__(self, **settings: Any):
        try:
            self.config = self.Settings.model_validate(settings)  # typed: self.config.<name>
        except ValidationError as e:
            from eebench.errors import UsageError

            err = e.errors()[0]
            known = ", ".join(self.Settings.model_fields) or "none"
            raise UsageError(
                f"method {self.name!r}: setting {'.'.join(map(str, err['loc']))}: {err['msg']}",
                hint=f"its settings are: {known}" if err["type"] == "extra_forbidden" else None,
            ) from None

    @property
    def settings(self) -> dict[str, Any]:
        """The settings a run records (part of its name), e.g. {"regression_threshold": 0.1}."""
        return self.config.recorded()

    # -- checks --------------------------------------------------------------------------------
    def check_task(self, task: Any) -> None:
        """Refuse a task the method cannot do (a TaskSpec, or anything with `is_regression`)."""
        if getattr(task, "is_regression", False) and not self.supports_regression:
            from eebench.errors import UsageError

            raise UsageError(
                f"method {self.name!r} cannot do regression task {getattr(task, 'name', '?')!r}",
                hint="use a method that supports regression (eebench methods), e.g. pabee",
            )

    # -- model ---------------------------------------------------------------------------------
    def variants(self, sweep: Sequence[float]) -> list[Variant]:
        """The models this method trains for `sweep`, each with the sweep values it serves. A
        joint method trains one model and sweeps its exit rule over every value (this default);
        static trains one truncated model per value. Refuses values no variant can serve."""
        return [Variant(JOINT, self, tuple(float(v) for v in sweep))]

    def layers_to_use(self, available: int) -> int:
        """How many backbone layers the model keeps (a static method may truncate)."""
        return available

    def build_heads(self, config: Any, num_labels: int, num_layers: int, pooler: nn.Module | None
                    ) -> ExitHeads:
        """Exit heads for a backbone of `num_layers` layers. `pooler` is a copy of the pretrained
        pooler (a fresh one where the checkpoint has none) that already pools the model's way
        ([CLS] or masked mean): use it, share it or copy it."""
        raise NotImplementedError

    # -- training ------------------------------------------------------------------------------
    def stages(self) -> list[Stage]:
        raise NotImplementedError

    def loss(self, exit_logits: Sequence[torch.Tensor], labels: torch.Tensor, stage: Stage,
             is_regression: bool) -> torch.Tensor:
        """Loss over the exits of `stage` (exit_logits[j] is [batch, num_labels])."""
        raise NotImplementedError

    # -- inference -----------------------------------------------------------------------------
    def default_sweep(self, num_layers: int, is_regression: bool, num_labels: int = 2
                      ) -> list[float]:
        """The sweep values tried when the user gives none (entropy grids depend on C)."""
        raise NotImplementedError

    def exit_rule(self, value: float, is_regression: bool) -> ExitRule:
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "paper": self.paper,
            "description": self.description,
            "sweep_param": self.sweep_param,
            "supports_regression": self.supports_regression,
            "trains": self.trains,
            "settings": self.config.model_dump(mode="json"),  # every setting, with defaults
        }


def exit_loss(logits: torch.Tensor, labels: torch.Tensor, is_regression: bool) -> torch.Tensor:
    """One exit's loss: cross-entropy over classes, or MSE on the single output for regression."""
    import torch.nn.functional as F

    if is_regression:
        return F.mse_loss(logits[:, 0].float(), labels.float())
    return F.cross_entropy(logits.float(), labels)


METHODS: Registry[type[EarlyExitMethod]] = Registry("method", entry_point_group="eebench.methods")


def register_method(name: str) -> Callable[[type[EarlyExitMethod]], type[EarlyExitMethod]]:
    def decorator(cls: type[EarlyExitMethod]) -> type[EarlyExitMethod]:
        cls.name = name
        METHODS.add(name, cls)
        return cls

    return decorator


# The built-in methods, one file each, imported when first looked up.
for _name, _ref in (("static", "static:Static"), ("deebert", "deebert:DeeBERT"),
                    ("pabee", "pabee:PABEE")):
    METHODS.add(_name, Lazy(f"eebench.methods.{_ref}"))


def get_method(name: str, **settings: Any) -> EarlyExitMethod:
    return METHODS.get(name)(**settings)

