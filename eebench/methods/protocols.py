"""The optional parts of a method, not on EarlyExitMethod: a method that fits something after
training (maxprob's temperatures) implements `Calibrates`; one that acts on the gradient's way
between layers and heads while a stage trains (SWEET's detaching, ElasticBERT's gradient
equilibrium) implements `Routes`; a method of a decoder LLM (`eebench decode`: self-speculation,
CALM, ...) implements `DecodesGreedy` and/or `DecodesTeacherForced` (together: `Decodes`). A
method has the methods and nothing else: the trainer and the decoder run ask
eebench.methods.derived (`calibration_fraction`, `route`, `decodings`), which checks with
isinstance, in one place."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # torch stays out of `eebench --help`
    from torch import nn

    from eebench.methods.decoding import DecodeContext
    from eebench.methods.stages import Stage
    from eebench.models.multi_exit import Route


@runtime_checkable
class Calibrates(Protocol):
    """A method that fits what its rule needs after training, on a held-out slice."""

    def calibration_fraction(self) -> float:
        """The share of the training split held out of training for `calibrate` (> 0)."""

    def calibrate(self, model: nn.Module, outputs: Any) -> None:
        """Fit on the held-out slice (`outputs`: its ExitOutputs, every exit's logits and the
        labels)."""


@runtime_checkable
class Routes(Protocol):
    """A method that acts on the hidden states' way to the heads and the next layer."""

    def route(self, stage: Stage, num_exits: int) -> Route | None:
        """How the hidden states reach the heads and the next layer while `stage` trains a
        model of `num_exits` exits (see MultiExitModel.forward); None: unchanged."""


@runtime_checkable
class DecodesGreedy(Protocol):
    """A method of a decoder LLM's early exit that does greedy generation (humaneval-gen)."""

    def greedy_points(self, ctx: DecodeContext) -> list[Any]:
        """Its operating points (DecoderPoint, made by `ctx.point`) from the run's greedy
        traces."""


@runtime_checkable
class DecodesTeacherForced(Protocol):
    """A method of a decoder LLM's early exit that does teacher-forced prediction (imdb-lm)."""

    def teacher_points(self, ctx: DecodeContext) -> list[Any]:
        """Its operating points from the run's teacher-forced passes."""


# A decoder method (`eebench decode`) implements one or both: `isinstance(m, Decodes)`. Which
# decoder tasks it does, whether a run's exits fit it, its real decodes to time: derived.
Decodes = DecodesGreedy | DecodesTeacherForced
