"""`eebench methods`: the registered early-exit methods (built-in and plugins), as plain data."""

from __future__ import annotations

from eebench.cli.app import app
from eebench.cli.common import JsonOption, err_console, print_json

PANEL = "Methods and models"


@app.command("methods", rich_help_panel=PANEL)
def methods(as_json: bool = JsonOption) -> None:
    """List the early-exit methods: paper, sweep parameter, regression support, settings."""
    from eebench.methods.base import METHODS, get_method

    rows = [get_method(name).describe() for name in METHODS.names()]
    if as_json:
        print_json(rows)
        return

    from rich.table import Table

    table = Table(title=f"{len(rows)} methods", title_justify="left")
    for col in ("method", "sweep", "regression", "settings", "paper"):
        table.add_column(col, overflow="fold")
    for r in rows:
        settings = " ".join(f"{k}={v}" for k, v in r["settings"].items()) or "—"
        sweep = f"{r['sweep_param']} ({r['trains']})"
        table.add_row(r["name"], sweep, "yes" if r["supports_regression"] else "no", settings,
                      r["paper"])
    err_console.print(table)
    err_console.print("[dim]details and default sweeps: docs/methods.md")


@app.command("backbones", rich_help_panel=PANEL)
def backbones(as_json: bool = JsonOption) -> None:
    """List the registered backbone names and how their exit heads pool by default (any local
    model directory or hub id works too)."""
    from eebench.errors import EebenchError
    from eebench.models.backbones import BACKBONES, default_pooling

    def pooling(name: str) -> str | None:
        try:
            return default_pooling(name)
        except EebenchError:  # e.g. a bundled model whose package is not installed
            return None

    from eebench.train.config import TrainConfig

    rows = [{"name": name, "description": b.description, "pooling": pooling(name),
             "lr": b.lr or TrainConfig().lr} for name, b in BACKBONES.items()]
    if as_json:
        print_json(rows)
        return

    from rich.table import Table

    table = Table(title=f"{len(rows)} backbones", title_justify="left")
    table.add_column("model")
    table.add_column("pooling")
    table.add_column("lr", justify="right")
    table.add_column("description", overflow="fold")
    for r in rows:
        table.add_row(r["name"], r["pooling"] or "?", f"{r['lr']:g}", r["description"])
    err_console.print(table)
    err_console.print("[dim]--model also takes a local model directory or a Hugging Face hub id; "
                      "--pooling cls|mean overrides the default pooling, --lr the learning rate")
