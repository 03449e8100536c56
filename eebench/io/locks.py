"""The one way eebench takes a lock: an exclusive flock on a regular file of its own.

Runs (`<run>/.lock`), checkpoints being trained or imported (`.<key>.lock` beside them) and the
bundled model's extraction each hold a lock file while they work, so that two processes never
write one directory at once; the operating system drops a flock when its process ends, however
it ends. Whatever sits at a lock file's path is treated as possibly planted: it is opened without
following a symbolic link (a link's target is never created, truncated or locked), without
blocking (a FIFO would wait forever for its other end), created where missing but never
truncated, and checked on the open descriptor to be a regular file. Anything else (a link, a
FIFO, a device, a socket, a directory) is refused in one line naming the file, before any work.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from eebench.errors import DataError, EebenchError
from eebench.io.files import regular_fd

HINT = "eebench makes its lock files itself, as regular files: remove it and rerun the command"
_FLAGS = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)  # never O_TRUNC


def _open(path: Path) -> int:
    """The lock file at `path` opened (created where missing), or one line saying what is there
    instead of a regular file."""
    try:
        return regular_fd(path, _FLAGS, HINT)
    except IsADirectoryError:
        raise DataError(f"{path}: is a directory, not a regular file", hint=HINT) from None


def take_lock(path: Path, wait: bool = True) -> BinaryIO | None:
    """An exclusive lock on the lock file `path`, held while the returned file stays open. With
    `wait`, blocks until another process has let it go; without, returns None at once when
    another process holds it."""
    f = os.fdopen(_open(Path(path)), "r+b", buffering=0)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: one process at a time is assumed
        return f
    try:
        fcntl.flock(f, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        f.close()
        return None
    except BaseException:
        f.close()
        raise
    return f


@contextmanager
def locked(path: Path, wait: bool = True) -> Iterator[bool]:
    """`take_lock` for the block: yields whether the lock is held (always, with `wait`); it is
    let go when the block ends."""
    f = take_lock(path, wait)
    try:
        yield f is not None
    finally:
        if f is not None:
            f.close()


def held_elsewhere(path: Path) -> bool:
    """Whether another process holds the lock file `path` (asked without taking it for longer
    than the question, and without creating it). Anything but a regular file there is held by
    nobody: the process that takes it refuses it in one line."""
    try:
        fd = regular_fd(Path(path), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except (OSError, EebenchError):
        return False
    try:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except ImportError:  # pragma: no cover - not POSIX
        return False
    finally:
        os.close(fd)
    return False
