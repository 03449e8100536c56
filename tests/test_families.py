"""Backbone families (BERT, RoBERTa, ALBERT, DistilBERT, MPNet, ElasticBERT checkpoints): the
multi-exit model reproduces each transformers model, real dynamic inference agrees with the
one-pass simulation on each, checkpoints round-trip, ALBERT's shared layer is one set of weights,
and ElasticBERT's keys map onto BERT with its per-layer poolers as exit poolers."""

from __future__ import annotations

import copy
import json
import time

import pytest
import torch
from safetensors.torch import save_file
from typer.testing import CliRunner

from eebench.cli import app
from eebench.data.batching import Encoded, collate, eval_batches
from eebench.errors import EebenchError, UsageError
from eebench.measure.params import params_per_exit, params_total
from eebench.methods import derived
from eebench.methods.base import get_method
from eebench.models import backbones, decoders, families, model_config
from eebench.models.build import assemble, build_model
from eebench.models.families import MASK, elasticbert_state_dict
from eebench.models.outputs import collect_exit_logits
from eebench.rules.engine import compare, dynamic_batch, dynamic_inference, simulate
from eebench.train.checkpoint import TrainState, load_trained, save_checkpoint
from tests import tiny

FAMILIES = tiny.FAMILIES
SENTENCES = ["a charming and often affecting journey .",
             "unflinchingly bleak and desperate , with a long and winding second half that drags",
             "fine"]
PAIRS = ["a second segment", "and another one here", "x"]
ATOL = 1e-5  # fp32


def _batch(texts=SENTENCES, pairs=PAIRS):
    enc = tiny.tokenizer()(texts, pairs, padding=True, return_tensors="pt")
    return enc["input_ids"], enc["attention_mask"], enc["token_type_ids"]


def _stepwise_hidden(model, ids, mask, types) -> torch.Tensor:
    h, inputs = model.embed(ids, mask, types)
    for i in range(model.num_layers):
        h = model.layer(i, h, inputs)
    return h


def _reference_hidden(reference, model, ids, mask, types) -> torch.Tensor:
    kw = {"token_type_ids": types} if model.family.token_types else {}
    return reference(input_ids=ids, attention_mask=mask, **kw).last_hidden_state


# ------------------------------------------------------------------------------------- parity
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("family", FAMILIES)
def test_full_depth_reproduces_the_transformers_model(family, attn):
    if family == "mpnet" and attn == "sdpa":
        pytest.skip("transformers' MPNet has no SDPA attention")
    hf = tiny.tiny_hf_model(0, attn, family, num_layers=4)
    reference = copy.deepcopy(hf)
    model = assemble(hf, get_method("deebert"), 2)
    assert model.family.name == family and model.num_layers == 4
    ids, mask, types = _batch()
    assert mask[2].sum() < mask.shape[1]  # padding in the batch
    with torch.no_grad():
        got = _stepwise_hidden(model, ids, mask, types)
        expected = _reference_hidden(reference, model, ids, mask, types)
    real = mask.bool()  # padded positions are never read
    assert (got[real] - expected[real]).abs().max().item() <= ATOL


@pytest.mark.parametrize("family", FAMILIES)
def test_embed_is_the_transformers_embedding_output_padding_included(family):
    """RoBERTa and MPNet derive position ids from the token ids and the padding id: `embed`
    gives what the transformers model gives its first layer, at every position."""
    hf = tiny.tiny_hf_model(0, "eager", family, num_layers=2)
    reference = copy.deepcopy(hf)
    model = assemble(hf, get_method("static"), 2)
    ids, mask, types = _batch()
    kw = {"token_type_ids": types} if model.family.token_types else {}
    with torch.no_grad():
        first = reference(input_ids=ids, attention_mask=mask, output_hidden_states=True,
                          **kw).hidden_states[0]
        hidden, inputs = model.embed(ids, mask, types)
    assert torch.equal(hidden, first)
    assert set(inputs.tensors) == set(model.family.token_dims)
    assert inputs.attention_mask.shape == (3, 1, 1, ids.shape[1])


def test_roberta_positions_count_after_the_padding_id():
    model = tiny.tiny_model("static", family="roberta", depth=1)
    pad = model.config.pad_token_id
    ids, mask, types = _batch()
    short = int(mask[2].sum())
    alone = _batch([SENTENCES[2]], [PAIRS[2]])
    with torch.no_grad():  # a padded row's real tokens embed as the row alone does
        padded, _ = model.embed(ids, mask, types)
        single, _ = model.embed(*alone)
        torch.testing.assert_close(padded[2, :short], single[0], atol=0, rtol=0)
        emb = model.embeddings
        positions = emb.create_position_ids_from_input_ids(ids, pad)
    assert positions[2, short:].eq(pad).all() and positions[2, 0] == pad + 1
    assert model.max_tokens == model.config.max_position_embeddings - pad - 1


@pytest.mark.slow  # the real all-MiniLM-L6-v2
def test_real_minilm_parity(minilm_path):
    from transformers import AutoModel

    model = build_model(str(minilm_path), get_method("pabee"), 2)
    reference = AutoModel.from_pretrained(str(minilm_path), attn_implementation="eager").eval()
    ids, mask, types = _batch()
    with torch.no_grad():
        got = _stepwise_hidden(model, ids, mask, types)
        expected = _reference_hidden(reference, model, ids, mask, types)
    real = mask.bool()
    assert (got[real] - expected[real]).abs().max().item() <= ATOL


@pytest.mark.slow  # the real all-mpnet-base-v2 (109M parameters), where the extra is installed
def test_real_mpnet_parity():
    from transformers import AutoModel

    from eebench.models.backbones import load_tokenizer, resolve_backbone

    try:
        where = resolve_backbone("mpnet-base")
    except EebenchError as e:
        pytest.skip(e.message)
    model = build_model("mpnet-base", get_method("deebert"), 2)
    reference = AutoModel.from_pretrained(where, attn_implementation="eager").eval()
    enc = load_tokenizer("mpnet-base")(SENTENCES, PAIRS, padding=True, return_tensors="pt")
    ids, mask = enc["input_ids"], enc["attention_mask"]
    with torch.no_grad():
        got = _stepwise_hidden(model, ids, mask, None)
        expected = reference(input_ids=ids, attention_mask=mask).last_hidden_state
    real = mask.bool()
    assert (got[real] - expected[real]).abs().max().item() <= ATOL


# -------------------------------------------------------------- simulation == dynamic inference
def _encoded(n: int = 24, seed: int = 0) -> Encoded:
    """Token ids of varied lengths ([CLS] ... [SEP]), so batches hold padding."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(3, 40, (n,), generator=g).tolist()
    ids = [[101, *torch.randint(1000, 29000, (k - 2,), generator=g).tolist(), 102]
           for k in lengths]
    return Encoded(input_ids=ids, token_type_ids=None, lengths=lengths, labels=[0] * n,
                   ids=[str(i) for i in range(n)], pad_token_id=0, is_regression=False,
                   max_seq_length=64)


def _confident(model):
    """Weights that mix tokens strongly and heads that are sure of themselves: every rule then
    exits at a mix of layers (random heads alone give near-uniform, sample-independent outputs)."""
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0, 0.3)
        for p in model.heads.parameters():
            p.mul_(30)
    return model


def _sweep(method, logits):
    values = list(derived.default_sweep(method, logits.shape[0], False, logits.shape[-1]))
    if derived.sweep_param(method) == "threshold":
        p = logits.softmax(-1)
        ent = -(p * p.clamp_min(1e-12).log()).sum(-1)
        values += [float(q) for q in torch.quantile(ent.flatten(), torch.tensor([.2, .5, .8]))]
    return values


@pytest.mark.parametrize("name", ["deebert", "pabee"])
@pytest.mark.parametrize("family", FAMILIES)
def test_simulation_equals_real_dynamic_inference(family, name):
    method = get_method(name)
    model = _confident(tiny.tiny_model(method, seed=3, family=family))
    enc = _encoded()
    out = collect_exit_logits(model, eval_batches(enc, 8, sort_by_length=True))
    mixed = False
    for value in _sweep(method, out.logits):
        sim = simulate(method.exit_rule(value, False), out.logits, False)
        mixed |= len(set(sim.exit_index.tolist())) > 1
        for bs in (1, 6):
            batches = (collate(enc, list(range(i, min(i + bs, len(enc)))))
                       for i in range(0, len(enc), bs))
            real = dynamic_inference(model, method.exit_rule(value, False), batches, len(enc),
                                     False)
            assert compare(sim, real).unexplained == 0, (value, bs)
    assert mixed, "the sweep never produced a mix of exit layers"


@pytest.mark.parametrize("family", FAMILIES)
def test_batch_shrinking_cuts_every_layer_input(family):
    """Exited rows leave and padding columns are cut from every layer input (MPNet's position
    bias in both token dimensions): each sample decides as it does alone."""
    method = get_method("pabee")
    model = _confident(tiny.tiny_model(method, seed=2, family=family))
    enc = _encoded(seed=1)
    order = sorted(range(len(enc)), key=lambda i: enc.lengths[i])  # short ones exit, long stay
    e_batched, p_batched = dynamic_batch(model, method.exit_rule(1, False), collate(enc, order),
                                         False)
    assert len(set(e_batched.tolist())) > 1
    for row, i in enumerate(order):
        e1, p1 = dynamic_batch(model, method.exit_rule(1, False), collate(enc, [i]), False)
        assert (int(e1[0]), int(p1[0])) == (int(e_batched[row]), int(p_batched[row]))


def test_mpnet_position_bias_is_cut_in_rows_and_both_token_dimensions():
    model = tiny.tiny_model("pabee", family="mpnet", depth=2)
    ids, mask, types = _batch()
    with torch.no_grad():
        hidden, inputs = model.embed(ids, mask, types)
        bias = inputs.tensors["position_bias"]
        assert bias.shape == (3, model.config.num_attention_heads, ids.shape[1], ids.shape[1])
        keep = torch.tensor([False, True, True])
        width = int(mask[keep].sum(-1).max())
        cut = inputs.cut(keep, width)
        # the bias of the kept rows at the shorter width, as if computed for it
        fresh = model.embeddings.position_bias(hidden[keep, :width])
    assert torch.equal(cut.tensors["position_bias"], fresh)
    assert torch.equal(cut.tensors[MASK], inputs.tensors[MASK][keep][..., :width])


# -------------------------------------------------------------------------- checkpoints
@pytest.mark.parametrize("name", ["deebert", "pabee"])
@pytest.mark.parametrize("family", FAMILIES)
def test_checkpoint_round_trip_gives_identical_logits(family, name, tmp_path):
    model = tiny.tiny_model(name, num_labels=3, family=family, pooling="mean")
    cfg = json.loads(json.dumps(model.model_config()))
    assert cfg["family"] == family
    state = TrainState(config_hash="x", config={}, finished=True)
    save_checkpoint(tmp_path / "ckpt", model, tiny.tokenizer(), state)
    rebuilt, _, meta = load_trained(tmp_path / "ckpt")  # model_config() -> rebuild_model
    assert meta["model_config"] == cfg
    ids, mask, types = _batch()
    with torch.no_grad():
        torch.testing.assert_close(rebuilt(ids, mask, types), model(ids, mask, types),
                                   atol=0, rtol=0)
    assert rebuilt.model_config() == model.model_config()


def test_static_models_of_every_family_are_cut_to_k_layers():
    for family in FAMILIES:
        model = tiny.tiny_model(get_method("static", layers=2), family=family)
        assert (model.num_layers, model.exit_layers) == (2, (2,))
        assert model.config.num_hidden_layers == 2


# -------------------------------------------------------------------------------- ALBERT
def test_albert_runs_one_shared_layer_counted_once():
    model = tiny.tiny_model("deebert", family="albert", depth=4)
    assert len({id(layer) for layer in model.layers}) == 1 and model.num_layers == 4
    layer = sum(p.numel() for p in model.layers[0].parameters())
    embeddings = sum(p.numel() for p in model.embeddings.parameters())
    head = sum(p.numel() for p in model.heads[0].parameters())
    projection = model.embeddings.projection  # E -> H belongs to the embeddings part
    assert (projection.in_features, projection.out_features) == (16, 32)
    counts = params_per_exit(model)
    assert counts.per_exit == [embeddings + layer + (j + 1) * head for j in range(4)]
    assert params_total(model) == sum(p.numel() for p in model.parameters())
    assert counts.total == embeddings + layer + 4 * head


def test_albert_with_several_layer_groups_runs_them_in_order_and_is_not_cut():
    model = tiny.tiny_model("pabee", family="albert", depth=4, num_hidden_groups=2)
    groups = model.layers
    assert groups[0] is groups[1] and groups[2] is groups[3] and groups[1] is not groups[2]
    with pytest.raises(UsageError, match="layer groups"):
        tiny.tiny_model(get_method("static", layers=2), family="albert", num_hidden_groups=2)


def test_distilbert_has_no_pooler_and_reads_its_own_dropout():
    model = tiny.tiny_model("deebert", family="distilbert", dropout=0.25)
    assert not model.family.token_types
    assert {head.dropout.p for head in model.heads} == {0.25}
    assert model.config.hidden_size == 32  # DistilBERT's `dim`, through its attribute map


def test_an_unsupported_family_is_a_usage_error_naming_the_supported_ones():
    from transformers import AutoModel, GPT2Config

    gpt2 = AutoModel.from_config(GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=10))
    with pytest.raises(UsageError, match="not supported") as e:
        assemble(gpt2, get_method("static"), 2)
    assert "mpnet" in e.value.hint and "elasticbert" in e.value.hint


# ---------------------------------------------------------------------------- ElasticBERT
L, H, FF, V, P = 3, 32, 64, tiny.MINILM_VOCAB, 64


def _elasticbert_checkpoint(seed: int = 0) -> dict[str, torch.Tensor]:
    """A state dict shaped like fastnlp/ElasticBERT's ElasticBertModel (saved from a model with
    heads: prefix `elasticbert.`), one ElasticBertPooler per layer, written out name by name."""
    g = torch.Generator().manual_seed(seed)

    def t(*shape):
        return torch.randn(*shape, generator=g) * 0.05

    p = "elasticbert."
    sd = {p + "embeddings.word_embeddings.weight": t(V, H),
          p + "embeddings.position_embeddings.weight": t(P, H),
          p + "embeddings.token_type_embeddings.weight": t(2, H),
          p + "embeddings.LayerNorm.weight": 1 + t(H), p + "embeddings.LayerNorm.bias": t(H),
          p + "embeddings.position_ids": torch.arange(P)[None]}
    for i in range(L):
        q = f"{p}encoder.layer.{i}."
        for name in ("query", "key", "value"):
            sd[f"{q}attention.self.{name}.weight"], sd[f"{q}attention.self.{name}.bias"] = (
                t(H, H), t(H))
        sd[q + "attention.output.dense.weight"], sd[q + "attention.output.dense.bias"] = (
            t(H, H), t(H))
        sd[q + "attention.output.LayerNorm.weight"] = 1 + t(H)
        sd[q + "attention.output.LayerNorm.bias"] = t(H)
        sd[q + "intermediate.dense.weight"], sd[q + "intermediate.dense.bias"] = t(FF, H), t(FF)
        sd[q + "output.dense.weight"], sd[q + "output.dense.bias"] = t(H, FF), t(H)
        sd[q + "output.LayerNorm.weight"], sd[q + "output.LayerNorm.bias"] = 1 + t(H), t(H)
        sd[f"{p}encoder.pooler.{i}.dense.weight"] = t(H, H)
        sd[f"{p}encoder.pooler.{i}.dense.bias"] = t(H)
    sd["cls.predictions.bias"] = t(V)  # a pretraining head: not part of the encoder
    sd["cls.predictions.transform.dense.weight"] = t(H, H)
    return sd


ELASTICBERT_CONFIG = {
    "model_type": "elasticbert", "architectures": ["ElasticBertForPreTraining"],
    "vocab_size": V, "hidden_size": H, "num_hidden_layers": L, "num_attention_heads": 4,
    "intermediate_size": FF, "max_position_embeddings": P, "type_vocab_size": 2,
    "max_output_layers": L, "num_output_layers": L, "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "layer_norm_eps": 1e-12,
    "initializer_range": 0.02, "pad_token_id": 0, "position_embedding_type": "absolute",
}


@pytest.fixture(scope="module")
def elasticbert_dir(tmp_path_factory):
    """A local ElasticBERT model directory (safetensors: a local directory is never unpickled)."""
    path = tmp_path_factory.mktemp("elasticbert")
    (path / "config.json").write_text(json.dumps(ELASTICBERT_CONFIG))
    sd = _elasticbert_checkpoint()
    save_file({k: v.contiguous() for k, v in sd.items()}, str(path / "model.safetensors"))
    tiny.tokenizer().save_pretrained(str(path))
    return path


def test_elasticbert_keys_map_onto_a_bert_model():
    from transformers import AutoModel

    sd = _elasticbert_checkpoint()
    bert_sd, poolers = elasticbert_state_dict(sd)
    config = families.elasticbert_config(ELASTICBERT_CONFIG)
    assert config.model_type == "bert" and config.num_hidden_layers == L
    bert = AutoModel.from_config(config)
    assert set(bert_sd) == set(bert.state_dict())  # every BERT tensor, nothing else
    assert sorted(poolers) == [1, 2, 3]  # 1-based layers
    for layer in range(1, L + 1):
        assert torch.equal(poolers[layer]["weight"],
                           sd[f"elasticbert.encoder.pooler.{layer - 1}.dense.weight"])
    assert torch.equal(bert_sd["pooler.dense.weight"], poolers[L]["weight"])  # the last layer's
    assert torch.equal(bert_sd["encoder.layer.2.output.dense.weight"],
                       sd["elasticbert.encoder.layer.2.output.dense.weight"])
    unprefixed = {k.removeprefix("elasticbert."): v for k, v in sd.items()}
    again, _ = elasticbert_state_dict(unprefixed)  # saved from the bare ElasticBertModel
    assert set(again) == set(bert_sd)
    with pytest.raises(EebenchError, match="position"):
        families.elasticbert_config({**ELASTICBERT_CONFIG,
                                     "position_embedding_type": "relative_key"})


def test_elasticbert_loads_into_bert_with_its_poolers_as_exit_poolers(elasticbert_dir):
    from transformers import AutoModel

    sd = _elasticbert_checkpoint()

    def pooler(layer):
        return sd[f"elasticbert.encoder.pooler.{layer - 1}.dense.weight"]

    deebert = build_model(str(elasticbert_dir), get_method("deebert"), 2)
    assert deebert.family.name == "bert" and deebert.model_config()["family"] == "bert"
    for head, layer in zip(deebert.heads, deebert.exit_layers, strict=True):
        assert torch.equal(head.pooler.dense.weight, pooler(layer))
    static = build_model(str(elasticbert_dir), get_method("static", layers=2), 2)
    assert torch.equal(static.heads[0].pooler.dense.weight, pooler(2))
    pabee = build_model(str(elasticbert_dir), get_method("pabee"), 2)  # one shared pooler:
    assert torch.equal(pabee.heads[0].pooler.dense.weight, pooler(L))  # the last layer's
    own = build_model(str(elasticbert_dir), get_method("pabee", shared_pooler=False), 2)
    assert [torch.equal(h.pooler.dense.weight, pooler(k))
            for h, k in zip(own.heads, own.exit_layers, strict=True)] == [True] * L

    bert_sd, _ = elasticbert_state_dict(sd)  # parity with a BertModel holding the mapped weights
    reference = AutoModel.from_config(families.elasticbert_config(ELASTICBERT_CONFIG),
                                      attn_implementation="eager").eval()
    reference.load_state_dict(bert_sd)
    ids, mask, types = _batch()
    with torch.no_grad():
        got = _stepwise_hidden(deebert, ids, mask, types)
        expected = _reference_hidden(reference, deebert, ids, mask, types)
    real = mask.bool()
    assert (got[real] - expected[real]).abs().max().item() <= ATOL


def test_elasticbert_checkpoint_round_trip_and_flops(elasticbert_dir, tmp_path):
    model = build_model(str(elasticbert_dir), get_method("deebert"), 2)
    save_checkpoint(tmp_path / "ckpt", model, tiny.tokenizer(),
                    TrainState(config_hash="x", config={}, finished=True))
    rebuilt, _, _ = load_trained(tmp_path / "ckpt")
    ids, mask, types = _batch()
    with torch.no_grad():
        assert torch.equal(rebuilt(ids, mask, types), model(ids, mask, types))
    result = CliRunner().invoke(app, ["flops", "--model-config", str(elasticbert_dir), "--json",
                                      "--seq-len", "16"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    layer = 2 * (4 * 16 * H * H + 2 * 16 * H * FF + 2 * 16 * 16 * H)
    assert out["counters_agree"] and out["total_flops"] == L * layer + 2 * (H * H + 2 * H)


def test_an_elasticbert_hub_id_offline_fails_fast_with_one_line(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.monotonic()
    with pytest.raises(EebenchError) as e:
        build_model("fnlp/elasticbert-base", get_method("deebert"), num_labels=2)
    assert time.monotonic() - start < 10
    assert "\n" not in str(e.value) and "offline" in e.value.message
    result = CliRunner().invoke(app, ["flops", "--model-config", "fnlp/elasticbert-base"])
    assert result.exit_code == 1 and len(result.stderr.strip().splitlines()) == 1


# ------------------------------------------------------------------------------- listings
def test_the_light_family_listing_matches_the_entries():
    supported = set(model_config.SUPPORTED_FAMILIES)
    assert supported == set(families.FAMILIES) | set(families.CONVERSIONS)
    for name, conversion in families.CONVERSIONS.items():
        assert conversion.into in families.FAMILIES, name
    for b in backbones.BACKBONES.names():
        entry = backbones.BACKBONES.get(b)
        known = families.FAMILIES if entry.kind == "encoder" else decoders.DECODER_FAMILIES
        assert entry.family in known, b


def test_backbones_command_lists_each_family():
    result = CliRunner().invoke(app, ["backbones", "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    assert rows["minilm-l6"]["family"] == rows["bert-base"]["family"] == "bert"
    assert rows["mpnet-base"]["family"] == "mpnet"
    listed = CliRunner().invoke(app, ["backbones", "--families", "--json"])
    assert listed.exit_code == 0, listed.output
    names = [f["family"] for f in json.loads(listed.stdout)]
    assert names == [*model_config.SUPPORTED_FAMILIES, *decoders.DECODER_FAMILIES]
    table = CliRunner().invoke(app, ["backbones", "--families"])
    assert table.exit_code == 0 and "albert" in table.stderr and not table.stdout
