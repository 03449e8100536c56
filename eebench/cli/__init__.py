"""The `eebench` command line (Typer): the app, with every command module registered on import."""

from eebench.cli import commands  # noqa: F401,I001  (each module adds its commands to `app`)
from eebench.cli.app import app, main, make_app

__all__ = ["app", "main", "make_app"]
