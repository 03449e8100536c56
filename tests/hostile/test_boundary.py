"""The one error boundary (eebench.cli.app): what becomes one line, what keeps its traceback,
and what --debug and EEBENCH_DEBUG=1 change."""

from __future__ import annotations

import errno

import pytest

import eebench.tasks.catalog
from eebench.errors import expected
from tests.hostile.helpers import fails, invoke


def _raise(exc: BaseException):
    def fn(*args, **kwargs):
        raise exc
    return fn


@pytest.mark.parametrize("exc,needle", [
    (OSError(errno.ENOSPC, "No space left on device", "/data/x.json"),
     "/data/x.json: no space left on device"),
    (PermissionError(errno.EACCES, "Permission denied", "/data/x.json"),
     "/data/x.json: permission denied"),
    (IsADirectoryError(errno.EISDIR, "Is a directory", "/data"), "/data: is a directory"),
    (FileExistsError(errno.EEXIST, "File exists", "/data"), "/data: already exists"),
    (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"), "not UTF-8 text"),
    (OverflowError("int too large to convert"), "a number is out of range"),
])
def test_expected_failures_left_over_are_one_line(monkeypatch, exc, needle):
    monkeypatch.setattr(eebench.tasks.catalog, "all_tasks", _raise(exc))
    fails("tasks", code=1, needle=needle)


def test_an_interrupt_is_one_line_and_exit_130(monkeypatch):
    monkeypatch.setattr(eebench.tasks.catalog, "all_tasks", _raise(KeyboardInterrupt()))
    fails("tasks", code=130, prefix="interrupted: rerun the same command to resume")


def test_sigterm_met_as_an_interrupt_is_one_line_and_exit_143(monkeypatch):
    from eebench.errors import Terminated

    monkeypatch.setattr(eebench.tasks.catalog, "all_tasks", _raise(Terminated()))
    fails("tasks", code=143, prefix="terminated: rerun the same command to resume")


@pytest.mark.parametrize("exc", [ZeroDivisionError("a bug"), KeyError("a bug"),
                                 OSError(errno.ENXIO, "No such device or address")])
def test_a_bug_keeps_its_traceback(monkeypatch, exc):
    monkeypatch.setattr(eebench.tasks.catalog, "all_tasks", _raise(exc))
    result = invoke("tasks")
    assert result.exit_code == 1 and result.exception is exc  # not swallowed: shown in full


@pytest.mark.parametrize("how", ["option", "environment"])
def test_debug_shows_the_traceback_of_an_expected_failure_too(monkeypatch, how):
    if how == "environment":
        monkeypatch.setenv("EEBENCH_DEBUG", "1")
    result = invoke(*(["--debug"] if how == "option" else []), "tasks", "--benchmark", "nope")
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[-1] == ("error: unknown benchmark 'nope' (hint: choose from: glue, elue, ner, "
                         "decoder)")


def test_without_debug_the_same_failure_is_one_line(monkeypatch):
    monkeypatch.setenv("EEBENCH_DEBUG", "0")
    fails("tasks", "--benchmark", "nope", code=2, needle="unknown benchmark 'nope'")


def test_a_group_alone_still_prints_its_help():
    for args in ([], ["data"], ["leaderboard"]):
        result = invoke(*args)
        assert "Usage:" in result.output and "Traceback" not in result.output


def test_expected_names_the_file_that_is_in_the_way(tmp_path):
    (tmp_path / "a-file").write_text("x")
    err = expected(NotADirectoryError(errno.ENOTDIR, "Not a directory",
                                      str(tmp_path / "a-file" / "b" / "c.json")))
    assert str(err) == f"{tmp_path / 'a-file'}: is a file, where a directory is needed"
    assert expected(ValueError("a bug")) is None
