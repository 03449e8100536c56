"""What a method's exits classify, its `unit`: a label per text ("sequence": GLUE, ELUE) or a tag
per word ("token": sequence labelling, CoNLL-2003, WNUT-17).

Every method has the setting `unit` (eebench.methods.settings); the runner sets it from the task
(`for_task`), so a method's token model is the same method with a token head at each of its exits
(eebench.methods.heads) and its `token_rule` (a token rule of eebench.rules.token_catalog) where
its text rule was: DeeBERT's token model exits on the mean entropy of its words (the survey's
adaption). A method without a token rule does no token task, unless it has no rule at all
(static's single exit). A method that only labels tokens (SENTEE, TOKEE) sets
`sequence_tasks = False`: its unit is "token" unless said otherwise. What follows from these
(`units`, `unit_rule`, `check_unit`, `methods_for`) is in eebench.methods.derived.
"""

from __future__ import annotations

from typing import Any

from eebench.models.units import TOKEN, unit_of


def for_task(settings: dict[str, Any], task: Any) -> dict[str, Any]:
    """A method's settings for `task`: its token model (`unit` "token") on a token task."""
    if unit_of(getattr(task, "unit", None)).per_token:
        return {**settings, "unit": TOKEN.name}
    return dict(settings)
