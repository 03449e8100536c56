"""Model directories that would train the wrong model without a word: no tokenizer (every word
unknown), a tokenizer that does not fit the embeddings, a config declaring more layers than the
weights hold (filled in at random), a layer missing a tensor, a family eebench does not know.
Each is refused in one line by `train`, `run` and `flops` before any work, nothing written; the
bundled models, the tiny test models and a sharded checkpoint still load."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests import tiny
from tests.hostile.conftest import FAST, run_args
from tests.hostile.helpers import fails, unchanged


def _copy(bench, tmp_path: Path, name: str) -> Path:
    return Path(shutil.copytree(bench.backbone, tmp_path / "models" / name))


def _config(path: Path, **changes) -> Path:
    config = json.loads((path / "config.json").read_text())
    config.update(changes)
    (path / "config.json").write_text(json.dumps(config))
    return path


def _tensors(path: Path, edit) -> Path:
    """Rewrite the directory's model.safetensors through `edit(dict) -> dict`."""
    from safetensors.torch import load_file, save_file

    weights = path / "model.safetensors"
    save_file(edit(load_file(str(weights))), str(weights), metadata={"format": "pt"})
    return path


def no_tokenizer(bench, tmp_path):
    path = _copy(bench, tmp_path, "no-tokenizer")
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt",
                 "special_tokens_map.json"):
        (path / name).unlink(missing_ok=True)
    return path


def small_tokenizer(bench, tmp_path):
    """A five-token WordPiece vocabulary over weights trained with 30,522 tokens."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordPiece

    path = _copy(bench, tmp_path, "small-tokenizer")
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4}
    Tokenizer(WordPiece(vocab, unk_token="[UNK]")).save(str(path / "tokenizer.json"))
    return path


def large_tokenizer(bench, tmp_path):
    """The MiniLM tokenizer (30,522 tokens) over 1,000 rows of embeddings."""
    return tiny.save_tiny_backbone(tmp_path / "models" / "large-tokenizer", num_layers=2,
                                   vocab_size=1000)


def more_layers(bench, tmp_path):
    """A config declaring 12 layers over 2 layers of weights."""
    return _config(_copy(bench, tmp_path, "twelve-over-two"), num_hidden_layers=12)


def partial_layer(bench, tmp_path):
    path = _copy(bench, tmp_path, "partial-layer")
    return _tensors(path, lambda sd: {k: v for k, v in sd.items()
                                      if k != "encoder.layer.1.attention.self.query.weight"})


def no_embeddings(bench, tmp_path):
    path = _copy(bench, tmp_path, "no-embeddings")
    return _tensors(path, lambda sd: {k: v for k, v in sd.items() if "word_embeddings" not in k})


def unknown_family(bench, tmp_path):
    return _config(_copy(bench, tmp_path, "gpt2"), model_type="gpt2")


def other_vocab_size(bench, tmp_path):
    return _config(_copy(bench, tmp_path, "vocab-size"), vocab_size=1000)


BROKEN = {
    "no-tokenizer": (no_tokenizer, "no tokenizer files"),
    "small-tokenizer": (small_tokenizer, "the tokenizer has 5 tokens, but the word embeddings "
                                         "have 30,522 rows"),
    "large-tokenizer": (large_tokenizer, "the tokenizer has 30,522 tokens, but the word "
                                         "embeddings have 1,000 rows"),
    "more-layers": (more_layers, "num_hidden_layers is 12, but the weights hold 2 of them "
                                 "(missing: 3-12)"),
    "partial-layer": (partial_layer, "layer 2 of the weights lacks attention.self.query.weight"),
    "no-embeddings": (no_embeddings, "the weights hold no word embeddings"),
    "unknown-family": (unknown_family, "model_type 'gpt2' is not a supported backbone family"),
    "vocab-size": (other_vocab_size, "vocab_size is 1000, but the word embeddings have 30522"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_train_refuses_before_any_work(bench, tmp_path, case):
    make, needle = BROKEN[case]
    model = make(bench, tmp_path)
    with unchanged(tmp_path):
        fails("train", "--method", "pabee", "--task", "rte", "--model", model, "--data-dir",
              bench.data, *FAST[:2], "--out", tmp_path / "ckpt", code=1, needle=needle)


@pytest.mark.parametrize("case", ["no-tokenizer", "more-layers", "unknown-family"])
def test_run_refuses_before_any_work(bench, tmp_path, case):
    make, needle = BROKEN[case]
    model = make(bench, tmp_path)
    with unchanged(tmp_path):
        fails(*run_args(model, bench.data, tmp_path, "--method", "pabee"), code=1, needle=needle)


@pytest.mark.parametrize("case", ["small-tokenizer", "more-layers", "partial-layer"])
def test_flops_refuses_the_directory(bench, tmp_path, case):
    make, needle = BROKEN[case]
    model = make(bench, tmp_path)
    with unchanged(tmp_path):
        fails("flops", "--model-config", model, code=1, needle=needle)


def test_a_model_completed_at_random_is_refused_when_loaded():
    """The loader's own report is checked too: a tensor transformers had to initialise."""
    from eebench.errors import DataError
    from eebench.models import backbones

    with pytest.raises(DataError, match="does not fill weights in at random"):
        backbones.check_loaded("x", {"missing_keys": ["encoder.layer.3.output.dense.weight"]})
    backbones.check_loaded("x", {"missing_keys": ["pooler.dense.weight"]})  # a fresh pooler


# ------------------------------------------------------------------------- what still loads
def test_the_tiny_test_models_carry_their_tokenizer(tmp_path):
    """Exempt by construction, not by a flag: they are saved with the MiniLM tokenizer."""
    from eebench.models.model_dir import check_model_dir

    for family in tiny.FAMILIES:
        path = tmp_path / family
        tiny.tiny_hf_model(family=family, num_layers=2).save_pretrained(str(path))
        tiny.tokenizer().save_pretrained(str(path))
        check_model_dir(path)
    check_model_dir(tiny.save_tiny_backbone(tmp_path / "saved", num_layers=2))


def test_the_bundled_minilm_passes():
    from eebench.models.backbones import resolve_backbone
    from eebench.models.model_dir import check_model_dir

    check_model_dir(Path(resolve_backbone("minilm-l6")))


def test_a_config_without_weights_is_still_a_config(tmp_path):
    """What `flops` counts and a submission records the sizes of: no weights, no tokenizer."""
    from eebench.models.backbones import load_config

    tiny.tiny_family_config("bert", num_layers=3).save_pretrained(str(tmp_path))
    assert load_config(str(tmp_path)).num_hidden_layers == 3


def test_run_refuses_a_directory_without_weights_before_any_work(bench, tmp_path):
    """A config and a tokenizer, no weights: `run` says so before it creates a run directory."""
    model = tmp_path / "config-only"
    tiny.tiny_family_config("bert", num_layers=2).save_pretrained(str(model))
    tiny.tokenizer().save_pretrained(str(model))
    with unchanged(tmp_path):
        fails(*run_args(model, bench.data, tmp_path, "--method", "pabee"), code=1,
              needle="no weights")


def test_a_sharded_checkpoint_loads_as_the_single_file(bench, tmp_path):
    import torch
    from safetensors.torch import load_file, save_file

    from eebench.models.backbones import load_hf_model

    path = _copy(bench, tmp_path, "sharded")
    state = load_file(str(path / "model.safetensors"))
    (path / "model.safetensors").unlink()
    keys = sorted(state)
    halves = {"model-00001-of-00002.safetensors": keys[: len(keys) // 2],
              "model-00002-of-00002.safetensors": keys[len(keys) // 2:]}
    for name, names in halves.items():
        save_file({k: state[k] for k in names}, str(path / name), metadata={"format": "pt"})
    (path / "model.safetensors.index.json").write_text(json.dumps({
        "metadata": {}, "weight_map": {k: n for n, names in halves.items() for k in names}}))
    loaded = load_hf_model(str(path)).state_dict()
    single = load_hf_model(str(bench.backbone)).state_dict()
    assert loaded.keys() == single.keys()
    assert all(torch.equal(loaded[k], single[k]) for k in single)
