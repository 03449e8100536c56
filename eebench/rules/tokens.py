"""Exit rules for sequence labelling: a decision per sentence from its tokens' uncertainties
(SENTEE), or per token (TOKEE), from per-exit token logits [n, T, C].

Which tokens count is a bool token mask [n, T] (the first piece of each word; padding, special
tokens and a word's other pieces never count). A sentence with no token that counts (its only
word is one the tokenizer turns into nothing, as WNUT-17's lone emoji variation selectors) has
nothing to label: every rule lets it go at the first exit. A token rule keeps it in its state
(`start_tokens(mask)`), so the batch shrinking of real inference (`base.select_state`) keeps it
aligned, and a loop that also drops padding columns cuts the state with `trim_tokens`. `step`
returns a `TokenStepResult`: `exit` [n] (the sentence is done) as for a sequence rule, plus
`halt` [n, T] (tokens that halt at this exit). The caller halts every token still running at the
last exit; `simulate_tokens` replays a rule over stored logits [E, N, T, C].

Following Li et al., "Accelerating BERT Inference for Sequence Labeling via Early-Exit" (ACL
2021), code LeeSureman/Sequence-Labeling-Early-Exit @9717770 (V0/modeling_bert_ee.py, the same
file as V0/modeling_bert_ee_old.py @e518c80; V0/utils.py; V0/test.py). Their loops run one
sentence at a time over its words (each word's first piece, `ptm_pool_pos`), so "neighbouring
tokens" are neighbouring words: here, neighbouring counting tokens.

- uncertainty of a token (utils.py get_uncertainty 314-318): its entropy divided by ln C;
- SENTEE (`s_level_ee`, modeling_bert_ee.py 562-631): the max (`sentence_ee_pool`, default
  'max', test.py 71) or the mean of the sentence's token uncertainties, no window; the sentence
  exits when it is `<` the threshold (599), checked at every exit but the last;
- TOKEE (`t_level_win_ee_copy`, test.py's default mode, 1145-1308): a token's uncertainty is the
  max over a window of `win_size` words centred on it (`max_pool1d(kernel=win_size, stride=1,
  padding=win_size // 2)`, 1246); a running token halts when it is `<` the threshold of that
  layer (1271), which is the threshold in the lower 6 layers and twice it in the upper 6, capped
  by `max_threshold` (test.py 142-146); halted tokens still count in their neighbours' windows
  with their current uncertainty (1240-1242 mean to set them to -1 but write into the previous
  layer's pooled tensor, which 1246 overwrites: `halted="current"`; `halted="certain"` is the
  evident intent); a halted token predicts its logits at the layer it halted (1273); the
  sentence stops when every token halted (1297-1308), at the last layer the rest halt (1223).

Not taken over: TOKEE's second test `or own uncertainty < t_level_t[i]` (test.py's default -1
never fires) and the constraint/local-aware options (off by default). Entropy is computed
stably (log_softmax); theirs overflows for logits above ~88. With the authors' true copying, a
halted token's later logits (and its neighbours') come from the copied state: replaying stored
logits of a model run without copying (as their utils.py simulate_ee does) is exact for SENTEE
but for TOKEE matches a live loop only if the live loop's logits are what was stored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from eebench.rules.base import ExitRule, Signals, State, StepResult, meets
from eebench.rules.entropy import entropy

AGGREGATES = ("mean", "max")
HALTED = ("current", "certain")


@dataclass(frozen=True)
class TokenStepResult(StepResult):
    halt: torch.Tensor  # bool [n, T]: counting tokens that halt at this exit
    token_margin: torch.Tensor  # float [n, T]: distance from the boundary; inf where not decided


def token_uncertainty(logits: torch.Tensor, normalized: bool = True) -> torch.Tensor:
    """Entropy of each token's prediction [n, T] in nats, or divided by ln C (`normalized`)."""
    h = entropy(logits)
    return h / math.log(max(int(logits.shape[-1]), 2)) if normalized else h


def window_max(u: torch.Tensor, mask: torch.Tensor, window: int) -> torch.Tensor:
    """For each counting token, the max of `u` over the `window` counting tokens centred on it
    (window // 2 either side, fewer at the sentence's ends); -inf where a token does not count."""
    out = u.float().masked_fill(~mask, -math.inf)
    if window == 1:
        return out
    # counting tokens first, in order: the authors' sentence of words, padded with -inf
    order = torch.sort((~mask).to(torch.uint8), dim=1, stable=True).indices
    pooled = F.max_pool1d(out.gather(1, order)[:, None], window, stride=1,
                          padding=window // 2)[:, 0]
    return torch.empty_like(out).scatter_(1, order, pooled).masked_fill(~mask, -math.inf)


def trim_tokens(state: State, length: int) -> State:
    """Keep the first `length` token columns of every [n, T] state tensor (a loop that drops
    padding columns no remaining sentence needs)."""
    return {k: v[:, :length] if v.ndim >= 2 else v for k, v in state.items()}


def _odd_window(window: int) -> int:
    if isinstance(window, bool) or int(window) != window or window < 1 or window % 2 == 0:
        # an even kernel with padding window // 2 gives T + 1 outputs: their loop breaks on it
        raise ValueError(f"the window is an odd number of tokens >= 1, got {window!r}")
    return int(window)


class TokenExitRule(ExitRule):
    """A stepwise rule over token logits [n, T, C]; its state holds the token mask."""

    def start(self, n: int, device: Any = None) -> State:
        raise TypeError(f"{type(self).__name__} decides over tokens: start it with "
                        "start_tokens(mask), run it with simulate_tokens")

    def start_tokens(self, mask: torch.Tensor) -> State:
        """The state for sentences whose counting tokens are `mask` (bool [n, T])."""
        if mask.ndim != 2:
            raise ValueError(f"a token mask is [sentences, tokens], got shape {tuple(mask.shape)}")
        mask = mask.bool()  # a sentence with none (a word the tokenizer drops) exits at once
        return {"mask": mask, "halted": torch.zeros_like(mask)}

    def step(self, state: State, exit_index: int, logits: torch.Tensor,
             signals: Signals | None = None) -> TokenStepResult:
        raise NotImplementedError


class SentenceEntropyRule(TokenExitRule):
    """SENTEE: the whole sentence exits when the max (or mean) of its counting tokens'
    uncertainties is below the threshold; `window` > 1 first takes each token's max over its
    neighbours (the authors use none), `normalized` divides entropy by ln C (the authors do)."""

    def __init__(self, threshold: float, aggregate: str = "max", window: int = 1,
                 normalized: bool = True, comparison: str = "<"):
        if aggregate not in AGGREGATES:
            raise ValueError(f"aggregate is one of {', '.join(AGGREGATES)}, got {aggregate!r}")
        self.threshold, self.aggregate = float(threshold), aggregate
        self.window, self.normalized = _odd_window(window), normalized
        self.comparison = comparison

    def step(self, state: State, exit_index: int, logits: torch.Tensor,
             signals: Signals | None = None) -> TokenStepResult:
        mask = state["mask"]
        u = window_max(token_uncertainty(logits, self.normalized), mask, self.window)
        empty = ~mask.any(1)  # nothing to label: done at the first exit
        if self.aggregate == "max":
            agg = u.amax(1)
        else:
            agg = u.masked_fill(~mask, 0.0).sum(1) / mask.sum(1).clamp(min=1)
        go = meets(agg, self.threshold, self.comparison) | empty
        margin = (agg - self.threshold).abs().masked_fill(empty, math.inf)
        halt = go[:, None] & mask & ~state["halted"]
        token_margin = torch.where(mask, margin[:, None], math.inf)
        return TokenStepResult({"mask": mask, "halted": state["halted"] | halt}, go, margin,
                               halt, token_margin)


class TokenHaltRule(TokenExitRule):
    """TOKEE: each running token halts when the max uncertainty (entropy / ln C) over the
    `window` counting tokens centred on it is below the threshold of this exit; the sentence is
    done when all its counting tokens halted.

    The threshold is `threshold`, times `upper_scale` from exit `upper_from` on (0-based; None:
    never), at most `cap`: the authors' 12-layer schedule is upper_from=6, upper_scale=2
    (`authors`). `halted`: how a halted token counts in its neighbours' windows: "current" (its
    uncertainty at this exit, as the authors' code does) or "certain" (-1, what it meant)."""

    def __init__(self, threshold: float, window: int = 5, upper_from: int | None = None,
                 upper_scale: float = 2.0, cap: float | None = None, halted: str = "current",
                 comparison: str = "<"):
        if halted not in HALTED:
            raise ValueError(f"halted is one of {', '.join(HALTED)}, got {halted!r}")
        self.threshold, self.window = float(threshold), _odd_window(window)
        self.upper_from, self.upper_scale, self.cap = upper_from, float(upper_scale), cap
        self.halted, self.comparison = halted, comparison

    @classmethod
    def authors(cls, threshold: float, window: int, num_exits: int) -> TokenHaltRule:
        """test.py's schedule for a model of `num_exits` layers: twice the threshold in the
        upper half (max_threshold's default 100 caps nothing)."""
        return cls(threshold, window, upper_from=num_exits // 2, upper_scale=2.0)

    def threshold_at(self, exit_index: int) -> float:
        t = self.threshold
        if self.upper_from is not None and exit_index >= self.upper_from:
            t *= self.upper_scale
        return t if self.cap is None else min(t, float(self.cap))

    def step(self, state: State, exit_index: int, logits: torch.Tensor,
             signals: Signals | None = None) -> TokenStepResult:
        mask, halted = state["mask"], state["halted"]
        u = token_uncertainty(logits)
        if self.halted == "certain":
            u = u.masked_fill(halted, -1.0)
        w = window_max(u, mask, self.window)
        threshold = self.threshold_at(exit_index)
        running = mask & ~halted
        halt = running & meets(w, threshold, self.comparison)
        halted = halted | halt
        token_margin = torch.where(running, (w - threshold).abs(), math.inf)
        done = ~(mask & ~halted).any(1)
        return TokenStepResult({"mask": mask, "halted": halted}, done, token_margin.amin(1),
                               halt, token_margin)


@dataclass
class TokenDecisions:
    """Where each sentence and each counting token exits, and what each token predicts there;
    -1 for a token that does not count."""

    exit_index: torch.Tensor  # long [N]: the exit where the sentence is done
    token_exit: torch.Tensor  # long [N, T]: the exit where the token halted
    prediction: torch.Tensor  # long [N, T]: argmax of its logits at that exit
    margin: torch.Tensor  # float [N, T]: smallest margin of its decisions up to its halt


def simulate_tokens(rule: ExitRule, logits: torch.Tensor, mask: torch.Tensor
                    ) -> TokenDecisions:
    """Replay a token rule over stored logits [E, N, T, C] of sentences whose counting tokens
    are `mask` [N, T]; at the last exit every token still running halts (the rule is not
    asked there, as in the authors' loops)."""
    num_exits, n, t = logits.shape[:3]
    mask = mask.to(logits.device).bool()
    start = getattr(rule, "start_tokens", None)  # a rule of one decision per sentence: start(n)
    state = start(mask) if start is not None else rule.start(n, logits.device)
    exit_index = torch.full((n,), num_exits - 1, dtype=torch.long, device=logits.device)
    token_exit = torch.full((n, t), num_exits - 1, dtype=torch.long, device=logits.device)
    margin = torch.full((n, t), math.inf, device=logits.device)
    done = torch.zeros(n, dtype=torch.bool, device=logits.device)
    for j in range(num_exits - 1):
        step = rule.step(state, j, logits[j])
        state = step.state
        running = mask & (token_exit == num_exits - 1) & ~done[:, None]
        token_margin = getattr(step, "token_margin", None)
        if token_margin is None:  # a sentence's decision is each of its tokens'
            token_margin = step.margin[:, None].expand(n, t)
        margin = torch.where(running, torch.minimum(margin, token_margin.float()), margin)
        halt = getattr(step, "halt", None)
        token_exit[running & (step.exit[:, None] if halt is None else halt)] = j
        now = ~done & step.exit
        exit_index[now] = j
        done |= now
    prediction = logits.argmax(-1).gather(0, token_exit[None])[0]
    gone = torch.tensor(-1, device=logits.device)
    return TokenDecisions(exit_index, token_exit.where(mask, gone), prediction.where(mask, gone),
                          margin)
