"""The `eebench` command line: thin. It parses options, calls the pipeline stages, prints with rich.

Heavy libraries (torch, transformers, matplotlib) are imported inside commands so that
`eebench --help` stays fast.

This is the one error boundary (docs/reliability.md). Every expected failure ends as one line on
stderr and an exit code: an EebenchError (raised where the failure happened, naming the file) with
its own code (1: bad input or the environment, 2: usage); a command-line usage error, 2; what
remains of the expected kinds (an OSError the user can act on: no space, permission, a directory for
a file and the like; undecodable text; numeric overflow), 1, naming the file where the error does;
an interrupt, 130 (SIGTERM, 143: met as Ctrl-C is, training saving its checkpoint; the signals
after the first are ignored while the command ends). Anything else is a bug and keeps its
traceback. `eebench --debug ...` or EEBENCH_DEBUG=1 prints the traceback of
expected failures too, before their line.
"""

from __future__ import annotations

import inspect
import os
import sys
import traceback

import typer
from typer.core import TyperGroup

from eebench.errors import EebenchError, Terminated, expected, printable, terminate_as_interrupt

try:  # typer carries its own copy of click since 0.20
    from typer._click.exceptions import NoArgsIsHelpError
    from typer._click.exceptions import UsageError as ClickUsageError
except ImportError:  # pragma: no cover - an older typer on click
    from click.exceptions import NoArgsIsHelpError
    from click.exceptions import UsageError as ClickUsageError

DEBUG_ENV = "EEBENCH_DEBUG"
INTERRUPTED = "interrupted: rerun the same command to resume"
TERMINATED = "terminated: rerun the same command to resume"
# What the boundary turns into one line; an OSError only for the errno values it knows.
EXPECTED = (EebenchError, ClickUsageError, OSError, UnicodeDecodeError, OverflowError,
            KeyboardInterrupt)


def debug_requested(ctx=None) -> bool:
    """`eebench --debug ...` (read from the root context) or EEBENCH_DEBUG=1."""
    if os.environ.get(DEBUG_ENV, "").strip().lower() in ("1", "true", "yes", "on"):
        return True
    return bool(ctx is not None and ctx.find_root().params.get("debug"))


def _usage_line(e: ClickUsageError) -> str:
    message = e.format_message().strip()
    return message + (f" (hint: {e.ctx.command_path} --help)" if e.ctx is not None else "")


def _fail(e: BaseException, ctx) -> typer.Exit:
    """The exit for an expected failure, after its one line (and with --debug its traceback);
    re-raises `e` as it is when it is a bug."""
    if isinstance(e, Terminated):  # SIGTERM: 128 + 15, as a shell reports it
        line, code = TERMINATED, 143
    elif isinstance(e, KeyboardInterrupt):
        line, code = INTERRUPTED, 130
    elif isinstance(e, ClickUsageError):
        line, code = f"error: {_usage_line(e)}", e.exit_code
    else:
        err = expected(e)
        if err is None:  # not a failure a user can act on: a bug, shown with its traceback
            raise e
        line, code = f"error: {err}", err.exit_code
    if debug_requested(ctx):
        traceback.print_exception(type(e), e, e.__traceback__, file=sys.stderr)
    typer.echo(printable(line), err=True)
    return typer.Exit(code)


class _Group(TyperGroup):
    def make_context(self, info_name, args, parent=None, **extra):  # noqa: D401 - click hook
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except NoArgsIsHelpError:
            raise  # `eebench` alone prints the help
        except ClickUsageError as e:  # a bad option of the root command itself
            raise _fail(e, parent) from None

    def format_help(self, ctx, formatter):  # noqa: D401 - click hook
        # a command's line in the listing: the first paragraph of its help as one line (the rich
        # markup mode would keep the docstring's line breaks there)
        for command in self.commands.values():
            if command.short_help is None and command.help:
                first = inspect.cleandoc(command.help).split("\n\n")[0]
                command.short_help = " ".join(first.split())
        return super().format_help(ctx, formatter)

    def invoke(self, ctx):  # noqa: D401 - click hook
        try:
            return super().invoke(ctx)
        except NoArgsIsHelpError:
            raise  # `eebench data` alone prints the group's help
        except EXPECTED as e:
            raise _fail(e, ctx) from None


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
    debug: bool = typer.Option(
        False, "--debug", help=f"Show the traceback of any error, not one line (also: "
        f"{DEBUG_ENV}=1).", show_envvar=False,
    ),
) -> None:
    """Benchmark early-exit transformer classifiers, ELUE-style."""


def main() -> None:
    terminate_as_interrupt()  # SIGTERM saves what training has done, as Ctrl-C does; once
    app()
