"""Decoder exits: the layer-by-layer run is the model, an untrained adapter exit is the logit lens,
exits save and load as plain tensors, and EE-Tuning lowers the KL on a frozen backbone."""

from __future__ import annotations

import pytest
import torch

from eebench.errors import DataError, UsageError
from eebench.models.decoder_exits import (
    DecoderExits,
    ExitSettings,
    crop_cache,
    embed,
    final_logits,
    full_forward,
    load_exits,
    new_cache,
    run_layers,
    save_exits,
)
from eebench.testing.tiny_decoder import tiny_llama
from eebench.train.exit_tuning import exit_states, train_exits


@pytest.fixture(scope="module")
def model():
    return tiny_llama()


def _ids(shape, seed=0):
    return torch.randint(0, 100, shape, generator=torch.Generator().manual_seed(seed))


@torch.no_grad()
def test_the_tiny_model_is_what_the_tests_need(model):
    c = model.config
    assert (c.num_hidden_layers, c.hidden_size, c.num_attention_heads, c.num_key_value_heads,
            c.intermediate_size, c.vocab_size) == (4, 32, 4, 2, 64, 100)
    assert model.lm_head.weight is model.model.embed_tokens.weight  # tied
    assert c._attn_implementation == "eager"


@torch.no_grad()
def test_run_to_the_end_reproduces_the_model_logits(model):
    ids = _ids((2, 9))
    assert torch.allclose(full_forward(model, ids), model(ids).logits, atol=1e-5)


@torch.no_grad()
def test_stop_after_k_layers_and_go_on_with_the_cache(model):
    ids = _ids((1, 12), seed=1)
    expected = model(ids).logits
    cache = new_cache(model)
    run_layers(model, embed(model, ids[:, :7]), 0, 4, cache)  # a prefix through every layer
    hidden = run_layers(model, embed(model, ids[:, 7:]), 0, 2, cache)  # stop after 2 layers
    assert [cache.get_seq_length(i) for i in range(4)] == [12, 12, 7, 7]
    with pytest.raises(UsageError, match="different cached lengths"):
        run_layers(model, hidden, 1, 3, cache)
    positions = torch.arange(7, 12)[None]
    hidden = run_layers(model, hidden, 2, 4, cache, position_ids=positions)
    assert torch.allclose(final_logits(model, hidden), expected[:, 7:], atol=1e-5)
    crop_cache(cache, 9)
    assert [cache.get_seq_length(i) for i in range(4)] == [9] * 4
    hidden = run_layers(model, embed(model, ids[:, 9:]), 0, 4, cache)  # after a crop, go on
    assert torch.allclose(final_logits(model, hidden), expected[:, 9:], atol=1e-5)


@torch.no_grad()
def test_an_untrained_adapter_exit_is_the_logit_lens(model):
    lens = DecoderExits(model, ExitSettings(layers=(1, 3)))
    adapter = DecoderExits(model, ExitSettings(layers=(1, 3), head="adapter", rank=4))
    assert len(list(lens.parameters())) == 0
    states = exit_states(model, lens, _ids((2, 6)))
    for k in (1, 3):
        lens_logits = lens.logits(model, k, states[k])
        assert torch.allclose(adapter.logits(model, k, states[k]), lens_logits, atol=1e-6)
        expected = model.lm_head(model.model.norm(states[k]))
        assert torch.equal(lens_logits, expected)
    assert torch.allclose(lens.logits(model, 4, states[4]), model(_ids((2, 6))).logits,
                          atol=1e-5)


@pytest.mark.parametrize("layers", [(0,), (4,), (2, 1), (1, 1)])
def test_exit_layers_must_be_increasing_and_inside(model, layers):
    with pytest.raises(UsageError, match="exit layers"):
        DecoderExits(model, ExitSettings(layers=layers))


@torch.no_grad()
def test_exits_save_and_load_as_safetensors(model, tmp_path):
    exits = DecoderExits(model, ExitSettings(layers=(2,), head="adapter", rank=3))
    torch.nn.init.normal_(exits.heads["2"].up.weight)
    path = save_exits(exits, tmp_path / "exits.safetensors")
    loaded = load_exits(model, path)
    assert loaded.settings == exits.settings
    hidden = torch.randn(1, 4, 32)
    assert torch.equal(loaded.logits(model, 2, hidden), exits.logits(model, 2, hidden))
    from safetensors.torch import save_file

    save_file({"x": torch.zeros(1)}, str(tmp_path / "other.safetensors"))
    with pytest.raises(DataError, match="not an exits file"):
        load_exits(model, tmp_path / "other.safetensors")
    with pytest.raises(DataError, match="no exits file"):
        load_exits(model, tmp_path / "absent.safetensors")


def _mean_kl(model, exits, ids):
    with torch.no_grad():
        states = exit_states(model, exits, ids)
        teacher = torch.log_softmax(model.lm_head(model.model.norm(states[4])), -1)
        out = []
        for k in exits.layers:
            student = torch.log_softmax(exits.logits(model, k, states[k]), -1)
            out.append(float((teacher.exp() * (teacher - student)).sum(-1).mean()))
    return out


def test_ee_tuning_lowers_the_kl_and_leaves_the_backbone_alone(model):
    exits = DecoderExits(model, ExitSettings(layers=(1, 2, 3), head="adapter", rank=8))
    batches = [_ids((4, 16), seed=s) for s in range(3)]
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    kl_before = _mean_kl(model, exits, batches[0])
    losses = train_exits(model, exits, batches, steps=12, lr=1e-2, chunk=20)
    kl_after = _mean_kl(model, exits, batches[0])
    assert losses[-1] < losses[0]
    assert all(a < b for a, b in zip(kl_after, kl_before)), (kl_before, kl_after)
    for name, p in model.named_parameters():
        assert torch.equal(p, before[name]), name
        assert p.grad is None and p.requires_grad  # frozen during training, restored after
    losses = train_exits(model, exits, batches[:1], steps=2, lr=1e-3, ce_weight=0.5)
    assert all(x > 0 for x in losses)  # the text's cross-entropy is in it


def test_logit_lens_exits_have_nothing_to_train(model):
    with pytest.raises(UsageError, match="nothing to train"):
        train_exits(model, DecoderExits(model, ExitSettings(layers=(1,))), [_ids((1, 4))], 1)
