"""One error type for everything a user can get wrong, caught once at the CLI boundary.

Exit codes: 0 ok, 1 failure or invalid input, 2 usage error.
"""

from __future__ import annotations

import errno
import os
import signal
import stat
from pathlib import Path
from typing import NoReturn


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


class Terminated(KeyboardInterrupt):
    """SIGTERM (`kill`, `timeout`, a scheduler's time limit), met as Ctrl-C is: training saves
    its checkpoint and the command ends with one line and exit code 143. Raised only where the
    command line asked for it (`terminate_as_interrupt`); a library's caller keeps its own
    handling."""


def _interrupt(signum: int, frame: object) -> None:
    """The command line's handler of Ctrl-C and SIGTERM: the first raises (KeyboardInterrupt,
    Terminated for SIGTERM) and the signals it handles are ignored from then on. The command is
    ending: another signal would cut the save of the step training reached short, or escape as
    a traceback while the line is printed, or, once Python has put back the default action of
    the signals its functions handle (as it shuts down), kill the process."""
    for s in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(s) is _interrupt:
            signal.signal(s, signal.SIG_IGN)
    raise Terminated if signum == signal.SIGTERM else KeyboardInterrupt


def terminate_as_interrupt() -> None:
    """From now on Ctrl-C and SIGTERM interrupt the main thread once (`_interrupt`), SIGTERM as
    Terminated. Only a signal that still has Python's default (Ctrl-C raising
    KeyboardInterrupt, SIGTERM ending the process) is taken over: a handler installed before,
    or a signal ignored from a parent (`nohup`, Ctrl-C of a background job), is kept."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    for signum, default in ((signal.SIGINT, signal.default_int_handler),
                            (signal.SIGTERM, signal.SIG_DFL)):
        if signal.getsignal(signum) is default:
            signal.signal(signum, _interrupt)


def terminates_as_interrupt() -> bool:
    """Whether SIGTERM raises Terminated here (`terminate_as_interrupt`)."""
    return signal.getsignal(signal.SIGTERM) is _interrupt


# ------------------------------------------------------------------ failures of the environment
# The operating system's errors a user can act on, by errno: what it means and what to do. Any
# other OSError is not expected and keeps its traceback.
_SPACE = "free some disk space and rerun the same command: finished work is kept"
OS_ERRORS: dict[int, tuple[str, str | None]] = {
    errno.ENOSPC: ("no space left on device", _SPACE),
    errno.EDQUOT: ("disk quota exceeded", _SPACE),
    errno.EFBIG: ("file too large for the file system", None),
    errno.EACCES: ("permission denied", "check the permissions, or choose another path"),
    errno.EPERM: ("operation not permitted", "check the permissions, or choose another path"),
    errno.EROFS: ("read-only file system", "choose a writable path"),
    errno.EISDIR: ("is a directory, not a file", None),
    errno.ENOTDIR: ("not a directory (a file is in the way)", None),
    errno.EEXIST: ("already exists", None),
    errno.ENOENT: ("not found", None),
    errno.ENAMETOOLONG: ("file name too long", None),
    errno.ELOOP: ("too many levels of symbolic links", None),
    errno.EIO: ("input/output error", "check the disk"),
}


def one_line(e: BaseException | str, limit: int = 200, named: bool = False, cut: str = "",
             escaped: bool = False) -> str:
    """An exception's message, or a text, as one line of at most `limit` characters (its
    whitespace folded). An exception that says nothing is its type's name; `named`: always led
    by its type's name. `cut`: what ends a line cut short, within the limit ("..."); `escaped`:
    each character a terminal would act on is shown escaped first (`printable`), for text read
    from a file."""
    text = printable(str(e)) if escaped else str(e)
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - len(cut)] + cut
    if not isinstance(e, BaseException):
        return text
    if named:
        return f"{type(e).__name__}: {text}" if text else type(e).__name__
    return text or type(e).__name__


def printable(text: str) -> str:
    """`text` as one line that a terminal shows as it is: every character Python does not call
    printable is escaped as Python writes it (a newline as \\n, NUL as \\x00, ESC as \\x1b,
    a right-to-left override as \\u202e, a no-break space as \\xa0), so a file or a name cannot
    split the line, move the cursor or reverse the text."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def os_error(e: OSError, doing: str | None = None) -> EebenchError | None:
    """The one-line error for an expected OSError (its errno in OS_ERRORS), naming its file;
    None for any other. `doing` ("cannot write") goes before the reason."""
    if e.errno not in OS_ERRORS:
        return None
    what, hint = OS_ERRORS[e.errno]
    # a failed rename names both files: the one that is in the way is the second
    name = e.filename2 if e.filename2 is not None and e.errno in (errno.EEXIST, errno.EISDIR,
                                                                   errno.ENOTDIR) else e.filename
    if e.errno == errno.ENOTDIR and name is not None:  # name the file that is in the way
        name = _file_in_the_way(str(name))
        what = f"is {kind(name)}, where a directory is needed"
    reason = f"{doing} ({what})" if doing else what
    return EebenchError(f"{name}: {reason}" if name is not None else reason, hint=hint)


def raise_unwritten(e: BaseException, path: Path, what: str, hint: str | None = None
                    ) -> NoReturn:
    """Re-raise the failure to write the directory `path` (written in a temporary directory,
    then renamed in), naming `path`: an OSError as the same error about `path`, not about a file
    of the temporary directory; a library's own writer's error (safetensors' and the tokenizers'
    writers do not raise an OSError on a full disk) as one DataError line saying that `what`
    could not be written; an EebenchError or an interrupt as it is. The cause stays for --debug."""
    if isinstance(e, OSError) and e.errno is not None:
        raise OSError(e.errno, e.strerror, str(path)) from e
    if isinstance(e, Exception) and not isinstance(e, EebenchError):
        raise DataError(f"{path}: {what} could not be written ({one_line(e, 300)})",
                        hint=hint) from e
    raise e


def _file_in_the_way(name: str) -> str:
    """The first part of the path `name` that exists and is not a directory (else `name`)."""
    path = Path(name)
    for part in reversed(path.parents):
        if part.exists() and not part.is_dir():
            return str(part)
    return name


def expected(e: BaseException) -> EebenchError | None:
    """What the CLI boundary says for a failure not already turned into an EebenchError where it
    happened: bad input or the environment (file-system errors, undecodable text, numeric
    overflow) become one line; None means a bug, which keeps its traceback."""
    if isinstance(e, EebenchError):
        return e
    if isinstance(e, OSError):
        return os_error(e)
    if isinstance(e, UnicodeDecodeError):
        return DataError(f"a file is not UTF-8 text ({e.reason} at byte {e.start})",
                         hint="rerun with --debug to see which file")
    if isinstance(e, OverflowError):
        return EebenchError(f"a number is out of range ({' '.join(str(e).split())[:160]})",
                            hint="rerun with --debug to see where")
    return None


def kind(path: str | os.PathLike) -> str:
    """What `path` is, for a message: "a directory", "a file", "a FIFO (named pipe)", "a socket",
    "a character device", "a block device", "a broken symbolic link" or "missing". Here, not
    in `eebench.io` (which re-exports it), because an error message needs it and io imports
    errors."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "a broken symbolic link" if os.path.islink(path) else "missing"
    except OSError as e:
        return f"unreadable ({e.strerror})"
    for test, what in ((stat.S_ISDIR, "a directory"), (stat.S_ISREG, "a file"),
                       (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return what
    return "not a regular file"
