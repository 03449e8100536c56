"""Token-level exit rules (eebench.rules.tokens) against the authors' SENTEE and TOKEE loops,
one sentence at a time, on every token.

The loops below are written from LeeSureman/Sequence-Labeling-Early-Exit @9717770 (Li et al.,
ACL 2021); V0/modeling_bert_ee.py there is V0/modeling_bert_ee_old.py of @e518c80, unchanged.
They run at batch size 1 over a sentence's words (each word's first piece, `ptm_pool_pos`), so
a sentence here is given to them as its counting tokens only, [E, W, C]; eebench's rules see
the padded batch [E, N, T, C] with [CLS], extra word pieces, [SEP] and padding interleaved and
a token mask. Logits are moderate, so the authors' entropy formula (no max subtracted) stays
finite; it is evaluated in float64, as tests/test_reference_loops.py does for ElasticBERT's.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from eebench.rules.base import select_state
from eebench.rules.tokens import (
    SentenceEntropyRule,
    TokenHaltRule,
    simulate_tokens,
    trim_tokens,
    window_max,
)

NUM_LABELS = (9, 13)  # CoNLL-2003 and WNUT-17 BIO tag sets


# --------------------------------------------------------------------------- the authors' loops
def _authors_uncertainty(x: torch.Tensor, normalized: bool = True) -> torch.Tensor:
    """V0/utils.py get_entropy 306-311 and get_uncertainty 314-318, on one layer's [W, C]:
    log(sum e^x) - sum(x e^x) / sum(e^x), divided by log(num_tags)."""
    x = x.double()
    exp_x = torch.exp(x)
    a = torch.sum(exp_x, dim=1)
    b = torch.sum(x * exp_x, dim=1)
    h = torch.log(a) - b / a
    return h / math.log(x.size(-1)) if normalized else h


def _pool(u: torch.Tensor, win_size: int) -> torch.Tensor:
    """The window: `nn.functional.max_pool1d(u.unsqueeze(0).unsqueeze(0), kernel_size=win_size,
    stride=1, padding=win_size // 2).squeeze(0).squeeze(0)` (modeling_bert_ee.py 1246)."""
    return F.max_pool1d(u[None, None], kernel_size=win_size, stride=1,
                        padding=win_size // 2)[0, 0]


def _sentee_loop(z: torch.Tensor, threshold: float, pool: str, normalized: bool = True,
                 win_size: int = 1) -> tuple[int, list[int], list[int]]:
    """SENTEE: BertModel_EE.forward, `test_mode == 's_level_ee'`, criterion 'entropy',
    V0/modeling_bert_ee.py 562-604.

    At layer i: `if (i+1) == num_hidden_layers: return [logits]` (584-588: the last layer is
    never checked); `tmp_for_judging_ee = get_uncertainty(logits[0])` (591), then
    `torch.mean` ('avg') or `torch.max` ('max', test.py 71's default) over all the sentence's
    words (593-597); `if tmp_for_judging_ee < self.args.threshold: return [logits]` (599), a
    scalar threshold (test.py 142 turns it into a list for the t_level modes only).
    `normalized=False` is the survey's variant (entropy in nats, thresholds up to ln C);
    `win_size` > 1 is eebench's extension (the authors pool no window here).
    Returns (sentence exit, per-word exit, per-word prediction)."""
    num_layers, words = z.shape[:2]
    for i in range(num_layers):
        logits = z[i]
        if (i + 1) == num_layers:
            break
        u = _authors_uncertainty(logits, normalized)
        if win_size > 1:
            u = _pool(u, win_size)
        u = torch.mean(u) if pool == "mean" else torch.max(u)
        if u < threshold:
            break
    preds = logits.argmax(-1).tolist()
    return i, [i] * words, preds


def _tokee_loop(z: torch.Tensor, threshold: float, win_size: int, fixed: bool = False,
                max_threshold: float = 100.0) -> tuple[int, list[int], list[int]]:
    """TOKEE: BertModel_EE.forward, `test_mode == 't_level_win_ee_copy'` (test.py 74-77's
    default), criterion 'entropy', V0/modeling_bert_ee.py 1145-1308, with test.py's defaults
    t_level_t '-1', use_constrain 0, local_aware_1/2 0.

    test.py 142-146: `threshold = [threshold]*6 + [threshold*2]*6`, each `min(max_threshold, x)`
    (default 100); here the lower half of any number of layers keeps it. test.py 81, 130-131:
    `t_level_t = [-1]*6 + [-1]*6` (a token's own uncertainty never is < -1). At layer i:
    at the last layer every token with `pred[j] is None` takes `logits[0,j]` (1223-1235);
    else `tmp_for_judging_ee_token = get_uncertainty(logits[0])` (1239); 1240-1242 set
    `tmp_for_judging_ee[j] = -1` for halted tokens, a variable that 1246 then overwrites, so
    halted tokens still count with their current uncertainty (`fixed=True`: what it meant, -1);
    the window max (1246); `if pred[j] is None and (uncertainty < threshold[i] or
    tmp_for_judging_ee_token[j] < t_level_t[i])`: `pred[j] = logits[0,j]`, `exit_layer[j] = i`
    (1271-1287); the sentence ends once no `pred[j]` is None (1297-1308). The prediction is
    the argmax of `pred[j]` (modeling_bert_ee.py 2311-2319). Equally utils.py simulate_ee
    447-542, the authors' own replay over stored logits (used in their self-sampling training).
    Returns (sentence exit, per-word exit, per-word prediction)."""
    num_layers, seq_len = z.shape[:2]
    half = num_layers // 2
    thresholds = [threshold] * half + [threshold * 2] * (num_layers - half)
    thresholds = [min(max_threshold, x) for x in thresholds]
    t_level_t = [-1.0] * num_layers
    pred: list[torch.Tensor | None] = [None] * seq_len
    exit_layer = [-1] * seq_len
    for i in range(num_layers):
        logits = z[i]
        if (i + 1) == num_layers:
            for j, _ in enumerate(pred):
                if pred[j] is None:
                    pred[j] = logits[j]
                    exit_layer[j] = i
            break
        token_u = _authors_uncertainty(logits)
        if fixed:
            for j, p in enumerate(pred):
                if p is not None:
                    token_u[j] = -1
        pooled = _pool(token_u, win_size)
        for j, uncertainty in enumerate(pooled):
            if pred[j] is None and (uncertainty < thresholds[i] or token_u[j] < t_level_t[i]):
                pred[j] = logits[j]
                exit_layer[j] = i
        if all(p is not None for p in pred):
            break
    return i, exit_layer, [int(p.argmax()) for p in pred]


# ------------------------------------------------------------------------------------ the data
def _batch(seed: int, n: int, num_exits: int, num_labels: int, max_words: int = 12):
    """Stored logits [E, N, T, C] and the first-piece mask [N, T] of n sentences laid out as
    word pieces: [CLS], 1-3 pieces per word, [SEP], padding to the longest. Word counts vary
    from 1 to max_words; the logits' scale varies per sentence, token and exit, so
    uncertainties spread over (0, 1), away from 1 (a near-uniform token's uncertainty is 1 up
    to float32 rounding: a tie at threshold 1 that no loop can be held to)."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    for _ in range(n):
        words = int(torch.randint(1, max_words + 1, (1,), generator=g))
        row = [False]
        for _ in range(words):
            row += [True] + [False] * int(torch.randint(0, 3, (1,), generator=g))
        rows.append(row + [False])
    t = max(map(len, rows))
    mask = torch.tensor([r + [False] * (t - len(r)) for r in rows])
    scale = 0.25 + torch.rand(num_exits, n, t, 1, generator=g) * 4.0  # none near-uniform
    logits = torch.randn(num_exits, n, t, num_labels, generator=g) * scale
    return logits, mask


def _check(decisions, logits, mask, loop) -> None:
    """Every sentence and every token: the authors' loop on its words gives what the rule did."""
    for s in range(mask.shape[0]):
        words = mask[s].nonzero().flatten()
        exit_, token_exit, preds = loop(logits[:, s, words])
        assert int(decisions.exit_index[s]) == exit_ == max(token_exit), s
        assert decisions.token_exit[s, words].tolist() == token_exit, s
        assert decisions.prediction[s, words].tolist() == preds, s
        assert (decisions.token_exit[s, ~mask[s]] == -1).all()
        assert (decisions.prediction[s, ~mask[s]] == -1).all()


CASES = [(0, 12, 9), (1, 6, 13), (2, 4, 9), (3, 12, 13)]  # (seed, exits, labels)


@pytest.mark.parametrize("seed,num_exits,num_labels", CASES)
@pytest.mark.parametrize("pool", ["max", "mean"])
def test_sentence_rule_is_the_authors_sentee(seed, num_exits, num_labels, pool):
    logits, mask = _batch(seed, 40, num_exits, num_labels)
    for threshold in (0.0, 0.2, 0.35, 0.5, 0.65, 0.8, 0.95):
        rule = SentenceEntropyRule(threshold, aggregate=pool)
        _check(simulate_tokens(rule, logits, mask), logits, mask,
               lambda z, t=threshold: _sentee_loop(z, t, pool))


@pytest.mark.parametrize("seed,num_exits,num_labels", CASES[:2])
@pytest.mark.parametrize("pool", ["max", "mean"])
def test_sentence_rule_in_nats_and_over_windows(seed, num_exits, num_labels, pool):
    """The survey's variant (mean entropy in nats, up to ln C) and a window (eebench's)."""
    logits, mask = _batch(seed, 40, num_exits, num_labels)
    for threshold in (0.5, 1.0, 1.5, 2.0):
        rule = SentenceEntropyRule(threshold, aggregate=pool, normalized=False)
        _check(simulate_tokens(rule, logits, mask), logits, mask,
               lambda z, t=threshold: _sentee_loop(z, t, pool, normalized=False))
    for threshold in (0.4, 0.6, 0.8):
        rule = SentenceEntropyRule(threshold, aggregate=pool, window=3)
        _check(simulate_tokens(rule, logits, mask), logits, mask,
               lambda z, t=threshold: _sentee_loop(z, t, pool, win_size=3))


@pytest.mark.parametrize("seed,num_exits,num_labels", CASES)
@pytest.mark.parametrize("window", [1, 3, 5, 15])
def test_token_rule_is_the_authors_tokee(seed, num_exits, num_labels, window):
    logits, mask = _batch(seed, 40, num_exits, num_labels)
    for threshold in (0.0, 0.1, 0.15, 0.25, 0.4, 0.6):
        rule = TokenHaltRule.authors(threshold, window, num_exits)
        _check(simulate_tokens(rule, logits, mask), logits, mask,
               lambda z, t=threshold: _tokee_loop(z, t, window))


@pytest.mark.parametrize("seed,num_exits,num_labels", CASES[:2])
def test_token_rule_variants(seed, num_exits, num_labels):
    """Halted tokens counting as certain (the authors' evident intent), a capped schedule."""
    logits, mask = _batch(seed, 40, num_exits, num_labels)
    for threshold in (0.15, 0.3, 0.45):
        rule = TokenHaltRule(threshold, 5, upper_from=num_exits // 2, halted="certain")
        _check(simulate_tokens(rule, logits, mask), logits, mask,
               lambda z, t=threshold: _tokee_loop(z, t, 5, fixed=True))
        rule = TokenHaltRule(threshold, 3, upper_from=num_exits // 2, cap=0.4)
        _check(simulate_tokens(rule, logits, mask), logits, mask,
               lambda z, t=threshold: _tokee_loop(z, t, 3, max_threshold=0.4))


def test_halted_tokens_count_with_their_current_uncertainty():
    """Counting tokens a, b, c with a non-first piece between a and b (always uncertain: it
    must not enter any window). Exit 0: a, b sure, c unsure: a halts (its window is a, b).
    Exit 1: a unsure again, b, c sure: with the authors' code a still blocks b (window 3);
    with `halted="certain"` it no longer does."""
    sure, unsure = [8.0, 0.0, 0.0], [0.0, 0.0, 0.0]
    logits = torch.tensor([[[sure, unsure, sure, unsure]],
                           [[unsure, unsure, sure, sure]],
                           [[sure, unsure, sure, sure]]])  # [E=3, N=1, T=4, C=3]
    mask = torch.tensor([[True, False, True, True]])
    current = simulate_tokens(TokenHaltRule(0.5, 3), logits, mask)
    certain = simulate_tokens(TokenHaltRule(0.5, 3, halted="certain"), logits, mask)
    assert current.token_exit.tolist() == [[0, -1, 2, 1]] and current.exit_index.tolist() == [2]
    assert certain.token_exit.tolist() == [[0, -1, 1, 1]] and certain.exit_index.tolist() == [1]
    assert current.prediction.tolist() == [[0, -1, 0, 0]]
    z = logits[:, 0, mask[0]]
    assert _tokee_loop(z, 0.5, 3, max_threshold=0.5)[1] == [0, 2, 1]
    assert _tokee_loop(z, 0.5, 3, fixed=True, max_threshold=0.5)[1] == [0, 1, 1]


def test_window_is_over_counting_tokens():
    u = torch.tensor([[0.9, 0.1, 0.0, 0.5, 0.2, 0.0, 0.7, 0.3, 0.9]])
    mask = torch.tensor([[False, True, False, True, True, False, True, True, False]])
    got = window_max(u, mask, 3)  # counting tokens: 0.1 0.5 0.2 0.7 0.3
    assert got[mask].tolist() == pytest.approx([0.5, 0.5, 0.7, 0.7, 0.7])
    assert (got[~mask] == -math.inf).all()
    assert window_max(u, mask, 5)[mask].tolist() == pytest.approx([0.5, 0.7, 0.7, 0.7, 0.7])
    assert window_max(u, mask, 1)[mask].tolist() == pytest.approx([0.1, 0.5, 0.2, 0.7, 0.3])


# ------------------------------------------------------------------------------ the live loop
def _shrinking(rule, logits, mask):
    """Real inference's bookkeeping with the same rule: after each exit the sentences that are
    done leave the batch (select_state) and the padding columns no remaining sentence needs go
    (trim_tokens); a token's prediction is read when it halts."""
    num_exits, n, t = logits.shape[:3]
    token_exit = torch.full((n, t), -1)
    prediction = torch.full((n, t), -1)
    exit_index = torch.full((n,), -1)
    alive, length = torch.arange(n), t
    state = rule.start_tokens(mask)
    for j in range(num_exits):
        z = logits[j][alive][:, :length]
        if j == num_exits - 1:
            halt, go = state["mask"] & ~state["halted"], torch.ones(len(alive), dtype=torch.bool)
        else:
            step = rule.step(state, j, z)
            halt, go, state = step.halt, step.exit, step.state
        rows, cols = halt.nonzero(as_tuple=True)
        token_exit[alive[rows], cols] = j
        prediction[alive[rows], cols] = z.argmax(-1)[rows, cols]
        exit_index[alive[go]] = j
        alive, state = alive[~go], select_state(state, ~go)
        if len(alive) == 0:
            break
        length = int(mask[alive].nonzero()[:, 1].max()) + 1
        state = trim_tokens(state, length)
    return exit_index, token_exit, prediction


@pytest.mark.parametrize("seed", [0, 1])
def test_shrinking_batches_decide_the_same(seed):
    logits, mask = _batch(seed, 30, 6, 9)
    rules = [SentenceEntropyRule(0.5), SentenceEntropyRule(0.4, "mean", window=3),
             TokenHaltRule.authors(0.15, 5, 6), TokenHaltRule(0.3, 3, halted="certain")]
    for rule in rules:
        sim = simulate_tokens(rule, logits, mask)
        exit_index, token_exit, prediction = _shrinking(rule, logits, mask)
        assert exit_index.tolist() == sim.exit_index.tolist()
        assert token_exit.tolist() == sim.token_exit.tolist()
        assert prediction.tolist() == sim.prediction.tolist()


# ------------------------------------------------------------------------------------ the edges
RULES = [lambda t: SentenceEntropyRule(t), lambda t: SentenceEntropyRule(t, "mean"),
         lambda t: SentenceEntropyRule(t, "mean", normalized=False),
         lambda t: TokenHaltRule.authors(t, 5, 6), lambda t: TokenHaltRule(t, 1)]


@pytest.mark.parametrize("make", RULES)
def test_threshold_zero_never_exits_early_and_a_huge_one_at_once(make):
    logits, mask = _batch(5, 20, 6, 9)
    logits[:, :3] *= 100  # near one-hot predictions: entropy 0 up to float, never below
    never = simulate_tokens(make(0.0), logits, mask)
    assert (never.exit_index == 5).all()
    assert (never.token_exit[mask] == 5).all() and (never.token_exit[~mask] == -1).all()
    assert (never.prediction[mask] == logits[5].argmax(-1)[mask]).all()
    first = simulate_tokens(make(1e9), logits, mask)
    assert (first.exit_index == 0).all() and (first.token_exit[mask] == 0).all()
    assert (first.prediction[mask] == logits[0].argmax(-1)[mask]).all()


def test_one_token_sentences():
    """A one-word sentence: its window is the word itself, whatever the window."""
    logits, mask = _batch(7, 30, 12, 9, max_words=1)
    assert (mask.sum(1) == 1).all()
    for threshold in (0.1, 0.3, 0.6):
        for window in (1, 5, 15):
            a = simulate_tokens(TokenHaltRule(threshold, window), logits, mask)
            b = simulate_tokens(SentenceEntropyRule(threshold), logits, mask)
            assert a.token_exit.tolist() == b.token_exit.tolist()
            _check(a, logits, mask, lambda z, t=threshold, w=window: _tokee_loop(
                z, t, w, max_threshold=t))


@pytest.mark.parametrize("rule", [TokenHaltRule(0.0), SentenceEntropyRule(0.0),
                                  SentenceEntropyRule(0.0, aggregate="mean")])
def test_a_sentence_with_nothing_to_label_exits_first(rule):
    """A sentence with no counting token (WNUT-17's lone U+FE0F: no piece) exits at the first
    exit under every rule, even at threshold 0 where nothing else exits early; the others are
    decided as without it."""
    logits, mask = _batch(0, 4, 3, 9)
    alone = simulate_tokens(rule, logits, mask)
    mask[2] = False
    dec = simulate_tokens(rule, logits, mask)
    assert int(dec.exit_index[2]) == 0 and (dec.prediction[2] == -1).all()
    keep = [0, 1, 3]
    assert dec.exit_index[keep].tolist() == alone.exit_index[keep].tolist()
    assert dec.prediction[keep].tolist() == alone.prediction[keep].tolist()


def test_refusals():
    logits, mask = _batch(0, 4, 3, 9)
    with pytest.raises(TypeError, match="start_tokens"):
        TokenHaltRule(0.1).start(4)
    for window in (0, 2, 4, -1, 1.5):
        with pytest.raises(ValueError, match="odd"):
            TokenHaltRule(0.1, window)
    with pytest.raises(ValueError, match="aggregate"):
        SentenceEntropyRule(0.1, aggregate="min")
    with pytest.raises(ValueError, match="halted"):
        TokenHaltRule(0.1, halted="ignore")
    with pytest.raises(ValueError, match="token mask"):
        TokenHaltRule(0.1).start_tokens(torch.ones(5, dtype=torch.bool))


def test_token_rule_settings_are_checked_in_one_line():
    from eebench.errors import UsageError
    from eebench.rules.catalog import get_rule

    assert get_rule("tokee").settings({"window": 3}) == {"window": 3, "halted": "current"}
    assert get_rule("sentee").settings() == {"aggregate": "max", "window": 1}
    for name, given, said in [("tokee", {"window": 4}, "odd number"),
                              ("sentee", {"window": 0}, "greater than or equal to 1"),
                              ("sentee", {"aggregate": "median"}, "aggregate"),
                              ("tokee", {"halted": "gone"}, "halted")]:
        with pytest.raises(UsageError, match=said):
            get_rule(name).settings(given)
