"""What a local model directory must hold before eebench uses it, checked without loading it.

`check_model_dir` is the one gate every local directory passes before transformers reads it
(eebench.models.backbones.from_pretrained, and the first look of `train` and `run`). It refuses
in one line, naming the file:

- `config.json`: present, JSON, an object with a `model_type` of a supported family and sizes a
  model can be built with (eebench.models.model_config: types and bounds);
- weights in safetensors only: `model.safetensors`, or the shards that
  `model.safetensors.index.json` lists, each a plain file name inside the directory (no path, no
  symbolic link out of it, a regular file). Nothing listed is opened before every name passed.
  Weights that exist only pickled (`pytorch_model.bin`) are refused with the conversion hint:
  eebench never unpickles a file;
- the weights have the sizes the config declares (nothing is allocated at sizes the weights do
  not have), and hold the word embeddings and every layer the config declares, each with all of
  its tensors (a model is never completed with randomly initialised layers);
- tokenizer files, each a regular file, whose vocabulary fits the word embeddings (no ids past
  the matrix, and no vocabulary far smaller than the one the embeddings were trained with).

`check_contents` (the last two) is shared with `--from-checkpoint DIR`, whose folder holds an
early-exit checkpoint (eebench.models.convert.schema).

A directory with `config.json` and no weights at all is a config (what `eebench flops` counts,
what a submission records the sizes of): reading its config accepts it; loading a model from it
then fails for want of weights. Only the safetensors headers are read (a few kilobytes each).
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from eebench.errors import DataError, one_line
from eebench.models.model_config import CONFIG_HINT, check_config, check_sizes

HINT = "use --model minilm-l6 (bundled, works offline) or a local model directory"
CONVERT = ("save the model with safetensors (save_pretrained writes model.safetensors) and "
           "remove the pickled file")
WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"
PICKLED_WEIGHTS = ("pytorch_model.bin", "pytorch_model.bin.index.json", "model.pt", "model.pth",
                   "model.ckpt", "model.pkl")
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model",
                   "sentencepiece.bpe.model")
# What else transformers reads to build a tokenizer: each, where present, a regular file too.
TOKENIZER_SIDE_FILES = ("tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                        "merges.txt")
SAVE_TOKENIZER = "save the tokenizer next to the weights (tokenizer.save_pretrained(DIR))"
MAX_HEADER = 100 << 20  # bytes of a safetensors header (its JSON): far above any encoder's
MAX_INDEX = 50 << 20  # bytes of a shard index
MAX_TOKENIZER = 500 << 20  # bytes of a tokenizer.json
# A vocabulary may fall short of the embedding matrix by a little (rows padded to a multiple of
# 8 or 128, a few unused ids); by more, most rows were trained with another tokenizer.
VOCAB_SLACK = 128

# Where each family's layers sit in its weights (any prefix: `bert.`, `elasticbert.`, ...), and
# the config field that says how many there are. ALBERT stores its layer groups, not its depth.
_LAYER = re.compile(r"(?:^|\.)(?:encoder|transformer)\.layer\.(\d+)\.(.+)$")
_ALBERT_GROUP = re.compile(r"(?:^|\.)encoder\.albert_layer_groups\.(\d+)\.(.+)$")
_WORDS = "embeddings.word_embeddings.weight"

_checked: dict[tuple, None] = {}  # directories that passed, by their state (names, sizes, times)


def check_model_dir(path: Path) -> None:
    """A local model directory eebench can use without unpickling anything and without filling
    anything in at random: one line naming the file otherwise (see the module docstring)."""
    from eebench.io import read_json

    path = Path(path)
    config = path / "config.json"
    if not config.is_file():
        what = "config.json is not a file" if config.exists() else "no config.json"
        raise DataError(f"{path}: not a model directory ({what})", hint=HINT)
    state = _state(path)
    if state in _checked:
        return
    data = read_json(config, hint=HINT)
    if not isinstance(data, dict):
        raise DataError(f"{config}: not a JSON object: not a Hugging Face model config")
    check_config(data, str(config))
    files = weight_files(path)
    if files:
        shapes: dict[str, tuple[int, ...]] = {}
        for file in files:
            shapes.update(_shapes(path, file))
        check_contents(path, data, shapes)
    _checked[state] = None


def check_contents(path: Path, config: dict[str, Any], shapes: dict[str, tuple[int, ...]]
                   ) -> None:
    """What a folder's config, weights and tokenizer must agree on before a model is built from
    them: the sizes the config declares are the weights' (nothing allocated at other sizes),
    every declared layer is there, and the tokenizer is there and fits the word embeddings. The
    one check of `--model DIR` (above) and of `--from-checkpoint DIR` (convert.schema: an
    imported folder's weights under its family's own keys); `config` has passed check_config."""
    check_sizes(config, shapes, str(path / "config.json"))
    rows = _check_layers(path, config, shapes)
    check_tokenizer(path, rows)


def weight_files(path: Path) -> list[Path]:
    """The safetensors files holding the model's weights, every name checked (see the module
    docstring) before any is opened; [] for a directory without weights (a config)."""
    index = path / INDEX
    if index.exists() or index.is_symlink():
        names = _index_shards(path, index)
        return [_inside(path, name, index) for name in names]
    single = path / WEIGHTS
    if single.exists() or single.is_symlink():
        return [_inside(path, WEIGHTS, single)]
    pickled = [path / f for f in PICKLED_WEIGHTS if (path / f).exists()]
    if pickled:
        raise DataError(f"{pickled[0]}: pickled weights; eebench never unpickles a file",
                        hint=CONVERT)
    return []


def _index_shards(path: Path, index: Path) -> list[str]:
    data = _read_small_json(index, MAX_INDEX)
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise DataError(f"{index}: no weight_map: not a safetensors shard index")
    names = []
    for shard in weight_map.values():
        if not isinstance(shard, str):
            raise DataError(f"{index}: a shard name is {shard!r}, not a file name")
        _plain(shard, index)
        if not shard.endswith(".safetensors"):
            raise DataError(f"{index}: lists {_shown(shard)}, which is not a safetensors file; "
                            "eebench never unpickles a file", hint=CONVERT)
        if shard not in names:
            names.append(shard)
    return names


def _inside(path: Path, name: str, where: Path) -> Path:
    """`path / name`, where `name` is a plain file name that is a regular file in `path` itself
    (a symbolic link is followed only where it stays in the directory)."""
    _plain(name, where)
    file = path / name
    try:
        real = file.resolve(strict=True)
    except (OSError, RuntimeError):
        raise DataError(f"{where}: {_shown(name)} not found in {path}") from None
    if real.parent != path.resolve():
        raise DataError(f"{where}: {_shown(name)} links out of the model directory",
                        hint="copy the weights into the directory")
    if not stat.S_ISREG(real.stat().st_mode):
        raise DataError(f"{file}: not a regular file")
    return file


def _plain(name: str, where: Path) -> None:
    """`name` is a file name, with no directory part (no path out of the directory)."""
    if name in ("", ".", "..") or "/" in name or "\\" in name or "\0" in name \
            or Path(name).is_absolute():
        raise DataError(f"{where}: shard {_shown(name)} is not a file name inside the model "
                        "directory", hint="a shard index lists file names next to it")


def _shown(name: str) -> str:
    return repr(name if len(name) <= 120 else name[:117] + "...")


def _open_regular(file: Path):
    """`file` opened for binary reading, checked on the descriptor to be a regular file (a FIFO
    put in its place would block the reader)."""
    fd = os.open(file, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise DataError(f"{file}: not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _read_small_json(file: Path, limit: int) -> Any:
    with _open_regular(file) as f:
        raw = f.read(limit + 1)
    if len(raw) > limit:
        raise DataError(f"{file}: larger than {limit >> 20} MiB: not a shard index")
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise DataError(f"{file}: not JSON") from None


def _shapes(path: Path, file: Path) -> dict[str, tuple[int, ...]]:
    """The tensors a safetensors file holds and their shapes, from its header alone."""
    damaged = DataError(f"{path}: cannot load the model directory: {file.name} is not a "
                        "safetensors file (damaged or truncated)", hint=HINT)
    with _open_regular(file) as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(8)
        n = int.from_bytes(head, "little") if len(head) == 8 else 0
        if not 2 <= n <= min(MAX_HEADER, size - 8):
            raise damaged
        raw = f.read(n)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise damaged from None
    if not isinstance(header, dict):
        raise damaged
    shapes = {}
    for key, entry in header.items():
        if key == "__metadata__":
            continue
        shape = entry.get("shape") if isinstance(entry, dict) else None
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise damaged
        shapes[key] = tuple(shape)
    return shapes


def _check_layers(path: Path, config: dict[str, Any], shapes: dict[str, tuple[int, ...]]
                  ) -> int:
    """Every layer the config declares is in the weights with all its tensors, and the word
    embeddings are there; returns their rows (the vocabulary the model was trained with)."""
    where = path / "config.json"
    words = [shape for key, shape in shapes.items() if key.endswith(_WORDS) and len(shape) == 2]
    if not words:
        raise DataError(f"{path}: the weights hold no word embeddings ({_WORDS})",
                        hint="a model directory holds a whole pretrained encoder")
    rows = words[0][0]
    if isinstance(config.get("vocab_size"), int) and config["vocab_size"] != rows:
        raise DataError(f"{where}: vocab_size is {config['vocab_size']}, but the word "
                        f"embeddings have {rows} rows")
    if config["model_type"] == "albert":
        pattern, field, declared = _ALBERT_GROUP, "num_hidden_groups", config.get(
            "num_hidden_groups", 1)
    else:
        field = "n_layers" if config["model_type"] == "distilbert" else "num_hidden_layers"
        pattern, declared = _LAYER, config.get(field)
    if not isinstance(declared, int):
        return rows  # transformers' own default applies; its tensors are checked when loaded
    tensors: dict[int, set[str]] = {}
    for key in shapes:
        if match := pattern.search(key):
            tensors.setdefault(int(match[1]), set()).add(match[2])
    missing = [i for i in range(declared) if i not in tensors]
    if missing:
        held = len([i for i in tensors if i < declared])
        raise DataError(f"{where}: {field} is {declared}, but the weights hold {held} of them "
                        f"(missing: {_spans(missing)}); eebench does not fill layers in at random",
                        hint=CONFIG_HINT)
    every = set().union(*tensors.values()) if tensors else set()
    for i in range(declared):
        lacking = sorted(every - tensors[i])
        if lacking:
            raise DataError(f"{path}: layer {i + 1} of the weights lacks {lacking[0]}"
                            + (f" and {len(lacking) - 1} more tensors" if len(lacking) > 1
                               else ""), hint="the weights are incomplete")
    return rows


def _spans(numbers: list[int]) -> str:
    """0-based indices as 1-based ranges: [6, 7, 8, 11] -> "7-9, 12"."""
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(f"{a + 1}" if a == b else f"{a + 1}-{b + 1}" for a, b in spans)


def check_tokenizer(path: Path, rows: int) -> None:
    """Tokenizer files present, each a regular file, and a vocabulary that fits the embedding
    matrix (`rows`). Without them transformers falls back to a tokenizer that knows no word; a
    FIFO in their place would block its reader."""
    from eebench.io import kind

    for name in (*TOKENIZER_FILES, *TOKENIZER_SIDE_FILES):
        file = path / name
        if os.path.lexists(file) and not file.is_file():
            raise DataError(f"{file}: is {kind(file)}, not a regular file", hint=SAVE_TOKENIZER)
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        raise DataError(f"{path}: no tokenizer files ({', '.join(TOKENIZER_FILES[:2])}, ...): "
                        "every word would be unknown to the model", hint=SAVE_TOKENIZER)
    size = _vocabulary(path)
    if size > rows:
        raise DataError(f"{path}: the tokenizer has {size:,} tokens, but the word embeddings "
                        f"have {rows:,} rows: its ids past {rows - 1} have no embedding",
                        hint="use the tokenizer saved with these weights")
    if size < rows - VOCAB_SLACK:
        raise DataError(f"{path}: the tokenizer has {size:,} tokens, but the word embeddings "
                        f"have {rows:,} rows: it is not the tokenizer these weights were "
                        "trained with", hint="use the tokenizer saved with these weights")


def _vocabulary(path: Path) -> int:
    """The number of token ids the directory's tokenizer gives (its added tokens included):
    from tokenizer.json where there is one (the fast tokenizer eebench uses), else from the
    tokenizer transformers builds out of the other files."""
    file = path / "tokenizer.json"
    if file.is_file():
        from tokenizers import Tokenizer

        with _open_regular(file) as f:
            raw = f.read(MAX_TOKENIZER + 1)
        if len(raw) > MAX_TOKENIZER:
            raise DataError(f"{file}: larger than {MAX_TOKENIZER >> 20} MiB: not a tokenizer")
        try:
            return Tokenizer.from_str(raw.decode("utf-8")).get_vocab_size(with_added_tokens=True)
        except Exception as e:  # noqa: BLE001 - tokenizers raises a bare Exception
            first = one_line(e)
            raise DataError(f"{file}: not a tokenizer: {first}") from None
    from transformers import AutoTokenizer
    from transformers.utils import logging

    verbosity = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        return len(AutoTokenizer.from_pretrained(str(path), use_fast=True))
    except (OSError, ValueError, TypeError, KeyError) as e:
        first = one_line(e)
        raise DataError(f"{path}: cannot load the tokenizer: {first}", hint=HINT) from e
    finally:
        logging.set_verbosity(verbosity)


def _state(path: Path) -> tuple:
    """The directory's identity and its files' names, sizes and modification times: a check
    that passed holds while they are unchanged."""
    entries = []
    try:
        with os.scandir(path) as it:
            for entry in it:
                try:
                    st = entry.stat()
                except OSError as e:
                    if e.errno not in (errno.ENOENT, errno.ELOOP):
                        raise
                    st = None
                entries.append((entry.name, None if st is None else (st.st_size, st.st_mtime_ns,
                                                                     st.st_ino)))
    except OSError:
        return (str(path), None)
    return (str(path.resolve()), tuple(sorted(entries, key=lambda e: e[0])))
