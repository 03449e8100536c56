"""The Q-exit rule: exit at the first exit where the halting distribution's cumulative
probability passes the threshold q (Balagansky & Gavrilov, NeurIPS 2022, section 3.2).

It reads one head signal, `halting_prob` (lambda_j, the chance of halting at exit j if no
earlier exit halted), so it needs `halting-prob`, a need eebench does not know: it describes it.
`eebench run --method pabee --rule q-exit` is then refused before training (pabee's heads give
no such signal), and `--method palbert --rule entropy` works like any other pair.
"""

from __future__ import annotations

from eebench.rules import ExitRule, RuleKind, StepResult, register_rule


@register_rule("q-exit")
class QExit(RuleKind):
    description = ("exit when the cumulative halting probability sum_{i<=j} lambda_i "
                   "prod_{k<i}(1 - lambda_k) > q (the threshold)")
    paper = "PALBERT (Balagansky & Gavrilov, NeurIPS 2022)"
    needs = ("halting-prob",)
    need_descriptions = {"halting-prob": "a halting probability per exit, the chance of "
                                         "stopping there if no earlier exit did (trained by: "
                                         "palbert)"}

    def default_sweep(self, num_layers, is_regression, num_labels=2):
        return [round(k / 20, 6) for k in range(1, 20)]  # the authors' runs: q = 0.5

    def check(self, value):
        from eebench.errors import UsageError

        if not 0 <= value <= 1:
            raise UsageError(f"rule 'q-exit': q is a probability in [0, 1], got {value:g}")

    def build(self, value, facts):
        return QExitRule(value)


class QExitRule(ExitRule):
    def __init__(self, q: float):
        self.q = float(q)

    def start(self, n, device=None):
        import torch

        return {"cdf": torch.zeros(n, device=device), "left": torch.ones(n, device=device)}

    def step(self, state, exit_index, logits, signals=None):
        lam = signals["halting_prob"].float()
        cdf = state["cdf"] + lam * state["left"]  # + p_j, the chance of halting exactly here
        return StepResult({"cdf": cdf, "left": state["left"] * (1 - lam)}, cdf > self.q,
                          (cdf - self.q).abs())
