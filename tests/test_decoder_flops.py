"""Decoder FLOPs: a hand count, torch's FlopCounterMode on one step, and on whole decodes.

The tiny Llama: d = 32, H = 4 query heads, G = 2 key/value heads of h = 8, f = 64, V = 100,
L = 4. One layer at position p, in multiply-adds:

    q 32*32 = 1024, k 32*16 = 512, v 512, o 32*32 = 1024        -> 3072
    QK^T and AV: 2 * 4 * 8 * (p + 1) = 64 (p + 1)
    MLP 3 * 32 * 64 = 6144
    total 9216 + 64 (p + 1) MACs = 18432 + 128 (p + 1) FLOPs

the LM head 32 * 100 = 3200 MACs = 6400 FLOPs, a copy into a skipped layer (k, v) 1024 MACs =
2048 FLOPs. Eager attention multiplies the full masked square of a multi-token span, which the
causal count leaves out: `masked_excess` reconciles the two for whole decodes.
"""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from eebench.errors import UsageError
from eebench.measure.decoder_flops import (
    DecoderShape,
    calm_flops,
    copy_flops,
    draft_lengths,
    exit_head_flops,
    greedy_flops,
    layer_flops,
    layers_over,
    lm_head_flops,
    masked_excess,
    self_spec_flops,
)
from eebench.models.decoder_exits import DecoderExits, ExitSettings
from eebench.rules.calm_decoding import calm_decode
from eebench.rules.self_speculation import greedy_decode, self_speculative_decode
from eebench.testing.tiny_decoder import tiny_llama

L = 4


@pytest.fixture(scope="module")
def model():
    return tiny_llama()


def _counted(fn):
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        out = fn()
    return out, counter.get_total_flops()


def test_the_hand_count(model):
    c = model.config
    assert DecoderShape.of(c) == DecoderShape(4, 32, 4, 2, 8, 64, 100)
    assert layer_flops(c, 5) == 18432 + 128 * 6 == 19200
    assert lm_head_flops(c) == 6400 and exit_head_flops(c) == 6400
    assert exit_head_flops(c, rank=4) == 6400 + 2 * 2 * 32 * 4
    assert copy_flops(c) == 2048
    assert layers_over(c, 3, 9, 2) == 2 * sum(layer_flops(c, p) for p in range(3, 9))
    # greedy, prompt of 3, 2 new tokens: positions 0, 1 are the prefill; tokens are decided at
    # positions 2 and 3, each through 4 layers and the LM head
    flops = greedy_flops(c, 3, 2)
    assert flops.prefill == 4 * ((18432 + 128) + (18432 + 256)) == 148992
    assert flops.generation == 4 * ((18432 + 384) + (18432 + 512)) + 2 * 6400 == 163840
    assert flops.per_token == 81920
    # CALM: token 0 exits after layer 1 (1 exit head, 3 copies), token 1 runs all 4 layers
    calm = calm_flops(c, 3, [1, 4], [1, 3])
    assert calm.generation == ((18432 + 384) + 6400 + 3 * 2048) + (
        4 * (18432 + 512) + 3 * 6400 + 6400)


def test_one_greedy_step_equals_flop_counter_mode(model):
    ids = torch.randint(0, 100, (1, 6), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        cache = model(ids[:, :5], use_cache=True).cache
        _, counted = _counted(lambda: model(ids[:, 5:], cache=cache, use_cache=True))
    assert counted == L * layer_flops(model.config, 5) + lm_head_flops(model.config) == 83200


def test_an_exit_head_equals_flop_counter_mode(model):
    hidden = torch.randn(1, 1, 32)
    for settings, rank in ((ExitSettings(layers=(2,)), None),
                           (ExitSettings(layers=(2,), head="adapter", rank=4), 4)):
        exits = DecoderExits(model, settings)
        _, counted = _counted(lambda e=exits: e.logits(model, 2, hidden))
        assert counted == exit_head_flops(model.config, rank)


def test_draft_lengths_shrink_only_at_the_end():
    assert draft_lengths([2, 0, 3, 1], 3) == [3, 3, 3, 1]  # 9 tokens: the 4th round has 2 left
    assert draft_lengths([0, 0], 0) == [0, 0]


@pytest.fixture(scope="module")
def setting(model):
    exits = DecoderExits(model, ExitSettings(layers=(1, 2, 3)))
    prompt = torch.randint(0, 100, (1, 6), generator=torch.Generator().manual_seed(1))
    return exits, prompt, 12


def test_whole_greedy_decode_equals_flop_counter_mode(model, setting):
    _, prompt, n = setting
    _, counted = _counted(lambda: greedy_decode(model, prompt, n))
    p = prompt.shape[1]  # greedy_decode runs the prompt as one span
    assert counted == greedy_flops(model.config, p, n).total + masked_excess(model.config, p, L)


@pytest.mark.parametrize("k,d", [(1, 2), (2, 3), (3, 1), (2, 0)])
def test_self_speculation_equals_flop_counter_mode(model, setting, k, d):
    exits, prompt, n = setting
    real, counted = _counted(lambda: self_speculative_decode(model, exits, prompt, n, k, d))
    flops = self_spec_flops(model.config, prompt.shape[1], real.accepted, k, d)
    excess, pending = 0, prompt.shape[1]
    for drafts in real.drafted:  # the pending span through k layers; with the drafts, L - k
        excess += (masked_excess(model.config, pending, k)
                   + masked_excess(model.config, pending + drafts, L - k))
        pending = 1
    assert counted == flops.total + excess
    assert flops.prefill == greedy_flops(model.config, prompt.shape[1], n).prefill
    if d == 0:  # no drafts: greedy, one verifier token per round
        assert flops.generation == greedy_flops(model.config, prompt.shape[1], n).generation


@pytest.mark.parametrize("threshold", [0.3, 1.01])
def test_calm_equals_flop_counter_mode(model, setting, threshold):
    exits, prompt, n = setting
    real, counted = _counted(lambda: calm_decode(model, exits, prompt, n, threshold))
    flops = calm_flops(model.config, prompt.shape[1], real.exit_layers, real.exits_evaluated)
    assert counted == flops.total + masked_excess(model.config, prompt.shape[1] - 1, L)
    if threshold > 1:  # every token through every layer, reading all 3 exits on the way
        greedy = greedy_flops(model.config, prompt.shape[1], n)
        assert flops.generation == greedy.generation + n * 3 * exit_head_flops(model.config)
    else:
        assert min(real.exit_layers) < L  # some tokens did exit early


def test_bad_inputs_are_usage_errors(model):
    with pytest.raises(UsageError):
        greedy_flops(model.config, 0, 3)
    with pytest.raises(UsageError):
        self_spec_flops(model.config, 3, [1], 4, 2)
    with pytest.raises(UsageError):
        calm_flops(model.config, 3, [1, 2], [1])
