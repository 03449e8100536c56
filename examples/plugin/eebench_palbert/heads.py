"""PALBERT's exit heads (torch): one pooler and one classifier shared by every exit, and a lambda
MLP, also shared, that reads this exit's pooled state and the previous exit's."""

from __future__ import annotations

import torch
from torch import nn

from eebench.methods import ExitHeads


class LambdaHead(nn.Module):
    """Exit j: [class logits, lambda_j] from the hidden states, and its pooled state for exit j+1.

    `reads_previous = True`: eebench calls it head(hidden, attention_mask, previous), previous
    being exit j-1's pooled state (None at exit 0), and it returns (outputs, state). The shared
    modules are registered on exit 0's head only (saved and counted once)."""

    reads_previous = True

    def __init__(self, pooler: nn.Module, classifier: nn.Linear, lam: nn.Module, own: bool):
        super().__init__()
        for name, module in (("pooler", pooler), ("classifier", classifier), ("lam", lam)):
            if own:
                self.add_module(name, module)
            else:
                self.__dict__[name] = module  # not a submodule: exit 0 owns it
        self.dropout = nn.Dropout(0.1)  # the authors' classifier dropout

    def forward(self, hidden, attention_mask=None, previous=None):
        pooled = self.pooler(hidden, attention_mask)
        logits = self.classifier(self.dropout(pooled))
        before = torch.zeros_like(pooled) if previous is None else previous
        lam = torch.sigmoid(self.lam(self.dropout(torch.cat([pooled, before], -1))))
        return torch.cat([logits, lam.to(logits.dtype)], -1), pooled


def lambda_heads(config, num_labels: int, num_layers: int, pooler: nn.Module, depth: int
                 ) -> ExitHeads:
    """An exit after every layer, each giving the signal `halting_prob` after its logits."""
    width = 2 * config.hidden_size
    classifier = nn.Linear(config.hidden_size, num_labels)
    nn.init.normal_(classifier.weight, std=config.initializer_range)
    nn.init.zeros_(classifier.bias)
    lam = nn.Sequential(*[m for _ in range(depth) for m in (nn.Linear(width, width), nn.Tanh())],
                        nn.Linear(width, 1))
    heads = [LambdaHead(pooler, classifier, lam, own=j == 0) for j in range(num_layers)]
    return ExitHeads(nn.ModuleList(heads), tuple(range(1, num_layers + 1)),
                     signals=("halting_prob",))
