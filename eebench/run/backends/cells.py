"""The cells of a grid and the one worker function every backend runs.

A cell is the work of one trained model: a method's run of the grid, the runs of the other exit
rules swept on the same model in the same pass (`--rule`), and for domain-shift runs their
in-domain twins, trained first. Its id is its first run's directory key, so a cell is the same on
every backend and on every rerun. What a cell did is read from its run directories alone: every
`summary.json` present and verified means done; `error.json` in its first run's directory (the
exception's one line, with `traceback.txt` beside it) means it failed; otherwise it is still to
do. The worker writes the error record itself, so a cell that fails on a remote node says why
where its results would have been.

`run_cell` is what a backend ships: a top-level function of plain, picklable arguments (the cell,
`WorkerOptions`, the attempt number). The function it runs is named in `WorkerOptions.cell_fn`
("module:function"), `execute_cell` by default; tests name a stand-in there.
"""

from __future__ import annotations

import importlib
import os
import socket
import time
import traceback
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from eebench import errors
from eebench.io import atomic_write_text, read_json, write_json
from eebench.run.artifacts import SUMMARY_FILE, RunConfig, verify_run
from eebench.run.execute import RunOptions, execute_group, help_train, run_dir_for, same_pass

ERROR_FILE = "error.json"
TRACEBACK_FILE = "traceback.txt"
ERROR_SCHEMA_VERSION = 1
DEFAULT_CELL_FN = "eebench.run.backends.cells:execute_cell"

Status = Literal["done", "failed", "todo"]


@dataclass(frozen=True)
class Cell:
    """One trained model's runs, as a worker gets them."""

    runs: tuple[RunConfig, ...]
    in_domain: tuple[RunConfig, ...] = ()  # --eval-task: the same training on its own task
    # --test-out: the same models on the test split, run right after `runs` (while their
    # checkpoints are at hand) into the folder `test_out` (absolute)
    test: tuple[RunConfig, ...] = ()
    test_out: str | None = None

    @property
    def config(self) -> RunConfig:
        """The method's own run (the others sweep other rules on its model)."""
        return self.runs[0]

    @property
    def key(self) -> str:
        return self.config.key()

    @property
    def label(self) -> str:
        return ", ".join(rc.label for rc in self.runs)

    def run_dirs(self, out: Path | str) -> list[Path]:
        """The directories of the cell's runs under `out`, then of its test-split runs."""
        return [run_dir_for(rc, Path(out)) for rc in self.runs] + [
            run_dir_for(rc, Path(self.test_out or out)) for rc in self.test]


@dataclass(frozen=True)
class WorkerOptions:
    """What a worker needs besides its cell: plain values, paths absolute (a worker's current
    directory is not the driver's)."""

    out: str
    checkpoints: str
    data_dir: str | None = None
    cwd: str | None = None  # the driver's directory: relative names in a config resolve there
    overwrite: bool = False
    eval_batch_size: int = 64
    threads: int | None = None  # torch CPU threads in the worker (--cpus-per-job)
    backend: str = "local"
    cell_fn: str = DEFAULT_CELL_FN


@dataclass
class CellOutcome:
    """What became of a cell in this command. `engine_retried`: the engine itself already
    retried it (Ray re-runs a task whose worker died), so the driver does not again."""

    key: str
    # deferred: not started, its estimate would end after `--stop-by` (`error` says why)
    status: Literal["done", "failed", "busy", "submitted", "running", "skipped", "deferred"]
    attempts: int = 0
    seconds: float | None = None
    error: str | None = None
    run_dir: str | None = None
    job: str | None = None
    engine_retried: bool = field(default=False, repr=False)


def cells_of(runs: list[RunConfig], in_domain: list[RunConfig],
             test: list[RunConfig] | None = None, test_out: Path | str | None = None
             ) -> list[Cell]:
    """The grid's cells, in its order: consecutive runs that share a pass go together, and
    each run's in-domain twin and test-split twin with it."""
    groups: list[list[int]] = []
    for i, rc in enumerate(runs):
        if groups and same_pass(runs[groups[-1][0]], rc):
            groups[-1].append(i)
        else:
            groups.append([i])
    return [Cell(tuple(runs[i] for i in g),
                 tuple(in_domain[i] for i in g) if runs[g[0]].train_task else (),
                 tuple(test[i] for i in g) if test else (),
                 str(test_out) if test else None)
            for g in groups]


def cell_dir(cell: Cell, out: Path | str) -> Path:
    return run_dir_for(cell.config, Path(out))


def status(cell: Cell, out: Path | str) -> Status:
    """done (every run's summary present and verified; a damaged run is one error line, as
    `eebench run` says it), failed (an error record) or todo."""
    dirs = cell.run_dirs(out)
    if all((d / SUMMARY_FILE).exists() for d in dirs):
        for d in dirs:
            verify_run(d)
        return "done"
    return "failed" if (dirs[0] / ERROR_FILE).exists() else "todo"


def read_error(cell: Cell, out: Path | str) -> dict[str, Any] | None:
    path = cell_dir(cell, out) / ERROR_FILE
    return read_json(path) if path.exists() else None


def write_error(run_dir: Path, error: str, kind: str, attempt: int, backend: str,
                trace: str | None = None, job: str | None = None) -> None:
    """The failure record of a cell: error.json (one line and where it happened), and the
    traceback beside it when there is one. Both are written atomically."""
    run_dir.mkdir(parents=True, exist_ok=True)
    if trace is not None:
        atomic_write_text(run_dir / TRACEBACK_FILE, trace)
    else:  # an earlier attempt's traceback is not this failure's
        (run_dir / TRACEBACK_FILE).unlink(missing_ok=True)
    write_json(run_dir / ERROR_FILE, {
        "schema_version": ERROR_SCHEMA_VERSION, "error": error, "type": kind,
        "attempt": attempt, "backend": backend, "host": socket.gethostname(),
        "job": job or _job_id(), "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    })


def clear_error(run_dir: Path) -> None:
    for name in (ERROR_FILE, TRACEBACK_FILE):
        (run_dir / name).unlink(missing_ok=True)


def resolve_fn(name: str) -> Any:
    module, _, attr = name.partition(":")
    return getattr(importlib.import_module(module), attr)


def run_cell(cell: Cell, opts: WorkerOptions, attempt: int = 1) -> CellOutcome:
    """The worker: run the cell, and on failure leave its error record instead of raising (a
    failure is data the driver reads, whatever the engine makes of exceptions)."""
    fn = resolve_fn(opts.cell_fn)
    if opts.cwd and Path(opts.cwd).is_dir():
        os.chdir(opts.cwd)
    run_dir = cell_dir(cell, opts.out)
    started = time.perf_counter()
    try:
        done = fn(cell, opts)
    except Exception as e:
        error = errors.one_line(e, limit=2000, named=True)
        write_error(run_dir, error, type(e).__name__, attempt, opts.backend,
                    traceback.format_exc())
        return CellOutcome(cell.key, "failed", attempt, _since(started), error, str(run_dir),
                           _job_id())
    if done is None:
        return CellOutcome(cell.key, "busy", attempt, _since(started), run_dir=str(run_dir))
    clear_error(run_dir)
    return CellOutcome(cell.key, "done", attempt, _since(started), run_dir=str(done),
                       job=_job_id())


def run_options(opts: WorkerOptions, console: Any = None, progress: Any = None) -> RunOptions:
    """The options of `execute_group` in a worker (a console and progress bar where one shows)."""
    return RunOptions(data_dir=Path(opts.data_dir) if opts.data_dir else None,
                      out=Path(opts.out), checkpoints=Path(opts.checkpoints),
                      overwrite=opts.overwrite, eval_batch_size=opts.eval_batch_size,
                      console=console, progress=progress)


def execute_runs(cell: Cell, run_opts: RunOptions) -> Path | None:
    """Train or reuse the cell's model, one pass, each run's sweep and run directory
    (`execute_group`), after the in-domain twins of domain-shift runs and before its test-split
    runs (each of which records its dev run and their models). The first run's directory, or
    None: another process holds one of its runs, and this one has trained those of its models
    that process had not reached (`help_train`)."""
    if cell.in_domain and None in execute_group(list(cell.in_domain), run_opts):
        return None
    dirs = execute_group(list(cell.runs), run_opts)
    if None in dirs:
        help_train(cell.config, run_opts)
        return None
    if cell.test:
        test_opts = replace(run_opts, out=Path(cell.test_out or run_opts.out))
        if None in execute_group(list(cell.test), test_opts, list(cell.runs)):
            return None
    return dirs[0]


def execute_cell(cell: Cell, opts: WorkerOptions) -> Path | None:
    """The real cell on a remote worker (`execute_runs`, with the worker's CPU threads). The seed
    is the cell's own, in its RunConfigs. None: another process holds one of its runs."""
    if opts.threads:
        import torch

        torch.set_num_threads(opts.threads)
    return execute_runs(cell, run_options(opts))


def _since(started: float) -> float:
    return round(time.perf_counter() - started, 2)


def _job_id() -> str | None:
    """The Slurm job (an array task as `<array>_<index>`) this worker runs in, if any."""
    array, index = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array and index:
        return f"{array}_{index}"
    return os.environ.get("SLURM_JOB_ID")
