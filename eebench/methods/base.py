"""What an early-exit method is: a training scheme (exit heads, a loss over exits, training
stages) and the exit rule it is known by; and the registry of methods.

The base class gives the common defaults, so that a method states only what differs: one head per
layer (eebench.methods.heads), one joint stage whose loss sums every exit's, one model per
variant, and what its rule decides (eebench.methods.rule: its sweep, whether it can do
regression, what its models give a rule). The evaluator and the trainer never branch on a
method's name: they only call this interface. `eebench run --rule` sweeps other rules on the same
trained model, where its heads give what they need (`provides`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from eebench.methods.heads import HeadDefaults
from eebench.methods.rule import RuleDefaults
from eebench.methods.settings import MethodSettings
from eebench.methods.stages import Stage, exit_loss
from eebench.methods.training import TrainingDefaults
from eebench.methods.units import UnitDefaults
from eebench.registry import Lazy, Registry

if TYPE_CHECKING:  # torch stays out of `eebench --help`
    from torch import nn

# A method file is written with these (eebench.methods has them too).
__all__ = ["JOINT", "METHODS", "EarlyExitMethod", "MethodSettings", "Stage", "Variant",
           "exit_loss", "get_method", "register_method"]

JOINT = "all"  # the name of a joint method's one variant


class EarlyExitMethod(HeadDefaults, TrainingDefaults, RuleDefaults, UnitDefaults):
    """Base class; a method subclass is registered with `@register_method("name")`."""

    name: ClassVar[str] = ""
    paper: ClassVar[str] = ""
    description: ClassVar[str] = ""
    trains: ClassVar[str] = "one model"  # what `variants` trains, in words (`eebench methods`)
    Settings: ClassVar[type[MethodSettings]] = MethodSettings  # none, unless a method has some

    def __init__(self, **settings: Any):
        # typed: self.config.<name>; a method that labels tokens only is a token model
        self.config = self.Settings.checked(self.name, self.with_unit(settings))
        self.resolve_unit()

    @property
    def settings(self) -> dict[str, Any]:
        """The settings a run records (part of its name), e.g. {"regression_threshold": 0.1}."""
        return self.config.recorded()

    # -- the models it trains ------------------------------------------------------------------
    def variants(self, sweep: Sequence[float]) -> list[Variant]:
        """The models this method trains for `sweep`, each with the sweep values it serves. A
        joint method trains one model and sweeps its exit rule over every value (this default);
        static trains one truncated model per value. Refuses values no variant can serve."""
        return [Variant(JOINT, self, tuple(float(v) for v in sweep))]

    def models(self, num_layers: int) -> list[EarlyExitMethod]:
        """The models one variant of this method trains, each a method of its own (its heads,
        stages and loss), for a backbone of `num_layers` layers: itself, by default; or
        complete models of growing depth, run in turn. `combine` makes the one model a run
        measures."""
        return [self]

    def combine(self, models: Sequence[nn.Module]) -> nn.Module:
        """The model the engine runs (eebench.models.exits) from the trained `models`, in the
        order `models()` gave them: the one model itself, by default."""
        return models[0]

    @staticmethod
    def methods_for(unit: str) -> list[str]:
        """The registered methods that can do tasks of `unit`."""
        return [n for n in METHODS.names() if unit in METHODS.get(n).units()]

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "paper": self.paper, "description": self.description,
                "rule": self.rule or None, "comparison": self.rule_comparison(),
                "provides": sorted(self.provides), "sweep_param": self.sweep_param,
                "supports_regression": self.supports_regression, "trains": self.trains,
                **self.describe_units(),
                # every setting, with defaults; the unit is the task's (`units` above)
                "settings": self.config.model_dump(mode="json", exclude={"unit"})}


@dataclass(frozen=True)
class Variant:
    """One model a method trains, with its own settings, and the sweep values it serves."""

    name: str  # JOINT, or e.g. "k3" (static, first 3 layers); names the logits in a run
    method: EarlyExitMethod
    values: tuple[float, ...]


METHODS: Registry[type[EarlyExitMethod]] = Registry("method", entry_point_group="eebench.methods",
                                                     expects=EarlyExitMethod)


def register_method(name: str) -> Callable[[type[EarlyExitMethod]], type[EarlyExitMethod]]:
    """Registers a method class under `name` (which it takes as its `name`)."""

    def named(cls: type[EarlyExitMethod]) -> type[EarlyExitMethod]:
        cls.name = name
        return METHODS.register(name)(cls)

    return named


# The built-in methods, one file each, imported when first looked up.
for _name, _ref in (("static", "static:Static"), ("deebert", "deebert:DeeBERT"),
                    ("pabee", "pabee:PABEE"), ("maxprob", "maxprob:MaxProb"),
                    ("fastbert", "fastbert:FastBERT"), ("berxit", "berxit:BERxiT"),
                    ("pcee", "pcee:PCEE"), ("elasticbert", "elasticbert:ElasticBERT"),
                    ("sweet", "sweet:SWEET"), ("cascade", "cascade:Cascade"),
                    ("sentee", "sentee:SENTEE"), ("tokee", "tokee:TOKEE")):
    METHODS.add(_name, Lazy(f"eebench.methods.{_ref}"))


def get_method(name: str, **settings: Any) -> EarlyExitMethod:
    return METHODS.get(name)(**settings)
