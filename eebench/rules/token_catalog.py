"""The exit rules of token models (sequence labelling), by name: a decision per sentence from its
tokens' uncertainties, or per token. Each reads a token model's logits [n, T, C] over the tokens
that count (each word's first piece); eebench.rules.tokens implements them and cites the code
they follow.

    mean-entropy  the survey's adaption of DeeBERT: the sentence exits when the mean of its
                  tokens' entropies (nats) < threshold, swept from 0 to ln C
    sentee        SENTEE (Li et al., ACL 2021): when the max (or mean) of its tokens' entropies
                  divided by ln C < threshold, swept from 0 to 1
    tokee         TOKEE (the same paper): each token halts when the max normalised entropy over
                  a window of its neighbours < threshold (twice it in the upper half of the
                  exits, as the authors' test.py); the sentence is done when every token halted
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from eebench.rules.catalog import RuleKind, even_grid, register_rule, require
from eebench.rules.sweep import RuleSettings


def _odd(window: int) -> int:
    if window % 2 == 0:  # an even window has no centre word (the authors' pooling breaks on it)
        raise ValueError("the window is an odd number of words")
    return window


Window = Annotated[int, Field(ge=1), AfterValidator(_odd)]


class _TokenRule(RuleKind):
    unit = "token"
    # whether words halt on their own (their states copied upward): such a rule's decisions
    # depend on the copies, so each sweep value runs the model (eebench.rules.token_halting)
    halts_tokens = False

    def check(self, value):
        require(value >= 0, self.name, "the threshold must be >= 0", value)

    def sentence_entropy(self, value, facts, **how):
        """A rule of the whole sentence on its words' entropies (mean-entropy, sentee): `how`
        they are pooled and scaled (eebench.rules.tokens.SentenceEntropyRule)."""
        from eebench.rules.tokens import SentenceEntropyRule

        return SentenceEntropyRule(value, comparison=self.comparison_for(facts), **how)


@register_rule("mean-entropy")
class MeanEntropy(_TokenRule):
    description = ("token models: the sentence exits when the mean entropy (nats) of its words' "
                   "predictions < threshold")
    paper = "the early-exit survey's NER adaption of DeeBERT (CoNLL-2003, max threshold ln C)"

    def default_sweep(self, num_layers, is_regression, num_labels=2):
        return even_grid(0.0, math.log(max(num_labels, 2)))

    def build(self, value, facts):
        return self.sentence_entropy(value, facts, aggregate="mean", normalized=False)


@register_rule("sentee")
class SentEE(_TokenRule):
    description = ("token models: the sentence exits when the max (or mean) of its words' "
                   "entropies / ln C < threshold")
    paper = "SENTEE (Li et al., Accelerating BERT Inference for Sequence Labeling, ACL 2021)"

    class Settings(RuleSettings):
        aggregate: Literal["max", "mean"] = "max"  # the authors' sentence_ee_pool default
        window: Window = 1  # the authors pool no window for SENTEE

    def default_sweep(self, num_layers, is_regression, num_labels=2):
        return even_grid(0.0, 1.0)

    def build(self, value, facts):
        s = self.settings(facts.rule_settings)
        return self.sentence_entropy(value, facts, aggregate=s["aggregate"], window=s["window"])


@register_rule("tokee")
class TokEE(_TokenRule):
    description = ("token models: each word halts when the max of its window's entropies / ln C "
                   "< threshold (x2 in the upper half); the sentence ends when all halted")
    paper = "TOKEE (Li et al., Accelerating BERT Inference for Sequence Labeling, ACL 2021)"
    halts_tokens = True

    class Settings(RuleSettings):
        window: Window = 5  # test.py's win_size
        # how a halted word counts in its neighbours' windows: its uncertainty where it halted
        # ("current", what the authors' code does) or -1 ("certain", what it means to do)
        halted: Literal["current", "certain"] = "current"

    def default_sweep(self, num_layers, is_regression, num_labels=2):
        return even_grid(0.0, 0.5)  # twice the threshold above halfway: 0..1 there

    def build(self, value, facts):
        from eebench.rules.tokens import TokenHaltRule

        s = self.settings(facts.rule_settings)
        upper = None if facts.num_exits is None else facts.num_exits // 2
        return TokenHaltRule(value, s["window"], upper_from=upper, upper_scale=2.0,
                             halted=s["halted"], comparison=self.comparison_for(facts))
