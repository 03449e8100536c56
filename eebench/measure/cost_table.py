"""FLOPs per module, not per trace: a cost table of the embeddings, each layer and each exit head
by token length, from the counts of eebench.measure.flops.

A sample's FLOPs are the sum along its executed path at its own length: embeddings + layers 1..k
+ every exit head evaluated on the way (`CostTable.path`). Cost is a polynomial of degree <= 2 in
n (a layer is a*n^2 + b*n + c), so a table for n = 1..max_len is fitted exactly from counts at
three lengths and verified at two more; if the check fails, every length is counted. Modules of
the same structure share one fit (verified per module). A model whose exits are reached through
several complete models (eebench.models.exits: `chain()`) gets its exits' costs summed along
their paths (`exit_paths`) from each model's table. See docs/flops.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from math import prod
from typing import Any

import numpy as np
import torch
from torch import nn

from eebench.errors import EebenchError, UsageError
from eebench.measure.flops import (
    DEFAULT_CONVENTION,
    check_convention,
    count_flops,
    layer_piece,
    torch_flops,
)
from eebench.models.exits import ModelRun, exit_paths

FIT_LENGTHS = (2, 5, 9)  # a quadratic through these three lengths ...
CHECK_LENGTHS = (1, 16)  # ... must hit the counts here too, else every length is counted


@dataclass(frozen=True)
class CostTable:
    """FLOPs of each module by token length n: `embedding[n]`, `layer[i][n]`, `head[j][n]`.

    Column 0 (n = 0) is unused and 0, so a length indexes the arrays directly.
    """

    convention: str
    exit_layers: tuple[int, ...]  # 1-based layer after which head j runs
    max_len: int
    embedding: np.ndarray  # int64 [max_len + 1]
    layer: np.ndarray  # int64 [L, max_len + 1]
    head: np.ndarray  # int64 [E, max_len + 1]
    fitted: bool = True  # False where some module was counted at every length
    # int64 [E, max_len + 1]: what a sample exiting at exit j costs; None: this model's own
    # paths (embeddings + layers 1..exit_layers[j] + heads 0..j)
    path: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.path is None:
            rows = [self.run_flops(ModelRun(k, tuple(self.exit_layers[: j + 1])))
                    for j, k in enumerate(self.exit_layers)]
            object.__setattr__(self, "path", np.stack(rows).astype(np.int64))

    def run_flops(self, run: ModelRun) -> np.ndarray:
        """FLOPs by length of one run of this model: embeddings, layers 1..run.layers and the
        heads after the layers run.heads."""
        heads = [self.exit_layers.index(k) for k in run.heads]
        return self.embedding + self.layer[: run.layers].sum(0) + self.head[heads].sum(0)

    @property
    def num_exits(self) -> int:
        return len(self.exit_layers)

    def _check_length(self, n: int) -> None:
        if not 1 <= n <= self.max_len:
            raise EebenchError(f"token length {n} is outside the FLOPs table (1..{self.max_len})")

    def path_flops(self, exit_index: int, n: int) -> int:
        """Embeddings + layers 1..exit_layers[exit_index] + heads 0..exit_index, at length n."""
        self._check_length(n)
        return int(self.path[exit_index, n])

    def single_exit_flops(self, exit_index: int, n: int) -> int:
        """The same path with only head `exit_index` evaluated (a static first-k model)."""
        self._check_length(n)
        k = self.exit_layers[exit_index]
        return int(self.embedding[n] + self.layer[:k, n].sum() + self.head[exit_index, n])

    def exit_indices(self, exit_layers: np.ndarray) -> np.ndarray:
        """Map 1-based exit layer numbers (as stored per sample) to exit indices."""
        exits, layers = np.asarray(self.exit_layers), np.asarray(exit_layers, dtype=np.int64)
        idx = np.minimum(np.searchsorted(exits, layers), len(exits) - 1)
        wrong = layers[exits[idx] != layers]
        if wrong.size:
            raise EebenchError(f"no exit after layer {wrong.flat[0]} (exits: {list(exits)})")
        return idx

    def per_sample_flops(self, exit_indices: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """Vectorised `path_flops`: int64 FLOPs of each sample (exit index, real token length)."""
        idx = np.asarray(exit_indices, dtype=np.int64)
        n = np.asarray(lengths, dtype=np.int64)
        if idx.shape != n.shape:
            raise EebenchError(f"exit indices {idx.shape} and lengths {n.shape} differ in shape")
        if idx.size and (idx.min() < 0 or idx.max() >= self.num_exits):
            raise EebenchError(f"exit index outside 0..{self.num_exits - 1}")
        if n.size and (n.min() < 1 or n.max() > self.max_len):
            raise EebenchError(f"token length outside the FLOPs table (1..{self.max_len})",
                               hint="build the table with max_len >= the max sequence length")
        return self.path[idx, n]

    def to_dict(self) -> dict[str, Any]:
        return {"convention": self.convention, "exit_layers": list(self.exit_layers),
                "max_len": self.max_len, "fitted": self.fitted,
                "embedding": self.embedding.tolist(), "layer": self.layer.tolist(),
                "head": self.head.tolist()}


def _fit(count: Callable[[int], int], ns: Sequence[int]) -> Callable[[int], Fraction]:
    """The exact polynomial through `count` at lengths `ns` (Lagrange form, in fractions)."""
    pts = [(x, Fraction(count(x))) for x in ns]
    return lambda n: sum(y * prod(Fraction(n - xk, x - xk) for xk, _ in pts if xk != x)
                         for x, y in pts)


def _costs(count: Callable[[int], int], max_len: int, fit: bool
           ) -> tuple[np.ndarray, Callable[[int], Fraction] | None]:
    """Costs for n = 0..max_len: fitted and verified where possible, else counted at each length."""
    out = np.zeros(max_len + 1, dtype=np.int64)
    if fit:
        poly = _fit(count, FIT_LENGTHS)
        if all(poly(n) == count(n) for n in CHECK_LENGTHS):
            values = [poly(n) for n in range(1, max_len + 1)]
            if all(v.denominator == 1 for v in values):
                out[1:] = [int(v) for v in values]
                return out, poly
    out[1:] = [count(n) for n in range(1, max_len + 1)]
    return out, None


def _signature(kind: str, module: nn.Module) -> tuple:
    """Modules of one class with the same parameter shapes cost the same (verified per module)."""
    params = tuple((name, tuple(p.shape)) for name, p in module.named_parameters())
    return (kind, type(module).__module__, type(module).__qualname__, params)


_ABSENT = object()


@contextmanager
def eager_attention(model: nn.Module) -> Iterator[None]:
    """Count attention as eager matmuls: fvcore and FlopCounterMode both have gaps for SDPA."""
    configs = {id(c): c for c in [getattr(model, "config", None)]
               + [getattr(m, "config", None) for m in model.modules()]
               if getattr(c, "_attn_implementation", _ABSENT) is not _ABSENT}
    saved = {k: c._attn_implementation for k, c in configs.items()}
    was_training = model.training
    try:
        for c in configs.values():
            c._attn_implementation = "eager"
        model.eval()
        yield
    finally:
        for k, c in configs.items():
            c._attn_implementation = saved[k]
        model.train(was_training)


def build_cost_table(model: nn.Module, max_len: int, convention: str = DEFAULT_CONVENTION,
                     exact: bool = False) -> CostTable:
    """Count the FLOPs of `model`'s embeddings, layers and exit heads for n = 1..max_len.

    `model` follows the MultiExitModel contract (embed / layer / head, exit_layers, config).
    Modules of identical structure share one fitted polynomial; every module is still counted at
    one length to verify that it matches. `exact=True` counts every length of every module.
    A model whose exits are reached through several complete models run one after another
    (`model.chain()`, eebench.models.exits) gets each model's table, summed along its exits'
    paths (`paths_cost_table`).
    """
    check_convention(convention)
    chain = model.chain()
    if len(chain) > 1 or chain[0] is not model:
        return paths_cost_table([build_cost_table(m, max_len, convention, exact)
                                 for m in chain], exit_paths(model),
                                tuple(model.exit_layers))
    max_pos = getattr(model, "max_tokens", getattr(model.config, "max_position_embeddings", None))
    if max_len < 1 or (max_pos is not None and max_len > max_pos):
        raise UsageError(f"FLOPs table length {max_len} must be in 1..{max_pos or 'inf'}")
    fit = not exact and max_len > len(FIT_LENGTHS) + len(CHECK_LENGTHS)
    fit = fit and (max_pos is None or max(FIT_LENGTHS + CHECK_LENGTHS) <= max_pos)
    device = next(model.parameters()).device
    vocab = int(getattr(model.config, "vocab_size", 2))
    embedded: dict[int, tuple] = {}

    def embed_inputs(n: int) -> tuple:
        ids = (torch.arange(n, device=device) % vocab).unsqueeze(0)
        ones = torch.ones(1, n, dtype=torch.long, device=device)
        return ids, ones, torch.zeros_like(ones)

    def embedded_at(n: int) -> tuple:
        if n not in embedded:
            with torch.no_grad():
                embedded[n] = model.embed(*embed_inputs(n))
        return embedded[n]

    def layer_call(i: int, n: int) -> tuple[Callable[..., Any], tuple]:
        return layer_piece(model, i, *embedded_at(n))

    previous: dict[int, list] = {}  # n -> the state each head reads (None where none reads one)

    def head_call(j: int, n: int) -> tuple[Callable[..., Any], tuple]:
        """Head j on the hidden states and the 2-D mask; a head that reads the previous exit's
        state gets the one it gets in a run (computed outside the count)."""
        hidden, mask = embedded_at(n)[0], embed_inputs(n)[1]
        if not getattr(model, "stateful", False):
            return (lambda h, m: model.head(j, h, m)), (hidden, mask)
        if n not in previous:
            previous[n] = model.previous_states(hidden, mask)
        return (lambda h, m, p=previous[n][j]: model.head(j, h, m, p)), (hidden, mask)

    # (structure, n -> (function, inputs)) for the embeddings, every layer, every exit head
    pieces: list[tuple[tuple, Callable[[int], tuple[Callable[..., Any], tuple]]]] = [
        (_signature("embed", model.embeddings), lambda n: (model.embed, embed_inputs(n)))]
    pieces += [(_signature("layer", mod), lambda n, i=i: layer_call(i, n))
               for i, mod in enumerate(model.layers)]
    pieces += [(_signature("head", mod), lambda n, j=j: head_call(j, n))
               for j, mod in enumerate(model.heads)]

    shared: dict[tuple, tuple[np.ndarray, Callable[[int], Fraction]]] = {}
    rows, all_fitted = [], True
    with eager_attention(model):
        for sig, call in pieces:
            if sig in shared:  # same structure: verify the shared cost with one cheap count
                costs, poly = shared[sig]
                probe = CHECK_LENGTHS[-1]
                if poly(probe) == torch_flops(*call(probe), convention):
                    rows.append(costs)
                    continue
            costs, poly = _costs(lambda n, call=call: count_flops(*call(n), convention, model),
                                 max_len, fit)
            if poly is None:
                all_fitted = False
            else:
                shared.setdefault(sig, (costs, poly))
            rows.append(costs)
    n_layers = len(model.layers)
    return CostTable(convention=convention, exit_layers=tuple(model.exit_layers),
                     max_len=max_len, embedding=rows[0], layer=np.stack(rows[1:1 + n_layers]),
                     head=np.stack(rows[1 + n_layers:]), fitted=all_fitted)


def paths_cost_table(tables: Sequence[CostTable], paths: Sequence[Sequence[ModelRun]],
                     exit_layers: tuple[int, ...]) -> CostTable:
    """The table of a model whose exits are reached through complete models run in turn, from
    each model's table (`tables`, in chain order): exit j costs the sum over its path's runs
    (`paths[j]`, eebench.models.exits.exit_paths; run i of a path is model i) of what each run
    executes. Its module rows list every model's modules in the order they run: model 1's
    embeddings, every model's layers in turn (a later model's embeddings counted with its first
    layer), and head i = model i's heads."""
    if len({(t.convention, t.max_len) for t in tables}) != 1:
        raise ValueError("cost tables of one model's parts differ in convention or length")
    path = np.stack([sum(t.run_flops(run) for t, run in zip(tables, runs)) for runs in paths])
    layers = []
    for j, t in enumerate(tables):
        rows = t.layer[: t.exit_layers[-1]].copy()
        if j:
            rows[0] += t.embedding
        layers.append(rows)
    first = tables[0]
    return CostTable(convention=first.convention, exit_layers=exit_layers,
                     max_len=first.max_len, embedding=first.embedding.copy(),
                     layer=np.concatenate(layers), head=np.stack([t.head.sum(0) for t in tables]),
                     fitted=all(t.fitted for t in tables), path=path.astype(np.int64))
