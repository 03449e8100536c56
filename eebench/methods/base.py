"""What an early-exit method is: exit heads, a loss over exits, training stages and an exit rule.

The evaluator and the trainer never branch on a method's name: they only call this interface.
A method's exit rule follows the stepwise, batched contract of eebench.rules.base.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

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


class EarlyExitMethod:
    """Base class; a method subclass is registered with `@register_method("name")`."""

    name: ClassVar[str] = ""
    paper: ClassVar[str] = ""
    description: ClassVar[str] = ""
    sweep_param: ClassVar[str] = ""  # e.g. "threshold", "patience", "layers"
    supports_regression: ClassVar[bool] = True
    # A static method sweeps over separately trained truncated models, not over an exit rule.
    static: ClassVar[bool] = False
    defaults: ClassVar[dict[str, Any]] = {}
    # Settings added after runs were made with the method: recorded (and so part of a run's name)
    # only when they differ from their default, so the earlier runs keep their names.
    optional: ClassVar[dict[str, Any]] = {}

    def __init__(self, **settings: Any):
        known = {**self.defaults, **self.optional}
        unknown = set(settings) - set(known)
        if unknown:
            from eebench.errors import UsageError

            raise UsageError(
                f"method {self.name!r} has no setting {sorted(unknown)[0]!r}",
                hint=f"its settings are: {', '.join(known) or 'none'}",
            )
        self.settings: dict[str, Any] = {**self.defaults, **{
            k: v for k, v in settings.items()
            if not (k in self.optional and v == self.optional[k])}}

    def setting(self, name: str) -> Any:
        """A setting's value, its default included where the settings leave it out."""
        return self.settings[name] if name in self.settings else self.optional[name]

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
            "static": self.static,
            "settings": {**self.optional, **self.settings},
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

