"""The exit rules by name, as plain data: what each reads, what it needs of a model, its sweep.

An exit rule reads per-exit outputs; a training scheme (eebench.methods) says which heads exist
and how they learn, and names its own default rule. Any rule can be swept on any trained model
whose heads give what the rule needs, in the same single pass (`eebench run --rule`): DeeBERT's
entropy on a PABEE-trained model, patience on DeeBERT's. What a rule may need:

    classes       a distribution over classes (not a regression task)
    temperatures  a temperature per exit, fit after training (the maxprob method stores them)
    exit-score    a learned exit head's score per exit (BERxiT's)

A rule may need something else by name: it says what in `need_descriptions` (a plugin's rule
on a plugin method's heads). A model provides every signal its heads give by name, `_` written
`-` (a head signal `halting_prob` provides the need `halting-prob`, as `exit_score` provides
`exit-score`); a method says what its models will provide in `provides`, so that a rule its
models cannot serve is refused before anything trains.

A rule declares its sweep's parameters (`params`: names and types; one float named
`sweep_param` by default) and its own settings that are not swept (`Settings`, e.g. patience's
regression threshold). A point of its sweep is stored as its named values ({"threshold": 0.3};
PCEE's {"patience": 2, "threshold": 0.3}); sweeps are written and tables order points by one
number per point (`number`: a one-parameter rule's value; a rule of several parameters says how,
and reads it back in `values`).

This module imports no torch (`eebench rules` lists them without it); `build` imports the rule.
A third-party rule registers a RuleKind subclass with `@register_rule("name")` or through the
`eebench.rules` entry-point group.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field, ValidationError

from eebench.errors import UsageError
from eebench.registry import Lazy, Registry
from eebench.rules.sweep import Param, RuleSettings, SweepValues, shown_values, typed

if TYPE_CHECKING:
    from eebench.rules.base import ExitRule

NEEDS = {
    "classes": "a distribution over classes (classification tasks only)",
    "temperatures": "a temperature per exit, fit after training (trained by: maxprob)",
    "exit-score": "a learned exit head's score per exit (trained by: berxit)",
}
GRID_STEPS = 20

@dataclass(frozen=True)
class ModelFacts:
    """What a trained model gives a rule: read from the model at evaluation time."""

    is_regression: bool
    num_labels: int
    temperatures: Sequence[float] | None = None  # one per exit, where the model was calibrated
    signals: tuple[str, ...] = ()  # head outputs besides the logits, e.g. ("exit_score",)
    settings: dict[str, Any] = field(default_factory=dict)  # the training method's settings
    # How the rule's quantity meets its threshold where the model's method says (its authors'
    # code, e.g. CascadeBERT's `>`); None: the rule's own `comparison`
    comparison: str | None = None
    # The rule's own settings (its `Settings`) for this run: given by the run, recorded with it;
    # a setting not given takes the rule's default
    rule_settings: Mapping[str, Any] = field(default_factory=dict)
    num_exits: int | None = None  # the model's exits (TOKEE's thresholds change halfway up)

    def provides(self) -> set[str]:
        """What the model gives a rule (NEEDS names, and every head signal by name)."""
        got = set() if self.is_regression else {"classes"}
        if self.temperatures is not None:
            got.add("temperatures")
        return got | {signal_need(s) for s in self.signals}


def signal_need(signal: str) -> str:
    """The need a head signal provides: `exit_score` -> `exit-score`."""
    return signal.replace("_", "-")


class RuleKind:
    """A named exit rule: its sweep, what it needs, and how to build it for one sweep value.

    A sweep value given to `check`, `build` and `label` is a point's named values or, as sweeps
    are written, its one number (`number`)."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    # Its sweep's parameters in order; empty: one float, named `sweep_param`. With several,
    # `sweep_param` is their names joined by "+" (set from them), and the rule says how a point
    # is written as one number (`number`, `from_number`).
    params: ClassVar[tuple[Param, ...]] = ()
    sweep_param: ClassVar[str] = "threshold"
    # Its own settings, not swept: what the run gives it is validated and recorded with the run
    Settings: ClassVar[type[RuleSettings]] = RuleSettings
    needs: ClassVar[tuple[str, ...]] = ("classes",)
    # What each need beyond NEEDS is, in words, e.g. {"halting-prob": "a halting probability per
    # exit (trained by: palbert)"}: `eebench rules` and the refusals say it.
    need_descriptions: ClassVar[dict[str, str]] = {}
    paper: ClassVar[str] = ""
    # How its quantity meets the threshold for a sample to exit ("<", "<=", ">=", ">"): data,
    # recorded in every run; a method may name another (its authors' code), through ModelFacts
    comparison: ClassVar[str] = "<"
    # What it decides about: each text ("sequence", over logits [n, C]) or, for a token model
    # (sequence labelling, logits [n, T, C]), a sentence or each token ("token": the rules of
    # eebench.rules.token_catalog), or each generated token of a decoder ("generated": CALM's,
    # eebench.rules.calm). A rule runs only on a model of its unit.
    unit: ClassVar[str] = "sequence"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "params" in cls.__dict__ and cls.params:
            cls.sweep_param = "+".join(p.name for p in cls.params)

    @classmethod
    def parameters(cls) -> tuple[Param, ...]:
        """Its sweep's parameters, in order (names and types)."""
        return cls.params or (Param(cls.sweep_param, float),)

    def values(self, value: float | Mapping[str, Any]) -> SweepValues:
        """A sweep value's named values, typed as the rule declares them: from a mapping of
        its parameters, or from its one number (`from_number` for a rule of several)."""
        params = self.parameters()
        if isinstance(value, Mapping):
            names = [p.name for p in params]
            if sorted(value) != sorted(names):
                raise UsageError(f"rule {self.name!r}: a sweep value names {', '.join(names)}, "
                                 f"got {', '.join(map(str, value)) or 'nothing'}")
            return {p.name: typed(self.name, p, value[p.name]) for p in params}
        if len(params) > 1:
            return self.from_number(typed(self.name, Param("value"), value))
        return {params[0].name: typed(self.name, params[0], value)}

    def from_number(self, value: float) -> SweepValues:
        """The named values a rule of several parameters writes as `value` (see `number`)."""
        raise UsageError(f"rule {self.name!r}: a sweep value names its parameters "
                         f"({self.sweep_param})")

    def number(self, values: Mapping[str, Any]) -> float:
        """The one number a point is written as in a sweep and ordered by in tables: its
        value, for a rule of one parameter; a rule of several says how (`from_number` reads it
        back)."""
        params = self.parameters()
        if len(params) > 1:
            raise NotImplementedError(f"rule {self.name!r} writes no point as one number")
        return float(values[params[0].name])

    def settings(self, given: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Its own settings with `given` over the defaults, checked (one line where wrong)."""
        try:
            return self.Settings.model_validate(dict(given or {})).model_dump()
        except ValidationError as e:
            err = e.errors()[0]
            raise UsageError(f"rule {self.name!r}: setting {'.'.join(map(str, err['loc']))}: "
                             f"{err['msg']}") from None

    def comparison_for(self, facts: ModelFacts | None) -> str:
        """The comparison a rule built for `facts` tests: the method's where it names one."""
        return (facts.comparison if facts is not None else None) or self.comparison

    @property
    def supports_regression(self) -> bool:
        return "classes" not in self.needs

    def default_sweep(self, num_layers: int, is_regression: bool, num_labels: int = 2
                      ) -> list[float]:
        raise NotImplementedError

    def check(self, value: float) -> None:
        """Refuse a sweep value the rule cannot take (a UsageError)."""

    def build(self, value: float, facts: ModelFacts) -> ExitRule:
        raise NotImplementedError

    def missing(self, provided: set[str]) -> list[str]:
        """What the rule needs that `provided` lacks (NEEDS names)."""
        return [n for n in self.needs if n not in provided]

    def refuse_unless(self, provided: set[str], what: str) -> None:
        """One line when `what` (a method and task, or a model) lacks what this rule needs."""
        lacking = self.missing(provided)
        if lacking:
            need = lacking[0]
            said = NEEDS.get(need) or f"{need!r} ({self.describe_need(need)})"
            raise UsageError(f"rule {self.name!r} needs {said}: {what} has none",
                             hint="`eebench rules` lists what each rule needs")

    @classmethod
    def describe_need(cls, need: str) -> str:
        """A need in words: the rule's own description, else NEEDS', else the head signal."""
        return cls.need_descriptions.get(need) or NEEDS.get(need) or \
            f"a head signal {need.replace('-', '_')!r} per exit"

    def label(self, value: float | Mapping[str, Any]) -> str:
        """The sweep value as tables show it: `threshold=0.3`, `patience=2,threshold=0.3`."""
        return shown_values(self.values(value))

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description,
                "sweep_param": self.sweep_param,
                "params": [{"name": p.name, "type": p.type.__name__} for p in self.parameters()],
                "settings": self.settings(), "needs": list(self.needs),
                "needs_described": {n: self.describe_need(n) for n in self.needs},
                "supports_regression": self.supports_regression, "paper": self.paper,
                "comparison": self.comparison, "unit": self.unit}


RULES: Registry[type[RuleKind]] = Registry("rule", entry_point_group="eebench.rules",
                                            expects=RuleKind)


def register_rule(name: str) -> Callable[[type[RuleKind]], type[RuleKind]]:
    def decorator(cls: type[RuleKind]) -> type[RuleKind]:
        cls.name = name
        RULES.add(name, cls)
        return cls

    return decorator


def get_rule(name: str) -> RuleKind:
    return RULES.get(name)()


def all_needs() -> dict[str, str]:
    """Every need a registered rule may have (NEEDS, then the rules' own), described."""
    out = dict(NEEDS)
    for name in RULES.names():
        kind = RULES.get(name)
        out.update({n: kind.describe_need(n) for n in kind.needs if n not in out})
    return out


def even_grid(low: float, high: float) -> list[float]:
    return [round(low + (high - low) * k / GRID_STEPS, 6) for k in range(GRID_STEPS + 1)]


def require(ok: bool, rule: str, what: str, value: Any) -> None:
    if not ok:
        shown = f"{value:g}" if isinstance(value, (int, float)) else shown_values(value)
        raise UsageError(f"rule {rule!r}: {what}, got {shown}")


@register_rule("entropy")
class Entropy(RuleKind):
    description = "exit when the entropy of the prediction (nats) < threshold"
    paper = "DeeBERT (Xin et al., ACL 2020)"

    def default_sweep(self, num_layers, is_regression, num_labels=2):
        return even_grid(0.0, math.log(max(num_labels, 2)))  # 0: never early; ln C: almost always

    def check(self, value):
        require(value >= 0, self.name, "the threshold must be >= 0", value)

    def build(self, value, facts):
        from eebench.rules.entropy import EntropyRule

        return EntropyRule(value, comparison=self.comparison_for(facts))


@register_rule("normalized-entropy")
class NormalizedEntropy(RuleKind):
    description = "exit when the entropy divided by ln C (0..1, FastBERT's 'speed') < threshold"
    paper = "FastBERT (Liu et al., ACL 2020)"

    def default_sweep(self, num_layers, is_regression, num_labels=2):
        return even_grid(0.0, 1.0)

    def check(self, value):
        require(value >= 0, self.name, "the threshold must be >= 0", value)

    def build(self, value, facts):
        from eebench.rules.entropy import EntropyRule

        return EntropyRule(value, normalized=True, comparison=self.comparison_for(facts))


@register_rule("maxprob")
class MaxProb(RuleKind):
    description = "exit when the largest class probability >= threshold"
    paper = "Schwartz et al., ACL 2020 (uncalibrated); SWEET; CascadeBERT"
    comparison = ">="

    def default_sweep(self, num_layers, is_regression, num_labels=2):
        return even_grid(1.0 / max(num_labels, 2), 1.0)  # 1/C: always early; 1: (almost) never

    def check(self, value):
        require(0 <= value <= 1, self.name, "the threshold is a probability in [0, 1]", value)

    def build(self, value, facts):
        from eebench.rules.maxprob import MaxProbRule

        return MaxProbRule(value, comparison=self.comparison_for(facts))


@register_rule("calibrated-maxprob")
class CalibratedMaxProb(MaxProb):
    description = ("exit when the largest probability of softmax(z / T_j) >= threshold, T_j "
                   "fit per exit after training")
    paper = "Schwartz et al., The Right Tool for the Job, ACL 2020"
    needs = ("classes", "temperatures")

    def build(self, value, facts):
        from eebench.rules.maxprob import MaxProbRule

        return MaxProbRule(value, facts.temperatures, self.comparison_for(facts))


@register_rule("patience")
class Patience(RuleKind):
    description = ("exit once the prediction stayed the same for `patience` exits (regression: "
                   "|change| < its regression_threshold)")
    paper = "PABEE (Zhou et al., NeurIPS 2020)"
    params = (Param("patience", int),)
    needs = ()
    comparison = ">="  # the count of unchanged predictions against the patience

    class Settings(RuleSettings):
        # regression: successive outputs closer than this count as unchanged (PABEE's default)
        regression_threshold: float = Field(0.1, ge=0)

    def default_sweep(self, num_layers, is_regression, num_labels=2):
        return [float(p) for p in range(1, num_layers + 1)]

    def check(self, value):
        patience = self.values(value)["patience"]
        require(patience >= 1, self.name, "patience must be a positive integer", patience)

    def build(self, value, facts):
        from eebench.rules.patience import PatienceRule

        tau = self.settings(facts.rule_settings)["regression_threshold"] \
            if facts.is_regression else None
        return PatienceRule(self.values(value)["patience"], tau)


PAIR_THRESHOLDS = tuple(k / 18 for k in range(1, 10))  # PCEE-BERT's scripts: 1/18 .. 9/18
PAIR_PATIENCES = (1, 2, 3)  # their scripts use 2


@register_rule("confident-patience")
class ConfidentPatience(RuleKind):
    description = ("exit once `patience` consecutive exits were confident (entropy / ln C < "
                   "threshold); swept over (patience, threshold) pairs, written in a sweep as "
                   "the one number patience + threshold")
    paper = "PCEE-BERT (Zhang et al., NAACL Findings 2022)"
    params = (Param("patience", int), Param("threshold", float))

    def default_sweep(self, num_layers, is_regression, num_labels=2):
        return [self.number({"patience": p, "threshold": round(t, 6)})
                for p in PAIR_PATIENCES if p <= num_layers for t in PAIR_THRESHOLDS]

    def number(self, values):
        """patience + threshold (the threshold in [0, 1)): 2.3 is patience 2, threshold 0.3."""
        return round(values["patience"] + values["threshold"], 6)

    def from_number(self, value):
        patience = math.floor(value)
        return {"patience": patience, "threshold": round(value - patience, 6)}

    def check(self, value):
        values = self.values(value)
        require(values["patience"] >= 1 and 0 <= values["threshold"] < 1, self.name,
                 "patience >= 1 and a threshold in [0, 1)", values)

    def build(self, value, facts):
        from eebench.rules.patience import ConfidentPatienceRule

        values = self.values(value)
        return ConfidentPatienceRule(values["threshold"], values["patience"],
                                     self.comparison_for(facts))


@register_rule("learned")
class Learned(RuleKind):
    description = "exit when the model's learned exit score (predicted error, 0..1) < threshold"
    paper = "BERxiT (Xin et al., EACL 2021)"
    needs = ("exit-score",)

    def default_sweep(self, num_layers, is_regression, num_labels=2):
        return even_grid(0.0, 1.0)

    def check(self, value):
        require(value >= 0, self.name, "the threshold must be >= 0", value)

    def build(self, value, facts):
        from eebench.rules.learned import LearnedExitRule

        return LearnedExitRule(value, self.comparison_for(facts))


# The token rules (eebench.rules.token_catalog) and CALM's rule for a generated token
# (eebench.rules.calm), built on this module, imported when first looked up, as the built-in
# methods are.
for _name, _ref in (("mean-entropy", "token_catalog:MeanEntropy"),
                    ("sentee", "token_catalog:SentEE"), ("tokee", "token_catalog:TokEE"),
                    ("calm", "calm:Calm")):
    RULES.add(_name, Lazy(f"eebench.rules.{_ref}"))
