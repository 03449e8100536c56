"""Token-level early exit (TOKEE) run on the model: each word halts on its own, its pieces' states
are copied to the layers above, and the sentence is done when every word halted.

The authors' loop (LeeSureman/Sequence-Labeling-Early-Exit @9717770, V0/modeling_bert_ee.py
`t_level_win_ee_copy` with test.py's `true_copy=1` and `copy_wordpiece='all'`) runs one sentence
at a time: after each layer, the words that halted keep their hidden states (all of a word's
pieces) while the others and the special tokens go on; every later layer's queries are the live
tokens, its keys and values all tokens. Because a halted word's later states are copies, the
logits of the layers above depend on the decisions taken below: unlike a sentence-level rule,
TOKEE cannot be replayed over the logits of one full pass, so each sweep value runs the model.

`halting_batch` does it for a batch, in one of two ways that decide alike:

- `live=False` (the exact decisions, any family): every layer runs on all tokens and the halted
  pieces' states are put back (the copy), as the authors' code computes it;
- `live=True` (real dynamic inference, timed): a layer computes only the live tokens
  (eebench.models.live_layer: BERT-style layers), and sentences that are done leave the batch.

Each exit's head reads every token's state (a halted word's too: with the rule's
`halted="current"`, as the authors' code, its uncertainty counts in its neighbours' windows).
Besides the decisions, the loop returns how many pieces each layer computed per sentence, from
which eebench.measure counts the per-token FLOPs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import numpy as np
import torch

from eebench.rules.base import select_state
from eebench.rules.tokens import TokenDecisions, TokenExitRule

__all__ = ["HaltingRun", "halting_batch", "halting_inference"]


@dataclass
class HaltingRun:
    """Decisions over a split of sentences, and the pieces each layer computed."""

    decisions: TokenDecisions  # exit_index [N], token_exit, prediction, margin [N, T]
    live_pieces: np.ndarray  # int [N, L]: the pieces layer i computed for sentence n


@torch.inference_mode()
def halting_batch(model, rule: TokenExitRule, batch: dict, mask: torch.Tensor,
                  owner: torch.Tensor, live: bool = False
                  ) -> tuple[TokenDecisions, torch.Tensor]:
    """TOKEE on one batch. `mask` bool [B, T]: the counting tokens (each word's first piece);
    `owner` long [B, T]: each piece's word's first piece (-1 for special tokens and padding).
    Returns the decisions (as eebench.rules.tokens.simulate_tokens gives them) and the pieces
    each layer computed per sentence, long [B, L], both on the CPU."""
    device = next(model.parameters()).device
    attention = batch["attention_mask"].to(device)
    types = batch["token_type_ids"].to(device) if "token_type_ids" in batch else None
    mask, owner = mask.to(device).bool(), owner.to(device)
    if live:
        from eebench.models.token_halting_layer import check_live, live_layer

        check_live(model)
    hidden, inputs = model.embed(batch["input_ids"].to(device), attention, types)
    n, width = mask.shape
    last, layers = model.num_exits - 1, model.exit_layers[-1]
    exit_of = {k: j for j, k in enumerate(model.exit_layers)}
    exit_index = torch.full((n,), last, dtype=torch.long, device=device)
    token_exit = torch.full((n, width), last, dtype=torch.long, device=device)
    prediction = torch.full((n, width), -1, dtype=torch.long, device=device)
    margin = torch.full((n, width), float("inf"), device=device)
    computed = torch.zeros((n, layers), dtype=torch.long, device=device)
    alive = torch.arange(n, device=device)  # the batch's rows still running (live mode)
    state = rule.start_tokens(mask)
    done = torch.zeros(n, dtype=torch.bool, device=device)
    real, own = attention.bool(), owner
    for i in range(layers):
        frozen = (own >= 0) & state["halted"].gather(1, own.clamp(min=0))  # halted words' pieces
        running = real & ~frozen & ~done[:, None]
        computed[alive, i] = running.sum(1)
        if live:
            hidden = live_layer(model.layers[i], hidden, inputs.attention_mask, running)
        else:
            hidden = torch.where(running[..., None], model.layer(i, hidden, inputs), hidden)
        j = exit_of.get(i + 1)
        if j is None:
            continue
        logits = model.head(j, hidden, real.long())  # [b, T, C]: every token's
        here = state["mask"] & ~state["halted"] & ~done[:, None]  # words still running
        if j == last:
            token_exit[alive] = torch.where(here, j, token_exit[alive])
            prediction[alive] = torch.where(here, logits.argmax(-1), prediction[alive])
            break
        step = rule.step(state, j, logits)
        rows = alive[:, None].expand(-1, width)
        margin[alive] = torch.where(here, torch.minimum(margin[alive],
                                                        step.token_margin.float()), margin[alive])
        newly = step.halt & here
        token_exit[rows[newly], newly.nonzero()[:, 1]] = j
        prediction[rows[newly], newly.nonzero()[:, 1]] = logits.argmax(-1)[newly]
        now = step.exit & ~done
        exit_index[alive[now]] = j
        state, done = step.state, done | now
        if bool(done.all()):
            break
        if live and bool(done.any()):  # sentences that are done leave the batch
            keep = ~done
            alive, state, done = alive[keep], select_state(state, keep), done[keep]
            hidden, inputs = hidden[keep], inputs.cut(keep, width)
            real, own = real[keep], own[keep]
    gone = torch.tensor(-1, device=device)
    decisions = TokenDecisions(exit_index.cpu(), token_exit.where(mask, gone).cpu(),
                               prediction.where(mask, gone).cpu(), margin.cpu())
    return decisions, computed.cpu()


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
