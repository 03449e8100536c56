"""One error type for everything a user can get wrong, caught once at the CLI boundary.

Exit codes: 0 ok, 1 failure or invalid input, 2 usage error.
"""

from __future__ import annotations


class EebenchError(Exception):
    """A failure the user can act on: a one-line message, an optional hint, an exit code."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None, exit_code: int | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} (hint: {self.hint})"


class UsageError(EebenchError):
    """The command line itself is wrong (unknown name, bad option value): exit code 2."""

    exit_code = 2


class DataError(EebenchError):
    """A data file is missing or malformed; the message names the file (and line)."""
