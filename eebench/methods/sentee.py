"""SENTEE (Li et al., ACL 2021): sentence-level early exit for sequence labelling.

    exit i = a token head after every layer (dropout -> linear on each token), i = 1..L
    train:  every parameter on sum_i CE(exit i) over the tokens that count (each word's first
            piece), one joint stage
    infer:  the sentence exits at the first i where max_words H(p_i(word)) / ln C < threshold
            (the `sentee` rule; the mean instead of the max is its `aggregate` setting)

Deviations from the authors' code (LeeSureman/Sequence-Labeling-Early-Exit, V0/main_two_stage.py,
further_train.py): linear token heads (theirs default to a small transformer layer, `tener`),
one learning rate for all parameters (theirs scale the heads' by the number of layers and the
backbone's by 0.1), and no second self-sampling fine-tuning stage.
"""

from __future__ import annotations

from eebench.methods import EarlyExitMethod, register_method


@register_method("sentee")
class SENTEE(EarlyExitMethod):
    paper = ("Li et al., Accelerating BERT Inference for Sequence Labeling via Early-Exit, "
             "ACL 2021")
    description = "token heads on every layer, joint loss; the sentence exits when its words agree"
    rule = "sentee"
    token_rule = "sentee"
    sequence_tasks = False  # it labels tokens
