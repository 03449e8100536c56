"""Typed sweep values: what a rule's sweep is made of.

A rule declares its sweep's parameters (`Param`: a name and whether it is an integer) and its own
settings that are not swept (a `RuleSettings` model). A point of a sweep is its named values,
`SweepValues` ({"threshold": 0.3}, PCEE's {"patience": 2, "threshold": 0.3}): run points,
the results table and submissions store them so (eebench.run.artifacts, eebench.submit.schema).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from eebench.errors import UsageError

SweepValues = dict[str, int | float]  # one point's named values, in the rule's order


@dataclass(frozen=True)
class Param:
    """One parameter of a rule's sweep: its name, and whether its values are integers."""

    name: str
    type: type = float  # int or float


class RuleSettings(BaseModel):
    """A rule's own settings, not swept (a subclass per rule: names, defaults, bounds)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


def typed(rule: str, param: Param, value: Any) -> int | float:
    """One sweep value as its parameter's type: a finite number, a whole one for an integer."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UsageError(f"rule {rule!r}: {param.name} must be a finite number, got {value!r}")
    if param.type is int:
        if not float(value).is_integer():
            raise UsageError(f"rule {rule!r}: {param.name} must be a whole number, got {value:g}")
        return int(value)
    return float(value)


def shown_values(values: Mapping[str, Any]) -> str:
    """Named values as tables show them: `threshold=0.3`, `patience=2,threshold=0.3`."""
    return ",".join(f"{k}={v:g}" for k, v in values.items())
