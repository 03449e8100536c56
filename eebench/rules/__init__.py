"""Exit rules and the engine that applies them: simulated over stored logits, or live.

What a rule (built in or a plugin's) is written with: a `RuleKind` registered by name (its
sweep's parameters, its own settings and what it needs of a model) and the `ExitRule` it builds
for one sweep value.
"""

from eebench.rules.base import ExitRule, State, StepResult, select_state
from eebench.rules.catalog import NEEDS, RULES, ModelFacts, RuleKind, get_rule, register_rule
from eebench.rules.sweep import Param, RuleSettings, SweepValues

__all__ = ["NEEDS", "RULES", "ExitRule", "ModelFacts", "Param", "RuleKind", "RuleSettings",
           "State", "StepResult", "SweepValues", "get_rule", "register_rule", "select_state"]
