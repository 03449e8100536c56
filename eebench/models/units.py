"""Exit units: what one exit decides about, as a strategy the engine asks, never a name it tests.

A model says its unit by name (`model.unit`: what its heads classify, eebench.models.token_heads;
a task says it in its spec); `unit_of(name)` gives the Unit object, and the one dynamic loop
(eebench.rules.engine), the one evaluator (eebench.run.evaluate) and the FLOP counter ask it:

    exit outputs      SEQUENCE [b, C + S] (logits, then signals)    TOKEN [b, T, C]
    a prediction      the argmax (or the regression value) per row  the argmax per counting token
                                                                    (each word's first piece),
                                                                    -1 elsewhere: [b, T]
    a rule's state    `rule.start(n)`, rows cut as rows leave       `rule.start_tokens(counting)`,
                                                                    its rows and the padding columns
                                                                    no live sentence needs cut
    carried upward    nothing: an exited row leaves                 a halted token's state is copied
                                                                    to the layers above (TOKEE): a
                                                                    walk that freezes pieces is told
    scored by         the task's metrics on a label per text         seqeval on a tag per word
    FLOPs             per sequence, its path at its token length     the same for a sentence-level
                                                                    decision; per token (each layer
                                                                    at its live pieces) for halting

The loop is the same for every unit: a batch walks the model exit by exit (eebench.models.exits),
the rule decides on what each exit emits, the unit's `Tracker` records what is decided (where a
piece exits, what it predicts there), `carry` tells the walk what halted, and the pieces that are
done leave the batch (`cut`).

The third unit, a generated token of a decoder LLM (CALM: a token may exit after any layer), is
one more instance, with nothing in the loop touched: GENERATED. Its walk
(eebench.rules.calm_decoding.DecoderWalk) runs one decoding position exit by exit over the
sequence's shared KV cache, and a decode runs the loop once per generated position. `start`
begins the rule's state per sequence being generated (CALM's rule keeps none); `carry(walk,
step)` tells the walk which sequences exit here (`walk.fill_skipped(step.exit)`), and their
hidden state at the exit is copied into the key/value cache of every layer they skipped (CALM's
state propagation); its `GeneratedTracker` records each sequence's exit and its token there.
Batch size 1: a batch's rows share one cache whose layers append a whole batch at a time, and
tokens of different prompts would exit at different layers, so the walk cuts no rows (`keep`
refuses). Its
points come from one teacher-forced pass, the same rule replayed over the stored confidences
(eebench.rules.decoder_sweep), checked by real decoding; the decoder run scores them and counts
their FLOPs (each token at its position: its layers up to its exit, the exit heads read, the key
and value projections of the skipped layers that the copy fills), not this unit's `score` and
`flops_along`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from eebench.models.unit_records import (
    Agreement,
    Gathered,
    GatheredSentences,
    GatheredSequences,
    GeneratedTracker,
    SequenceTracker,
    TokenRun,
    TokenTracker,
    Tracker,
    counting_tokens,
)

if TYPE_CHECKING:  # torch stays out of `eebench --help`
    import torch

__all__ = ["GENERATED", "SEQUENCE", "TOKEN", "UNITS", "Agreement", "TokenRun", "Tracker", "Unit",
           "counting_tokens", "model_unit", "unit_of"]


@dataclass(frozen=True)
class Unit:
    """What one exit decides about; SEQUENCE and TOKEN are its instances (see the module)."""

    name: str
    per_token: bool = False  # a prediction (and a rule's state) per token, [b, T]
    scores_quality: bool = True  # calibration / consistency of the exited probabilities
    # a run keeps every exit's logits, so its decisions re-derive from its files alone
    stores_logits: bool = True
    # a generated token of a decoder LLM (the decoder tasks, eebench.tasks.lm): its points come
    # from one teacher-forced pass (eebench.rules.decoder_sweep), checked by real decoding
    generates: bool = False
    does: str = "labels whole texts"  # what a task of this unit asks (a refusal says it)

    # -- the rule's state ------------------------------------------------------------------
    def counting(self, batch: dict, enc: Any = None) -> torch.Tensor | None:
        """The pieces a rule reads and a prediction is scored at, per row of `batch`; None
        where a row is one piece."""
        return None

    def start(self, rule: Any, n: int, counting: torch.Tensor | None, device: Any) -> Any:
        return rule.start(n, device)

    def fit(self, state: Any, logits: torch.Tensor) -> Any:
        """The state for an exit's outputs (a token state: the columns the logits have)."""
        return state

    def cut(self, state: Any, keep: torch.Tensor) -> Any:
        """The state of the rows `keep` (the pieces still running)."""
        return {k: v[keep] for k, v in state.items()}

    def carry(self, walk: Any, step: Any) -> None:
        """Carry what halted at this exit upward: nothing for a sequence (it left)."""

    # -- predictions -----------------------------------------------------------------------
    def read(self, logits: torch.Tensor, is_regression: bool) -> torch.Tensor:
        """An exit's prediction from its logits: the regression value or the argmax."""
        return logits[..., 0] if is_regression else logits.argmax(-1)

    def tracker(self, n: int, counting: torch.Tensor | None, last: int, device: Any,
                is_regression: bool) -> Tracker:
        return SequenceTracker(self.read, n, last, device, is_regression)

    def gather(self, n: int, enc: Any, is_regression: bool) -> Gathered:
        """Collects batches' answers over a split of `n` (rows no batch holds: exit 0)."""
        return GatheredSequences(n, is_regression)

    def agreement(self, simulated: Any, real: Any, indices: Sequence[int] | None,
                  is_regression: bool, atol: float, tolerance: float) -> Agreement:
        """Count pieces where real inference decided otherwise than the simulation, and
        those of them within `tolerance` of the boundary."""
        idx = np.arange(len(simulated.exit_index)) if indices is None else np.asarray(indices)
        same_exit = simulated.exit_index[idx] == real.exit_index[idx]
        if is_regression:
            same_pred = np.isclose(simulated.prediction[idx], real.prediction[idx], atol=atol)
        else:
            same_pred = simulated.prediction[idx] == real.prediction[idx]
        bad = ~(same_exit & same_pred)
        near = bad & (simulated.margin[idx] < tolerance)
        return Agreement(len(idx), int(bad.sum()), int(near.sum()))

    # -- a run's pass and what its directory stores ----------------------------------------
    def collect(self, model: Any, enc: Any, batches: Any,
                progress: Callable[[int], None] | None = None) -> Any:
        """Every exit's outputs for every piece of the split, one full pass
        (eebench.models.outputs)."""
        from eebench.models.outputs import collect_exit_logits

        return collect_exit_logits(model, batches, progress=progress)

    def answers(self, enc: Any, prediction: Any) -> Any:
        """What a point's predictions are scored and stored as: a label id (score) per text."""
        return np.asarray(prediction)

    def gold(self, enc: Any) -> Any:
        """The split's gold answers (a label id or score per text), as it was loaded."""
        return list(enc.labels)

    def stored_point(self, enc: Any, answers: Any, token_exit: Any, exit_layer_of: np.ndarray,
                     is_regression: bool) -> dict[str, np.ndarray]:
        """One point's per-piece arrays besides its exit layers. Class ids fit in int16 like the
        exit layers (a quarter of int64, for run directories that are committed); regression
        scores stay float32."""
        return {"prediction": answers.astype(np.float32 if is_regression else np.int16)}

    def stored_split(self, enc: Any, out: Any, is_regression: bool) -> dict[str, np.ndarray]:
        """The split's arrays: real lengths, and gold labels where it has them."""
        arrays = {"lengths": out.lengths.astype(np.int32)}
        if out.labels is not None:
            labels = np.asarray(out.labels)
            arrays["labels"] = labels if is_regression else labels.astype(np.int16)
        return arrays

    def stored_logits(self, out: Any) -> np.ndarray:
        """What the run keeps of the pass's outputs: every exit's logits [E, N, C]."""
        return out.logits.numpy()

    # -- scores and costs ------------------------------------------------------------------
    def score(self, spec: Any, answers: Any, labels: Any) -> dict[str, float]:
        """The task's metrics of one point's answers (label ids or scores per text)."""
        from eebench.tasks.metrics import compute_metrics

        return compute_metrics(spec, answers, labels)

    def flops_along(self, table: Any, exit_index: np.ndarray, lengths: np.ndarray,
                    live_pieces: np.ndarray | None = None, live_costs: Any = None) -> np.ndarray:
        """int64 FLOPs of each piece along its path to its exit: a sequence runs every layer up
        to there at its real token length (eebench.measure.cost_table)."""
        return table.per_sample_flops(exit_index, lengths)


class _TokenUnit(Unit):
    """A tag per token: a sentence-level rule lets whole sentences go; a halting rule halts
    tokens on their own, and their states are copied upward (a walk that `freeze`s them)."""

    def counting(self, batch: dict, enc: Any = None) -> torch.Tensor:
        if enc is not None:  # an EncodedWords: each word's first piece
            rows, width = batch["index"].tolist(), batch["input_ids"].shape[1]
            return enc.counting_mask(rows, width).to(batch["input_ids"].device)
        return counting_tokens(batch)

    def start(self, rule: Any, n: int, counting: torch.Tensor | None, device: Any) -> Any:
        start = getattr(rule, "start_tokens", None)  # a rule of one decision per row: start(n)
        return start(counting) if start is not None else rule.start(n, device)

    def fit(self, state: Any, logits: torch.Tensor) -> Any:
        width = logits.shape[1]
        return {k: v[:, :width] if v.ndim >= 2 else v for k, v in state.items()}

    def carry(self, walk: Any, step: Any) -> None:
        freeze, halt = getattr(walk, "freeze", None), getattr(step, "halt", None)
        if freeze is not None and halt is not None:
            freeze(halt)  # their states are copied to the layers above

    def read(self, logits: torch.Tensor, is_regression: bool) -> torch.Tensor:
        return logits.argmax(-1)

    def tracker(self, n: int, counting: torch.Tensor | None, last: int, device: Any,
                is_regression: bool) -> Tracker:
        if counting is None:
            raise ValueError("a token batch needs its counting tokens")
        return TokenTracker(counting.to(device).bool(), last)

    def gather(self, n: int, enc: Any, is_regression: bool) -> Gathered:
        return GatheredSentences(enc.lengths)

    def agreement(self, simulated: Any, real: TokenRun, indices: Sequence[int] | None,
                  is_regression: bool, atol: float, tolerance: float) -> Agreement:
        """Sentences whose exit or some counting token's prediction differ from the
        simulation's (TokenDecisions over [N, T], T at least each sentence's length)."""
        idx = range(len(real.exit_index)) if indices is None else indices
        bad = near = 0
        for i in idx:
            k = len(real.predictions[i])
            sim_pred = simulated.prediction[i, :k].cpu().numpy()
            same = (int(simulated.exit_index[i]) == int(real.exit_index[i])
                    and np.array_equal(sim_pred, real.predictions[i])
                    and not (simulated.prediction[i, k:] >= 0).any())
            if not same:
                bad += 1
                near += bool(simulated.margin[i].min() < tolerance)
        return Agreement(len(idx), bad, near)

    def collect(self, model: Any, enc: Any, batches: Any,
                progress: Callable[[int], None] | None = None) -> Any:
        from eebench.models.outputs import collect_token_logits

        return collect_token_logits(model, enc, batches, progress=progress)

    def answers(self, enc: Any, prediction: Any) -> list[list[int]]:
        """A tag id per word, read at each word's first piece (a word cut off is O)."""
        return enc.predictions_per_word(np.asarray(prediction))

    def gold(self, enc: Any) -> Any:
        """The gold tag ids per word of each sentence."""
        return enc.tags

    def stored_point(self, enc: Any, answers: Any, token_exit: Any, exit_layer_of: np.ndarray,
                     is_regression: bool) -> dict[str, np.ndarray]:
        """A tag per word, the split's words in order, and the layer where each word's tag was
        decided (its first piece's exit; 0 for a word with no piece), int8 [W] each."""
        from eebench.data.tokens import first_pieces

        token_exit = np.asarray(token_exit)
        exits = []
        for i, (ids, n) in enumerate(zip(enc.word_ids, enc.words, strict=True)):
            row = np.zeros(n, dtype=np.int16)
            for w, k in first_pieces(ids).items():
                row[w] = exit_layer_of[token_exit[i, k]]
            exits.append(row)
        tags = np.concatenate([np.asarray(t, dtype=np.int16) for t in answers])
        return {"prediction": tags.astype(np.int8),
                "token_exit_layer": np.concatenate(exits).astype(np.int8)}

    def stored_split(self, enc: Any, out: Any, is_regression: bool) -> dict[str, np.ndarray]:
        """Real lengths, words per sentence, which words have a piece (and so a row in the
        stored tags) [W], and the gold tags [W] where the split has them."""
        from eebench.data.tokens import first_pieces

        counted = []
        for ids, n in zip(enc.word_ids, enc.words, strict=True):
            row = np.zeros(n, dtype=np.int8)
            row[list(first_pieces(ids))] = 1
            counted.append(row)
        arrays = {"lengths": out.lengths.astype(np.int32),
                  "words": np.asarray(enc.words, dtype=np.int32),
                  "counted": np.concatenate(counted)}
        if enc.tags is not None:
            arrays["labels"] = np.concatenate([np.asarray(t, dtype=np.int16) for t in enc.tags])
        return arrays

    def stored_logits(self, out: Any) -> np.ndarray:
        """Each exit's tag at the counted words, int8 [E, K] (logits [E, K, C] would make a
        committed CoNLL run directory 5 MB)."""
        return out.logits[:, out.mask].argmax(-1).numpy().astype(np.int8)

    def score(self, spec: Any, answers: Any, labels: Any) -> dict[str, float]:
        """Entity-level metrics (seqeval) over every word: `answers` a tag per word, `labels`
        the gold tags per word."""
        from eebench.tasks.seqlabel import token_metrics

        return token_metrics(spec, answers, labels)

    def flops_along(self, table: Any, exit_index: np.ndarray, lengths: np.ndarray,
                    live_pieces: np.ndarray | None = None, live_costs: Any = None) -> np.ndarray:
        """A sentence-level decision: the whole sentence runs to its exit (as a sequence). Tokens
        halting on their own (`live_pieces` [N, L]): each layer at its live pieces
        (eebench.measure.token_flops)."""
        if live_pieces is None:
            return table.per_sample_flops(exit_index, lengths)
        return live_costs.sentence_flops(table, exit_index, lengths, live_pieces)


class _GeneratedUnit(Unit):
    """A generated token of a decoder, one position at a time: a sequence that exits leaves,
    and its state at the exit fills the skipped layers' KV cache (a walk that `fill_skipped`)."""

    def carry(self, walk: Any, step: Any) -> None:
        fill = getattr(walk, "fill_skipped", None)
        if fill is not None:
            fill(step.exit)  # keys and values of the layers above, from the exited state

    def tracker(self, n: int, counting: torch.Tensor | None, last: int, device: Any,
                is_regression: bool) -> Tracker:
        return GeneratedTracker(n, last, device)

    def score(self, spec: Any, answers: Any, labels: Any) -> dict[str, float]:
        """A decoder's points are scored over whole decodes against the full model's tokens
        (eebench.tasks.lm_metrics, by eebench.run.decoding), not answer by answer here."""
        raise NotImplementedError(f"{spec.name}: generated tokens are scored by "
                                  "eebench.tasks.lm_metrics over a decode")

    def flops_along(self, table: Any, exit_index: np.ndarray, lengths: np.ndarray,
                    live_pieces: np.ndarray | None = None, live_costs: Any = None) -> np.ndarray:
        """A generated token's FLOPs depend on its position and the KV cache the decode has
        built (eebench.measure.decoder_flops), not on an encoder's per-layer cost table."""
        raise NotImplementedError("generated tokens' FLOPs are counted per decode by "
                                  "eebench.measure.decoder_flops")


SEQUENCE = Unit("sequence")
TOKEN = _TokenUnit("token", per_token=True, scores_quality=False, stores_logits=False,
                   does="tags every word")
# A generated token: the loop above runs its per-token exits over a decoder walk, which fills
# the skipped layers' KV cache from a halted token's state (eebench.rules.calm_decoding)
GENERATED = _GeneratedUnit("generated", scores_quality=False, stores_logits=False,
                           generates=True, does="predicts each next token of a decoder")
UNITS: dict[str, Unit] = {u.name: u for u in (SEQUENCE, TOKEN, GENERATED)}


def unit_of(unit: str | Unit | None) -> Unit:
    """The Unit of a name (a model's or a task's `unit`; None: a sequence)."""
    if isinstance(unit, Unit):
        return unit
    found = UNITS.get(SEQUENCE.name if unit is None else unit)
    if found is None:  # a method's or a file's bug
        raise ValueError(f"unknown exit unit {unit!r}: one of {', '.join(UNITS)}")
    return found


def model_unit(model: Any) -> Unit:
    """The Unit of a model of the exit protocol (a model that does not say: a sequence)."""
    return unit_of(getattr(model, "unit", None))
