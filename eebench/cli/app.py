"""The `eebench` command line: thin. It parses options, calls the pipeline stages, prints with rich.

Heavy libraries (torch, transformers, matplotlib) are imported inside commands so that
`eebench --help` stays fast. Every EebenchError is caught here, at one boundary, and mapped to
its exit code with a one-line message on stderr.
"""

from __future__ import annotations

import typer
from typer.core import TyperGroup

from eebench.errors import EebenchError


class _Group(TyperGroup):
    def invoke(self, ctx):  # noqa: D401 - click hook
        try:
            return super().invoke(ctx)
        except EebenchError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(e.exit_code) from None
        except KeyboardInterrupt:
            typer.echo("interrupted: rerun the same command to resume", err=True)
            raise typer.Exit(130) from None


def make_app(help: str) -> typer.Typer:
    return typer.Typer(
        cls=_Group,
        help=help,
        no_args_is_help=True,
        rich_markup_mode="rich",
        context_settings={"help_option_names": ["-h", "--help"]},
        pretty_exceptions_enable=False,
    )


app = make_app(
    "Benchmark early-exit transformer classifiers, ELUE-style: fine-tune, sweep exit "
    "thresholds, count FLOPs, score against a reference curve, submit."
)


def _version(value: bool) -> None:
    if value:
        from eebench import __version__

        typer.echo(f"eebench {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Show the version and exit."
    ),
) -> None:
    """Benchmark early-exit transformer classifiers, ELUE-style."""


def main() -> None:
    app()
