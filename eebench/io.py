"""Files, written whole or not at all, and read back with one-line errors; content hashes.

Every file eebench writes goes through `atomic_path`: the content is written to a temporary file
in the same directory and renamed over the target, so a reader (or a crash, or a full disk) never
sees half a file. Every JSON file it reads goes through `read_json` / `read_model`, so a missing,
undecodable or invalid file is one line naming the file.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from eebench.errors import DataError

M = TypeVar("M", bound=BaseModel)
HASH_CHUNK = 1 << 20

_UMASK = os.umask(0o022)
os.umask(_UMASK)


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path next to `path` to write to; renamed over `path` when the block ends
    without an error, removed otherwise. Created files are readable by others (results are for
    sharing), whatever mode the writer used."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` (UTF-8) to `path` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: Path, obj: BaseModel | Any) -> None:
    """A pydantic model or plain JSON data, indented, atomically."""
    data = obj.model_dump(mode="json") if isinstance(obj, BaseModel) else obj
    atomic_write_text(path, json.dumps(data, indent=2) + "\n")


def _one_line(text: str, n: int = 200) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= n else line[: n - 3] + "..."


def read_text(path: Path, hint: str | None = None) -> str:
    """A UTF-8 text file's content; missing, a directory, unreadable or undecodable is one line."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{path}: missing", hint=hint) from None
    except IsADirectoryError:
        raise DataError(f"{path}: is a directory, not a file", hint=hint) from None
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not UTF-8 text (byte {e.start})", hint=hint) from None
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror})", hint=hint) from None


def read_json(path: Path, hint: str | None = None) -> Any:
    """Parsed JSON of a file, or one DataError line naming the file."""
    text = read_text(path, hint)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(f"{path}: not JSON ({e.msg}, line {e.lineno})", hint=hint) from None


def read_model(path: Path, model: type[M], hint: str | None = None) -> M:
    """A pydantic model from a JSON file, or one DataError line naming the file and the field."""
    text = read_text(path, hint)
    try:
        return model.model_validate_json(text)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "(top level)"
        raise DataError(f"{path}: not a valid {model.__name__}: {where}: "
                        f"{_one_line(err['msg'], 120)}", hint=hint) from None


def sha256_file(path: Path) -> str:
    """The sha256 of a file's bytes, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(HASH_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def config_hash(data: Any) -> str:
    """A short, stable hash of JSON-able data (sorted keys): names run and checkpoint dirs."""
    blob = json.dumps(data, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:12]
