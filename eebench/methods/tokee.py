"""TOKEE (Li et al., ACL 2021): token-level early exit for sequence labelling.

    exit i = a token head after every layer (dropout -> linear on each token), i = 1..L
    train:  every parameter on sum_i CE(exit i) over the tokens that count, one joint stage
    infer:  a word halts at the first i where the max of H(p_i) / ln C over a window of its
            neighbours < threshold_i (twice the threshold in the upper half of the layers); its
            state is copied upward; the sentence ends when every word halted (the `tokee` rule)

Trained as SENTEE (eebench.methods.sentee, with the same deviations from the authors' code); the
two differ in their rule.
"""

from __future__ import annotations

from eebench.methods import EarlyExitMethod, register_method


@register_method("tokee")
class TOKEE(EarlyExitMethod):
    paper = ("Li et al., Accelerating BERT Inference for Sequence Labeling via Early-Exit, "
             "ACL 2021")
    description = "token heads on every layer, joint loss; each word halts when its window is sure"
    rule = "tokee"
    token_rule = "tokee"
    sequence_tasks = False  # it labels tokens
