"""Decoders are sweeps too: what one teacher-forced pass predicts is what real decoding does.

For every prompt and every (k, d) of a grid, simulated self-speculation accepts exactly the drafts
that real LayerSkip decoding (reusing the draft's cache) accepts, round by round, and the real
output is greedy's. CALM's real decode copies halted states into the skipped layers; with a
threshold no exit reaches it is greedy. No disagreement is excused: the tiny model's exits have
top-2 margins far above float noise (checked below).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from eebench.errors import UsageError
from eebench.models.decoder_exits import (
    DecoderExits,
    ExitSettings,
    embed,
    new_cache,
    run_layers,
)
from eebench.rules.calm_decoding import TokenWalk, advance, begin, calm_decode, copy_into_layer
from eebench.rules.decoder_sweep import (
    ExitTrace,
    adaptive_self_spec,
    layer_passes,
    record_exits,
    simulate_calm,
    simulate_self_spec,
    sweep_self_spec,
)
from eebench.rules.self_speculation import (
    greedy_decode,
    hf_early_exit_generate,
    self_speculative_decode,
)
from eebench.testing.tiny_decoder import tiny_llama
from eebench.train.exit_tuning import train_exits

N = 20
PROMPT_LENGTHS = (1, 5, 11)
KS, DS = (1, 2, 3), (0, 1, 2, 4)


@pytest.fixture(scope="module")
def model():
    return tiny_llama()


@pytest.fixture(scope="module", params=["lens", "adapter"])
def exits(request, model):
    if request.param == "lens":
        return DecoderExits(model, ExitSettings(layers=(1, 2, 3)))
    exits = DecoderExits(model, ExitSettings(layers=(1, 2, 3), head="adapter", rank=4))
    g = torch.Generator().manual_seed(7)
    train_exits(model, exits, [torch.randint(0, 100, (2, 12), generator=g)], steps=3, lr=1e-2)
    return exits.eval()


@pytest.fixture(scope="module")
def prompts():
    g = torch.Generator().manual_seed(3)
    return [torch.randint(0, 100, (1, n), generator=g) for n in PROMPT_LENGTHS]


@pytest.fixture(scope="module")
def traces(model, exits, prompts):
    return [record_exits(model, exits, p, N, chunk=7) for p in prompts]


def test_greedy_decode_is_transformers_greedy(model, prompts):
    for p in prompts:
        expected = model.generate(p, attention_mask=torch.ones_like(p), do_sample=False,
                                  max_new_tokens=N, min_new_tokens=N)[:, p.shape[1]:]
        assert torch.equal(greedy_decode(model, p, N), expected)
    batch = torch.cat([prompts[1], prompts[1].flip(1)])  # one length: decoded together
    assert torch.equal(greedy_decode(model, batch, N)[1], greedy_decode(model, batch[1:], N)[0])


def test_the_trace_is_small_and_its_last_row_is_the_trajectory(traces, exits):
    for trace in traces:
        assert trace.layers == (1, 2, 3, 4)
        assert trace.argmax.shape == trace.maxprob.shape == trace.margin.shape == (4, N)
        assert np.array_equal(trace.argmax[-1], trace.tokens)
        assert trace.margin.min() > 1e-5  # no near-tie: every equality below is exact


def test_simulated_self_speculation_is_real_round_by_round(model, exits, prompts, traces):
    extremes = set()
    for prompt, trace in zip(prompts, traces):
        sims = sweep_self_spec(trace, KS, DS)
        for (k, d), sim in sims.items():
            real = self_speculative_decode(model, exits, prompt, N, k, d)
            assert real.tokens == trace.tokens.tolist(), (k, d)  # lossless
            assert real.accepted == sim.accepted, (prompt.shape[1], k, d)
            assert real.drafted == sim.drafted, (prompt.shape[1], k, d)
            assert sim.emitted == N
            extremes |= {a for a, made in zip(sim.accepted, sim.drafted) if made == d == 4}
    assert {0, 4} <= extremes  # rounds that accepted nothing and everything: not vacuous


def test_transformers_assistant_early_exit_is_lossless_with_the_same_rounds(model, prompts):
    lens = DecoderExits(model, ExitSettings(layers=(1, 2, 3)))  # what transformers drafts with
    for p in prompts:
        for k, d in ((1, 3), (3, 2)):
            peer = hf_early_exit_generate(model, p, N, k, d)
            ours = self_speculative_decode(model, lens, p, N, k, d)
            assert peer.tokens == greedy_decode(model, p, N)[0].tolist()
            assert (peer.accepted, peer.drafted) == (ours.accepted, ours.drafted)


def test_self_speculation_takes_one_prompt_and_a_real_exit(model, exits, prompts):
    with pytest.raises(UsageError, match="batch size 1"):
        self_speculative_decode(model, exits, torch.zeros(2, 3, dtype=torch.long), 4, 1, 2)
    with pytest.raises(UsageError, match="no exit at layer 4"):
        self_speculative_decode(model, exits, prompts[0], 4, 4, 2)


def _trace(matches: list[list[bool]]) -> ExitTrace:
    """A hand-made trace over tokens 0..N-1: exit row r's argmax is right where matches[r]."""
    n = len(matches[0])
    tokens = np.arange(n)
    argmax = np.array([np.where(m, tokens, tokens + 1) for m in matches] + [tokens])
    conf = np.linspace(0.1, 0.9, len(matches) + 1)[:, None] * np.ones((1, n))
    return ExitTrace(1, tokens, tuple(range(1, len(matches) + 2)), argmax, conf, conf / 2)


def test_simulated_rounds_by_hand():
    T, F = True, False
    trace = _trace([[T, T, F, T, T, T, T, F, T]])
    sim = simulate_self_spec(trace, 1, 3)
    # round 1 drafts 3: T T F -> accepts 2, emits 3 (tokens 0-2); round 2 drafts 3 from token 3:
    # T T T -> 3, emits 4 (tokens 3-6); round 3 from token 7: 1 left room for min(3, 9-7-1) = 1
    # draft: F -> 0, emits 1; round 4 from token 8: the last token, no draft.
    assert (sim.accepted, sim.drafted) == ([2, 3, 0, 0], [3, 3, 1, 0])
    assert sim.emitted == 9 and sim.rounds == 4
    assert sim.acceptance_rate == pytest.approx(5 / 7) and sim.mean_accepted == 1.25
    assert simulate_self_spec(trace, 1, 0).accepted == [0] * 9  # d = 0 is greedy
    assert simulate_self_spec(trace, 1, 3, start=3, stop=7).accepted == [3]


def test_the_choice_of_k_reads_the_first_tokens():
    T, F = True, False
    trace = _trace([[F, F, F, F, T, T, T, T, T, T, T, T],   # exit 1: wrong early
                    [T, T, T, T, F, F, F, F, F, F, F, F]])  # exit 2: right early
    k, sim = adaptive_self_spec(trace, (1, 2), d=2, m=4, round_cost=lambda k, d: 1.0,
                                probe_k=1)
    assert k == 2  # the first 4 tokens favour exit 2, whatever comes after
    assert sim.emitted == 12
    probe = simulate_self_spec(trace, 1, 2, 0, 4)
    assert sim.accepted[:probe.rounds] == probe.accepted
    assert sim.accepted[probe.rounds:] == simulate_self_spec(trace, 2, 2, 4).accepted
    assert layer_passes(4)(1, 2) == 3 * 1 + 3


def test_calm_oracle_by_hand():
    trace = _trace([[True, False, True], [False, False, True]])  # confidences .1, .5, .9
    sim = simulate_calm(trace, 0.5)
    assert sim.exit_layers.tolist() == [2, 2, 2] and sim.exits_evaluated.tolist() == [2] * 3
    assert sim.predictions.tolist() == [1, 2, 2] and sim.agreement == pytest.approx(1 / 3)
    assert simulate_calm(trace, 0.95).exit_layers.tolist() == [3, 3, 3]
    assert simulate_calm(trace, 0.05).exit_layers.tolist() == [1, 1, 1]
    assert simulate_calm(trace, 0.25, "margin").exit_layers.tolist() == [2, 2, 2]
    with pytest.raises(UsageError, match="confidence measure"):
        simulate_calm(trace, 0.5, "entropy")


@torch.no_grad()
def test_a_copied_state_gives_the_keys_and_values_the_layer_computes(model, prompts):
    prompt = prompts[2]
    cache = new_cache(model)
    run_layers(model, embed(model, prompt[:, :-1]), 0, 4, cache)
    walk = advance(model, begin(model, prompt[:, -1:], cache), 2)
    twin = new_cache(model)
    run_layers(model, embed(model, prompt[:, :-1]), 0, 4, twin)
    copy_into_layer(model, TokenWalk(walk.hidden, twin, walk.position_ids, walk.rope, 2), 2)
    advance(model, walk, 3)  # layer 2 run for real from the same input state
    assert torch.allclose(twin.layers[2].keys, cache.layers[2].keys, atol=1e-6)
    assert torch.allclose(twin.layers[2].values, cache.layers[2].values, atol=1e-6)


@pytest.mark.parametrize("measure", ["maxprob", "margin"])
def test_calm_real_decoding_against_its_oracle(model, exits, prompts, traces, measure):
    for prompt, trace in zip(prompts, traces):
        top = 1.01  # no exit is ever this confident: every token runs every layer
        real = calm_decode(model, exits, prompt, N, top, measure)
        assert real.tokens == trace.tokens.tolist() and real.exit_layers == [4] * N
        assert simulate_calm(trace, top, measure).exit_layers.tolist() == [4] * N
        for threshold in (0.2, 0.4, 0.6):
            oracle = simulate_calm(trace, threshold, measure)
            real = calm_decode(model, exits, prompt, N, threshold, measure)
            assert len(real.tokens) == N and set(real.exit_layers) <= {1, 2, 3, 4}
            # the first token's cache is the prompt's, computed in full: no copy yet
            assert real.exit_layers[0] == oracle.exit_layers[0]
            assert real.tokens[0] == oracle.predictions[0]
            assert real.exits_evaluated == [min(e, 3) for e in real.exit_layers]
