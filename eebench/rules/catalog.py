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

This module imports no torch (`eebench rules` lists them without it); `build` imports the rule.
A third-party rule registers a RuleKind subclass with `@register_rule("name")` or through the
`eebench.rules` entry-point group.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from eebench.errors import UsageError
from eebench.registry import Registry

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
    """A named exit rule: its sweep, what it needs, and how to build it for one sweep value."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    sweep_param: ClassVar[str] = "threshold"
    needs: ClassVar[tuple[str, ...]] = ("classes",)
    # What each need beyond NEEDS is, in words, e.g. {"halting-prob": "a halting probability per
    # exit (trained by: palbert)"}: `eebench rules` and the refusals say it.
    need_descriptions: ClassVar[dict[str, str]] = {}
    paper: ClassVar[str] = ""
    # How its quantity meets the threshold for a sample to exit ("<", "<=", ">=", ">"): data,
    # recorded in every run; a method may name another (its authors' code), through ModelFacts
    comparison: ClassVar[str] = "<"

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

    def label(self, value: float) -> str:
        """The sweep value as tables show it."""
        return f"{self.sweep_param}={value:g}"

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description,
                "sweep_param": self.sweep_param, "needs": list(self.needs),
                "needs_described": {n: self.describe_need(n) for n in self.needs},
                "supports_regression": self.supports_regression, "paper": self.paper,
                "comparison": self.comparison}


RULES: Registry[type[RuleKind]] = Registry("rule", entry_point_group="eebench.rules")


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


def _grid(low: float, high: float) -> list[float]:
    return [round(low + (high - low) * k / GRID_STEPS, 6) for k in range(GRID_STEPS + 1)]


def _require(ok: bool, rule: str, what: str, value: float) -> None:
    if not ok:
        raise UsageError(f"rule {rule!r}: {what}, got {value:g}")


@register_rule("entropy")
class Entropy(RuleKind):
    description = "exit when the entropy of the prediction (nats) < threshold"
    paper = "DeeBERT (Xin et al., ACL 2020)"

    def default_sweep(self, num_layers, is_regression, num_labels=2):
        return _grid(0.0, math.log(max(num_labels, 2)))  # 0: never early; ln C: almost always

    def check(self, value):
        _require(value >= 0, self.name, "the threshold must be >= 0", value)

    def build(self, value, facts):
        from eebench.rules.entropy import EntropyRule

        return EntropyRule(value, comparison=self.comparison_for(facts))


@register_rule("normalized-entropy")
class NormalizedEntropy(RuleKind):
    description = "exit when the entropy divided by ln C (0..1, FastBERT's 'speed') < threshold"
    paper = "FastBERT (Liu et al., ACL 2020)"

    def default_sweep(self, num_layers, is_regression, num_labels=2):
        return _grid(0.0, 1.0)

    def check(self, value):
        _require(value >= 0, self.name, "the threshold must be >= 0", value)

    def build(self, value, facts):
        from eebench.rules.entropy import EntropyRule

        return EntropyRule(value, normalized=True, comparison=self.comparison_for(facts))


@register_rule("maxprob")
class MaxProb(RuleKind):
    description = "exit when the largest class probability >= threshold"
    paper = "Schwartz et al., ACL 2020 (uncalibrated); SWEET; CascadeBERT"
    comparison = ">="

    def default_sweep(self, num_layers, is_regression, num_labels=2):
        return _grid(1.0 / max(num_labels, 2), 1.0)  # 1/C: always early; 1: (almost) never

    def check(self, value):
        _require(0 <= value <= 1, self.name, "the threshold is a probability in [0, 1]", value)

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
                   "|change| < the method's regression_threshold)")
    paper = "PABEE (Zhou et al., NeurIPS 2020)"
    sweep_param = "patience"
    needs = ()
    comparison = ">="  # the count of unchanged predictions against the patience

    def default_sweep(self, num_layers, is_regression, num_labels=2):
        return [float(p) for p in range(1, num_layers + 1)]

    def check(self, value):
        _require(value >= 1 and float(value).is_integer(), self.name,
                 "patience must be a positive integer", value)

    def build(self, value, facts):
        from eebench.rules.patience import PatienceRule

        tau = float(facts.settings.get("regression_threshold", 0.1)) \
            if facts.is_regression else None
        return PatienceRule(int(value), tau)


PAIR_THRESHOLDS = tuple(k / 18 for k in range(1, 10))  # PCEE-BERT's scripts: 1/18 .. 9/18
PAIR_PATIENCES = (1, 2, 3)  # their scripts use 2


def split_pair(value: float) -> tuple[int, float]:
    """A (patience, threshold) sweep value, written as one number patience + threshold with the
    threshold in [0, 1): 2.3 is patience 2, threshold 0.3."""
    patience = math.floor(value)
    return patience, round(value - patience, 6)


@register_rule("confident-patience")
class ConfidentPatience(RuleKind):
    description = ("exit once `patience` consecutive exits were confident (entropy / ln C < "
                   "threshold); swept over (patience, threshold) pairs written patience.threshold")
    paper = "PCEE-BERT (Zhang et al., NAACL Findings 2022)"
    sweep_param = "patience+threshold"

    def default_sweep(self, num_layers, is_regression, num_labels=2):
        return [round(p + t, 6) for p in PAIR_PATIENCES if p <= num_layers
                for t in PAIR_THRESHOLDS]

    def check(self, value):
        patience, threshold = split_pair(value)
        _require(patience >= 1 and 0 <= threshold < 1, self.name,
                 "a value is patience + threshold (patience >= 1, threshold in [0, 1))", value)

    def build(self, value, facts):
        from eebench.rules.patience import ConfidentPatienceRule

        patience, threshold = split_pair(value)
        return ConfidentPatienceRule(threshold, patience, self.comparison_for(facts))

    def label(self, value):
        patience, threshold = split_pair(value)
        return f"patience={patience},threshold={threshold:g}"


@register_rule("learned")
class Learned(RuleKind):
    description = "exit when the model's learned exit score (predicted error, 0..1) < threshold"
    paper = "BERxiT (Xin et al., EACL 2021)"
    needs = ("exit-score",)

    def default_sweep(self, num_layers, is_regression, num_labels=2):
        return _grid(0.0, 1.0)

    def check(self, value):
        _require(value >= 0, self.name, "the threshold must be >= 0", value)

    def build(self, value, facts):
        from eebench.rules.learned import LearnedExitRule

        return LearnedExitRule(value, self.comparison_for(facts))
