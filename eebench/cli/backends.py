"""`eebench run --backend slurm|ray` and `--dry-run`: a grid's cells run on an engine, or listed.

Every backend runs through `eebench.api.run`; the local one's per-run tables are eebench.cli.run's.
This module defines the Backends flags (one value, `BackendFlags`, for the command; each flag
goes over the config's [backend] table through `merge`), turns that table into options, and shows
a dry run's listing or an engine's outcomes, after the grid is expanded and checked.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from eebench.cli.common import err_console, print_json
from eebench.errors import EebenchError, UsageError

if TYPE_CHECKING:
    from eebench.run.backends import BackendOptions, Cell, CellOutcome, PlannedCell
    from eebench.run.config import BackendConfig, BenchConfig
    from eebench.run.grid import Grid


PANEL = "Backends"  # the help panel of the options saying where a grid runs


@dataclass(frozen=True)
class BackendFlags:
    """`eebench run`'s Backends options, as one value: the table they give over the config's
    [backend] (`table`, through `merge`); and --overwrite and --dry-run, which are no settings
    but what to do with the cells. `with_backend_flags` puts them on the command one by one."""

    overwrite: bool = False
    backend: str | None = None
    dry_run: bool = False
    rerun_failed: bool = False
    max_parallel: int | None = None
    retries: int | None = None
    cpus_per_job: int | None = None
    gpus_per_job: int | None = None
    partition: str | None = None
    time_limit: int | None = None
    account: str | None = None
    slurm_option: list[str] | None = None
    exclusive: bool = False
    no_wait: bool = False
    ray_address: str | None = None
    stop_by: str | None = None

    def table(self) -> dict[str, Any]:
        """The [backend] settings the flags give (None: not given; a switch left off is not
        given, so the config's own stays)."""
        return {"name": self.backend, "rerun_failed": self.rerun_failed or None,
                "max_parallel": self.max_parallel, "retries": self.retries,
                "cpus_per_job": self.cpus_per_job, "gpus_per_job": self.gpus_per_job,
                "partition": self.partition, "time_limit": self.time_limit,
                "account": self.account,
                "slurm_options": parse_slurm_options(self.slurm_option or []) or None,
                "exclusive": self.exclusive or None, "wait": False if self.no_wait else None,
                "ray_address": self.ray_address, "stop_by": self.stop_by}


NO_FLAGS = BackendFlags()  # none given


def _option(*names: str, help: str, **kwargs: Any) -> Any:
    return typer.Option(*names, help=help, rich_help_panel=PANEL, **kwargs)


# Each flag of BackendFlags: its type and option, in the order `eebench run --help` lists them.
FLAGS: dict[str, Any] = {
    "overwrite": Annotated[bool, typer.Option("--overwrite", help="Redo a finished run.")],
    "backend": Annotated[str | None, _option(
        "--backend", help="Where the grid's cells run: local (this process, one after another), "
        "slurm (job arrays through submitit) or ray (Ray tasks); see docs/scaling.md.")],
    "dry_run": Annotated[bool, _option(
        "--dry-run", help="List the cells (status, training steps, estimated time); run "
        "nothing.")],
    "rerun_failed": Annotated[bool, _option(
        "--rerun-failed", help="Run again the cells whose error.json says they failed.")],
    "max_parallel": Annotated[int | None, _option(
        "--max-parallel", min=1, help="Cells running at once (slurm: the array's %K).",
        show_default=False)],
    "retries": Annotated[int | None, _option(
        "--retries", min=0, help="Retries of a cell that fails or whose worker dies [0].",
        show_default=False)],
    "cpus_per_job": Annotated[int | None, _option(
        "--cpus-per-job", min=1, help="CPUs (and torch threads) per cell [1].",
        show_default=False)],
    "gpus_per_job": Annotated[int | None, _option(
        "--gpus-per-job", min=0, help="GPUs per cell [0].", show_default=False)],
    "partition": Annotated[str | None, _option(
        "--partition", help="Slurm partition.", show_default=False)],
    "time_limit": Annotated[int | None, _option(
        "--time-limit", min=1, help="Slurm time limit per cell, in minutes [240].",
        show_default=False)],
    "account": Annotated[str | None, _option(
        "--account", help="Slurm account.", show_default=False)],
    "slurm_option": Annotated[list[str] | None, _option(
        "--slurm-option", help="An extra #SBATCH option KEY=VALUE (repeatable).",
        show_default=False)],
    "exclusive": Annotated[bool, _option(
        "--exclusive", help="Slurm: a whole node per cell (for timing).")],
    "no_wait": Annotated[bool, _option(
        "--no-wait", help="Slurm: exit once submitted; rerun the same command to collect.")],
    "ray_address": Annotated[str | None, _option(
        "--ray-address", help="Ray: attach to this cluster (default: start a local one).",
        show_default=False)],
    "stop_by": Annotated[str | None, _option(
        "--stop-by", help="Local: start no cell whose estimate (the dry run's) would end after "
        "this time: HH:MM, a date and time, or a time from now (2h30m). A cell without an "
        "estimate is not started either.", show_default=False)],
}


SHOWN = {"backend": "local"}  # defaults the help shows, where the flag's own is "not given"


def with_backend_flags(command: Callable[..., Any]) -> Callable[..., Any]:
    """`command`, whose parameter `backend_flags` is a BackendFlags, as Typer registers it: that
    one parameter is the Backends options, each in its place, gathered again into one value."""
    signature = inspect.signature(command, eval_str=True)
    params = []
    for p in signature.parameters.values():
        if p.name != "backend_flags":
            params.append(p)
            continue
        params += [inspect.Parameter(name, p.kind, annotation=kind,
                                     default=SHOWN.get(name, getattr(BackendFlags, name)))
                   for name, kind in FLAGS.items()]

    params.append(inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY,
                                    annotation=typer.Context))

    @functools.wraps(command)
    def with_flags(ctx: typer.Context, **kwargs: Any) -> Any:
        # a flag left out is not given (its default), so the config's [backend] keeps its own
        given = {name: kwargs.pop(name) for name in FLAGS}
        given = {name: value for name, value in given.items()
                 if getattr(ctx.get_parameter_source(name), "name", None) != "DEFAULT"}
        return command(**kwargs, backend_flags=BackendFlags(**given))

    with_flags.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    with_flags.__annotations__ = {p.name: p.annotation for p in params}
    del with_flags.__wrapped__  # Typer reads the signature above, not the command's
    return with_flags


@dataclass(frozen=True)
class GridRequest:
    """How the command line asked for a grid to run."""

    options: BackendOptions
    dry_run: bool = False

    @property
    def elsewhere(self) -> bool:
        """Not the plain local loop: a listing, or an engine."""
        return self.dry_run or self.options.backend != "local"


def grid_request(section: BackendConfig, dry_run: bool) -> GridRequest:
    """The backend options of a config's [backend] (the flags merged in), checked before any
    work (one line, exit code 2)."""
    from eebench.run.backends import BackendOptions
    from eebench.run.backends.driver import check_backend

    settings = section.model_dump(exclude={"name", "stop_by"})
    opts = BackendOptions(backend=section.name, stop_by=parse_stop_by(section.stop_by),
                          **settings)
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
    from eebench.run.backends.plan import UNKNOWN_KEY

    if rows and rows[0].key == UNKNOWN_KEY:
        err_console.print(f"[yellow]{rows[0].error}[/]: the cells' run keys, sweeps and "
                          "training steps are known once it is; running them is refused until "
                          "then")
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
