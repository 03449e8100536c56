"""Per-token FLOPs of token-level early exit (TOKEE): a layer computes its live tokens only.

A sentence of n pieces whose layer i computed q_i of them (eebench.rules.token_halting: the
pieces of words not yet halted, and the special tokens, while the sentence runs) costs

    embeddings(n) + sum_i live_i(q_i, n) + sum_{j <= its exit} head_j(n)

where live_i(q, n) is layer i computed by eebench.models.token_halting_layer: queries,
attention output and feed-forward for q tokens, keys and values for all n, attention q x n.
Each exit's head reads every token (a halted word's uncertainty counts in its neighbours'
windows), so it costs what the cost table says at n. live_i is counted, not written down:
fvcore and torch's FlopCounterMode count `live_layer` at a few (q, n) (they must agree), and the
exact form a + b q + c n + d q n through four of them is checked at two more; with every token
live it equals the cost table's layer i at every n (`check_full`).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import torch

from eebench.errors import EebenchError
from eebench.measure.cost_table import CostTable, eager_attention
from eebench.measure.flops import count_flops

FIT = ((1, 2), (2, 2), (1, 3), (2, 3))  # (q, n): a + b q + c n + d q n through these
CHECK = ((3, 5), (4, 9))


@dataclass(frozen=True)
class LiveCosts:
    """live_i(q, n) = a + b q + c n + d q n, one row (a, b, c, d) per layer, exact integers."""

    coefficients: np.ndarray  # int64 [L, 4]

    def layer(self, i: int, q: np.ndarray | int, n: np.ndarray | int) -> np.ndarray:
        a, b, c, d = (int(x) for x in self.coefficients[i])
        q, n = np.asarray(q, dtype=np.int64), np.asarray(n, dtype=np.int64)
        return np.where(q > 0, a + b * q + c * n + d * q * n, 0)

    def sentence_flops(self, table: CostTable, exit_index: np.ndarray, lengths: np.ndarray,
                       live_pieces: np.ndarray) -> np.ndarray:
        """int64 FLOPs of each sentence: its embeddings, the live pieces of each layer it ran
        (`live_pieces` [N, L]; 0 once it is done), and the heads up to its exit."""
        n = np.asarray(lengths, dtype=np.int64)
        idx = np.asarray(exit_index, dtype=np.int64)
        total = table.embedding[n].astype(np.int64)
        for i in range(live_pieces.shape[1]):
            total = total + self.layer(i, live_pieces[:, i], n)
        heads = np.cumsum(table.head, axis=0)  # [E, max_len + 1]: heads 0..j at each length
        return total + heads[idx, n]


def _fit(count) -> tuple[int, int, int, int]:
    """Solve a + b q + c n + d q n through FIT exactly (fractions), check it at CHECK."""
    v = {p: Fraction(count(*p)) for p in FIT}
    d = v[(2, 3)] - v[(1, 3)] - v[(2, 2)] + v[(1, 2)]
    b = v[(2, 2)] - v[(1, 2)] - 2 * d
    c = v[(1, 3)] - v[(1, 2)] - d
    a = v[(1, 2)] - b - 2 * c - 2 * d
    coef = (a, b, c, d)
    for q, n in CHECK:
        if a + b * q + c * n + d * q * n != count(q, n):
            raise EebenchError(f"a live layer's FLOPs are not of the form a + b q + c n + d q n "
                               f"(checked at q={q}, n={n})")
    if any(x.denominator != 1 for x in coef):
        raise EebenchError("a live layer's FLOPs fit with fractions: not a count")
    return tuple(int(x) for x in coef)  # type: ignore[return-value]


def build_live_costs(model, convention: str) -> LiveCosts:
    """Count every layer of `model` run by eebench.models.token_halting_layer (see the module)."""
    from eebench.models.token_halting_layer import check_live, live_layer

    check_live(model)
    device = next(model.parameters()).device
    vocab = int(getattr(model.config, "vocab_size", 2))

    def call(i: int, q: int, n: int):
        ids = (torch.arange(n, device=device) % vocab).unsqueeze(0)
        ones = torch.ones(1, n, dtype=torch.long, device=device)
        with torch.no_grad():
            hidden, inputs = model.embed(ids, ones, torch.zeros_like(ones))
        live = torch.zeros(1, n, dtype=torch.bool, device=device)
        live[0, :q] = True
        mask = inputs.attention_mask
        return (lambda h, m: live_layer(model.layers[i], h, m, live)), (hidden, mask)

    rows = []
    with eager_attention(model):
        for i in range(len(model.layers)):
            rows.append(_fit(lambda q, n, i=i: count_flops(*call(i, q, n), convention,
                                                           model)))
    return LiveCosts(np.asarray(rows, dtype=np.int64))


def check_full(costs: LiveCosts, table: CostTable) -> None:
    """With every token live a layer costs what the cost table counted for it, at every n."""
    n = np.arange(1, table.max_len + 1)
    for i in range(costs.coefficients.shape[0]):
        if not np.array_equal(costs.layer(i, n, n), table.layer[i][1:]):
            raise EebenchError(f"layer {i}: its live cost with every token live differs from "
                               "the cost table's")
