"""FastBERT (Liu et al., ACL 2020; autoliuweijie/FastBERT): self-distillation into per-layer
students, exit when the normalised entropy is below the "speed".

    head i  = its own pooler (from the pretrained pooler) -> dropout -> linear,   i = 1..L
              (head L is the teacher)
    stage 1:  train backbone + teacher on CE(teacher)
    stage 2:  backbone and teacher frozen; students 1..L-1 trained on
              sum_i KL(p_teacher || p_student_i),  p = softmax(logits), no labels used
    infer:    exit at the first i with H(p_i) / ln C < speed   (the last exit always exits)

Classification only (the entropy needs classes).
"""

from __future__ import annotations

from eebench.methods import EarlyExitMethod, backbone_then_heads, exit_loss, register_method
from eebench.methods.derived import check_regression


@register_method("fastbert")
class FastBERT(EarlyExitMethod):
    paper = "Liu et al., FastBERT: a Self-distilling BERT with Adaptive Inference Time, ACL 2020"
    description = ("a classifier per layer; students distilled from the last (teacher) on a "
                   "frozen backbone; exit on normalised entropy")
    rule = "normalized-entropy"
    sweep_param = "speed"

    def stages(self):
        return backbone_then_heads("distillation")

    def loss(self, exit_logits, labels, stage, is_regression, step=0):
        check_regression(self, is_regression)
        exits = stage.exit_indices(len(exit_logits))
        if stage.name == "backbone":
            return exit_loss(exit_logits[-1], labels, False)
        return sum(distillation_loss(exit_logits[j], exit_logits[-1]) for j in exits)


def distillation_loss(student, teacher):
    """KL(p_teacher || p_student), batch mean, the teacher a fixed target (no gradient):
    torch's KLDivLoss(log p_student, p_teacher), as the authors' code computes it."""
    import torch.nn.functional as F

    target = F.softmax(teacher.detach().float(), dim=-1)
    return F.kl_div(F.log_softmax(student.float(), dim=-1), target, reduction="batchmean")
