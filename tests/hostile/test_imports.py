"""`eebench run --from-checkpoint DIR` on a folder that would import the wrong model, hang or
allocate without end: no tokenizer (every word unknown), a FIFO in its place, a config whose
fields have the wrong types, absurd sizes, sizes the weights do not have, a malformed
`early_exit` block. Each is refused in one line naming the file (and the field), exit 1, before
anything is built: no model is constructed (`AutoModel.from_config` fails the case if called)
and the refusal takes well under the time any allocation of that size would.

The folder is what `eebench export-model` writes (a tiny two-layer PABEE model with the MiniLM
tokenizer), each case a copy broken in one way."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import tiny
from tests.hostile.helpers import fails, unchanged

LIMIT_S = 10.0  # each refusal takes a fraction of a second; the allocations it prevents, minutes


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    from eebench.models.convert.export import write_folder

    model = tiny.tiny_model("pabee", depth=2)
    return write_folder(tmp_path_factory.mktemp("exported") / "pabee", model, tiny.tokenizer(),
                        {"task": "rte"}, "card\n")


@pytest.fixture
def nothing_built(monkeypatch) -> None:
    """Building a backbone from the config (what allocates its tensors) fails the case."""
    from transformers import AutoModel

    def refuse(*args, **kwargs):
        raise AssertionError("a model was built from a config that should have been refused")

    monkeypatch.setattr(AutoModel, "from_config", refuse)


def _copy(exported: Path, tmp_path: Path, name: str = "model") -> Path:
    return Path(shutil.copytree(exported, tmp_path / name))


def _edit(folder: Path, edit: Callable[[dict], object]) -> Path:
    config = json.loads((folder / "config.json").read_text())
    edit(config)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def _refused(folder: Path, data_dir: Path, tmp_path: Path, needle: str) -> str:
    """`run --from-checkpoint folder` fails in one line holding `needle`, exit 1, quickly,
    nothing written (no run directory, no imported checkpoint, the folder as it was)."""
    start = time.perf_counter()
    with unchanged(tmp_path):
        line = fails("run", "--method", "pabee", "--task", "rte", "--from-checkpoint", folder,
                     "--data-dir", data_dir, "--max-eval-samples", 8, "--max-seq-length", 32,
                     "--no-timing", "--out", tmp_path / "runs", "--checkpoints",
                     tmp_path / "ckpt", code=1, needle=needle)
    assert time.perf_counter() - start < LIMIT_S
    return line


# ------------------------------------------------------------- 2a: the tokenizer's files
def test_2a_an_imported_folder_without_tokenizer_json_is_refused(exported, tmp_path, data_dir,
                                                                 nothing_built):
    """Without tokenizer.json transformers builds a five-token tokenizer from
    tokenizer_config.json: every word [UNK], and a wrong result with exit 0."""
    folder = _copy(exported, tmp_path)
    (folder / "tokenizer.json").unlink()
    assert (folder / "tokenizer_config.json").is_file()
    line = _refused(folder, data_dir, tmp_path, f"{folder}: no tokenizer files")
    assert "hint: save the tokenizer next to the weights" in line


@pytest.mark.parametrize("name", ["tokenizer.json", "tokenizer_config.json"])
def test_2a_a_fifo_in_place_of_a_tokenizer_file_is_refused_unread(exported, tmp_path, data_dir,
                                                                  nothing_built, name):
    folder = _copy(exported, tmp_path)
    (folder / name).unlink()
    os.mkfifo(folder / name)
    _refused(folder, data_dir, tmp_path,
             f"{folder / name}: is a FIFO (named pipe), not a regular file")
    assert (folder / name).is_fifo()


def test_2a_a_tokenizer_that_does_not_fit_the_embeddings_is_refused(exported, tmp_path,
                                                                    data_dir, nothing_built):
    """The same check as a `--model DIR`'s: five tokens over 30,522 rows of embeddings."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordPiece

    folder = _copy(exported, tmp_path)
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4}
    Tokenizer(WordPiece(vocab, unk_token="[UNK]")).save(str(folder / "tokenizer.json"))
    _refused(folder, data_dir, tmp_path,
             "the tokenizer has 5 tokens, but the word embeddings have 30,522 rows")


# ------------------------------------------------------ 4: config.json, by its schema
@pytest.mark.parametrize("field,value,needle", [
    ("num_hidden_layers", "2", "num_hidden_layers: '2' is not an integer in 1..1,024"),
    ("hidden_size", [32], "hidden_size: [32] is not an integer in 1..65,536"),
    ("num_attention_heads", 4.0, "num_attention_heads: 4.0 is not an integer"),
    ("vocab_size", True, "vocab_size: True is not an integer"),
    ("model_type", 7, "model_type: Input should be a valid string"),
])
def test_4_config_fields_of_the_wrong_type_are_refused(exported, tmp_path, data_dir,
                                                       nothing_built, field, value, needle):
    folder = _edit(_copy(exported, tmp_path), lambda c: c.update({field: value}))
    _refused(folder, data_dir, tmp_path,
             f"{folder / 'config.json'}: not a valid model config: {needle}")


@pytest.mark.parametrize("field,value,needle", [
    ("num_hidden_layers", 10**12, "num_hidden_layers: 1000000000000 is not an integer in "
                                  "1..1,024"),
    ("vocab_size", 2**31 - 1, "vocab_size: 2147483647 is not an integer in 1..16,777,216"),
    ("intermediate_size", 10**9, "intermediate_size: 1000000000 is not an integer"),
    ("max_position_embeddings", -1, "max_position_embeddings: -1 is not an integer"),
])
def test_4_huge_sizes_are_refused(exported, tmp_path, data_dir, nothing_built, field, value,
                                  needle):
    folder = _edit(_copy(exported, tmp_path), lambda c: c.update({field: value}))
    _refused(folder, data_dir, tmp_path, f"{folder / 'config.json'}: not a valid model config: "
                                         f"{needle}")


@pytest.mark.parametrize("field,value,needle", [
    ("hidden_size", 64, "hidden_size is 64, but the weights' embeddings.word_embeddings.weight "
                        "is [30522, 32]"),
    ("vocab_size", 4_000_000, "vocab_size is 4000000, but the word embeddings have 30522 rows"),
    ("intermediate_size", 262_144, "intermediate_size is 262144, but the weights' "
                                   "encoder.layer.0.intermediate.dense.weight is [64, 32]"),
    ("max_position_embeddings", 1_000_000, "max_position_embeddings is 1000000, but the "
                                           "weights' embeddings.position_embeddings.weight"),
    ("type_vocab_size", 1000, "type_vocab_size is 1000, but the weights' "
                              "embeddings.token_type_embeddings.weight is [2, 32]"),
    ("num_hidden_layers", 1000, "num_hidden_layers is 1000, but the weights hold 2 of them"),
])
def test_4_sizes_the_weights_do_not_have_are_refused_before_any_allocation(
        exported, tmp_path, data_dir, nothing_built, field, value, needle):
    """Compared with the shapes in the safetensors header: no model is built at these sizes."""
    folder = _edit(_copy(exported, tmp_path), lambda c: c.update({field: value}))
    _refused(folder, data_dir, tmp_path, f"{folder / 'config.json'}: {needle}")


# ------------------------------------------------------------ 4: the early_exit block
@pytest.mark.parametrize("change,needle", [
    ({"num_layers": "x"}, "not a valid early_exit block: num_layers: 'x' is not an integer"),
    ({"num_layers": 100_000}, "not a valid early_exit block: num_layers: 100000 is not an "
                              "integer in 1..1,024"),
    ({"num_labels": "2"}, "not a valid early_exit block: num_labels: '2' is not an integer"),
    ({"exit_layers": "1,2"}, "not a valid early_exit block: exit_layers: Input should be a "
                             "valid list"),
    ({"exit_layers": [1, 2.5]}, "not a valid early_exit block: exit_layers.1: 2.5 is not an "
                                "integer"),
    ({"method_settings": [1]}, "not a valid early_exit block: method_settings: Input should be "
                               "a valid dictionary"),
    ({"pooling": 3}, "not a valid early_exit block: pooling: Input should be 'cls' or 'mean'"),
    ({"format_version": 2}, "not a valid early_exit block: format_version: 2 is not an integer "
                            "in 1..1"),
])
def test_4_an_early_exit_block_of_the_wrong_types_is_refused(exported, tmp_path, data_dir,
                                                             nothing_built, change, needle):
    folder = _edit(_copy(exported, tmp_path), lambda c: c["early_exit"].update(change))
    _refused(folder, data_dir, tmp_path, f"{folder / 'config.json'}: {needle}")


def test_4_an_early_exit_block_that_is_no_object_is_refused(exported, tmp_path, data_dir,
                                                            nothing_built):
    folder = _edit(_copy(exported, tmp_path), lambda c: c.update(early_exit=[1, 2]))
    _refused(folder, data_dir, tmp_path,
             f"{folder / 'config.json'}: not a valid early_exit block: (top level)")


@pytest.mark.parametrize("change,needle", [
    ({"exit_layers": [1, 99]}, "early_exit.exit_layers [1, 99] are not layers in increasing "
                               "order within 1..2"),
    ({"exit_layers": [2, 1]}, "early_exit.exit_layers [2, 1] are not layers in increasing order"),
    ({"exit_layers": [0, 2]}, "not a valid early_exit block: exit_layers.0: 0 is not an integer "
                              "in 1..1,024"),
    ({"exit_layers": [2]}, "early_exit.exit_layers lists 1 exits, but the weights hold 2 exit "
                           "heads"),
    ({"num_layers": 3}, "early_exit.num_layers is 3, but num_hidden_layers is 2"),
    ({"num_labels": 5}, "early_exit.num_labels is 5, but the weights' "
                        "exit_heads.0.classifier.weight is [2, 32]"),
])
def test_4_early_exits_out_of_range_are_refused(exported, tmp_path, data_dir, nothing_built,
                                                change, needle):
    folder = _edit(_copy(exported, tmp_path), lambda c: c["early_exit"].update(change))
    _refused(folder, data_dir, tmp_path, f"{folder / 'config.json'}: {needle}")


# ------------------------------------------------------------------- what still imports
def test_the_exported_folder_itself_passes(exported):
    """The checks refuse what is broken, not the folder export-model writes."""
    from eebench.models.convert import open_checkpoint

    record = open_checkpoint(str(exported)).record()
    assert (record.format, record.num_layers, record.num_labels) == ("eebench", 2, 2)
