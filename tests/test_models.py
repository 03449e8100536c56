"""The multi-exit model contract: stepwise == all at once, padding invariance, truncation,
structure round trip, the real MiniLM-L6, and backbone name resolution."""

from __future__ import annotations

import csv
import json
import time

import pytest
import torch
from safetensors.torch import load_model, save_model

from eebench.errors import EebenchError, UsageError
from eebench.methods.base import get_method
from eebench.models.backbones import load_tokenizer, resolve_backbone
from eebench.models.build import build_model
from eebench.models.multi_exit import MultiExitModel, pool_tokens
from eebench.models.pooling import POOLINGS, default_pooling, resolve_pooling
from eebench.train.checkpoint import rebuild_model
from tests.tiny import TEXT_METHODS, save_tiny_backbone, tiny_model, tokenizer

ALL_METHODS = TEXT_METHODS  # eebench's own: plugins test themselves; tokens: test_token_*
SENTENCES = ["a charming and often affecting journey .",
             "unflinchingly bleak and desperate , with a long and winding second half that drags"]


def _batch(texts, pairs=None):
    enc = tokenizer()(texts, pairs, padding=True, return_tensors="pt")
    return enc["input_ids"], enc["attention_mask"], enc["token_type_ids"]


def _stepwise(model: MultiExitModel, ids, mask, types) -> torch.Tensor:
    """The way real dynamic inference runs the model: embed, layer by layer, head by head."""
    h, m = model.embed(ids, mask, types)
    out = []
    for i in range(model.num_layers):
        h = model.layer(i, h, m)
        if i + 1 in model.exit_layers:
            logits, signals = model.head_outputs(model.exit_layers.index(i + 1), h, mask)
            out.append(torch.cat([logits, *(v[:, None] for v in signals.values())], dim=-1))
    return torch.stack(out)


@pytest.mark.parametrize("pooling", POOLINGS)
@pytest.mark.parametrize("method", ALL_METHODS)
def test_stepwise_forward_equals_forward(method, pooling):
    model = tiny_model(method, pooling=pooling)
    ids, mask, types = _batch(SENTENCES)
    with torch.no_grad():
        full = model(ids, mask, types)
        steps = _stepwise(model, ids, mask, types)
    # the logits, then a column per signal the heads give (BERxiT's exit score)
    assert full.shape == (model.num_exits, 2, 2 + len(model.signal_names))
    assert torch.equal(full, steps)


@pytest.mark.parametrize("pooling", POOLINGS)
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("method", ALL_METHODS)
def test_padding_never_changes_a_samples_logits(method, attn, pooling):
    model = tiny_model(method, attn_implementation=attn, pooling=pooling)
    short, long = SENTENCES
    with torch.no_grad():
        alone = model(*_batch([short]))[:, 0]
        ids, mask, types = _batch([short, long])
        assert mask[0].sum() < mask.shape[1]  # the short one really is padded
        batched = model(ids, mask, types)[:, 0]
    torch.testing.assert_close(batched, alone, atol=1e-5, rtol=0)


def test_mean_pooling_is_the_masked_mean_of_the_real_tokens():
    model = tiny_model("deebert", pooling="mean")
    ids, mask, types = _batch(SENTENCES)
    with torch.no_grad():
        h, ext = model.embed(ids, mask, types)
        h = model.layer(0, h, ext)
        short = int(mask[0].sum())
        assert short < mask.shape[1]
        by_hand = torch.stack([h[0, :short].mean(0), h[1].mean(0)])  # padding left out
        torch.testing.assert_close(pool_tokens(h, mask, "mean"), by_hand, atol=1e-6, rtol=0)
        assert torch.equal(pool_tokens(h, mask, "cls"), h[:, 0])
        head = model.heads[0]
        expected = head.classifier(torch.tanh(head.pooler.dense(by_hand)))
        torch.testing.assert_close(model.head(0, h, mask), expected, atol=1e-6, rtol=0)
        # the padded positions hold real numbers: reading them would change the result
        assert not torch.allclose(pool_tokens(h, torch.ones_like(mask), "mean")[0], by_hand[0])
        # no mask: no padding, every token counts
        torch.testing.assert_close(pool_tokens(h, None, "mean"), h.mean(1), atol=1e-6, rtol=0)


@pytest.mark.parametrize("method", ALL_METHODS)
def test_the_pooling_choice_reaches_every_head(method):
    cls_model, mean_model = (tiny_model(method, pooling=p) for p in POOLINGS)
    assert {h.pooler.pooling for h in mean_model.heads} == {"mean"}
    assert {h.pooler.pooling for h in cls_model.heads} == {"cls"}
    ids, mask, types = _batch(SENTENCES)
    with torch.no_grad():  # the same weights, pooled two ways
        assert not torch.allclose(cls_model(ids, mask, types), mean_model(ids, mask, types))
    with pytest.raises(UsageError, match="pooling"):
        tiny_model(method, pooling="max")


def test_sdpa_and_eager_agree():
    ids, mask, types = _batch(SENTENCES, ["a second segment", "and another one here"])
    with torch.no_grad():
        eager = tiny_model("deebert", attn_implementation="eager")(ids, mask, types)
        sdpa = tiny_model("deebert", attn_implementation="sdpa")(ids, mask, types)
    torch.testing.assert_close(eager, sdpa, atol=1e-5, rtol=0)


def test_static_truncates_the_backbone():
    model = tiny_model("static", num_layers=2)
    assert (model.num_layers, model.num_exits, model.exit_layers) == (2, 1, (2,))
    assert model.config.num_hidden_layers == 2
    by_setting = tiny_model(get_method("static", layers=3))
    assert (by_setting.num_layers, by_setting.exit_layers) == (3, (3,))
    assert tiny_model("static").exit_layers == (4,)  # layers=None: every layer
    with pytest.raises(UsageError, match="4 layers"):
        tiny_model(get_method("static", layers=9))
    with pytest.raises(UsageError):
        get_method("static", layers="two")
    with pytest.raises(UsageError):
        tiny_model("pabee", num_layers=0)


@pytest.mark.parametrize("method", ALL_METHODS)
def test_backbone_parameters_are_embeddings_and_layers(method):
    model = tiny_model(method)
    backbone = {id(p) for p in model.backbone_parameters()}
    expected = {id(p) for m in (model.embeddings, model.layers) for p in m.parameters()}
    heads = {id(p) for p in model.heads.parameters()}
    assert backbone == expected and not backbone & heads
    assert backbone | heads == {id(p) for p in model.parameters()}


@pytest.mark.parametrize("pooling", POOLINGS)
@pytest.mark.parametrize("method", ALL_METHODS)
def test_model_config_round_trip_gives_identical_logits(method, pooling, tmp_path):
    model = tiny_model(method, num_labels=3, pooling=pooling)
    cfg = json.loads(json.dumps(model.model_config()))  # JSON-able, as written to disk
    assert (cfg["method"], cfg["num_labels"], cfg["pooling"]) == (method, 3, pooling)
    assert cfg["exit_layers"] == list(model.exit_layers)
    save_model(model, str(tmp_path / "model.safetensors"))  # how checkpoints are written

    rebuilt = rebuild_model(cfg)
    ids, mask, types = _batch(SENTENCES)
    with torch.no_grad():
        assert not torch.allclose(rebuilt(ids, mask, types), model(ids, mask, types))
        missing, unexpected = load_model(rebuilt, str(tmp_path / "model.safetensors"))
        assert not missing and not unexpected
        torch.testing.assert_close(rebuilt(ids, mask, types), model(ids, mask, types),
                                   atol=0, rtol=0)
    assert rebuilt.model_config() == model.model_config()


def test_model_config_mismatch_is_a_clear_error():
    cfg = tiny_model("pabee").model_config()
    with pytest.raises(EebenchError, match="exit layers"):
        rebuild_model({**cfg, "exit_layers": [1, 3]})
    with pytest.raises(EebenchError, match="malformed"):
        rebuild_model({k: v for k, v in cfg.items() if k != "num_layers"})
    with pytest.raises(EebenchError, match="pooling"):
        rebuild_model({**cfg, "pooling": "max"})
    # a config written before the pooling was recorded pooled [CLS]
    old = rebuild_model({k: v for k, v in cfg.items() if k != "pooling"})
    assert old.pooling == "cls"


def test_unknown_attention_implementation():
    with pytest.raises(UsageError, match="attention"):
        build_model("minilm-l6", get_method("pabee"), 2, attn_implementation="flash")


def _real_rows(data_dir, n=3):
    with open(data_dir / "MRPC" / "dev.tsv", encoding="utf-8-sig", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:n + 1]
    return [r[3] for r in rows], [r[4] for r in rows]


def test_real_minilm_reproduces_bert_model(minilm_path, data_dir):
    from transformers import BertModel

    first, second = _real_rows(data_dir)
    tok = load_tokenizer("minilm-l6")
    enc = tok(first, second, padding=True, return_tensors="pt")
    model = build_model("minilm-l6", get_method("deebert"), num_labels=2)
    reference = BertModel.from_pretrained(str(minilm_path), attn_implementation="eager").eval()
    assert model.num_layers == reference.config.num_hidden_layers == 6
    with torch.no_grad():
        expected = reference(**enc).last_hidden_state
        h, m = model.embed(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])
        for i in range(model.num_layers):
            h = model.layer(i, h, m)
    real = enc["attention_mask"].bool()  # padded positions are never read
    torch.testing.assert_close(h[real], expected[real], atol=1e-5, rtol=1e-4)
    # every off-ramp's pooler starts as the pretrained pooler, each its own copy
    for head in model.heads:
        assert torch.equal(head.pooler.dense.weight, reference.pooler.dense.weight)
        assert head.pooler.dense.weight.data_ptr() != reference.pooler.dense.weight.data_ptr()


def test_local_model_directory(tmp_path):
    path = save_tiny_backbone(tmp_path / "tiny", num_layers=3)
    assert resolve_backbone(str(path)) == str(path.resolve())
    model = build_model(str(path), get_method("pabee"), num_labels=2)
    assert (model.num_layers, model.config.hidden_size, model.source) == (3, 32, str(path))
    assert load_tokenizer(str(path)).is_fast


def test_default_pooling_follows_the_backbones_pretraining(tmp_path):
    assert default_pooling("minilm-l6") == "mean"  # sentence-transformers: 1_Pooling says mean
    assert default_pooling("bert-base") == "cls"  # a hub id: BERT's [CLS] pooler
    plain = save_tiny_backbone(tmp_path / "plain", num_layers=2)
    assert default_pooling(str(plain)) == "cls"  # no 1_Pooling
    assert build_model(str(plain), get_method("pabee"), 2).pooling == "cls"
    st = save_tiny_backbone(tmp_path / "st", num_layers=2, mean_pooling=True)
    assert default_pooling(str(st)) == "mean"
    model = build_model(str(st), get_method("pabee"), 2)
    assert model.pooling == model.heads[0].pooler.pooling == "mean"
    assert build_model(str(st), get_method("pabee"), 2, pooling="cls").pooling == "cls"
    assert resolve_pooling(str(st), None) == "mean"
    assert resolve_pooling("bert-base", "mean") == "mean"
    with pytest.raises(UsageError, match="unknown pooling"):
        resolve_pooling(str(st), "max")
    (st / "1_Pooling" / "config.json").write_text("{not json")
    with pytest.raises(EebenchError, match="pooling config"):
        default_pooling(str(st))


def test_backbones_command_shows_each_default_pooling():
    from typer.testing import CliRunner

    from eebench.cli import app

    result = CliRunner().invoke(app, ["backbones", "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r["pooling"] for r in json.loads(result.stdout)}
    assert rows["minilm-l6"] == "mean" and rows["bert-base"] == "cls"
    lrs = {r["name"]: r["lr"] for r in json.loads(result.stdout)}
    assert {k: lrs[k] for k in ("minilm-l6", "bert-base", "mpnet-base")} == {
        "minilm-l6": 1e-4, "bert-base": 2e-5, "mpnet-base": 5e-5}  # bert: GLUE's
    field = {"bert-large", "roberta-base", "albert-base-v2", "distilbert-base", "elasticbert-base"}
    assert field <= set(lrs)  # the field's backbones, by name
    assert rows["mpnet-base"] == "mean"  # declared: the listing extracts nothing
    table = CliRunner().invoke(app, ["backbones"])
    assert table.exit_code == 0 and "pooling" in table.stderr and not table.stdout


def test_unknown_backbone_suggests_a_name():
    with pytest.raises(UsageError, match="unknown backbone") as e:
        resolve_backbone("minilm-l5")
    assert "minilm-l6" in e.value.hint
    with pytest.raises(UsageError, match="does not exist"):
        resolve_backbone("./no/such/model")


def test_hub_id_offline_fails_fast_with_one_line(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.monotonic()
    with pytest.raises(EebenchError) as e:
        build_model("eebench-test/no-such-model", get_method("pabee"), num_labels=2)
    assert time.monotonic() - start < 10
    assert "\n" not in str(e.value) and "hub" in e.value.message
    assert "minilm-l6" in e.value.hint
    with pytest.raises(EebenchError, match="offline"):
        load_tokenizer("eebench-test/no-such-model")


def test_declared_pooling_of_a_bundled_backbone_is_what_its_directory_says(minilm_path):
    from eebench.models.backbones import BACKBONES

    assert default_pooling(str(minilm_path)) == BACKBONES.get("minilm-l6").pooling == "mean"
