"""What the one dynamic loop records for each exit unit (eebench.models.units), batch by batch,
and how a split's batches are gathered: a Tracker per batch (where each piece exits, what it
predicts there; per token, where each counting token was decided and its smallest margin; per
generated position, the exit its token took and the token), a gatherer per split
(Decisions-like arrays for texts, a TokenRun for sentences), and the Agreement of the
simulation with real inference.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # torch stays out of `eebench --help`
    import torch

__all__ = ["Agreement", "Gathered", "GatheredSentences", "GatheredSequences", "GeneratedTracker",
           "SequenceTracker", "TokenRun", "TokenTracker", "Tracker", "counting_tokens"]

IGNORE = -100  # a piece with no label (eebench.data.batching.IGNORE)


@dataclass
class Agreement:
    """Simulated decisions against real dynamic inference: how many pieces (texts, sentences)
    were compared, how many were decided otherwise, and how many of those sit within the float
    tolerance of the decision boundary."""

    compared: int
    disagreements: int  # exit or prediction differ
    near_threshold: int  # of those, how many sit within the tolerance of the boundary

    @property
    def unexplained(self) -> int:
        return self.disagreements - self.near_threshold


@dataclass
class TokenRun:
    """Where each sentence exits and a prediction per piece (its real length; -1 where a piece
    does not count): `EncodedWords.predictions_per_word` reads words' tags from them."""

    exit_index: np.ndarray  # [N]
    predictions: list[np.ndarray]  # per sentence, [length]


class Tracker:
    """What one batch's loop decided, exit by exit, for the rows (`alive`) still running."""

    def record(self, alive: torch.Tensor, j: int, logits: torch.Tensor, step: Any,
               go: torch.Tensor, n_exit: int) -> None:
        raise NotImplementedError

    def answer(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(exit index [B], prediction: the unit's shape), in batch order, on the CPU."""
        raise NotImplementedError


def counting_tokens(batch: dict, word_ids: Sequence[Sequence[int | None]] | None = None
                    ) -> torch.Tensor:
    """The tokens a rule reads, bool [B, T]: each word's first piece. From `word_ids` (an
    EncodedWords' `word_ids`, indexed by the batch's `index`) where given, else from the labels
    (!= -100)."""
    import torch

    from eebench.data.tokens import first_pieces

    shape = batch["input_ids"].shape
    if word_ids is None:
        if "labels" not in batch or batch["labels"].shape != shape:
            raise ValueError("an unlabelled batch needs word_ids to find the counting tokens")
        return batch["labels"] != IGNORE
    mask = torch.zeros(shape, dtype=torch.bool)
    for row, i in enumerate(batch["index"].tolist()):
        mask[row, list(first_pieces(word_ids[i]).values())] = True
    return mask.to(batch["input_ids"].device)


# -- trackers: what one batch decided -------------------------------------------------------

class SequenceTracker(Tracker):
    def __init__(self, read: Callable, n: int, last: int, device: Any, is_regression: bool):
        import torch

        self.read, self.is_regression = read, is_regression
        self.exit = torch.full((n,), last, dtype=torch.long, device=device)
        self.prediction = torch.zeros(n, device=device)

    def record(self, alive, j, logits, step, go, n_exit) -> None:
        if n_exit:
            self.exit[alive[go]] = j
            self.prediction[alive[go]] = self.read(logits[go], self.is_regression).float()

    def answer(self):
        return self.exit.cpu(), self.prediction.cpu()


class TokenTracker(Tracker):
    """Per token: the exit where it halted (its sentence's, for a sentence-level rule), its
    argmax there and the smallest margin of its decisions; per sentence, where it is done."""

    def __init__(self, counting: torch.Tensor, last: int):
        import torch

        (n, width), device = counting.shape, counting.device
        self.mask, self.pending = counting, counting.clone()  # pending: not yet decided
        self.exit_index = torch.full((n,), last, dtype=torch.long, device=device)
        self.token_exit = torch.full((n, width), last, dtype=torch.long, device=device)
        self.prediction = torch.full((n, width), -1, dtype=torch.long, device=device)
        self.margin = torch.full((n, width), float("inf"), device=device)

    def record(self, alive, j, logits, step, go, n_exit) -> None:
        import torch

        w = logits.shape[1]  # the columns the sentences still here need
        here = self.pending[alive, :w]
        token_margin = getattr(step, "token_margin", None)
        if token_margin is not None:
            m = self.margin[alive, :w]
            self.margin[alive, :w] = torch.where(here, torch.minimum(m, token_margin.float()), m)
        now = here & go[:, None]  # a sentence that goes takes its tokens still running along
        halt = getattr(step, "halt", None)
        if halt is not None:
            now = now | (halt & here)
        self.token_exit[alive, :w] = torch.where(now, j, self.token_exit[alive, :w])
        self.prediction[alive, :w] = torch.where(now, logits.argmax(-1),
                                                 self.prediction[alive, :w])
        self.pending[alive, :w] = here & ~now
        if n_exit:
            self.exit_index[alive[go]] = j

    def decisions(self) -> tuple[torch.Tensor, ...]:
        """(exit_index [B], token_exit, prediction, margin [B, T]), -1 where a token does not
        count, on the CPU."""
        import torch

        gone = torch.tensor(-1, device=self.mask.device)
        return (self.exit_index.cpu(), self.token_exit.where(self.mask, gone).cpu(),
                self.prediction.where(self.mask, gone).cpu(), self.margin.cpu())

    def answer(self):
        return self.exit_index.cpu(), self.prediction.cpu()


class GeneratedTracker(Tracker):
    """Per sequence being generated, at its one new position: the exit its token took and the
    token: the argmax its rule read the confidence at (a step's `prediction`: CALM's one softmax
    gives both), else the logits' argmax (the model's own head, at the last exit)."""

    def __init__(self, n: int, last: int, device: Any):
        import torch

        self.exit = torch.full((n,), last, dtype=torch.long, device=device)
        self.token = torch.zeros(n, dtype=torch.long, device=device)

    def record(self, alive, j, logits, step, go, n_exit) -> None:
        if n_exit:
            read = getattr(step, "prediction", None)
            token = logits.argmax(-1) if read is None else read
            self.exit[alive[go]] = j
            self.token[alive[go]] = token[go].long()

    def answer(self):
        return self.exit.cpu(), self.token.cpu()


# -- gathering a split's batches ------------------------------------------------------------

class Gathered:
    def add(self, rows: Sequence[int], answer: tuple[torch.Tensor, torch.Tensor]) -> None:
        raise NotImplementedError

    def result(self, make: Callable[..., Any] | None = None) -> Any:
        raise NotImplementedError


class GatheredSequences(Gathered):
    def __init__(self, n: int, is_regression: bool):
        self.is_regression = is_regression
        self.exit_index = np.zeros(n, dtype=np.int64)
        self.prediction = np.zeros(n, dtype=np.float64)

    def add(self, rows, answer) -> None:
        self.exit_index[rows], self.prediction[rows] = answer[0].numpy(), answer[1].numpy()

    def result(self, make=None):
        prediction = self.prediction if self.is_regression else self.prediction.astype(np.int64)
        n = len(self.exit_index)
        return make(self.exit_index, prediction, np.full(n, np.inf))


class GatheredSentences(Gathered):
    def __init__(self, lengths: Sequence[int]):
        self.lengths = [int(k) for k in lengths]
        self.exit_index = np.zeros(len(self.lengths), dtype=np.int64)
        self.predictions = [np.full(k, -1, dtype=np.int64) for k in self.lengths]

    def add(self, rows, answer) -> None:
        exits, preds = answer
        for row, i in enumerate(rows):
            self.exit_index[i] = int(exits[row])
            self.predictions[i] = preds[row, : self.lengths[i]].numpy()

    def result(self, make=None):
        return TokenRun(self.exit_index, self.predictions)
