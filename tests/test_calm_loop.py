"""CALM's per-token exits run by the one dynamic loop (eebench.rules.engine.exit_loop): each
generated position is the loop over a decoder walk, with the generated-token unit carrying a
halted token's state into the skipped layers' caches and CALM's rule (the catalog's `calm`)
deciding. Real decoding equals a plain per-sample CALM loop written out here (begin; for each
exit advance and read; halt), token by token, exit by exit; the oracle simulation is the engine's
`simulate` replaying the same rule over a trace's stored confidences.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from eebench.errors import UsageError
from eebench.models.decoder_exits import (
    DecoderExits,
    ExitSettings,
    cached_length,
    embed,
    final_logits,
    new_cache,
    num_layers,
    read_logits,
    run_layers,
)
from eebench.models.decoders import tiny_causal_lm
from eebench.models.units import GENERATED, SEQUENCE, TOKEN, model_unit
from eebench.rules import calm_decoding
from eebench.rules.base import FixedRule
from eebench.rules.calm import CalmRule
from eebench.rules.catalog import ModelFacts, get_rule
from eebench.rules.decoder_sweep import ExitTrace, simulate_calm
from eebench.rules.engine import exit_loop
from eebench.rules.maxprob import MaxProbRule
from eebench.rules.self_speculation import greedy_decode
from eebench.testing.tiny_decoder import tiny_llama
from eebench.train.exit_tuning import train_exits

N = 20
PROMPT_LENGTHS = (1, 5, 11)


@torch.no_grad()
def reference_calm(model, exits, prompt, n_new, threshold, measure):
    """CALM written out for one prompt: each position begins a walk, advances exit by exit and
    reads each exit's confidence until one is >= threshold (else the full model answers), then
    halts (its state fills the skipped layers' caches)."""
    begin, advance, halt = calm_decoding.begin, calm_decoding.advance, calm_decoding.halt
    total, cache = num_layers(model), new_cache(model)
    if prompt.shape[1] > 1:
        run_layers(model, embed(model, prompt[:, :-1]), 0, total, cache)
    token, tokens, layers, evaluated = prompt[:, -1:], [], [], []
    for _ in range(n_new):
        walk, read, choice = begin(model, token, cache), 0, None
        for k in exits.layers:
            advance(model, walk, k)
            read += 1
            arg, top, gap = read_logits(exits.logits(model, k, walk.hidden[:, -1]))
            if float(top if measure == "maxprob" else gap) >= threshold:
                choice = int(arg)
                break
        if choice is None:
            advance(model, walk, total)
            choice = int(final_logits(model, walk.hidden[:, -1]).argmax(-1))
        halt(model, walk)
        tokens.append(choice)
        layers.append(walk.layer)
        evaluated.append(read)
        token = torch.tensor([[choice]])
    return tokens, layers, evaluated


def _adapter(model, vocab):
    exits = DecoderExits(model, ExitSettings(layers=(1, 2, 3), head="adapter", rank=4))
    g = torch.Generator().manual_seed(7)
    train_exits(model, exits, [torch.randint(0, vocab, (2, 12), generator=g)], steps=3, lr=1e-2)
    return exits.eval()


# model, exits head, {measure: thresholds spanning its exits' confidences}
CASES = {
    "tiny-llama-lens": ("llama", "lens", {"maxprob": (0.2, 0.4, 0.6), "margin": (0.1, 0.3, 0.5)}),
    "tiny-llama-adapter": ("llama", "adapter",
                           {"maxprob": (0.2, 0.4, 0.6), "margin": (0.1, 0.3, 0.5)}),
    # a random 259-token vocabulary: every probability near 1/259
    "tiny-causal-lm-lens": ("causal", "lens",
                            {"maxprob": (0.0063, 0.0066, 0.0069), "margin": (0.0011, 0.0017)}),
}


@pytest.fixture(scope="module")
def models():
    return {"llama": tiny_llama(), "causal": tiny_causal_lm(0)}


@pytest.mark.parametrize("case", list(CASES))
def test_the_loop_decodes_as_calm_written_out(models, case):
    name, head, thresholds = CASES[case]
    model = models[name]
    vocab = min(model.config.vocab_size, 100)
    exits = DecoderExits(model, ExitSettings(layers=(1, 2, 3))) if head == "lens" \
        else _adapter(model, vocab)
    g = torch.Generator().manual_seed(3)
    prompts = [torch.randint(0, vocab, (1, n), generator=g) for n in PROMPT_LENGTHS]
    seen = set()
    for measure, values in thresholds.items():
        for threshold in values:
            for prompt in prompts:
                real = calm_decoding.calm_decode(model, exits, prompt, N, threshold, measure)
                ref = reference_calm(model, exits, prompt, N, threshold, measure)
                assert (real.tokens, real.exit_layers, real.exits_evaluated) == ref, \
                    (measure, threshold, prompt.shape[1])
                seen |= set(real.exit_layers)
    # early exits (their states copied upward) and full walks: not vacuous; the random 259-token
    # model's confidences do not grow with depth: its tokens exit at the first exit or run on
    assert seen == ({1, 2, 3, 4} if name == "llama" else {1, 4})


def test_each_generated_position_is_one_run_of_the_loop(models, monkeypatch):
    model = models["llama"]
    exits = DecoderExits(model, ExitSettings(layers=(1, 2, 3)))
    runs = []

    def counted(lm, rule, batch, *args, **kwargs):
        runs.append((model_unit(lm), type(rule), batch["input_ids"].shape))
        return exit_loop(lm, rule, batch, *args, **kwargs)

    monkeypatch.setattr(calm_decoding, "exit_loop", counted)
    calm_decoding.calm_decode(model, exits, torch.tensor([[5, 17, 42]]), 7, 0.4)
    assert runs == [(GENERATED, CalmRule, (1, 1))] * 7


@torch.no_grad()
def test_an_exit_fills_every_skipped_layer_and_the_loop_stops_there(models):
    model = models["llama"]
    exits = DecoderExits(model, ExitSettings(layers=(1, 2, 3)))
    cache = new_cache(model)
    run_layers(model, embed(model, torch.tensor([[5, 17, 42]])), 0, 4, cache)
    lm = calm_decoding.DecoderExitModel(model, exits, cache)
    assert (lm.num_exits, lm.exit_layers, lm.unit) == (4, (1, 2, 3, 4), "generated")
    token = torch.tensor([[8]])
    track = exit_loop(lm, CalmRule(0.0), {"input_ids": token, "attention_mask": token})
    exit_index, choice = track.answer()
    assert exit_index.tolist() == [0]  # a threshold of 0: the first exit
    logits = exits.logits(model, 1, run_layers(model, embed(model, token), 0, 1,
                                               _prefilled(model, [5, 17, 42], 1)))
    assert choice.tolist() == [int(read_logits(logits[:, -1])[0])]
    assert [cached_length(cache, i) for i in range(4)] == [4] * 4  # layers 2-4: copies


def _prefilled(model, ids, layers):
    cache = new_cache(model)
    run_layers(model, embed(model, torch.tensor([ids])), 0, layers, cache)
    return cache


@torch.no_grad()
def test_the_full_walk_is_greedy_decoding(models):
    """`full=True` (the timing baseline: only the model's own head is read) decodes greedily."""
    model = models["llama"]
    exits = DecoderExits(model, ExitSettings(layers=(1, 2, 3)))
    prompt = torch.tensor([[5, 17, 42, 8]])
    cache = _prefilled(model, prompt[0, :-1].tolist(), 4)
    lm, token, out = calm_decoding.DecoderExitModel(model, exits, cache), prompt[:, -1:], []
    for _ in range(6):
        exit_index, choice = exit_loop(lm, FixedRule(False), {"input_ids": token,
                                                              "attention_mask": token},
                                       full=True).answer()
        assert exit_index.tolist() == [3]
        out.append(int(choice[0]))
        token = choice[:1, None]
    assert out == greedy_decode(model, prompt, 6)[0].tolist()


def test_a_decoder_walk_takes_one_sequence(models):
    model = models["llama"]
    exits = DecoderExits(model, ExitSettings(layers=(1, 2, 3)))
    lm = calm_decoding.DecoderExitModel(model, exits, new_cache(model))
    with pytest.raises(UsageError, match="batch size 1"):
        lm.exit_walk(torch.zeros(2, 1, dtype=torch.long))
    walk = lm.exit_walk(torch.zeros(1, 1, dtype=torch.long))
    walk.keep(torch.tensor([True]))  # nothing to cut
    with pytest.raises(UsageError, match="batch size 1"):
        walk.keep(torch.tensor([True, False]))
    with pytest.raises(UsageError, match="confidence measure"):
        calm_decoding.calm_decode(model, exits, torch.tensor([[1, 2]]), 2, 0.5, "entropy")


class _Walk:
    def __init__(self):
        self.filled = []

    def fill_skipped(self, rows):
        self.filled.append(rows.tolist())


def test_the_generated_unit_carries_and_tracks():
    walk, rule = _Walk(), CalmRule(0.5)
    logits = torch.tensor([[0.0, 3.0, 0.0], [1.0, 0.0, 1.1]])
    step = rule.step({}, 0, logits)
    GENERATED.carry(walk, step)
    assert walk.filled == [[True, False]]
    SEQUENCE.carry(walk, step)  # a sequence that exits leaves: nothing carried
    TOKEN.carry(walk, step)  # no token halted (a CALM step has no `halt`)
    assert walk.filled == [[True, False]]
    track = GENERATED.tracker(2, None, 3, "cpu", False)
    track.record(torch.arange(2), 0, logits, step, step.exit, 1)
    track.record(torch.tensor([1]), 3, logits[1:], None, torch.tensor([True]), 1)
    exit_index, token = track.answer()
    assert exit_index.tolist() == [0, 3] and token.tolist() == [1, 2]


def test_calms_rule_reads_its_confidence_as_read_logits_in_float64():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(64, 50, generator=g) * 3
    arg, top, gap = read_logits(logits)
    for measure, quantity in (("maxprob", top), ("margin", gap)):
        for threshold in (0.1, 0.3, 0.7, float(quantity[5])):
            step = CalmRule(threshold, measure).step({}, 0, logits)
            assert step.exit.tolist() == [float(q) >= threshold for q in quantity]
            assert torch.equal(step.prediction, arg)
            signals = {"argmax": arg, "maxprob": top, "margin": gap}
            assert torch.equal(CalmRule(threshold, measure).step({}, 0, logits[:, :1],
                                                                  signals).exit, step.exit)
    # a threshold that rounds down in float32: the maxprob rule's float32 comparison exits
    # where CALM's (a float64 one) does not
    p = torch.tensor([0.7], dtype=torch.float32)  # 0.699999988...
    both = {"argmax": torch.tensor([0]), "maxprob": p, "margin": p}
    assert not CalmRule(0.7).step({}, 0, p[:, None], both).exit.item()
    assert MaxProbRule(0.7).step({}, 0, torch.tensor([[0.0, 0.0]])).exit.item() is False
    assert bool(torch.ge(p, 0.7)) and not float(p) >= 0.7


def test_the_catalog_builds_calms_rule():
    kind = get_rule("calm")
    assert (kind.unit, kind.comparison, kind.settings()) == ("generated", ">=",
                                                             {"measure": "maxprob"})
    rule = kind.build(0.4, ModelFacts(False, 100, rule_settings={"measure": "margin"}))
    assert isinstance(rule, CalmRule) and (rule.threshold, rule.measure) == (0.4, "margin")
    with pytest.raises(UsageError, match="setting measure"):
        kind.settings({"measure": "entropy"})
    with pytest.raises(UsageError, match="probability"):
        kind.check(1.5)


def test_the_oracle_is_the_engine_replaying_calms_rule_over_a_trace():
    """`simulate_calm` (engine.simulate over stored confidences) against CALM's decision written
    out over the trace: the first exit whose confidence >= threshold, else the last layer."""
    rng = np.random.default_rng(0)
    for _ in range(20):
        e, n = rng.integers(1, 6), rng.integers(1, 30)
        maxprob = rng.random((e + 1, n)).astype(np.float32).astype(np.float64)
        margin = (maxprob * rng.random((e + 1, n))).astype(np.float32).astype(np.float64)
        argmax = rng.integers(0, 9, (e + 1, n))
        trace = ExitTrace(3, argmax[-1], tuple(range(1, e + 2)), argmax, maxprob, margin)
        for measure, conf in (("maxprob", maxprob), ("margin", margin)):
            for threshold in (0.0, 0.3, 0.8, 1.0, float(conf[0, 0])):
                sim = simulate_calm(trace, threshold, measure)
                for i in range(n):
                    first = next((r for r in range(e) if conf[r, i] >= threshold), e)
                    assert sim.exit_layers[i] == first + 1
                    assert sim.exits_evaluated[i] == min(first + 1, e)
                    assert sim.predictions[i] == argmax[first, i]
                assert sim.agreement == pytest.approx(np.mean(sim.predictions == trace.tokens))
