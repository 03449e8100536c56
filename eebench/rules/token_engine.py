"""Real dynamic inference for token models (sequence labelling), sentence by sentence.

A model whose exit unit is "token" (`model.unit`, eebench.models.token_heads) gives every exit's
token logits [b, T, C]. Here a sentence-level token rule (`SentenceEntropyRule`, eebench.rules.
tokens: a decision per sentence from its tokens' uncertainties) decides after each exit which
sentences are done; they leave the batch as sequences do in eebench.rules.engine.dynamic_batch
(their rows, and the padding columns no remaining sentence needs), and each of their counting
tokens keeps its prediction from that exit. The rule's state is cut with the batch
(`select_state` for rows, `trim_tokens` for columns), so the live loop calls the same `step` on the
same logits as `simulate_tokens` over stored logits [E, N, T, C] of a full forward: decisions agree
up to the float noise of computing a row in a smaller batch; `compare_tokens` counts
disagreements and excuses those within MARGIN_TOLERANCE of the threshold.

Which tokens count (`counting_tokens`): those with a label (labels != -100: each word's first
piece, as eebench.data.tokens aligns them), or, for an unlabelled split, each word's first piece
from EncodedWords.word_ids. Token-level halting (TOKEE, copying a halted token's state upward) is
not run live here: a sentence leaves whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import numpy as np
import torch

from eebench.data.batching import IGNORE
from eebench.data.tokens import first_pieces
from eebench.rules.base import select_state
from eebench.rules.engine import MARGIN_TOLERANCE
from eebench.rules.tokens import TokenDecisions, TokenExitRule, trim_tokens

__all__ = ["TokenAgreement", "TokenRun", "compare_tokens", "counting_tokens",
           "dynamic_token_batch", "dynamic_token_inference"]


def counting_tokens(batch: dict, word_ids: Sequence[Sequence[int | None]] | None = None
                    ) -> torch.Tensor:
    """The tokens a rule reads, bool [B, T]: each word's first piece. From `word_ids` (an
    EncodedWords' `word_ids`, indexed by the batch's `index`) where given, else from the labels
    (!= -100)."""
    shape = batch["input_ids"].shape
    if word_ids is None:
        if "labels" not in batch or batch["labels"].shape != shape:
            raise ValueError("an unlabelled batch needs word_ids to find the counting tokens")
        return batch["labels"] != IGNORE
    mask = torch.zeros(shape, dtype=torch.bool)
    for row, i in enumerate(batch["index"].tolist()):
        mask[row, list(first_pieces(word_ids[i]).values())] = True
    return mask.to(batch["input_ids"].device)


def _check_token_model(model) -> None:
    unit = getattr(model, "unit", "sequence")
    if unit != "token":
        raise ValueError(f"token inference needs a model with token heads, this one's unit is "
                         f"{unit!r} (eebench.rules.engine runs sequence models)")


@torch.inference_mode()
def dynamic_token_batch(model, rule: TokenExitRule, batch: dict, mask: torch.Tensor | None = None,
                        full: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Real sentence-level early exit on one batch of a token model: after each exit, the
    sentences the rule lets go leave the batch. `mask` bool [B, T] is the counting tokens (None:
    `counting_tokens(batch)`, from its labels). `full=True` asks only the last exit (the timing
    baseline). Returns (exit_index [B], prediction [B, T]: the argmax at the sentence's exit on
    counting tokens, -1 elsewhere), in batch order, on the CPU."""
    _check_token_model(model)
    device = next(model.parameters()).device
    attention = batch["attention_mask"].to(device)
    types = batch["token_type_ids"].to(device) if "token_type_ids" in batch else None
    mask = (counting_tokens(batch) if mask is None else mask).to(device).bool()
    walk = model.exit_walk(batch["input_ids"].to(device), attention, types)
    (n, width), last = mask.shape, model.num_exits - 1
    alive = torch.arange(n, device=device)
    out_exit = torch.full((n,), last, dtype=torch.long, device=device)
    out_pred = torch.full((n, width), -1, dtype=torch.long, device=device)
    state = rule.start_tokens(mask)
    for j in range(model.num_exits):
        out = walk.step(j, emit=not full or j == last)
        if out is None:
            continue
        logits, signals = out  # [b, w, C]: w the columns the sentences still here need
        w = logits.shape[1]
        if j == last:
            go = torch.ones(len(alive), dtype=torch.bool, device=device)
        else:
            step = rule.step(trim_tokens(state, w), j, logits, signals)
            go, state = step.exit, step.state
        n_exit = int(go.sum())  # one device sync per exit
        if n_exit == 0:
            continue
        out_exit[alive[go]] = j
        out_pred[alive[go], :w] = logits[go].argmax(-1)
        if n_exit == len(alive):
            break
        keep = ~go
        alive, state = alive[keep], select_state(state, keep)
        walk.keep(keep)
    return out_exit.cpu(), out_pred.where(mask, -1).cpu()


@dataclass
class TokenRun:
    """Where each sentence exits and a prediction per piece (its real length; -1 where a piece
    does not count): `EncodedWords.predictions_per_word` reads words' tags from them."""

    exit_index: np.ndarray  # [N]
    predictions: list[np.ndarray]  # per sentence, [length]


def dynamic_token_inference(model, rule: TokenExitRule, batches: Iterable[dict], lengths:
                            Sequence[int], word_ids: Sequence[Sequence[int | None]] | None = None,
                            full: bool = False,
                            timer: Callable[[], AbstractContextManager] | None = None) -> TokenRun:
    """Real sentence-level early exit over a split of sentences of `lengths` pieces, in whatever
    batch size `batches` yields (rows no batch holds: exit 0, predictions -1). `word_ids` as in
    `counting_tokens` (needed for an unlabelled split); `timer()` brackets each batch's model."""
    n = len(lengths)
    exit_index = np.zeros(n, dtype=np.int64)
    predictions = [np.full(int(k), -1, dtype=np.int64) for k in lengths]
    for batch in batches:
        mask = counting_tokens(batch, word_ids)
        with timer() if timer is not None else nullcontext():
            e, p = dynamic_token_batch(model, rule, batch, mask, full=full)
        for row, i in enumerate(batch["index"].tolist()):
            exit_index[i] = int(e[row])
            predictions[i] = p[row, : int(lengths[i])].numpy()
    return TokenRun(exit_index, predictions)


@dataclass
class TokenAgreement:
    compared: int  # sentences
    disagreements: int  # sentences whose exit or some counting token's prediction differ
    near_threshold: int  # of those, how many sit within MARGIN_TOLERANCE of the boundary

    @property
    def unexplained(self) -> int:
        return self.disagreements - self.near_threshold


def compare_tokens(simulated: TokenDecisions, real: TokenRun,
                   indices: Sequence[int] | None = None) -> TokenAgreement:
    """Count sentences where real dynamic inference decided otherwise than `simulate_tokens`
    (over stored logits [E, N, T, C], T at least each sentence's length)."""
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
            near += bool(simulated.margin[i].min() < MARGIN_TOLERANCE)
    return TokenAgreement(len(idx), bad, near)
