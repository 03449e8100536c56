"""Max-prob early exit with calibrated exits (Schwartz et al., "The Right Tool for the Job",
ACL 2020; allenai/sledgehammer).

    head i  = shared pooler (one module, from the pretrained pooler) -> dropout -> linear_i
    train:    loss = sum_i CE(logits_i)                  (every exit at once, unweighted sum)
    calibrate: after training, per exit i: T_i = argmin_T NLL(softmax(logits_i / T), y) on a
              calibration slice held out of the training split (never dev); T_i = 1 where no
              T lowers the NLL. The temperatures are stored with the checkpoint.
    infer:    exit at the first i with max softmax(logits_i / T_i) >= threshold
              (the last exit always exits)

The rule is `calibrated-maxprob`; `eebench run --rule maxprob` sweeps the same model without its
temperatures. Classification only (a softmax over one output is always 1).
"""

from __future__ import annotations

from pydantic import Field

from eebench.methods import EarlyExitMethod, MethodSettings, register_method

LOG_T_BOUNDS = (-3.0, 3.0)  # T in [e^-3, e^3] = [0.05, 20]


@register_method("maxprob")
class MaxProb(EarlyExitMethod):
    paper = ("Schwartz et al., The Right Tool for the Job: Matching Model and Instance "
             "Complexities, ACL 2020")
    description = "a classifier per layer, trained jointly, calibrated; exit on max probability"
    rule = "calibrated-maxprob"
    provides = frozenset({"temperatures"})

    class Settings(MethodSettings):
        # share of the (subsampled) training split held out to fit the temperatures
        calibration_fraction: float = Field(0.1, gt=0, lt=0.5)

    def shares_pooler(self):
        return True  # the pretrained pooler on every layer, as in BERT

    def make_head(self, pooler, config, num_labels, own_pooler):
        from eebench.models.heads import CalibratedHead

        return CalibratedHead(pooler, config, num_labels, own_pooler=own_pooler)

    def calibration_fraction(self):
        return self.config.calibration_fraction

    def calibrate(self, model, outputs):
        import torch

        labels = torch.as_tensor(outputs.labels, dtype=torch.long)
        with torch.no_grad():
            for head, logits in zip(model.heads, outputs.logits, strict=True):
                head.temperature.fill_(fit_temperature(logits, labels))


def nll(logits, labels, temperature: float) -> float:
    import torch.nn.functional as F

    return float(F.cross_entropy(logits.double() / temperature, labels))


def fit_temperature(logits, labels) -> float:
    """The T minimising NLL(softmax(logits / T), labels), searched over log T in LOG_T_BOUNDS
    (a bounded 1-D minimisation: the NLL is smooth in log T); 1 unless it lowers the NLL."""
    import math

    from scipy.optimize import minimize_scalar

    found = minimize_scalar(lambda log_t: nll(logits, labels, math.exp(log_t)),
                            bounds=LOG_T_BOUNDS, method="bounded", options={"xatol": 1e-5})
    t = math.exp(float(found.x))
    return t if nll(logits, labels, t) < nll(logits, labels, 1.0) else 1.0
