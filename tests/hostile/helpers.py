"""What every hostile case checks: the exit code, exactly one line on stderr (no traceback), and
that the files involved are as they were."""

from __future__ import annotations

import errno
import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.cli import invoke
from tests.conftest import REPO

LIMIT_S = 60  # for a case in its own process: far above what it takes, far below "forever"


def _describe(result) -> str:
    return (f"exit {result.exit_code}\n--- stderr\n{result.stderr}\n--- exception\n"
            f"{result.exception!r}")


def fails(*args: object, code: int, needle: str | None = None, prefix: str = "error: ",
          banner: bool = False, report: bool = False, env: dict[str, str] | None = None) -> str:
    """Run `eebench *args`; assert exit `code`, one line on stderr starting with `prefix` (and
    holding `needle`), nothing on stdout, no traceback. `banner`: a run or training may have
    said what it starts before failing; the error is then its only error line, the last.
    `report`: a check that prints its --json report on stdout before failing."""
    result = invoke(*args, env=env)
    assert result.exit_code == code, _describe(result)
    assert result.exception is None or isinstance(result.exception, SystemExit), _describe(result)
    assert "Traceback" not in result.output, _describe(result)
    assert report or result.stdout == "", _describe(result)
    lines = result.stderr.splitlines()
    if banner:
        lines = [line for line in lines if line.strip()]
        assert [line for line in lines if line.startswith("error")] == lines[-1:], _describe(result)
        lines = lines[-1:]
    assert len(lines) == 1, _describe(result)
    assert lines[0].startswith(prefix), _describe(result)
    if needle is not None:
        assert needle in lines[0], _describe(result)
    return lines[0]


def fails_within(*args: object, code: int, needle: str, prefix: str = "error: ",
                 env: dict[str, str] | None = None, limit: float = LIMIT_S,
                 banner: bool = False, max_memory: int | None = None) -> str:
    """`eebench *args` in its own process, so that a case that would wait forever fails instead
    of hanging the suite: it ends within `limit` seconds with exit `code` and one line on stderr
    (holding `needle`; with `banner`, the last of the lines it printed, the only error), no
    traceback. `max_memory` (bytes of address space) keeps a regression that reads without end
    (a link to /dev/zero) from filling the machine."""
    import pytest

    def capped() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (max_memory, max_memory))

    start = time.perf_counter()
    try:
        result = subprocess.run([sys.executable, "-m", "eebench", *map(str, args)],
                                capture_output=True, text=True, timeout=limit, cwd=REPO,
                                env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL,
                                preexec_fn=capped if max_memory else None)
    except subprocess.TimeoutExpired:
        pytest.fail(f"eebench {' '.join(map(str, args))} still running after {limit} s")
    said = f"exit {result.returncode}\n--- stderr\n{result.stderr}"
    assert result.returncode == code, said
    assert "Traceback" not in result.stderr, said
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    if banner:
        assert [line for line in lines if line.startswith("error")] == lines[-1:], said
        lines = lines[-1:]
    assert len(lines) == 1 and lines[0].startswith(prefix) and needle in lines[0], said
    assert time.perf_counter() - start < limit
    return lines[0]


def snapshot(*roots: Path) -> dict[str, str | None]:
    """Every file and directory under `roots`: content hash, "dir", or None where absent."""
    state: dict[str, str | None] = {}
    for root in map(Path, roots):
        if not root.exists():
            state[str(root)] = None
            continue
        for p in [root, *sorted(root.rglob("*"))] if root.is_dir() else [root]:
            if p.is_dir():
                state[str(p)] = "dir"
            elif p.is_file():  # a FIFO or a device is noted as what it is, never read
                state[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
            else:
                state[str(p)] = "special"
    return state


@contextmanager
def unchanged(*roots: Path) -> Iterator[None]:
    """The block leaves every file and directory under `roots` as it was."""
    before = snapshot(*roots)
    yield
    after = snapshot(*roots)
    added = sorted(set(after) - set(before))
    changed = sorted(k for k in before if before[k] != after.get(k))
    assert not added and not changed, f"written: {added}; changed or removed: {changed}"


def fill_disk(monkeypatch, when: Callable[[str], bool] = lambda target: True) -> None:
    """From now on, moving a written file into place fails as on a full disk (ENOSPC), for
    targets `when` accepts: the last step of every atomic write in eebench."""
    real = os.replace

    def replace(src, dst, *args, **kwargs):
        if when(str(dst)):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)


def temporaries(*roots: Path) -> list[Path]:
    """Temporary files or directories of an atomic write left behind under `roots`."""
    return [p for root in roots if Path(root).exists() for p in Path(root).rglob(".*")
            if ".tmp" in p.name]


@contextmanager
def tmpfs(where: Path, options: str) -> Iterator[Path]:
    """A tmpfs mounted at `where` with `options` (e.g. "size=64k", "ro,size=64k"), unmounted
    when the block ends; the test is skipped where mounting needs what it does not have."""
    import shutil
    import subprocess
    import sys

    import pytest

    if sys.platform != "linux" or os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root on Linux")
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
