"""Files, written whole or not at all, and read back with one-line errors; content hashes.

Every file eebench writes goes through `atomic_path`: the content is written to a temporary file
in the same directory and renamed over the target, so a reader (or a crash, or a full disk) never
sees half a file; files that belong together go through `atomic_files`, renamed together at the
end. A failed write leaves nothing behind (no temporary file, no directory it created), and its
OSError names the file asked for, not the temporary one. Every JSON file it reads goes through
`read_json` / `read_model`, so a missing, undecodable or invalid file is one line naming the file.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ValidationError, model_serializer

from eebench.errors import DataError, kind, one_line  # kind: re-exported (errors.py defines it)

M = TypeVar("M", bound=BaseModel)
HASH_CHUNK = 1 << 20

_UMASK = os.umask(0o022)
os.umask(_UMASK)


def _make_parents(directory: Path) -> list[Path]:
    """Create `directory` and its missing parents; returns the ones created, outermost first."""
    missing = []
    d = directory
    while not d.exists() and d != d.parent:
        missing.append(d)
        d = d.parent
    if not d.is_dir():  # a file where a directory should be: name it
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(d))
    missing.reverse()
    for m in missing:
        m.mkdir(exist_ok=True)
    return missing


def _remove_empty(created: list[Path]) -> None:
    """Remove the directories a failed write created, innermost first, while they are empty."""
    for d in reversed(created):
        try:
            d.rmdir()
        except OSError:
            return


def _naming(e: OSError, path: Path, tmp: Path | None) -> OSError:
    """`e` naming the file the user asked for, `path`, instead of its temporary file (or of no
    file: a failed write names none); `e` itself when it is about another file."""
    if e.errno is None or e.filename not in (None, str(tmp) if tmp is not None else None):
        return e
    return OSError(e.errno, e.strerror, str(path))  # the errno's own subclass (IsADirectoryError)


def _reraise(e: OSError, path: Path, tmp: Path | None) -> None:
    named = _naming(e, path, tmp)
    if named is e:
        raise e
    raise named from e


def _temporary(path: Path, created: list[Path]) -> Path:
    """An empty temporary file next to `path`, creating its directory (recorded in `created`).
    A directory where the file should go is refused before anything is written."""
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    created += _make_parents(path.parent)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:  # no space, no permission: for the file the user asked for
        raise OSError(e.errno, e.strerror, str(path)) from e
    os.close(fd)
    return Path(tmp)


def _commit(tmp: Path, path: Path) -> None:
    os.chmod(tmp, 0o666 & ~_UMASK)
    try:
        os.replace(tmp, path)
    except OSError as e:
        _reraise(e, path, tmp)


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path next to `path` to write to; renamed over `path` when the block ends
    without an error, removed otherwise (with any directory it created), so `path` is whole or
    untouched. Created files are readable by others (results are for sharing), whatever mode the
    writer used. An OSError of the write or the rename names `path`, not the temporary file."""
    path = Path(path)
    created: list[Path] = []
    tmp = None
    try:
        tmp = _temporary(path, created)
        try:
            yield tmp
        except OSError as e:
            _reraise(e, path, tmp)
        _commit(tmp, path)
    except BaseException:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
        _remove_empty(created)
        raise


class Staging:
    """Files written together (`atomic_files`): each to a temporary file next to its target."""

    def __init__(self) -> None:
        self.pending: list[tuple[Path, Path]] = []  # (temporary, target)
        self.created: list[Path] = []

    @contextmanager
    def path(self, target: Path) -> Iterator[Path]:
        """A temporary path to write `target` to; it replaces `target` when the batch ends."""
        target = Path(target)
        tmp = _temporary(target, self.created)
        self.pending.append((tmp, target))
        try:
            yield tmp
        except OSError as e:
            _reraise(e, target, tmp)

    def write_text(self, target: Path, text: str) -> None:
        with self.path(target) as tmp:
            tmp.write_text(text, encoding="utf-8")

    def commit(self) -> None:
        while self.pending:
            tmp, target = self.pending[0]
            _commit(tmp, target)
            self.pending.pop(0)

    def discard(self) -> None:
        for tmp, _ in self.pending:
            tmp.unlink(missing_ok=True)
        self.pending.clear()
        _remove_empty(self.created)


@contextmanager
def atomic_files() -> Iterator[Staging]:
    """Several files that appear together or not at all: `staging.path(target)` and
    `staging.write_text(target, text)` write temporary files; when the block ends without an
    error they are renamed over their targets (renames need no space), else every one is removed
    with the directories they created. (Only a crash between two renames leaves some of the new
    files beside some of the old ones: each file is still whole.)"""
    staging = Staging()
    try:
        yield staging
        staging.commit()
    except BaseException:
        staging.discard()
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` (UTF-8) to `path` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: Path, obj: BaseModel | Any) -> None:
    """A pydantic model or plain JSON data, indented, atomically."""
    data = obj.model_dump(mode="json") if isinstance(obj, BaseModel) else obj
    atomic_write_text(path, json.dumps(data, indent=2) + "\n")


# Every file eebench reads is a regular file of bounded size: a FIFO would block the reader
# forever, a device (a link to /dev/zero) would never end. Generous for its own files (a run's
# points, a model's config); callers reading files from anyone pass a smaller bound.
MAX_READ_BYTES = 1 << 30


def not_a_directory(path: Path, of: str = "") -> str:
    """Why `path` is no directory, for a message: "no such directory", "is a file, not a
    directory", "is a FIFO (named pipe), not a directory"; `of` (" of submissions") follows."""
    what = kind(path)
    return f"no such directory{of}" if what == "missing" else f"is {what}, not a directory{of}"


def not_a_file(path: Path) -> str:
    """Why `path` is no regular file, for a message: "not found", "is a directory, not a file",
    "is a FIFO (named pipe), not a regular file", "is a character device, not a regular file"
    (a link to /dev/zero)."""
    what = kind(path)
    if what == "missing":
        return "not found"
    return f"is {what}, not a file" if what == "a directory" else f"is {what}, not a regular file"


def regular_fd(path: Path, flags: int, hint: str | None = None) -> int:
    """`path` opened with `flags`, checked on the open descriptor to be a regular file: opened
    without blocking (a FIFO would wait for its other end) and closed on exec, a FIFO, a device
    or a socket refused in one DataError line, and so is a symbolic link where `flags` hold
    O_NOFOLLOW. Missing, a directory, no permission: the OSError."""
    flags |= getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as e:
        if e.errno == errno.ENXIO:  # a socket, or a FIFO with no writer on some systems
            raise DataError(f"{path}: is {kind(path)}, not a regular file", hint=hint) from None
        if e.errno == errno.ELOOP and flags & getattr(os, "O_NOFOLLOW", 0) and \
                os.path.islink(path):
            raise DataError(f"{path}: is a symbolic link, not a regular file", hint=hint) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(mode):
            raise DataError(f"{path}: is {kind(path)}, not a regular file", hint=hint)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


def _open_regular(path: Path, hint: str | None = None):
    """`path` opened for reading in binary, a regular file (`regular_fd`)."""
    return os.fdopen(regular_fd(path, os.O_RDONLY, hint), "rb")


def read_bytes(path: Path, max_bytes: int = MAX_READ_BYTES, hint: str | None = None) -> bytes:
    """A regular file's bytes, at most `max_bytes`, or one DataError line naming the file. A
    FIFO, a device or a socket is refused without being read (opened without blocking, its type
    checked on the open descriptor), and so is a file over the bound."""
    path = Path(path)
    try:
        with _open_regular(path, hint) as f:
            size = os.fstat(f.fileno()).st_size
            if size > max_bytes:
                raise DataError(f"{path}: {size:,} bytes, over the {max_bytes:,}-byte limit",
                                hint=hint)
            data = f.read(max_bytes + 1)  # the file may have grown since fstat
    except FileNotFoundError:
        raise DataError(f"{path}: missing", hint=hint) from None
    except IsADirectoryError:
        raise DataError(f"{path}: is a directory, not a file", hint=hint) from None
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror})", hint=hint) from None
    if len(data) > max_bytes:
        raise DataError(f"{path}: over the {max_bytes:,}-byte limit", hint=hint)
    return data


def read_text(path: Path, hint: str | None = None, max_bytes: int = MAX_READ_BYTES) -> str:
    """A UTF-8 text file's content; missing, a directory, not a regular file (a FIFO, a device),
    over `max_bytes`, unreadable or undecodable is one line."""
    data = read_bytes(path, max_bytes, hint)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not UTF-8 text (byte {e.start})", hint=hint) from None


def parse_json_text(text: str | bytes, where: Any, hint: str | None = None) -> Any:
    """Parsed JSON, or one DataError line naming `where` (nesting too deep included)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(f"{where}: not JSON ({e.msg}, line {e.lineno})", hint=hint) from None
    except RecursionError:
        raise DataError(f"{where}: not JSON eebench reads (nested too deeply)",
                        hint=hint) from None


def read_json(path: Path, hint: str | None = None, max_bytes: int = MAX_READ_BYTES) -> Any:
    """Parsed JSON of a file, or one DataError line naming the file."""
    return parse_json_text(read_text(path, hint, max_bytes), path, hint)


def read_model(path: Path, model: type[M], hint: str | None = None) -> M:
    """A pydantic model from a JSON file, or one DataError line naming the file and the field."""
    return validated(model, read_text(path, hint), path, hint=hint)


def validated(model: type[M], data: Any, where: Any, what: str | None = None,
              hint: str | None = None) -> M:
    """`data` (parsed, or JSON text) as `model`, or one DataError line: where, what it should have
    been, the first invalid field and why."""
    try:
        if isinstance(data, str | bytes):
            return model.model_validate_json(data)
        return model.model_validate(data)
    except RecursionError:
        raise DataError(f"{where}: not a valid {what or model.__name__}: nested too deeply",
                        hint=hint) from None
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(x) for x in err["loc"]) or "(top level)"
        raise DataError(f"{where}: not a valid {what or model.__name__}: {field}: "
                        f"{one_line(err['msg'], 120, cut='...')}", hint=hint) from None


def sha256_file(path: Path) -> str:
    """The sha256 of a regular file's bytes, read in chunks (a FIFO or a device is a DataError,
    never read)."""
    h = hashlib.sha256()
    with _open_regular(Path(path)) as f:
        while chunk := f.read(HASH_CHUNK):
            h.update(chunk)
    return h.hexdigest()


class AddedLater(BaseModel):
    """A record whose fields added after records were written (`ADDED_LATER`) are left out of
    its serialisation while at their default: a record that does not use them serialises, and
    so hashes (a run's key, `config_hash`), as it did. The one mechanism that keeps run keys and
    earlier files stable."""

    ADDED_LATER: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _added_later_left_out(self, handler: Any) -> dict[str, Any]:
        return left_out_at_default(handler(self), self, self.ADDED_LATER)


def left_out_at_default(data: dict[str, Any], model: BaseModel, names: tuple[str, ...]
                        ) -> dict[str, Any]:
    """`data` (`model` serialised) without the fields `names` where `model` holds their
    default."""
    fields = type(model).model_fields
    for name in names:
        if getattr(model, name) == fields[name].get_default(call_default_factory=True):
            data.pop(name, None)
    return data


def config_hash(data: Any) -> str:
    """A short, stable hash of JSON-able data (sorted keys): names run and checkpoint dirs."""
    blob = json.dumps(data, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:12]
