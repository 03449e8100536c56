"""Parameters: the model's total, and the parameters a sample touches when it exits at exit j.

A sample that leaves at exit j has run the embeddings, layers 1..exit_layers[j] and every exit head
0..j on the way, so those are the weights it touched. A module shared between heads (one pooler
for all exits, say) or between layers (ALBERT's one layer, listed once per depth) is one set of
weights: it is counted once, by parameter identity, and it counts for every exit that runs it,
even where it is registered under a later head.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from torch import nn


def _modules_run(module: nn.Module) -> list[nn.Module]:
    """The module, its submodules, and modules it holds without registering them (a pooler
    shared by several heads is registered under one of them but run by all)."""
    found: dict[int, nn.Module] = {}
    stack = [module]
    while stack:
        m = stack.pop()
        if id(m) not in found:
            found[id(m)] = m
            stack += [*m.children(), *(v for v in vars(m).values() if isinstance(v, nn.Module))]
    return list(found.values())


def count_unique(modules: Iterable[nn.Module]) -> int:
    """Number of parameters `modules` use, each shared parameter counted once."""
    seen: dict[int, int] = {}
    for module in modules:
        for m in _modules_run(module):
            for p in m.parameters(recurse=False):
                seen[id(p)] = p.numel()
    return sum(seen.values())


def params_total(model: nn.Module) -> int:
    """Every parameter of the model (shared ones once), used or not."""
    return count_unique([model])


@dataclass(frozen=True)
class ParamCounts:
    """All parameters, and those touched by a sample exiting at exit j (`per_exit[j]`)."""

    total: int
    per_exit: list[int]

    def mean_used(self, exit_indices: np.ndarray) -> float:
        """Parameters touched, averaged over samples (each sample's exit index)."""
        idx = np.asarray(exit_indices, dtype=np.int64)
        return float(np.asarray(self.per_exit, dtype=np.float64)[idx].mean()) if idx.size else 0.0


def params_per_exit(model: nn.Module) -> ParamCounts:
    """Parameter counts of a model of the exit protocol (eebench.models.exits): the total and,
    per exit j, the modules a sample exiting there ran (`exit_modules(j)`: for a multi-exit
    model embeddings + layers 1..exit_layers[j] + heads 0..j; for complete models run in turn
    models 1..j whole), each shared parameter once."""
    return ParamCounts(total=params_total(model),
                       per_exit=[count_unique(model.exit_modules(j))
                                 for j in range(model.num_exits)])
