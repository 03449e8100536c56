"""One teacher-forced pass over a given text: every exit's argmax, confidence and the NLL of the
text's actual next token, at every position (imdb-lm's sweep).

`record_teacher_forced(model, exits, ids)` runs the model once over ids [T] (or [1, T]), layer
by layer, and at each exit (and the last layer) reads the vocabulary logits one chunk of
positions at a time, keeping only [exits + 1, T - 1] numbers: the argmax, the max softmax
probability, the top-2 margin and the negative log-likelihood (natural log) of the next token.
Position t predicts token t + 1; the last position predicts nothing and is not read. Memory stays
[T, hidden] plus one chunk of [chunk, vocab]: never [exits, positions, vocab].

The trace it returns has what `decoder_sweep.simulate_calm` reads (`tokens`, `layers`, `argmax`,
`maxprob`, `margin`), where `tokens` is the full model's own argmax: a CALM exit under an oracle
cache (every earlier position's states are the full model's) is what a teacher-forced pass gives.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from eebench.errors import UsageError
from eebench.models.decoder_exits import DecoderExits, embed, num_layers, read_logits, run_layers
from eebench.rules.decoder_sweep import ExitTrace


@dataclass
class TeacherForcedTrace(ExitTrace):
    """An ExitTrace over a given text: `tokens` is the full model's argmax at each position,
    `targets` the text's actual next tokens, `nll` [E + 1, T - 1] their negative
    log-likelihood at each exit (the last row: the full model)."""

    targets: np.ndarray = None  # type: ignore[assignment]  # [T - 1]
    nll: np.ndarray = None  # type: ignore[assignment]  # [E + 1, T - 1]


@torch.no_grad()
def record_teacher_forced(model: nn.Module, exits: DecoderExits, ids: torch.Tensor,
                          chunk: int = 256) -> TeacherForcedTrace:
    """Every exit's reading of a text ids [T] (T >= 2) in one teacher-forced pass."""
    ids = ids.reshape(1, -1)
    n = ids.shape[1] - 1
    if n < 1:
        raise UsageError("a teacher-forced text needs at least 2 tokens")
    targets = ids[0, 1:]
    layers = (*exits.layers, num_layers(model))
    rows: list[list[torch.Tensor]] = [[], [], [], []]
    hidden, done = embed(model, ids[:, :-1]), 0
    for k in layers:
        hidden = run_layers(model, hidden, done, k)
        done = k
        got: list[list[torch.Tensor]] = [[], [], [], []]
        for s in range(0, n, chunk):
            logits = exits.logits(model, k, hidden[0, s:s + chunk]).float()
            arg, top, gap = read_logits(logits)
            logp = torch.log_softmax(logits, dim=-1)
            nll = -logp.gather(-1, targets[s:s + chunk, None])[:, 0]
            for out, value in zip(got, (arg, top, gap, nll)):
                out.append(value)
        for out, parts in zip(rows, got):
            out.append(torch.cat(parts))
    arg, top, gap, nll = (torch.stack(r).cpu().numpy() for r in rows)
    return TeacherForcedTrace(prompt_len=1, tokens=arg[-1].astype(np.int64), layers=layers,
                              argmax=arg.astype(np.int64), maxprob=top.astype(np.float64),
                              margin=gap.astype(np.float64),
                              targets=targets.cpu().numpy().astype(np.int64),
                              nll=nll.astype(np.float64))


@torch.no_grad()
def truncated_greedy(model: nn.Module, exits: DecoderExits, prompt_ids: torch.Tensor,
                     n_new: int, k: int) -> list[int]:
    """Greedy decoding of `n_new` tokens by the model truncated at exit k: the first k layers
    and exit k's head, nothing above (the static baseline, decoded for real: after its first
    disagreement with the full model it follows its own tokens, not the full model's)."""
    from eebench.models.decoder_exits import new_cache

    total = num_layers(model)
    if k != total and k not in exits.layers:
        raise UsageError(f"no exit at layer {k}", hint=f"exits: {list(exits.layers)}")
    cache, step, out = new_cache(model), prompt_ids.reshape(1, -1), []
    for _ in range(n_new):
        hidden = run_layers(model, embed(model, step), 0, k, cache)
        step = exits.logits(model, k, hidden[:, -1:]).argmax(-1)
        out.append(int(step))
    return out


@torch.no_grad()
def truncated_greedy_batch(model: nn.Module, exits: DecoderExits, prompt_ids: torch.Tensor,
                           n_new: int, k: int) -> torch.Tensor:
    """`truncated_greedy` for a batch of prompts of one length [B, P] at once (no padding):
    tokens [B, n_new]; k = L is the full model's greedy decoding."""
    from eebench.models.decoder_exits import new_cache

    total = num_layers(model)
    if k != total and k not in exits.layers:
        raise UsageError(f"no exit at layer {k}", hint=f"exits: {list(exits.layers)}")
    if prompt_ids.dim() != 2 or prompt_ids.shape[1] < 1:
        raise UsageError("a batch of prompts of one length [B, P] is needed")
    cache, step, out = new_cache(model), prompt_ids, []
    for _ in range(n_new):
        hidden = run_layers(model, embed(model, step), 0, k, cache)
        step = exits.logits(model, k, hidden[:, -1:]).argmax(-1)
        out.append(step)
    return torch.cat(out, dim=1)
