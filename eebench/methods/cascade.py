"""CascadeBERT (Li et al., EMNLP Findings 2021; lancopku/CascadeBERT, cascade_bert.py): a cascade
of complete models of growing depth, each a static model (first k layers + one classifier).

    models:  M_1, ..., M_S = static models of depths d_1 < ... < d_S (default 1, 2, 4, ..., L)
    train:   each M_s alone on its cross-entropy; with DAR (ranking_weight w > 0) the models
             before the last add w * DAR on their own confidence c = max softmax(M_s(x)):
               DAR = mean over easy e of max(0, margin - (c_e - c_h)), h a uniformly drawn hard
             sample of the batch (with replacement), easy = M_s predicts it correctly
    infer:   for s = 1..S: run M_s (from the input ids) on the samples still here;
               those with c >= threshold answer with M_s (rule maxprob; the authors test
               c > threshold: they differ at exact ties); the last model answers for the rest
    cost:    a sample answered by M_j ran M_1..M_j whole: its FLOPs are their sum

Without DAR the models are exactly `static`'s (same method name and settings, so one checkpoint
serves static runs and cascades of the same training); the deepest model never has DAR, so it is
always static's. The run measures the cascade as one model (`CascadeModel`): exit j is M_j's
answer, at layer d_j, so a point's avg_exit_layer is the answering model's depth, while its FLOPs
count every model run. Classification only (the rule needs classes). Deviations: docs/methods.md.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from eebench.errors import UsageError
from eebench.methods import EarlyExitMethod, MethodSettings, register_method
from eebench.methods.static import Static


@register_method("cascade")
class Cascade(EarlyExitMethod):
    paper = ("Li et al., CascadeBERT: Accelerating Inference of Pre-trained Language Models via "
             "Calibrated Complete Models Cascade, EMNLP Findings 2021")
    description = ("complete models of growing depth run in turn; a sample stops at the first "
                   "whose max probability exceeds the threshold")
    rule = "maxprob"
    comparison = ">"  # cascade_bert.py moves on unless max p > threshold
    trains = ("one complete model per depth (static's models, shared with static runs), "
              "chained at inference")

    class Settings(MethodSettings):
        depths: list[int] | None = None  # the models' depths; None: 1, 2, 4, ... and L
        ranking_weight: float = Field(0.0, ge=0)  # DAR's weight (0: off, as in static)
        ranking_margin: float = Field(0.5, ge=0)  # DAR's margin (the authors' script: 0.5)
        layers: int | None = Field(None, ge=1)  # one model of the cascade (its checkpoint)

        @field_validator("depths")
        @classmethod
        def _increasing(cls, v: list[int] | None) -> list[int] | None:
            if v is not None and (not v or v[0] < 1 or any(a >= b for a, b in zip(v, v[1:]))):
                raise ValueError("depths must be layer counts >= 1, strictly increasing")
            return v

    # -- the cascade -----------------------------------------------------------------------------
    def depths(self, num_layers: int) -> list[int]:
        """The models' depths on a backbone of `num_layers` layers."""
        depths = self.config.depths
        if depths is None:
            return [*(2 ** i for i in range(num_layers.bit_length()) if 2 ** i < num_layers),
                    num_layers]
        if depths[-1] > num_layers:
            raise UsageError(f"cascade: depth {depths[-1]} but the backbone has {num_layers} "
                             "layers", hint="set depths to layer counts the backbone has")
        return list(depths)

    def models(self, num_layers):
        """One method per model, trained on its own: static's, or with DAR before the last."""
        if self.config.layers is not None:
            raise UsageError("cascade: `layers` names one model of a cascade, not a cascade",
                             hint="set the models' depths with depths=[1,2,4,6]")
        *first, last = self.depths(num_layers)
        w, m = self.config.ranking_weight, self.config.ranking_margin
        if w == 0:
            return [Static(layers=k) for k in [*first, last]]
        return [*(Cascade(layers=k, ranking_weight=w, ranking_margin=m) for k in first),
                Static(layers=last)]

    def combine(self, models):
        from eebench.methods.cascade_model import CascadeModel  # torch, so only here

        return CascadeModel(list(models), self.settings)

    # -- one model of the cascade: static's, with DAR -------------------------------------------
    def head_layers(self, num_layers):
        return Static(layers=self.config.layers).head_layers(num_layers)

    joint_stage = Static.joint_stage

    def loss(self, exit_logits, labels, stage, is_regression, step=0):
        """Its one exit's cross-entropy (static's), + w * DAR where w > 0."""
        loss = super().loss(exit_logits, labels, stage, is_regression)
        if self.config.ranking_weight == 0:
            return loss
        return loss + self.config.ranking_weight * dar_loss(exit_logits[-1], labels,
                                                            self.config.ranking_margin)


def dar_loss(logits, labels, margin: float):
    """Difficulty-aware ranking (cascade_bert.py `pair_loss`): each easy sample's confidence
    (max softmax) should exceed a uniformly drawn hard one's by `margin`. Easy: predicted
    correctly (the authors read precomputed labels); 0 where the batch lacks easy or hard ones."""
    import torch
    import torch.nn.functional as F

    confidence = torch.softmax(logits.float(), dim=-1).max(-1).values
    easy = logits.detach().argmax(-1) == labels
    easy_conf, hard_conf = confidence[easy], confidence[~easy]
    if len(easy_conf) == 0 or len(hard_conf) == 0:
        return confidence.sum() * 0.0
    drawn = torch.randint(len(hard_conf), (len(easy_conf),), device=logits.device)
    return F.margin_ranking_loss(easy_conf, hard_conf[drawn], torch.ones_like(easy_conf),
                                 margin=margin)
