"""Exit heads for sequence labelling: a tag for every token, at every exit.

A token head is dropout -> linear on each token's hidden state, [B, T, H] -> [B, T, C]: the
classifier of Hugging Face's `*ForTokenClassification` (no pooler), after a layer. It says so with
`unit = TOKEN`; a MultiExitModel whose heads are token heads has that unit and returns
every exit's token logits [E, B, T, C] from `forward` (and [b, T, C] for the rows still running
from its walk's `step`). Padding and the pieces that do not count (special tokens, a word's later
pieces) get logits too: the loss (label -100) and the rules (their token mask) ignore them.
A unit here is its name; eebench.models.units.unit_of gives the object the engine asks.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from eebench.models.families import head_dropout

SEQUENCE, TOKEN = "sequence", "token"
UNITS = (SEQUENCE, TOKEN)  # what one exit decides about: a whole sequence, or each token

__all__ = ["SEQUENCE", "TOKEN", "UNITS", "TokenExitHead", "head_unit", "new_classifier"]


def head_unit(head: nn.Module) -> str:
    """What `head` classifies: "token" for a token head, "sequence" for every other head."""
    unit = getattr(head, "unit", SEQUENCE)
    if unit not in UNITS:  # a method's bug
        raise ValueError(f"unknown head unit {unit!r}: one of {', '.join(UNITS)}")
    return unit


def new_classifier(config: Any, num_labels: int) -> nn.Linear:
    """A head's linear classifier, initialised as BERT's (normal weights, zero bias): every exit
    head's, a token head's and eebench.models.multi_exit.ExitHead's."""
    classifier = nn.Linear(config.hidden_size, num_labels)
    nn.init.normal_(classifier.weight, std=config.initializer_range)
    nn.init.zeros_(classifier.bias)
    return classifier


class TokenExitHead(nn.Module):
    """dropout -> linear on every token's hidden state: [B, T, H] -> [B, T, num_labels]."""

    unit = TOKEN

    def __init__(self, config: Any, num_labels: int):
        super().__init__()
        self.dropout = nn.Dropout(head_dropout(config))  # the family's hidden dropout
        self.classifier = new_classifier(config, num_labels)

    def forward(self, hidden: torch.Tensor, attention_mask: torch.Tensor | None = None
                ) -> torch.Tensor:
        """Every token's logits; `attention_mask` is taken for the head protocol and not read
        (a padded token's logits are computed and ignored downstream)."""
        return self.classifier(self.dropout(hidden))
