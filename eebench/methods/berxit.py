"""BERxiT (Xin et al., EACL 2021; castorini/berxit): alternating fine-tuning and a learning-to-exit
head that predicts whether an exit would be wrong.

    head i  = its own pooler (from the pretrained pooler) -> dropout -> linear_i, and the
              learning-to-exit (LTE) score u_i = sigmoid(w . pooled_i + b), one (w, b) for every
              exit, reading head i's pooled state
    target:   t_i = 1 - [argmax logits_i = y]  (classification);  tanh|y_hat_i - y| (regression)
              (no gradient through the target)
    train:    the batch's index in its epoch even:  L_L + MSE(u, t)
                                               odd:  sum_{i<L} L_i + MSE(u, t)
              (MSE over every exit and sample; L_i = CE, or MSE for regression)
    infer:    exit at the first i < L with u_i < threshold (the last exit always exits)
"""

from __future__ import annotations

import copy

from eebench.methods import EarlyExitMethod, exit_loss, register_method


@register_method("berxit")
class BERxiT(EarlyExitMethod):
    paper = ("Xin et al., BERxiT: Early Exiting for BERT with Better Fine-Tuning and Extension "
             "to Regression, EACL 2021")
    description = ("a classifier per layer, alternating fine-tuning, a learned exit score per "
                   "layer; exit when it predicts no error")
    rule = "learned"
    provides = frozenset({"exit-score"})
    joint_stage = "alternating"  # every parameter; the loss alternates (below)

    def build_heads(self, config, num_labels, num_layers, pooler):
        from torch import nn

        from eebench.models.heads import ScoredHead
        from eebench.models.multi_exit import ExitHeads

        scorer = nn.Linear(config.hidden_size, 1)  # one LTE layer shared by every exit
        nn.init.normal_(scorer.weight, std=config.initializer_range)
        nn.init.zeros_(scorer.bias)
        heads = [ScoredHead(copy.deepcopy(pooler), config, num_labels, scorer,
                            own_scorer=(i == 0)) for i in range(num_layers)]
        return ExitHeads(nn.ModuleList(heads), tuple(range(1, num_layers + 1)),
                         signals=("exit_score",))

    def loss(self, exit_logits, labels, stage, is_regression, step=0):
        import torch
        import torch.nn.functional as F

        num_labels = exit_logits[0].shape[-1] - 1
        logits = [out[:, :num_labels] for out in exit_logits]
        scores = torch.stack([out[:, num_labels] for out in exit_logits])  # [E, B]
        targets = torch.stack([exit_error(z, labels, is_regression) for z in logits]).detach()
        lte = F.mse_loss(scores.float(), targets.float())
        if step % 2 == 0:
            return exit_loss(logits[-1], labels, is_regression) + lte
        return sum(exit_loss(z, labels, is_regression) for z in logits[:-1]) + lte


def exit_error(logits, labels, is_regression: bool):
    """What the LTE score learns to predict at one exit: 1 where the exit is wrong, 0 where right
    (classification); tanh|y_hat - y| (regression)."""
    import torch

    if is_regression:
        return torch.tanh((logits[:, 0].float() - labels.float()).abs())
    return 1.0 - (logits.argmax(-1) == labels).float()
