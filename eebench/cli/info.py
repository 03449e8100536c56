"""`eebench tasks`: the built-in task specs, as a table or as JSON."""

from __future__ import annotations

import typer

from eebench.cli.app import app
from eebench.cli.common import JsonOption, err_console, print_json
from eebench.errors import UsageError

PANEL = "Tasks and data"
BENCHMARKS = ("glue", "elue", "ner", "decoder")


@app.command("tasks", rich_help_panel=PANEL)
def tasks(
    benchmark: str | None = typer.Option(
        None, "--benchmark", "-b", help="Only tasks of this benchmark: glue, elue, ner or decoder."
    ),
    as_json: bool = JsonOption,
) -> None:
    """List the GLUE, ELUE, NER and decoder tasks: labels, metrics, splits and data sources."""
    from eebench.tasks.catalog import all_tasks

    if benchmark is not None and benchmark.lower() not in BENCHMARKS:
        raise UsageError(f"unknown benchmark {benchmark!r}",
                         hint=f"choose from: {', '.join(BENCHMARKS)}")
    specs = [s for s in all_tasks() if benchmark is None or s.benchmark == benchmark.lower()]
    if as_json:
        print_json([s.to_dict() for s in specs])
        return

    from rich.table import Table

    from eebench.models.units import unit_of

    table = Table(title=f"{len(specs)} tasks", title_justify="left")
    for col in ("task", "bench", "title", "type", "labels", "metrics", "splits", "hub"):
        table.add_column(col, overflow="fold")
    for s in specs:
        kind = "regression" if s.is_regression else f"{s.num_labels}-way"
        if unit_of(s.unit).per_token:  # sequence labelling: the files' tag scheme; loaded as IOB2
            kind = f"{s.num_labels} tags per word, {s.scheme} files" + (
                ", read as IOB2" if s.scheme != "IOB2" else "")
        if unit_of(s.unit).generates:  # a decoder task: a next token per position, no labels
            kind = f"{s.decoding} next token"
        labels = ("tokens" if unit_of(s.unit).generates else "score") if s.labels is None else (
            " ".join(s.labels))
        metrics = " ".join(f"[bold]{m}[/]" if m == s.main_metric else m for m in s.metrics)
        splits = " ".join(x if x in s.local else f"{x}†" if s.package and x == s.package.split
                          else f"{x}*" for x in s.splits)
        hub = "—" if s.hub is None else "/".join(p for p in (s.hub.path, s.hub.name) if p)
        table.add_row(s.name, s.benchmark, s.title, kind, labels, metrics, splits, hub)
    err_console.print(table)
    err_console.print("[dim]bold: main metric; *: dev split carved from train (seeded, stratified)")
    if any(s.package for s in specs):
        err_console.print("[dim]†: shipped in a PyPI package (" + ", ".join(sorted(
            {s.package.distribution for s in specs if s.package})) + ")")
    if any(unit_of(s.unit).generates for s in specs):
        err_console.print("[dim]decoder tasks: scored against the full model's own tokens "
                          "(agreement, %); rows, window and generated tokens are run settings")
    if any(unit_of(s.unit).per_token for s in specs):
        err_console.print("[dim]entity_f1: entity-level micro F1 (seqeval, conlleval's "
                          "chunks); a row is a sentence")
