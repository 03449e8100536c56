"""A method's exit rule: a name in eebench.rules.catalog, and what the method derives from it (its
sweep, its default grid, whether it can do regression, what its models give a rule)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

from eebench.errors import UsageError
from eebench.rules.catalog import ModelFacts, get_rule

if TYPE_CHECKING:  # torch stays out of `eebench --help`
    from eebench.rules.base import ExitRule
    from eebench.rules.catalog import RuleKind


class RuleDefaults:
    """The rule part of EarlyExitMethod."""

    name: ClassVar[str]
    settings: dict[str, Any]
    rule: ClassVar[str] = ""  # its exit rule (eebench rules); "" for single-exit models
    # What its trained models give a rule besides logits: "temperatures", "exit-score" (NEEDS).
    provides: ClassVar[frozenset[str]] = frozenset()
    # How its rule's quantity meets the threshold in its authors' code ("<", "<=", ">=", ">"),
    # where that differs from the rule's own `comparison`; None: the rule's
    comparison: ClassVar[str | None] = None
    sweep_type: ClassVar[type] = float  # a method without a rule: its sweep values' type

    @property
    def sweep_param(self) -> str:
        """Its rule's parameter, or its own name for it (static's "layers", FastBERT's "speed")."""
        return self.rule_kind().sweep_param if self.rule else ""

    def sweep_values(self, value: float) -> dict[str, int | float]:
        """A sweep value as a point records it: its rule's named values (RuleKind.values), one
        under its own `sweep_param` ({"speed": 0.3}; static's {"layers": 3})."""
        if not self.rule:
            return {self.sweep_param: self.sweep_type(value)}
        values = self.rule_kind().values(value)
        return {self.sweep_param: next(iter(values.values()))} if len(values) == 1 else values

    def rule_settings(self) -> dict[str, Any]:
        """What it sets of its own rule's `Settings`: its settings of those names (PABEE's
        regression_threshold, patience's tau)."""
        fields = self.rule_kind().Settings.model_fields if self.rule else {}
        return {k: v for k, v in self.config.model_dump().items() if k in fields}

    @property
    def supports_regression(self) -> bool:
        """Whether it can do regression tasks: not where its rule needs classes; a method
        without a rule (one exit per model) can. A subclass may say so itself."""
        return self.rule_kind().supports_regression if self.rule else True

    def rule_kind(self) -> RuleKind:
        return get_rule(self.rule)

    def default_sweep(self, num_layers: int, is_regression: bool, num_labels: int = 2
                      ) -> list[float]:
        """The sweep values tried when the user gives none: its rule's (entropy grids depend on
        C)."""
        self.check_regression(is_regression)
        return self.rule_kind().default_sweep(num_layers, is_regression, num_labels)

    def exit_rule(self, value: float, is_regression: bool, facts: ModelFacts | None = None
                  ) -> ExitRule:
        """Its rule at one sweep value, for a model described by `facts` (None: what can be
        known without one); every sample exits at the one exit of a model without a rule."""
        self.check_regression(is_regression)
        if not self.rule:
            from eebench.rules.base import FixedRule

            return FixedRule(exit=True)
        kind = self.rule_kind()
        kind.check(value)
        if facts is None:
            facts = ModelFacts(is_regression, 2, settings=self.settings)
        # its authors' test of the rule's quantity, and the settings it gives its rule
        facts = replace(facts, comparison=self.comparison or facts.comparison,
                        rule_settings={**facts.rule_settings, **self.rule_settings()})
        return kind.build(value, facts)

    def rule_comparison(self) -> str | None:
        """How its rule's quantity meets the threshold: its own `comparison`, else the rule's."""
        return (self.comparison or self.rule_kind().comparison) if self.rule else None

    def check_task(self, task: Any) -> None:
        """Refuse a task it cannot do: a unit (a label per text, a tag per word) it has no model
        for or that its settings do not say (eebench.methods.units), a regression where its rule
        needs classes."""
        self.check_unit(task)
        self.check_regression(getattr(task, "is_regression", False),
                              f" task {getattr(task, 'name', '?')!r}")

    def check_regression(self, is_regression: bool, what: str = "") -> None:
        if is_regression and not self.supports_regression:
            raise UsageError(f"method {self.name!r} cannot do regression{what} (its {self.rule} "
                             "rule needs classes)",
                             hint="use pabee or static for regression tasks such as STS-B")

    def provided(self, is_regression: bool) -> set[str]:
        """What a trained model of this method gives an exit rule on such a task (NEEDS)."""
        return set(self.provides) | (set() if is_regression else {"classes"})
