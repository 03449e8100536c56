"""PALBERT: PonderNet's halting distribution over the exits, trained with the task loss each exit
would give weighted by the chance of halting there, plus a KL term towards a geometric prior; the
exit is chosen by the Q-exit rule. Balagansky & Gavrilov, "PALBERT: Teaching ALBERT to Ponder",
NeurIPS 2022; authors' code: tinkoff-ai/palbert (src/modeling/palbert_fast.py, src/loss.py,
src/trainer.py, src/train.py).

An exit per layer. Exit j gives class logits from one pooler and one classifier shared by every
exit, and lambda_j = sigmoid(MLP([pooled_j, pooled_{j-1}])) (the authors' "linear_cat" lambda
layer of 3 tanh layers; pooled_{-1} = 0): a head that reads the previous exit's state. With
p_j = lambda_j prod_{i<j}(1 - lambda_i), the loss is mean_batch sum_j p_j L_j + beta KL(prior||p).

Deviations (see docs/plugins.md):
- The last exit takes the probability left over, so p sums to 1; the authors floor p_j at
  epsilon / L once the cumulative passes 1 - epsilon (epsilon = 0.05) and leave the remainder out.
- The authors train the lambda layers together with the model, in their own optimizer group
  (--lambda-lr; 1e-5 in their reference run, the model's lr). An eebench stage has one learning
  rate, so here the whole model trains first ("joint", the run's lr), then the lambda layers
  alone ("lambdas", at `lambda_lr`, default 1e-3: they start from random on a small budget).
- No layer-position embeddings (the authors' default, --pos-encoding-type none); any eebench
  backbone, not only ALBERT and RoBERTa; pooling the backbone's way ([CLS] or mean).
"""

from __future__ import annotations

from pydantic import Field

from eebench.methods import EarlyExitMethod, MethodSettings, Stage, register_method


@register_method("palbert")
class PALBERT(EarlyExitMethod):
    paper = "Balagansky & Gavrilov, PALBERT: Teaching ALBERT to Ponder, NeurIPS 2022"
    description = "ponder lambdas over the exits, a KL term to a geometric prior; Q-exit"
    rule = "q-exit"
    provides = frozenset({"halting-prob"})  # its heads' `halting_prob` signal
    sweep_param = "threshold"

    class Settings(MethodSettings):
        beta: float = Field(0.5, ge=0)  # the KL term's weight (the authors' run: 0.5)
        prior_lambda: float = Field(0.1, gt=0, lt=1)  # the geometric prior's parameter
        lambda_layers: int = Field(3, ge=1, le=8)  # tanh layers of the lambda MLP
        lambda_lr: float = Field(1e-3, gt=0, le=1)  # the "lambdas" stage's learning rate

    def build_heads(self, config, num_labels, num_layers, pooler):
        from eebench_palbert.heads import lambda_heads

        return lambda_heads(config, num_labels, num_layers, pooler, self.config.lambda_layers)

    def stages(self):
        return [Stage("joint", lambda model: list(model.parameters())),
                Stage("lambdas", lambda model: list(model.heads[0].lam.parameters()),
                      lr=self.config.lambda_lr)]

    def loss(self, exit_logits, labels, stage, is_regression, step=0):
        import torch
        import torch.nn.functional as F

        out = torch.stack(exit_logits).float()  # [E, B, C + 1]: the logits, then lambda
        logits, lam = out[..., :-1], out[..., -1]
        p = halting_distribution(lam)  # [E, B]
        if is_regression:
            each = torch.stack([F.mse_loss(z[:, 0], labels.float(), reduction="none")
                                for z in logits])
        else:
            each = torch.stack([F.cross_entropy(z, labels, reduction="none") for z in logits])
        prior = geometric_prior(self.config.prior_lambda, len(exit_logits)).to(p.device)
        kl = (prior[:, None] * (prior[:, None].log() - p.clamp_min(1e-8).log())).sum(0)
        return (p * each).sum(0).mean() + self.config.beta * kl.mean()


def halting_distribution(lam):
    """p_j = lambda_j prod_{i<j}(1 - lambda_i), the last exit taking what is left: [E, B]."""
    import torch

    left = torch.cumprod(torch.cat([torch.ones_like(lam[:1]), 1 - lam[:-1]]), 0)
    return torch.cat([lam[:-1] * left[:-1], left[-1:]])


def geometric_prior(lam: float, n: int):
    """The prior over n exits: lam (1 - lam)^j, the last taking the rest (the authors' loss.py)."""
    import torch

    p = torch.tensor([lam * (1 - lam) ** j for j in range(n)])
    p[-1] = 1 - p[:-1].sum()
    return p
