"""Shared CLI pieces: consoles, common options, JSON output, progress bars."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

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


def resolve_data_dir(data_dir: Path | None) -> Path | None:
    if data_dir is not None:
        return data_dir
    env = os.environ.get(DATA_DIR_ENV)
    return Path(env) if env else None


def print_json(obj: Any) -> None:
    typer.echo(json.dumps(obj, indent=2, sort_keys=False, default=str))


def progress(**kwargs):
    """A rich progress bar on stderr (disabled when stderr is not a terminal and CI is quiet)."""
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
        **kwargs,
    )
