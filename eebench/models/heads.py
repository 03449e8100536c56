"""Exit heads beyond the plain pooler -> dropout -> linear (eebench.models.multi_exit.ExitHead):
one that carries a temperature fit after training, one that also scores its own exit."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from eebench.models.multi_exit import ExitHead


class CalibratedHead(ExitHead):
    """An exit head with a temperature T (a buffer, 1 until fit; saved with the weights). Its
    logits stay raw: a rule that wants calibrated probabilities divides by T itself."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.register_buffer("temperature", torch.ones(()))


class ScoredHead(ExitHead):
    """An exit head that also predicts how wrong it is: outputs [B, C + 1], the logits then
    sigmoid(scorer(dropout(pooled))) (BERxiT's learning-to-exit head). `scorer` (a Linear(H, 1))
    may be shared by every head: `own_scorer=False` keeps a reference that another head owns."""

    def __init__(self, pooler: nn.Module, config: Any, num_labels: int, scorer: nn.Linear,
                 own_pooler: bool = True, own_scorer: bool = True):
        super().__init__(pooler, config, num_labels, own_pooler)
        if own_scorer:
            self.scorer = scorer
        else:
            self.__dict__["scorer"] = scorer  # not a submodule: saved and counted once

    def forward(self, hidden: torch.Tensor, attention_mask: torch.Tensor | None = None
                ) -> torch.Tensor:
        pooled = self.dropout(self.pooler(hidden, attention_mask))
        logits = self.classifier(pooled)
        score = torch.sigmoid(self.scorer(pooled))  # [B, 1]
        return torch.cat([logits, score.to(logits.dtype)], dim=-1)
