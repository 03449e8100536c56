"""What an early-exit method is: a training scheme (exit heads, a loss over exits, training
stages) and the exit rule it is known by.

The evaluator and the trainer never branch on a method's name: they only call this interface.
The rule is named (eebench.rules.catalog); `eebench run --rule` sweeps other rules on the same
trained model, where its heads give what they need (`provides`).
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

    from eebench.models.multi_exit import ExitHeads, Route
    from eebench.rules.base import ExitRule
    from eebench.rules.catalog import ModelFacts, RuleKind


@dataclass(frozen=True)
class Stage:
    """One training stage: which parameters train and which exits' losses count."""

    name: str
    trainable: Callable[[Any], list[nn.Parameter]]  # MultiExitModel -> parameters to optimise
    # Exit indices whose logits enter the loss: None = all, a tuple (negative counts from the
    # end), or a slice (e.g. slice(None, -1): every exit but the last). A stage is written
    # before the number of exits is known; `exit_indices` resolves it.
    exits: tuple[int, ...] | slice | None = None
    # The stage's own peak learning rate (e.g. PALBERT's lambda layers); None: the run's (or
    # heads_lr where the stage trains heads alone). A `--stage NAME.lr=...` override beats it.
    lr: float | None = None

    def __post_init__(self) -> None:
        if self.lr is not None and not (isinstance(self.lr, (int, float)) and 0 < self.lr < 1e3):
            raise ValueError(f"stage {self.name!r}: lr must be a positive number, got {self.lr!r}")

    def exit_indices(self, num_exits: int) -> list[int]:
        """The 0-based exit indices of this stage for a model with `num_exits` exits."""
        every = list(range(num_exits))
        if self.exits is None:
            return every
        if isinstance(self.exits, slice):
            return every[self.exits]
        return [every[j] for j in self.exits]


def backbone_then_heads(second: str) -> list[Stage]:
    """Two stages (DeeBERT's, FastBERT's): the backbone with the last exit's head on its loss,
    then, the backbone frozen, every other head (`second` names that stage)."""
    return [Stage("backbone", lambda m: [*m.backbone_parameters(), *m.heads[-1].parameters()],
                  exits=(-1,)),
            Stage(second, lambda m: [p for h in m.heads[:-1] for p in h.parameters()],
                  exits=slice(None, -1))]  # every head but the last


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
    rule: ClassVar[str] = ""  # its exit rule (eebench rules); "" for single-exit models
    # What its trained models give a rule besides logits: "temperatures", "exit-score" (NEEDS).
    provides: ClassVar[frozenset[str]] = frozenset()
    joint_stage: ClassVar[str] = "joint"  # the name of the one stage of `stages()`' default
    # How its rule's quantity meets the threshold in its authors' code ("<", "<=", ">=", ">"),
    # where that differs from the rule's own `comparison`; None: the rule's
    comparison: ClassVar[str | None] = None
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
    def sweep_param(self) -> str:
        """What its sweep values are: its rule's parameter (e.g. "threshold", "patience"); a
        subclass may name it otherwise (`sweep_param = "layers"`, FastBERT's "speed")."""
        return self.rule_kind().sweep_param if self.rule else ""

    @property
    def supports_regression(self) -> bool:
        """Whether it can do regression tasks: what its rule needs says (a rule over classes
        cannot); a method without a rule (one exit per model) can. A subclass may say so itself
        (`supports_regression = False`)."""
        return self.rule_kind().supports_regression if self.rule else True

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

    def models(self, num_layers: int) -> list[EarlyExitMethod]:
        """The models one variant of this method trains, each a method of its own (its heads,
        stages and loss), for a backbone of `num_layers` layers: itself, by default; a cascade's
        complete models of growing depth. `combine` makes the one model a run measures."""
        return [self]

    def combine(self, models: Sequence[nn.Module]) -> nn.Module:
        """The model the engine runs (eebench.models.exits) from the trained `models`, in the
        order `models()` gave them: the one model itself, by default."""
        return models[0]

    def head_layers(self, num_layers: int) -> tuple[int, ...]:
        """The layers with an exit after them (1-based) on a backbone of `num_layers` layers:
        every one, by default. The model keeps the layers up to the last of them."""
        return tuple(range(1, num_layers + 1))

    def shares_pooler(self) -> bool:
        """One pooler for every exit (PABEE's), or each exit its own copy (the default)."""
        return False

    def make_head(self, pooler: nn.Module, config: Any, num_labels: int, own_pooler: bool
                  ) -> nn.Module:
        """One exit's head: pooler -> dropout -> linear (eebench.models.multi_exit.ExitHead)."""
        from eebench.models.multi_exit import ExitHead

        return ExitHead(pooler, config, num_labels, own_pooler=own_pooler)

    def build_heads(self, config: Any, num_labels: int, num_layers: int, pooler: nn.Module
                    ) -> ExitHeads:
        """Exit heads for a backbone of `num_layers` layers: a head (`make_head`) after each of
        `head_layers`, on a copy of `pooler` each or on one shared copy (`shares_pooler`).
        `pooler` already pools the model's way ([CLS] or masked mean), from the pretrained
        pooler where the checkpoint has one."""
        import copy

        from torch import nn

        from eebench.models.multi_exit import ExitHeads

        layers = self.head_layers(num_layers)
        shared = copy.deepcopy(pooler) if self.shares_pooler() else None
        heads = [self.make_head(copy.deepcopy(pooler) if shared is None else shared, config,
                                num_labels, own_pooler=shared is None or i == 0)
                 for i in range(len(layers))]
        return ExitHeads(nn.ModuleList(heads), layers)

    # -- training ------------------------------------------------------------------------------
    def stages(self) -> list[Stage]:
        """One joint stage: every parameter, every exit's loss."""
        return [Stage(self.joint_stage, lambda model: list(model.parameters()))]

    def loss(self, exit_logits: Sequence[torch.Tensor], labels: torch.Tensor, stage: Stage,
             is_regression: bool, step: int = 0) -> torch.Tensor:
        """Loss over the exits of `stage` (exit_logits[j] is [batch, num_labels], followed by
        the head's signal columns where it has some); `step` is the batch's index in its epoch,
        from 0 (for schedules such as BERxiT's alternating one). Default: the sum of the exits'
        losses."""
        self.check_regression(is_regression)
        return sum(exit_loss(exit_logits[j], labels, is_regression)
                   for j in stage.exit_indices(len(exit_logits)))

    def route(self, stage: Stage, num_exits: int) -> Route | None:
        """How the hidden states reach the heads and the next layer while `stage` trains a model
        of `num_exits` exits (see MultiExitModel.forward); None: unchanged."""
        return None

    def calibration_fraction(self) -> float:
        """The share of the training split held out of training for `calibrate` (0: none)."""
        return 0.0

    def calibrate(self, model: nn.Module, outputs: Any) -> None:
        """After training: fit what the rule needs on the held-out slice (`outputs`: its
        ExitOutputs, every exit's logits and the labels). Called only with a fraction > 0."""

    # -- inference -----------------------------------------------------------------------------
    def rule_kind(self) -> RuleKind:
        from eebench.rules.catalog import get_rule

        return get_rule(self.rule)

    def default_sweep(self, num_layers: int, is_regression: bool, num_labels: int = 2
                      ) -> list[float]:
        """The sweep values tried when the user gives none: its rule's (entropy grids depend on
        C)."""
        self.check_regression(is_regression)
        return self.rule_kind().default_sweep(num_layers, is_regression, num_labels)

    def exit_rule(self, value: float, is_regression: bool, facts: ModelFacts | None = None
                  ) -> ExitRule:
        """Its rule at one sweep value, for a model described by `facts` (None: a model of this
        method, as far as it can be known without one)."""
        self.check_regression(is_regression)
        kind = self.rule_kind()
        kind.check(value)
        if facts is None:
            from eebench.rules.catalog import ModelFacts

            facts = ModelFacts(is_regression, 2, settings=self.settings)
        if self.comparison is not None:  # its authors' test of the rule's quantity
            from dataclasses import replace

            facts = replace(facts, comparison=self.comparison)
        return kind.build(value, facts)

    def rule_comparison(self) -> str | None:
        """How its own rule's quantity meets the threshold: its own `comparison`, else the
        rule's (None without a rule)."""
        return (self.comparison or self.rule_kind().comparison) if self.rule else None

    def check_regression(self, is_regression: bool) -> None:
        if is_regression and not self.supports_regression:
            from eebench.errors import UsageError

            raise UsageError(f"method {self.name!r} cannot do regression (its {self.rule} rule "
                             "needs classes)",
                             hint="use pabee or static for regression tasks such as STS-B")

    def provided(self, is_regression: bool) -> set[str]:
        """What a trained model of this method gives an exit rule on such a task (NEEDS)."""
        return set(self.provides) | (set() if is_regression else {"classes"})

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "paper": self.paper,
            "description": self.description,
            "rule": self.rule or None,
            "comparison": self.rule_comparison(),
            "provides": sorted(self.provides),
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
                    ("pabee", "pabee:PABEE"), ("maxprob", "maxprob:MaxProb"),
                    ("fastbert", "fastbert:FastBERT"), ("berxit", "berxit:BERxiT"),
                    ("pcee", "pcee:PCEE"), ("elasticbert", "elasticbert:ElasticBERT"),
                    ("sweet", "sweet:SWEET"), ("cascade", "cascade:Cascade")):
    METHODS.add(_name, Lazy(f"eebench.methods.{_ref}"))


def get_method(name: str, **settings: Any) -> EarlyExitMethod:
    return METHODS.get(name)(**settings)

