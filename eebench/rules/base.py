"""The exit-rule contract: stepwise and batched, the same code for the one-pass simulation and for
real dynamic inference.

`rule.start(n)` makes a state of tensors whose first dim is the batch; `rule.step(state, j,
logits, signals)` is called after exit head j with that exit's logits for the samples still running
(and, for a rule that reads them, the head's other outputs, e.g. BERxiT's learned exit score, by
name: `signals`) and returns which of them exit now. The simulation calls it over stored logits
of every sample; real dynamic inference calls it on live logits and drops the exited rows
(`select_state`). The same code
decides in both, so they agree by construction up to float noise, and `margin` says how close each
decision was to flipping.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch stays out of `eebench --help`
    import torch

State = dict[str, "torch.Tensor"]
Signals = dict[str, "torch.Tensor"]  # a head's outputs besides its logits, [n] each, by name


@dataclass(frozen=True)
class StepResult:
    state: State
    exit: torch.Tensor  # bool [n]: these samples exit at this layer
    margin: torch.Tensor  # float [n]: distance of the exit quantity from the decision boundary


class ExitRule:
    """A stepwise exit decision. Subclasses implement `start` and `step`.

    The caller exits every sample still running at the last exit, whatever `step` says there:
    a rule never needs to know how many exits the model has.
    """

    def start(self, n: int, device: Any = None) -> State:
        raise NotImplementedError

    def step(self, state: State, exit_index: int, logits: torch.Tensor,
             signals: Signals | None = None) -> StepResult:
        raise NotImplementedError


def select_state(state: State, keep: torch.Tensor) -> State:
    """Keep the rows `keep` (bool mask or index tensor) of every state tensor (batch shrinking)."""
    return {k: v[keep] for k, v in state.items()}


COMPARISONS = ("<", "<=", ">=", ">")  # how a rule's quantity may meet its threshold


def meets(quantity: torch.Tensor, threshold: float, comparison: str) -> torch.Tensor:
    """Where `quantity <comparison> threshold` holds (bool, per row)."""
    import torch

    ops = {"<": torch.lt, "<=": torch.le, ">=": torch.ge, ">": torch.gt}
    if comparison not in ops:  # a rule's bug, not a user's
        raise ValueError(f"unknown comparison {comparison!r}: one of {', '.join(COMPARISONS)}")
    return ops[comparison](quantity, threshold)


class FixedRule(ExitRule):
    """The same decision for every sample at every exit: `exit=True` exits at the first exit (a
    single-exit model), `exit=False` never exits early (the full model, the timing baseline)."""

    def __init__(self, exit: bool):
        self.exit = bool(exit)

    def start(self, n: int, device: Any = None) -> State:
        return {}

    def step(self, state: State, exit_index: int, logits: torch.Tensor,
             signals: Signals | None = None) -> StepResult:
        import torch

        n = logits.shape[0]
        inf = torch.full((n,), float("inf"), device=logits.device)
        return StepResult(state, torch.full((n,), self.exit, dtype=torch.bool,
                                            device=logits.device), inf)
