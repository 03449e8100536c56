"""What an early-exit method is, and the registry of methods.

A method is a training scheme and the exit rule it is known by. What its author sees, the whole
contract (15 public members; tests/test_method_contract.py holds it to that):

    identity     name, paper, description
    settings     Settings (its pydantic model), settings (the dict a run records)
    heads        unit (what one exit classifies), head_layers, build_heads
    training     stages, loss
    its rule     rule (a name in eebench rules), exit_rule (that rule at one sweep value)
    its models   variants (the models a sweep trains), models (what one variant trains),
                 combine (the one model a run measures)

The base class gives the defaults (eebench.methods.heads, .training), so a method states only
what differs. Optional, and not on the base class: a method may declare `token_rule`,
`sequence_tasks`, `provides`, `comparison`, `sweep_param`, `sweep_type`, `trains`,
`joint_stage`, `supports_regression` (class attributes), `shares_pooler`, `make_head`,
`make_token_head` (hooks of the default heads), `default_sweep`, `sweep_values` (methods), and
implement `Calibrates` or `Routes` (eebench.methods.protocols).
Everything derived from a method (its sweep, comparisons, what it provides, which tasks it
refuses, its description) is a function of eebench.methods.derived. The evaluator and the
trainer never branch on a method's name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

from eebench.methods import derived
from eebench.methods.catalog import METHODS
from eebench.methods.heads import HeadDefaults
from eebench.methods.settings import MethodSettings
from eebench.methods.stages import Stage, exit_loss
from eebench.methods.training import TrainingDefaults
from eebench.rules.catalog import ModelFacts, get_rule

if TYPE_CHECKING:  # torch stays out of `eebench --help`
    from torch import nn

    from eebench.rules.base import ExitRule

# A method file is written with these (eebench.methods has them too).
__all__ = ["JOINT", "METHODS", "EarlyExitMethod", "MethodSettings", "Stage", "Variant",
           "exit_loss", "get_method", "register_method"]

JOINT = "all"  # the name of a joint method's one variant


class EarlyExitMethod(HeadDefaults, TrainingDefaults):
    """Base class; a method subclass is registered with `@register_method("name")`."""

    name: ClassVar[str] = ""
    paper: ClassVar[str] = ""
    description: ClassVar[str] = ""
    Settings: ClassVar[type[MethodSettings]] = MethodSettings  # none, unless a method has some
    rule: ClassVar[str] = ""  # its exit rule (eebench rules); "" for single-exit models

    def __init__(self, **settings: Any):
        # typed: self.config.<name>; a method that labels tokens only is a token model
        self.config = self.Settings.checked(self.name, derived.with_unit(type(self), settings))
        self.rule = derived.unit_rule(self)  # its token rule on a token model

    @property
    def settings(self) -> dict[str, Any]:
        """The settings a run records (part of its name), e.g. {"regression_threshold": 0.1}."""
        return self.config.recorded()

    def exit_rule(self, value: float, is_regression: bool, facts: ModelFacts | None = None
                  ) -> ExitRule:
        """Its rule at one sweep value."""
        # for a model described by `facts` (None: what can be known without one), tested as its
        # authors' code does; every sample exits at the one exit of a model without a rule
        derived.check_regression(self, is_regression)
        if not self.rule:
            from eebench.rules.base import FixedRule

            return FixedRule(exit=True)
        kind = get_rule(self.rule)
        kind.check(value)
        if facts is None:
            facts = ModelFacts(is_regression, 2, settings=self.settings)
        return kind.build(value, replace(
            facts, comparison=derived.comparison(self) or facts.comparison,
            rule_settings={**facts.rule_settings, **derived.rule_settings(self)}))

    # -- the models it trains ------------------------------------------------------------------
    def variants(self, sweep: Sequence[float]) -> list[Variant]:
        """The models this method trains for `sweep`, each with the sweep values it serves."""
        # A joint method trains one model and sweeps its exit rule over every value (this
        # default); static trains one truncated model per value. Refuses values none can serve.
        return [Variant(JOINT, self, tuple(float(v) for v in sweep))]

    def models(self, num_layers: int) -> list[EarlyExitMethod]:
        """The models one variant trains, each a method of its own, on `num_layers` layers."""
        # itself, by default; or complete models of growing depth (a cascade)
        return [self]

    def combine(self, models: Sequence[nn.Module]) -> nn.Module:
        """The model the engine runs (eebench.models.exits) from the trained `models`."""
        # in the order `models()` gave them: the one model itself, by default
        return models[0]

    def __getattr__(self, name: str) -> Any:  # the earlier contract's members (deprecated)
        return derived.former(self, name)


@dataclass(frozen=True)
class Variant:
    """One model a method trains, with its own settings, and the sweep values it serves."""

    name: str  # JOINT, or e.g. "k3" (static, first 3 layers); names the logits in a run
    method: EarlyExitMethod
    values: tuple[float, ...]


METHODS.expects = EarlyExitMethod  # what a plugin's entry must be


def register_method(name: str) -> Callable[[type[EarlyExitMethod]], type[EarlyExitMethod]]:
    """Registers a method class under `name` (which it takes as its `name`)."""

    def named(cls: type[EarlyExitMethod]) -> type[EarlyExitMethod]:
        cls.name = name
        return METHODS.register(name)(cls)

    return named


def get_method(name: str, **settings: Any) -> EarlyExitMethod:
    return METHODS.get(name)(**settings)
