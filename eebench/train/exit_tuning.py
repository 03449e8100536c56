"""EE-Tuning: train a causal LM's exit heads on its frozen backbone.

Each exit learns to say what the full model says: the loss at exit k is
KL(full model's next-token distribution || exit k's), averaged over positions, optionally plus
`ce_weight` times the cross-entropy of exit k on the text itself (the next input token). The
backbone and the shared LM head stay frozen: the backbone runs under no_grad, its hidden states
are detached inputs, and only the exits' own parameters (adapters, norms) get gradients.

Memory is bounded: per batch the backbone keeps one hidden state [B, T, d] per exit and the last
layer's; the vocabulary-sized logits exist only for one chunk of positions of one exit at a time
(teacher and student), and each chunk's gradient is accumulated at once (its graph freed).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

from eebench.errors import UsageError
from eebench.models.decoder_exits import DecoderExits, embed, num_layers, parts, run_layers


@torch.no_grad()
def exit_states(model: nn.Module, exits: DecoderExits, input_ids: torch.Tensor
                ) -> dict[int, torch.Tensor]:
    """Hidden states [B, T, d] after each exit layer and after the last layer (no cache)."""
    states, hidden, done = {}, embed(model, input_ids), 0
    for k in (*exits.layers, num_layers(model)):
        hidden = run_layers(model, hidden, done, k)
        states[k], done = hidden, k
    return states


def exit_loss(model: nn.Module, exits: DecoderExits, k: int, hidden: torch.Tensor,
              final: torch.Tensor, targets: torch.Tensor | None = None, ce_weight: float = 0.0
              ) -> torch.Tensor:
    """Sum over positions of KL(full || exit k) (+ ce_weight x CE on `targets`) for rows of
    hidden states [n, d]: the caller divides by the number of positions."""
    with torch.no_grad():
        teacher = torch.log_softmax(model.lm_head(parts(model).norm(final)).float(), dim=-1)
    student = torch.log_softmax(exits.logits(model, k, hidden).float(), dim=-1)
    loss = (teacher.exp() * (teacher - student)).sum()
    if ce_weight and targets is not None:
        loss = loss + ce_weight * nn.functional.nll_loss(student, targets, reduction="sum")
    return loss


def train_exits(model: nn.Module, exits: DecoderExits, batches: Iterable[torch.Tensor],
                steps: int, lr: float = 1e-3, ce_weight: float = 0.0, chunk: int = 256
                ) -> list[float]:
    """Train `exits` for `steps` optimiser steps over `batches` of token ids [B, T] (cycled).

    Returns the mean loss per step (KL per position, summed over exits, + CE if asked).
    """
    params = [p for p in exits.parameters() if p.requires_grad]
    if not params:
        raise UsageError("these exits have nothing to train (logit-lens heads)",
                         hint='build them with ExitSettings(head="adapter")')
    batches = list(batches)
    if not batches or steps < 1:
        raise UsageError("train_exits needs at least one batch and one step")
    frozen = {p: p.requires_grad for p in model.parameters()}
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    was_training, losses = exits.training, []
    try:
        model.requires_grad_(False)
        exits.train()
        for step in range(steps):
            ids = batches[step % len(batches)]
            states = exit_states(model, exits, ids)
            final = states[num_layers(model)].reshape(-1, states[exits.layers[0]].shape[-1])
            # the text's next token; the last position has none (-100: ignored)
            targets = torch.cat([ids[:, 1:], torch.full_like(ids[:, :1], -100)], 1).reshape(-1)
            n = final.shape[0]
            optimizer.zero_grad(set_to_none=True)
            total = 0.0
            for k in exits.layers:
                hidden = states[k].reshape(n, -1)
                for s in range(0, n, chunk):
                    part = slice(s, s + chunk)
                    loss = exit_loss(model, exits, k, hidden[part], final[part], targets[part],
                                     ce_weight) / n
                    loss.backward()
                    total += float(loss.detach())
            optimizer.step()
            losses.append(total)
    finally:
        for p, flag in frozen.items():
            p.requires_grad_(flag)
        exits.train(was_training)
    return losses
