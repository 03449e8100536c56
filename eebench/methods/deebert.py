"""DeeBERT (Xin et al., ACL 2020): off-ramps after every layer, exit when the entropy is low.

    off-ramp i = its own pooler (dense + tanh on layer i's pooled tokens, from the pretrained
                 pooler) -> dropout -> linear,                           i = 1..L
    stage 1:  train backbone + off-ramp L on CE(off-ramp L)
    stage 2:  freeze backbone and off-ramp L; train off-ramps 1..L-1 on sum_i CE(off-ramp i)
    infer:    exit at the first i with H(softmax(logits_i)) < threshold (off-ramp L always exits)

The threshold is swept over a grid from 0 (never exit early) to ln C (the largest entropy
possible, so almost every sample exits at layer 1). Entropy needs a distribution over classes:
regression tasks are refused.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from eebench.methods.base import EarlyExitMethod, Stage, exit_loss, register_method

if TYPE_CHECKING:
    import torch
    from torch import nn

    from eebench.models.multi_exit import ExitHeads

@register_method("deebert")
class DeeBERT(EarlyExitMethod):
    paper = "Xin et al., DeeBERT: Dynamic Early Exiting for Accelerating BERT Inference, ACL 2020"
    description = "an off-ramp per layer, two-stage training, exit when entropy < threshold"
    rule = "entropy"
    sweep_param = "threshold"
    supports_regression = False

    def build_heads(self, config: Any, num_labels: int, num_layers: int, pooler: nn.Module
                    ) -> ExitHeads:
        from torch import nn

        from eebench.models.multi_exit import ExitHead, ExitHeads

        ramps = [ExitHead(copy.deepcopy(pooler), config, num_labels) for _ in range(num_layers)]
        return ExitHeads(nn.ModuleList(ramps), tuple(range(1, num_layers + 1)))

    def stages(self) -> list[Stage]:
        return [
            Stage("backbone", lambda m: [*m.backbone_parameters(), *m.heads[-1].parameters()],
                  exits=(-1,)),
            Stage("off-ramps", lambda m: [p for h in m.heads[:-1] for p in h.parameters()],
                  exits=slice(None, -1)),  # every off-ramp but the last
        ]

    def loss(self, exit_logits: Sequence[torch.Tensor], labels: torch.Tensor, stage: Stage,
             is_regression: bool, step: int = 0) -> torch.Tensor:
        self.check_regression(is_regression)
        return sum(exit_loss(exit_logits[j], labels, False)
                   for j in stage.exit_indices(len(exit_logits)))
