"""One exit protocol for every model the engine runs.

The engine (eebench.rules.engine), the FLOP and parameter counters (eebench.measure) and the run
records see a model only as its exits in order. A multi-exit encoder (MultiExitModel: one
backbone, heads after some layers) and complete models of growing depth run one after another
(a method's several models, combined) are two implementations of it:

    model.num_exits, model.exit_layers     exit j answers after layer exit_layers[j] (of its model)
    model.unit                             what an exit classifies: "sequence" (a label per text,
                                           outputs [E, B, C + S]), "token" (a tag per token,
                                           [E, B, T, C]) or "generated" (a decoder's next token,
                                           [E, 1, V]): a name; eebench.models.units gives the
                                           Unit object the engine asks
    model(input_ids, mask, token_type_ids) every exit's outputs at once, [E, B, C + S] (the logits,
                                           then the heads' signal columns): the one-pass sweep
    model.exit_walk(ids, mask, types)      one batch, exit by exit, for real dynamic inference:
        walk.step(j, emit)                   run on to exit j; its (logits, signals) if `emit`
                                             (else None: the timing baseline runs past exits)
        walk.keep(rows)                      drop the exited samples, and the padding no one needs
    model.exit_modules(j)                  the modules a sample exiting at exit j ran (parameters)
    model.chain()                          the complete models run one after another to reach the
                                           exits: [model] for one model; with several, exit j is
                                           model j's answer (its last exit), after models 1..j-1

What a sample exiting at exit j ran follows from those: `exit_paths(model)[j]`, the complete
models run in turn (`ModelRun`: the layers each runs and the layers its heads sit after). FLOPs
are counted along it (eebench.measure.cost_table); run records and submissions store it, and the
validation of a submission bounds its costs with it.

State may flow from one exit to the next: a head that reads the previous exit's state (see
eebench.models.multi_exit) gets it from the walk, its rows dropped with the batch's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

import torch
from torch import nn


class ExitWalk(Protocol):
    """One batch through a model, exit by exit."""

    def step(self, j: int, emit: bool) -> tuple[torch.Tensor, dict[str, torch.Tensor]] | None:
        ...

    def keep(self, rows: torch.Tensor) -> None:
        ...


class ModelRun(NamedTuple):
    """One complete model run on a sample's way to its exit: its layers 1..`layers`, and the exit
    heads after the layers `heads` (ascending, the last one the answer)."""

    layers: int
    heads: tuple[int, ...]


def exit_paths(model: Any) -> list[list[ModelRun]]:
    """For each exit j, the complete models a sample exiting there ran, in turn. One model
    (`chain()` is itself): its layers 1..exit_layers[j] and its heads 0..j. Several: models
    1..j, each to its own last exit (its path there), model j's being the answer."""
    chain = model.chain()
    if len(chain) == 1 and chain[0] is model:
        layers = [int(k) for k in model.exit_layers]
        return [[ModelRun(k, tuple(layers[: j + 1]))] for j, k in enumerate(layers)]
    whole = [exit_paths(m)[-1] for m in chain]  # each model run to its answer
    return [[run for runs in whole[: j + 1] for run in runs] for j in range(len(chain))]


def select_rows(state: Any, keep: torch.Tensor) -> Any:
    """The rows `keep` of a state (None, a tensor, or a dict, tuple or list of them, each batch
    first): what real dynamic inference keeps of it when samples exit."""
    if state is None:
        return None
    if isinstance(state, dict):
        return {k: select_rows(v, keep) for k, v in state.items()}
    if isinstance(state, (tuple, list)):
        return type(state)(select_rows(v, keep) for v in state)
    return state[keep]


def _cut(mask: torch.Tensor, keep: torch.Tensor) -> tuple[torch.Tensor, int]:
    """The 2-D mask's rows `keep`, and the width the longest of them needs (right padding)."""
    mask = mask[keep]
    return mask, int(mask.sum(-1).max())


class LayerWalk:
    """A MultiExitModel's walk: embeddings once, then layer after layer; at exit j its head runs
    on the hidden states (with the previous exit's state, for a head that reads it)."""

    def __init__(self, model: Any, ids: torch.Tensor, mask: torch.Tensor,
                 types: torch.Tensor | None):
        self.model, self.mask, self.done, self.previous = model, mask, 0, None
        self.hidden, self.inputs = model.embed(ids, mask, types)

    def step(self, j: int, emit: bool) -> tuple[torch.Tensor, dict[str, torch.Tensor]] | None:
        m = self.model
        for i in range(self.done, m.exit_layers[j]):
            self.hidden = m.layer(i, self.hidden, self.inputs)
        self.done = m.exit_layers[j]
        if not emit and not m.stateful:
            return None  # a head whose output nobody reads does not run
        logits, signals, self.previous = m.head_step(j, self.hidden, self.mask, self.previous)
        return (logits, signals) if emit else None

    def keep(self, rows: torch.Tensor) -> None:
        self.mask, width = _cut(self.mask, rows)  # the mask is cut with hidden, row and column
        self.hidden, self.mask = self.hidden[rows, :width], self.mask[:, :width]
        self.inputs = self.inputs.cut(rows, width)  # each input knows its token dimensions
        self.previous = select_rows(self.previous, rows)


class ChainWalk:
    """Complete models run one after another: exit j runs model j on the samples still here,
    embedding them anew from their input ids; its answer is its last exit's logits."""

    def __init__(self, models: Sequence[nn.Module], ids: torch.Tensor, mask: torch.Tensor,
                 types: torch.Tensor | None):
        self.models, self.ids, self.mask, self.types = models, ids, mask, types

    def step(self, j: int, emit: bool) -> tuple[torch.Tensor, dict[str, torch.Tensor]] | None:
        if not emit:
            return None  # a model whose answer nobody reads does not run
        return self.models[j](self.ids, self.mask, self.types)[-1], {}

    def keep(self, rows: torch.Tensor) -> None:
        self.mask, width = _cut(self.mask, rows)
        self.ids, self.mask = self.ids[rows, :width], self.mask[:, :width]
        self.types = self.types[rows, :width] if self.types is not None else None
