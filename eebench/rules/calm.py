"""CALM's exit rule (Schuster et al., NeurIPS 2022): a generated token exits at the first exit
whose confidence >= threshold, and predicts that exit's argmax.

The confidence is one of two measures (the rule's `measure` setting) of the exit's softmax over
the vocabulary, computed in float32 (eebench.models.decoder_exits.read_logits): `maxprob`, the
largest probability, or `margin`, the top-1 minus the top-2 probability. The rule reads it from
the exit's signals by name (a decoder walk gives them, and a trace stores the same numbers:
eebench.models.decoder_exits.exit_signals), or from the logits where the signals lack it. It is
compared in float64 with the threshold as given: the float32 number is exact in float64, and the
threshold is never rounded to float32. (The `maxprob` rule compares in float32, its threshold
rounded: not CALM's decision, at a threshold that rounds down.) Its step also says the argmax
the confidence was read at (`prediction`): a generated token's tracker records that token
(eebench.models.unit_records.GeneratedTracker).

This module imports no torch (the catalog lists it without it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from eebench.rules.base import ExitRule, Signals, State, StepResult, meets
from eebench.rules.catalog import RuleKind, even_grid, register_rule, require
from eebench.rules.sweep import RuleSettings

if TYPE_CHECKING:  # torch stays out of `eebench rules`
    import torch

MEASURES = ("maxprob", "margin")
Measure = Literal["maxprob", "margin"]


@register_rule("calm")
class Calm(RuleKind):
    description = ("a generated token exits when its exit's confidence >= threshold: the largest "
                   "vocabulary probability, or the top-1 minus top-2 probability (its `measure`)")
    paper = "CALM (Schuster et al., NeurIPS 2022)"
    comparison = ">="
    unit = "generated"

    class Settings(RuleSettings):
        measure: Measure = "maxprob"

    def default_sweep(self, num_layers, is_regression, num_labels=2):
        return even_grid(0.0, 1.0)  # 0: every token at the first exit; 1: (almost) never early

    def check(self, value):
        require(0 <= value <= 1, self.name, "the threshold is a probability in [0, 1]", value)

    def build(self, value, facts):
        measure = self.settings(facts.rule_settings)["measure"]
        return CalmRule(value, measure, self.comparison_for(facts))


@dataclass(frozen=True)
class CalmStep(StepResult):
    prediction: torch.Tensor  # long [n]: the argmax the confidence was read at


class CalmRule(ExitRule):
    """Exit where the exit's `measure` >= threshold (or the `comparison` given)."""

    def __init__(self, threshold: float, measure: Measure = "maxprob", comparison: str = ">="):
        if measure not in MEASURES:  # the catalog's settings and calm_decode check it first
            raise ValueError(f"unknown confidence measure {measure!r}: one of {MEASURES}")
        self.threshold, self.measure, self.comparison = float(threshold), measure, comparison

    def start(self, n: int, device: Any = None) -> State:
        return {}

    def step(self, state: State, exit_index: int, logits: torch.Tensor,
             signals: Signals | None = None) -> CalmStep:
        read = signals if signals and self.measure in signals else None
        if read is None:
            from eebench.models.decoder_exits import exit_signals

            read = exit_signals(logits)
        quantity = read[self.measure].double()
        return CalmStep(state, meets(quantity, self.threshold, self.comparison),
                        (quantity - self.threshold).abs(), read["argmax"])
