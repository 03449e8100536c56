"""Token-level early exit (TOKEE) run on the model: each word halts on its own, its pieces' states
are copied to the layers above, and the sentence is done when every word halted.

The authors' loop (LeeSureman/Sequence-Labeling-Early-Exit @9717770, V0/modeling_bert_ee.py
`t_level_win_ee_copy` with test.py's `true_copy=1` and `copy_wordpiece='all'`) runs one sentence
at a time: after each layer, the words that halted keep their hidden states (all of a word's
pieces) while the others and the special tokens go on; every later layer's queries are the live
tokens, its keys and values all tokens. Because a halted word's later states are copies, the
logits of the layers above depend on the decisions taken below: unlike a sentence-level rule,
TOKEE cannot be replayed over the logits of one full pass, so each sweep value runs the model.

`halting_batch` does it for a batch with the one dynamic loop (eebench.rules.engine.exit_loop)
over a `HaltingWalk`: the token unit tells the walk which words halted at each exit (`freeze`),
and from then on their pieces' states are frozen (copied upward). Two walks that decide alike:

- `live=False` (the exact decisions, any family): every layer runs on all tokens and the halted
  pieces' states are put back (the copy), as the authors' code computes it; a sentence that is
  done stays in the batch, computing nothing;
- `live=True` (real dynamic inference, timed): a layer computes only the live tokens
  (eebench.models.token_halting_layer: BERT-style layers), and sentences that are done leave
  the batch.

Each exit's head reads every token's state (a halted word's too: with the rule's
`halted="current"`, as the authors' code, its uncertainty counts in its neighbours' windows).
Besides the decisions, the walk counts how many pieces each layer computed per sentence, from
which eebench.measure counts the per-token FLOPs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import numpy as np
import torch

from eebench.rules.engine import exit_loop
from eebench.rules.tokens import TokenDecisions, TokenExitRule

__all__ = ["HaltingRun", "HaltingWalk", "halting_batch", "halting_inference", "halting_walks"]


@dataclass
class HaltingRun:
    """Decisions over a split of sentences, and the pieces each layer computed."""

    decisions: TokenDecisions  # exit_index [N], token_exit, prediction, margin [N, T]
    live_pieces: np.ndarray  # int [N, L]: the pieces layer i computed for sentence n


class HaltingWalk:
    """A token model's walk in which halted words' pieces keep their states (an ExitWalk of
    eebench.models.exits, plus `freeze`). `owner` long [B, T]: each piece's word's first piece
    (-1 for special tokens and padding). `computed` long [B, L]: the pieces each layer computed
    per sentence."""

    def __init__(self, model, ids: torch.Tensor, attention: torch.Tensor,
                 types: torch.Tensor | None, owner: torch.Tensor, live: bool = False):
        if live:
            from eebench.models.token_halting_layer import check_live

            check_live(model)
        self.model, self.live, self.done = model, live, 0
        self.hidden, self.inputs = model.embed(ids, attention, types)
        n, width = attention.shape
        self.real, self.own = attention.bool(), owner.to(attention.device)
        self.halted = torch.zeros((n, width), dtype=torch.bool, device=attention.device)
        self.rows = torch.arange(n, device=attention.device)  # the batch's rows still running
        self.running = torch.ones(n, dtype=torch.bool, device=attention.device)
        self.computed = torch.zeros((n, model.exit_layers[-1]), dtype=torch.long,
                                    device=attention.device)

    @classmethod
    def of(cls, model, batch: dict, owner: torch.Tensor, live: bool = False) -> HaltingWalk:
        """The walk of one batch (its tensors moved to the model's device)."""
        device = next(model.parameters()).device
        types = batch["token_type_ids"].to(device) if "token_type_ids" in batch else None
        return cls(model, batch["input_ids"].to(device), batch["attention_mask"].to(device),
                   types, owner.to(device), live=live)

    def _here(self, x: torch.Tensor) -> torch.Tensor:
        """Of a tensor over the walk's rows, the rows still running (every row, live)."""
        return x if self.live else x[self.rows]

    def step(self, j: int, emit: bool) -> tuple[torch.Tensor, dict[str, torch.Tensor]] | None:
        m = self.model
        for i in range(self.done, m.exit_layers[j]):
            frozen = (self.own >= 0) & self.halted.gather(1, self.own.clamp(min=0))
            running = self.real & ~frozen & self.running[:, None]
            self.computed[self.rows, i] = self._here(running.sum(1))
            if self.live:
                from eebench.models.token_halting_layer import live_layer

                self.hidden = live_layer(m.layers[i], self.hidden, self.inputs.attention_mask,
                                         running)
            else:
                self.hidden = torch.where(running[..., None], m.layer(i, self.hidden,
                                                                      self.inputs), self.hidden)
        self.done = m.exit_layers[j]
        if not emit:
            return None
        logits = m.head(j, self.hidden, self.real.long())  # [b, T, C]: every token's
        return self._here(logits), {}

    def freeze(self, halt: torch.Tensor) -> None:
        """The counting tokens `halt` [rows running, T] halted: their words' pieces stop."""
        if self.live:
            self.halted |= halt
        else:
            self.halted[self.rows] |= halt

    def keep(self, rows: torch.Tensor) -> None:
        self.rows = self.rows[rows]
        if self.live:  # sentences that are done leave the batch
            width = self.real.shape[1]
            self.hidden, self.inputs = self.hidden[rows], self.inputs.cut(rows, width)
            self.real, self.own, self.halted = self.real[rows], self.own[rows], self.halted[rows]
            self.running = self.running[rows]
        else:  # they stay, computing nothing
            self.running = torch.zeros_like(self.running)
            self.running[self.rows] = True


@torch.inference_mode()
def halting_batch(model, rule: TokenExitRule, batch: dict, mask: torch.Tensor,
                  owner: torch.Tensor, live: bool = False
                  ) -> tuple[TokenDecisions, torch.Tensor]:
    """TOKEE on one batch. `mask` bool [B, T]: the counting tokens (each word's first piece);
    `owner` long [B, T]: each piece's word's first piece (-1 for special tokens and padding).
    Returns the decisions (as eebench.rules.tokens.simulate_tokens gives them) and the pieces
    each layer computed per sentence, long [B, L], both on the CPU."""
    walk = HaltingWalk.of(model, batch, owner, live=live)
    track = exit_loop(model, rule, batch, counting=mask, walk=walk)
    return TokenDecisions(*track.decisions()), walk.computed.cpu()


def halting_walks(model, enc, live: bool = False) -> Callable[[dict], HaltingWalk]:
    """The halting walk of each batch of `enc` (an EncodedWords: its pieces' owners), for the one
    loop's `walk` (eebench.rules.engine.dynamic_batch, dynamic_inference)."""
    def walk(batch: dict) -> HaltingWalk:
        rows, width = batch["index"].tolist(), batch["input_ids"].shape[1]
        return HaltingWalk.of(model, batch, enc.piece_owner(rows, width), live=live)

    return walk


def halting_inference(model, rule: TokenExitRule, batches: Iterable[dict], n: int, width: int,
                      counting: Callable[[dict], tuple[torch.Tensor, torch.Tensor]],
                      live: bool = False,
                      timer: Callable[[], AbstractContextManager] | None = None) -> HaltingRun:
    """TOKEE over a split of `n` sentences (at most `width` pieces) in whatever batch size
    `batches` yields; `counting(batch)` gives its (mask, owner) (EncodedWords.counting_mask,
    .piece_owner). Rows no batch holds keep exit 0 and no prediction. `timer()` brackets each
    batch's model."""
    layers = model.exit_layers[-1]
    exit_index = torch.zeros(n, dtype=torch.long)
    token_exit = torch.full((n, width), -1, dtype=torch.long)
    prediction = torch.full((n, width), -1, dtype=torch.long)
    margin = torch.full((n, width), float("inf"))
    live_pieces = np.zeros((n, layers), dtype=np.int64)
    for batch in batches:
        mask, owner = counting(batch)
        with timer() if timer is not None else nullcontext():
            dec, computed = halting_batch(model, rule, batch, mask, owner, live=live)
        rows = batch["index"].cpu()
        w = mask.shape[1]
        exit_index[rows] = dec.exit_index
        token_exit[rows, :w], prediction[rows, :w] = dec.token_exit, dec.prediction
        margin[rows, :w] = dec.margin
        live_pieces[rows.numpy()] = computed.numpy()
    return HaltingRun(TokenDecisions(exit_index, token_exit, prediction, margin), live_pieces)
