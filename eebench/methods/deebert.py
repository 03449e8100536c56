"""DeeBERT (Xin et al., ACL 2020): off-ramps after every layer, exit when the entropy is low.

    off-ramp i = its own pooler (dense + tanh on layer i's pooled tokens, from the pretrained
                 pooler) -> dropout -> linear,                           i = 1..L
    stage 1:  train backbone + off-ramp L on CE(off-ramp L)
    stage 2:  freeze backbone and off-ramp L; train off-ramps 1..L-1 on sum_i CE(off-ramp i)
    infer:    exit at the first i with H(softmax(logits_i)) < threshold (off-ramp L always exits)

The threshold is swept over a grid from 0 (never exit early) to ln C (the largest entropy
possible, so almost every sample exits at layer 1). Entropy needs a distribution over classes:
regression tasks are refused.

On a token task (sequence labelling) it is the early-exit survey's NER adaption: a token head
per layer, the same two stages, and the sentence exits when the mean entropy of its words'
predictions < threshold (the `mean-entropy` rule, up to ln C).
"""

from __future__ import annotations

from eebench.methods import EarlyExitMethod, Stage, backbone_then_heads, register_method


@register_method("deebert")
class DeeBERT(EarlyExitMethod):
    paper = "Xin et al., DeeBERT: Dynamic Early Exiting for Accelerating BERT Inference, ACL 2020"
    description = "an off-ramp per layer, two-stage training, exit when entropy < threshold"
    rule = "entropy"
    token_rule = "mean-entropy"

    def stages(self) -> list[Stage]:
        return backbone_then_heads("off-ramps")
