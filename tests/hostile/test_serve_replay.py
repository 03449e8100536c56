"""`eebench serve-replay` on hostile input: a trace that is a FIFO, /dev/zero, not UTF-8 or
1,000 days long (milliseconds read as seconds); rates, loads and request counts that would wait
for years or allocate terabytes; a negative seed, an absurd burst; a run of a token task. Each is
one line, exit 1 or 2, before the replay starts, and nothing is written.

A case that could wait forever runs under a time limit: in a process of its own where reading
could block or never end (a FIFO, /dev/zero: its memory capped too), in this process under
SIGALRM where the replay would only wait (a slow rate)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests import tiny
from tests.cli import invoke
from tests.hostile.helpers import LIMIT_S, fails, fails_within, unchanged

TRACE_HINT = "a trace holds one arrival time in seconds a line"


class _StillRunning(BaseException):
    """Raised by the alarm: a BaseException, so that no `except Exception` on the way eats it."""


@contextmanager
def _within(seconds: int = LIMIT_S) -> Iterator[None]:
    """The block ends within `seconds`, or the case fails (instead of hanging the suite)."""

    def ring(signum, frame):
        raise _StillRunning

    previous = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    except _StillRunning:
        pytest.fail(f"serve-replay still running after {seconds} s")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _replay(bench, tmp_path: Path, *args: object, code: int, needle: str,
            run: Path | None = None) -> str:
    """`serve-replay` of the bench's PABEE run (or `run`) with `args`: one line, no replay
    directory written, the run unchanged, within the time limit."""
    run = run or bench.pabee
    out = tmp_path / "replay"
    with unchanged(run), _within():
        line = fails("serve-replay", run, "--data-dir", bench.data, "--out", out, *args,
                     code=code, needle=needle)
    assert not out.exists()
    return line


# -- the trace file --------------------------------------------------------------------------
@pytest.mark.parametrize("what,needle", [("fifo", "is a FIFO (named pipe), not a regular file"),
                                         ("zero", "is a character device, not a regular file")])
def test_a_fifo_or_dev_zero_trace_is_refused_unread(bench, tmp_path, what, needle):
    trace = tmp_path / "trace.txt"
    if what == "fifo":
        os.mkfifo(trace)
    else:
        trace.symlink_to("/dev/zero")
    with unchanged(bench.pabee):
        fails_within("serve-replay", bench.pabee, "--data-dir", bench.data, "--arrivals",
                     "trace", "--trace", trace, code=1, needle=f"{trace}: {needle}",
                     max_memory=4 << 30)


def test_a_trace_that_is_not_utf8_is_named(bench, tmp_path):
    trace = tmp_path / "trace.txt"
    trace.write_bytes(b"0.0\n0.5\n\xff\xfe1.0\n")
    _replay(bench, tmp_path, "--arrivals", "trace", "--trace", trace, code=1,
            needle=f"{trace}: not UTF-8 text (byte 8) (hint: {TRACE_HINT})")


def test_a_trace_in_milliseconds_spanning_1000_days_is_refused_before_it_starts(bench,
                                                                                 tmp_path):
    trace = tmp_path / "trace.txt"
    trace.write_text("".join(f"{i * 86_400_000}\n" for i in range(11)))  # ms, read as seconds
    line = _replay(bench, tmp_path, "--arrivals", "trace", "--trace", trace, code=2,
                   needle="over the 6 h limit (hint: its timestamps are read as seconds; "
                          "replay it faster with --rates R")
    assert "3 schedulers x 1 rate x 11 requests" in line and "years" in line


def test_a_trace_of_more_timestamps_than_a_replay_sends_is_refused(bench, tmp_path):
    trace = tmp_path / "trace.txt"
    trace.write_text("0\n" * 1_000_001)
    _replay(bench, tmp_path, "--arrivals", "trace", "--trace", trace, "--rates", "1e6",
            code=1, needle=f"{trace}:1000001: more than 1,000,000 timestamps")


# -- how long a replay takes ---------------------------------------------------------------------
def test_a_rate_that_would_wait_for_years_is_refused_before_it_starts(bench, tmp_path):
    _replay(bench, tmp_path, "--rates", "1e-9", "--requests", "3", code=2,
            needle="over the 6 h limit (hint: raise --rates, or lower --requests)")


def test_a_load_far_below_capacity_is_refused_once_the_capacity_is_measured(bench, tmp_path):
    """The default rates are fractions of the measured capacity: a replay of a million requests
    at a thousandth of it waits for days, whatever the machine."""
    _replay(bench, tmp_path, "--load", "0.001", "--requests", "1000000", code=2,
            needle="over the 6 h limit (hint: raise --load, or lower --requests)")


# -- numeric options -----------------------------------------------------------------------------
@pytest.mark.parametrize("args,needle", [
    (("--requests", str(10**12)), "'--requests': Input should be less than or equal to 1000000"),
    (("--seed", "-1"), "'--seed': Input should be greater than or equal to 0"),
    (("--arrivals", "bursty", "--burst", "1e300", "--rates", "100", "--requests", "3"),
     "--burst 1e+300: a mean burst size is at most 10000"),
])
def test_numeric_options_out_of_bounds_are_usage_errors(bench, tmp_path, args, needle):
    _replay(bench, tmp_path, *args, code=2, needle=needle)


# -- what it serves ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def token_run(tmp_path_factory, data_dir) -> tuple[Path, Path]:
    """A finished DeeBERT run on CoNLL-2003 (sequence labelling) and its small data directory:
    the first sentences of the real files."""
    root = tmp_path_factory.mktemp("serve-token-run")
    data = root / "data"
    (data / "CoNLL-2003").mkdir(parents=True)
    for split in ("train", "dev"):
        lines = (data_dir / "CoNLL-2003" / f"{split}.txt").read_text().splitlines(True)
        (data / "CoNLL-2003" / f"{split}.txt").write_text("".join(lines[:120]))
    backbone = tiny.save_tiny_backbone(root / "tiny", num_layers=2)
    result = invoke("run", "--task", "conll2003", "--method", "deebert", "--sweep", "0.5",
                    "--model", backbone, "--data-dir", data, "--max-train-samples", "4",
                    "--epochs", "1", "--max-seq-length", "16", "--max-eval-samples", "4",
                    "--no-timing", "--out", root / "runs", "--checkpoints", root / "ckpt")
    assert result.exit_code == 0, result.output + repr(result.exception)
    [summary] = (root / "runs").rglob("summary.json")
    return summary.parent, data


def test_a_token_task_run_is_refused_in_one_line(token_run, tmp_path):
    run, data = token_run
    out = tmp_path / "replay"
    with unchanged(run), _within():
        fails("serve-replay", run, "--data-dir", data, "--rates", "100", "--requests", "3",
              "--out", out, code=1,
              needle="a run of conll2003, a token task (sequence labelling); serve-replay "
                     "serves sequence-level runs")
    assert not out.exists()
