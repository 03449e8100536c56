"""ElasticBERT's multi-exit fine-tuning (Liu et al., NAACL 2022; fastnlp/ElasticBERT,
finetune-dynamic): every exit trained at once, with gradient equilibrium; served by the entropy
rule (ELUE's "ElasticBERT-entropy") and the patience rule (`--rule patience`:
"ElasticBERT-patience").

    head i  = its own pooler (the checkpoint's pooler of layer i where it has one per layer, as
              ElasticBERT does; else the pretrained pooler) -> dropout -> linear,   i = 1..L
    train:    loss = sum_i CE_i (unweighted), with gradient equilibrium: identity forward; in
              backward the gradient reaching layer i's output is
                  (1 / (L - i + 1)) * [g_exit_i + (L - i) * g_deeper]     (i = 1..L)
    infer:    exit at the first i with H(softmax(logits_i)) < threshold (nats; the last always
              exits)

Classification only by default rule (entropy needs classes).
"""

from __future__ import annotations

from typing import Any

from eebench.methods import EarlyExitMethod, MethodSettings, register_method


@register_method("elasticbert")
class ElasticBERT(EarlyExitMethod):
    paper = ("Liu et al., Towards Efficient NLP: A Standard Evaluation and A Strong Baseline, "
             "NAACL 2022")
    description = ("a classifier per layer, all trained at once with gradient equilibrium; exit "
                   "on entropy (or --rule patience)")
    rule = "entropy"

    class Settings(MethodSettings):
        gradient_equilibrium: bool = True

    def route(self, stage, num_exits):
        if not self.config.gradient_equilibrium:
            return None
        return lambda j, hidden: gradient_equilibrium(j, hidden, num_exits)


def gradient_equilibrium(j: int, hidden, num_exits: int):
    """The authors' two rescales at exit j (0-based) of E: the hidden states scaled by
    1 / (E - j) in backward, then the deeper path's copy by E - j - 1 (identity forward)."""
    scaled = rescale_gradient(hidden, 1.0 / (num_exits - j))
    return scaled, rescale_gradient(scaled, float(num_exits - j - 1))


def rescale_gradient(x, weight: float):
    """x in the forward direction; its gradient times `weight` in backward."""
    return _rescale_function().apply(x, weight)


_RESCALE: Any = None


def _rescale_function() -> Any:
    global _RESCALE
    if _RESCALE is None:
        import torch

        class GradientRescale(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, weight):
                ctx.weight = weight
                return x.view_as(x)

            @staticmethod
            def backward(ctx, grad):
                return grad * ctx.weight, None

        _RESCALE = GradientRescale
    return _RESCALE
