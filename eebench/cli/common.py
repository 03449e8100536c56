"""Shared CLI pieces: consoles, common options, output paths checked before any work, JSON output,
progress bars."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from eebench.errors import DataError, EebenchError

# Progress and tables go to stderr; --json output goes to stdout alone. Tables wrap to fit a
# terminal, and stay unwrapped (160 columns) in a log or CI file.
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 160)

DATA_DIR_ENV = "EEBENCH_DATA_DIR"

DataDirOption = typer.Option(
    None,
    "--data-dir",
    help=f"Local GLUE/ELUE TSV directory (default: ${DATA_DIR_ENV}; else the Hugging Face hub).",
    show_default=False,
)
JsonOption = typer.Option(False, "--json", help="Print machine-readable JSON to stdout.")


def resolve_data_dir(data_dir: Path | None, exit_code: int = 1) -> Path | None:
    """--data-dir, else EEBENCH_DATA_DIR; one that exists as anything but a directory (a file, a
    FIFO) is refused before any work, naming what it is (with `exit_code`)."""
    if data_dir is None:
        env = os.environ.get(DATA_DIR_ENV)
        data_dir = Path(env) if env else None
    if data_dir is not None and data_dir.exists() and not data_dir.is_dir():
        from eebench.io import not_a_directory

        raise DataError(f"{data_dir}: {not_a_directory(data_dir)}",
                        hint="--data-dir (or EEBENCH_DATA_DIR) names a local GLUE/ELUE TSV "
                             "directory", exit_code=exit_code)
    return data_dir


def _first_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def out_file(path: Path | None, what: str = "the output file", option: str = "--out",
             example: str = "out.json") -> Path | None:
    """Refuse, before any work, an output file that cannot be written: an existing directory,
    or a file where one of its parent directories should be (one line, exit code 1)."""
    if path is None:
        return None
    if path.is_dir():
        raise EebenchError(f"{path}: cannot write {what} (it is a directory)",
                           hint=f"{option} names a file, e.g. {option} {path / example}")
    ancestor = _first_existing(path.parent)
    if not ancestor.is_dir():
        raise EebenchError(f"{path}: cannot write {what} ({ancestor} is a file, not a directory)")
    return path


def out_dir(path: Path | None, what: str = "the output", option: str = "--out"
            ) -> Path | None:
    """Refuse, before any work, an output directory that is an existing file, or lies under
    one (one line, exit code 1)."""
    if path is None:
        return None
    from eebench.io import kind

    ancestor = _first_existing(path)
    if ancestor == path and not path.is_dir():
        raise EebenchError(f"{path}: cannot write {what} (it is {kind(path)})",
                           hint=f"{option} names a directory")
    if not ancestor.is_dir():
        raise EebenchError(f"{path}: cannot write {what} ({ancestor} is {kind(ancestor)}, not a "
                           "directory)")
    _check_writable(path, ancestor, what)
    return path


def _check_writable(path: Path, ancestor: Path, what: str) -> None:
    """The directory that exists, `path` or its first existing parent, takes new files: a
    read-only file system or a directory without write permission is refused before any work
    (not after hours of training, at the first save)."""
    if os.access(ancestor, os.W_OK | os.X_OK):
        return
    try:
        read_only = bool(os.statvfs(ancestor).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):  # no statvfs (Windows)
        read_only = False
    why = "a read-only file system" if read_only else "no permission to write there"
    raise EebenchError(f"{path}: cannot write {what} ({ancestor}: {why})",
                       hint="choose a writable path")


def print_json(obj: Any) -> None:
    typer.echo(json.dumps(obj, indent=2, sort_keys=False, default=str))


def progress(**kwargs):
    """A rich progress bar on stderr; off when stderr is not a terminal (a log, a pipe, CI),
    where it would leave only a blank line before a command's result or its one-line error."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[info]}"),
        console=err_console,
        **{"disable": not err_console.is_terminal, **kwargs},
    )
