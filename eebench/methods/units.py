"""What a method's exits classify, its `unit`: a label per text ("sequence": GLUE, ELUE) or a tag
per word ("token": sequence labelling, CoNLL-2003, WNUT-17).

Every method has the setting `unit` (eebench.methods.settings); the runner sets it from the task
(`for_task`), so a method's token model is the same method with a token head at each of its exits
(eebench.methods.heads) and its `token_rule` (a token rule of eebench.rules.token_catalog) where
its text rule was: DeeBERT's token model exits on the mean entropy of its words (the survey's
adaption). A method without a token rule does no token task, unless it has no rule at all
(static's single exit). A method that only labels tokens (SENTEE, TOKEE) sets
`sequence_tasks = False`: its unit is "token" unless said otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from eebench.errors import UsageError


class UnitDefaults:
    """The unit part of EarlyExitMethod."""

    name: ClassVar[str]
    rule: ClassVar[str]
    config: Any
    # Its exit rule on a token task; None: it does no token task (unless it has no rule)
    token_rule: ClassVar[str | None] = None
    sequence_tasks: ClassVar[bool] = True  # False: it labels tokens only
    # The registered methods that do tasks of a unit (for a refusal's hint): given by
    # EarlyExitMethod, beside the registry, which this mixin does not import.
    methods_for: Callable[[str], list[str]]

    @classmethod
    def units(cls) -> tuple[str, ...]:
        """The task units it can do: "sequence" (a label per text), "token" (a tag per word)."""
        token = cls.token_rule is not None or not cls.rule
        return (("sequence",) if cls.sequence_tasks else ()) + (("token",) if token else ())

    @classmethod
    def with_unit(cls, settings: dict[str, Any]) -> dict[str, Any]:
        """Its settings, the unit "token" by default where it labels tokens only."""
        return settings if cls.sequence_tasks else {"unit": "token", **settings}

    def resolve_unit(self) -> None:
        """Its rule for its `unit` (the instance's `rule`): `token_rule` on a token model."""
        if self.config.unit == "token" and self.rule:
            if self.token_rule is None:
                raise UsageError(f"method {self.name!r} has no token model (its {self.rule} "
                                 "rule decides per text)",
                                 hint=f"token methods: {', '.join(self.methods_for('token'))}")
            self.rule = self.token_rule
        elif self.config.unit == "sequence" and not self.sequence_tasks:
            raise UsageError(f"method {self.name!r} labels tokens only (unit 'token')",
                             hint=f"methods for texts: {', '.join(self.methods_for('sequence'))}")

    def check_unit(self, task: Any) -> None:
        """Refuse a task of a unit it has no model for, or that its settings do not say."""
        name, unit = getattr(task, "name", "?"), getattr(task, "unit", "sequence")
        if unit not in self.units():
            what = "tags every word" if unit == "token" else "labels whole texts"
            raise UsageError(f"task {name!r} {what}; method {self.name!r} does not",
                             hint=f"methods for such tasks: {', '.join(self.methods_for(unit))}")
        if self.config.unit != unit:  # the runner sets it from the task; a caller's slip
            raise UsageError(f"method {self.name!r} is set up for unit {self.config.unit!r}; "
                             f"task {name!r} needs unit {unit!r}",
                             hint=f"set unit={unit!r} (eebench run does so from the task)")

    def describe_units(self) -> dict[str, Any]:
        return {"units": list(self.units()), "token_rule": self.token_rule}


def for_task(settings: dict[str, Any], task: Any) -> dict[str, Any]:
    """A method's settings for `task`: its token model (`unit` "token") on a token task."""
    if getattr(task, "unit", "sequence") == "token":
        return {**settings, "unit": "token"}
    return dict(settings)
