"""Files, written whole or not at all, and read back with one-line errors; content hashes; whether
the Hugging Face hub can be reached.

Every file eebench writes goes through `atomic_path`: the content is written to a temporary file
in the same directory and renamed over the target, so a reader (or a crash, or a full disk) never
sees half a file. Every JSON file it reads goes through `read_json` / `read_model`, so a missing,
undecodable or invalid file is one line naming the file.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlparse

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


# ------------------------------------------------------------------------------------- the hub
HUB_PROBE_TIMEOUT_S = 3.0
_OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")
_PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")


def hub_offline_mode() -> bool:
    """The user said offline (HF_HUB_OFFLINE and its datasets/transformers twins)."""
    return any(os.environ.get(n, "").strip().upper() in {"1", "ON", "YES", "TRUE"}
               for n in _OFFLINE_VARIABLES)


def hub_unreachable() -> str | None:
    """The hub's host when it cannot be reached within a few seconds, else None, so that a load
    fails in seconds rather than after the hub client's retry loop. Behind a proxy the answer is
    None: the proxy may reach what a direct connection cannot."""
    if any(os.environ.get(v) for v in _PROXY_VARIABLES):
        return None
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    host, port = url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)
    try:
        socket.create_connection((host, port), timeout=HUB_PROBE_TIMEOUT_S).close()
    except OSError:
        return host
    return None
