"""`eebench run --backend slurm|ray` and `--dry-run`: a grid's cells run on an engine, or listed.

Every backend runs through `eebench.api.run`; the local one's per-run tables are eebench.cli.run's.
This module turns the backend flags into options, and shows a dry run's listing or an engine's
outcomes, after the grid is expanded and checked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eebench.cli.common import err_console, print_json
from eebench.errors import EebenchError, UsageError

if TYPE_CHECKING:
    from eebench.run.backends import BackendOptions, Cell, CellOutcome, PlannedCell
    from eebench.run.config import BenchConfig
    from eebench.run.grid import Grid


@dataclass(frozen=True)
class GridRequest:
    """How the command line asked for a grid to run."""

    options: BackendOptions
    dry_run: bool = False

    @property
    def elsewhere(self) -> bool:
        """Not the plain local loop: a listing, or an engine."""
        return self.dry_run or self.options.backend != "local"


def grid_request(backend: str, dry_run: bool, slurm_option: list[str] | None,
                 no_wait: bool, **options: Any) -> GridRequest:
    """The backend options from the flags, checked before any work (one line, exit code 2)."""
    from eebench.run.backends import BackendOptions
    from eebench.run.backends.driver import check_backend

    opts = BackendOptions(backend=backend, slurm_options=parse_slurm_options(slurm_option or []),
                          wait=not no_wait, **options)
    check_backend(opts, dry_run)
    return GridRequest(opts, dry_run)


_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


def parse_stop_by(raw: str | None, now: datetime | None = None) -> float | None:
    """`--stop-by`: a clock time today (HH:MM, tomorrow once it has passed), a date and time
    (2026-12-02T04:20, or with its UTC offset: 2026-12-07T18:00+01:00), or a time from now
    (2h30m, 90m, 45s); as a Unix time. A time past what a clock can hold (10^20 hours) is
    refused as too far ahead, in one line naming the option."""
    if raw is None:
        return None
    try:
        return _stop_time(raw, now or datetime.now())
    except OverflowError:
        raise UsageError(f"--stop-by {raw!r} is too far ahead",
                         hint="give a time within a few years, such as 8h or 2026-12-02T04:20"
                         ) from None


def _stop_time(raw: str, now: datetime) -> float:
    text = raw.strip()
    span = _DURATION.fullmatch(text)
    if span and any(span.groups()):
        h, m, sec = (int(g or 0) for g in span.groups())
        return (now + timedelta(hours=h, minutes=m, seconds=sec)).timestamp()
    try:
        if re.fullmatch(r"\d{1,2}:\d{2}", text):
            at = datetime.combine(now.date(), time.fromisoformat(text.zfill(5)))
            return (at + timedelta(days=1) if at <= now else at).timestamp()
        at = datetime.fromisoformat(text)
    except ValueError:
        at = None
    if at is None:
        raise UsageError(f"--stop-by {raw!r} is not a time", hint="give HH:MM, a date and time "
                         "(2026-12-02T04:20) or a time from now (2h30m, 90m)")
    if at.tzinfo is not None:  # a time with its UTC offset, set against this machine's clock
        now = now.astimezone()
    if at <= now:
        raise UsageError(f"--stop-by {raw!r} has passed", hint="give a time still to come")
    return at.timestamp()


def parse_slurm_options(raw: list[str]) -> dict[str, str]:
    """`--slurm-option KEY=VALUE` (an #SBATCH option without its dashes; a bare KEY is a flag)."""
    out: dict[str, str] = {}
    for item in raw:
        key, eq, value = item.partition("=")
        key = key.strip().lstrip("-")
        if not key:
            raise UsageError(f"--slurm-option {item!r}: expected KEY=VALUE, e.g. "
                             "--slurm-option qos=high")
        out[key] = value if eq else ""
    return out


def run_elsewhere(grid: Grid, cfg: BenchConfig, data_dir: Path | None, overwrite: bool,
                  json_out: bool, request: GridRequest) -> None:
    """A dry run's listing, or the grid's cells on Slurm or Ray (`eebench.api.run`)."""
    from eebench import api

    if request.dry_run:
        rows = api.plan(cfg, data_dir, grid=grid)
        if json_out:
            print_json([r.as_dict() for r in rows])
        else:
            _plan_table(rows, request.options.backend)
        return
    opts = request.options
    result = api.run(cfg, backend=opts, data_dir=data_dir, overwrite=overwrite,
                     say=lambda line: err_console.print(line), grid=grid)
    out = result.out
    rows = [_outcome_row(c, o, out) for c, o in zip(result.cells, result.outcomes)]
    if json_out:
        print_json(rows)
    else:
        _outcome_table(rows, opts.backend)
    failed = [r for r in rows if r["status"] in ("failed", "skipped")]
    if failed:
        retried = " (not retried: it failed before)" if any(
            r["status"] == "skipped" for r in failed) else ""
        raise EebenchError(
            f"{len(failed)} of {len(rows)} cells failed{retried}; each one's error.json says "
            f"why, e.g. {failed[0]['run_dir']}/error.json",
            hint="rerun with --rerun-failed to retry them")
    if any(r["status"] in ("submitted", "running") for r in rows):
        err_console.print("submitted: rerun the same command to wait for the jobs and collect "
                          "them (finished cells are skipped)")


def _outcome_row(cell: Cell, o: CellOutcome, out: Path) -> dict[str, Any]:
    from eebench.run.backends.cells import cell_dir

    rc = cell.config
    return {"method": cell.label, "task": rc.task, "seed": rc.seed, "key": cell.key,
            "status": o.status, "attempts": o.attempts, "seconds": o.seconds, "job": o.job,
            "error": o.error, "run_dir": o.run_dir or str(cell_dir(cell, out))}


STYLE = {"done": "green", "failed": "red", "skipped": "red", "damaged": "red",
         "todo": "yellow", "submitted": "cyan", "running": "cyan", "busy": "yellow",
         "deferred": "yellow"}


def _plan_table(rows: list[PlannedCell], backend: str) -> None:
    from rich.table import Table

    t = Table(title=f"{len(rows)} cells (--backend {backend}, dry run: nothing started)")
    for col in ("method", "task", "seed", "run key", "status", "train steps", "left",
                "estimate"):
        t.add_column(col, justify="right" if col in ("seed", "train steps", "left") else "left")
    for r in rows:
        estimate = "-"
        if r.estimate_seconds is not None:
            mark = "" if r.estimate_from == r.key else f" (like {r.estimate_from}" + (
                ", scaled)" if r.estimate_scaled else ")")
            estimate = f"~{r.estimate_seconds:.0f} s{mark}"
        t.add_row(r.method, r.task, str(r.seed), r.key, f"[{STYLE[r.status]}]{r.status}[/]",
                  "?" if r.train_steps is None else f"{r.train_steps:,}",
                  "?" if r.train_steps_left is None else f"{r.train_steps_left:,}", estimate)
    err_console.print(t)
    todo = [r for r in rows if r.status in ("todo", "failed")]
    # the steps still to take: a finished checkpoint (this cell's or one it shares) costs none
    steps = sum((r.train_steps if r.train_steps_left is None else r.train_steps_left) or 0
                for r in todo)
    known = [r.estimate_seconds for r in todo if r.estimate_seconds is not None]
    cost = ""
    if known:  # run one after another; N workers take about 1/N of it
        cost = f", about {sum(known) / 3600:.1f} h of runs by the estimates" + (
            f" ({len(todo) - len(known)} cell(s) without one)" if len(known) < len(todo) else "")
    err_console.print(f"to run: {len(todo)} cell(s), {steps:,} training steps left{cost}"
                      + (" (failed cells only with --rerun-failed)"
                         if any(r.status == "failed" for r in todo) else ""))


def _outcome_table(rows: list[dict[str, Any]], backend: str) -> None:
    from rich.table import Table

    t = Table(title=f"{len(rows)} cells on --backend {backend}")
    for col in ("method", "task", "seed", "run key", "status", "attempts", "seconds", "job",
                "error"):
        t.add_column(col, justify="right" if col in ("seed", "attempts", "seconds") else "left")
    for r in rows:
        t.add_row(r["method"], r["task"], str(r["seed"]), r["key"],
                  f"[{STYLE[r['status']]}]{r['status']}[/]", str(r["attempts"] or "-"),
                  "-" if r["seconds"] is None else f"{r['seconds']:.1f}", r["job"] or "-",
                  (r["error"] or "")[:80])
    err_console.print(t)
