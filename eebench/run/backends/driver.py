"""Running a grid's cells on an engine (Slurm through submitit, or Ray) from one driver.

The driver settles what earlier commands left (a Slurm job still queued or running is waited for,
not submitted again), skips finished cells, leaves failed ones alone unless asked to rerun them,
hands the rest to the engine and retries the failures it is told to. Models and data are
resolved here, once, before any cell starts: a bundled model is extracted by one process, not by
every worker at the same time. The engines themselves (submitit, ray) are optional extras,
imported only when a grid is run on them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from eebench.errors import UsageError
from eebench.run.backends.cells import Cell, CellOutcome, WorkerOptions, read_error, status
from eebench.run.backends.engine import BackendOptions, Engine, Handle, check_options


def check_backend(opts: BackendOptions, dry_run: bool = False) -> None:
    """Everything about the backend options that can be refused before any work, in one line:
    options the backend would ignore, text that would reach a Slurm job script, and (unless
    nothing is to run) GPUs no machine has and a Ray address that does not answer."""
    from eebench.run.backends.resources import check_gpus, check_reachable, check_slurm_text

    check_options(opts)
    if dry_run and opts.stop_by is not None:
        raise UsageError("--stop-by does not apply to --dry-run: it starts nothing",
                         hint="the listing's estimates say which cells fit")
    check_slurm_text(opts)  # a newline would end its #SBATCH line in the job script
    if not dry_run:  # a listing asks nothing of the machines
        check_gpus(opts)
        if opts.backend == "ray" and opts.ray_address:
            check_reachable(opts.ray_address)


def prepare(cells: list[Cell], data_dir: Path | None) -> None:
    """Resolve models and data once, in the driver: a bundled model is extracted into the cache,
    a hub model's files and a hub task's splits downloaded, before any worker needs them."""
    from eebench.models.backbones import check_trainable
    from eebench.tasks.loaders import load_split

    for model in dict.fromkeys(c.config.model for c in cells if c.config.weights is None):
        check_trainable(model)
    if data_dir is None:  # from the hub: once here, then from its cache
        needed = dict.fromkeys(
            pair for c in cells for rc in (*c.runs, *c.in_domain, *c.test)
            for pair in ((rc.trained_on, "train"), (rc.trained_on, "dev"), (rc.task, rc.split))
            if rc.weights is None or pair[1] != "train")  # imported weights: nothing trains
        for task, split in needed:
            load_split(task, split, None)


def open_engine(opts: BackendOptions, worker: WorkerOptions,
                say: Callable[[str], None], **local: Any) -> Engine:
    """The backend's engine; `local` are the local engine's display arguments (console,
    progress, on_outcome), which the remote engines do not take."""
    if opts.backend == "local":
        from eebench.run.backends.local import LocalEngine

        return LocalEngine(opts, worker, say, **local)
    if opts.backend == "slurm":
        from eebench.run.backends.slurm import SlurmEngine

        return SlurmEngine(opts, worker, say)
    if opts.backend == "ray":
        from eebench.run.backends.ray import RayEngine

        return RayEngine(opts, worker, say)
    raise UsageError(f"--backend {opts.backend} does not run through an engine")


def run_cells(cells: list[Cell], opts: BackendOptions, worker: WorkerOptions,
              say: Callable[[str], None], **local: Any) -> list[CellOutcome]:
    """Every cell's outcome, in the grid's order. Blocks until each cell ran (or, with
    `wait=False`, until every cell to run is submitted)."""
    engine = open_engine(opts, worker, say, **local)
    try:
        return _drive(engine, cells, opts, worker, say)
    finally:
        engine.close()


def _drive(engine: Engine, cells: list[Cell], opts: BackendOptions, worker: WorkerOptions,
           say: Callable[[str], None]) -> list[CellOutcome]:
    running = engine.collect(cells)
    outcomes: dict[str, CellOutcome] = {}
    todo: list[Handle] = []
    for cell in cells:
        if cell.key in running:
            continue
        # in this process, every cell goes to the engine: a finished one says so as it comes
        state = "todo" if worker.overwrite or engine.in_process else status(cell, worker.out)
        if state == "done":
            outcomes[cell.key] = CellOutcome(cell.key, "done")
        elif state == "failed" and not opts.rerun_failed:
            error = read_error(cell, worker.out) or {}
            outcomes[cell.key] = CellOutcome(cell.key, "skipped", error=error.get("error"))
        else:
            todo.append(Handle(cell, 1))
    if todo:
        engine.start(todo)
        if not engine.in_process:
            say(f"{engine.name}: {len(todo)} cell(s) started"
                + (f", {len(running)} still running from before" if running else ""))
    if not opts.wait:
        for h in todo:
            outcomes[h.cell.key] = CellOutcome(h.cell.key, "submitted", h.attempt, job=h.job)
        for key, h in running.items():
            outcomes[key] = CellOutcome(key, "running", h.attempt, job=h.job)
        return [outcomes[c.key] for c in cells]
    results = engine.wait([*running.values(), *todo])
    retries = opts.retries or 0
    attempts = {h.cell.key: h.attempt for h in [*running.values(), *todo]}
    while True:
        again = [Handle(c, attempts[c.key] + 1) for c in cells
                 if c.key in results and results[c.key].status == "failed"
                 and not results[c.key].engine_retried and attempts[c.key] <= retries]
        if not again:
            break
        for h in again:
            attempts[h.cell.key] = h.attempt
            say(f"retrying {h.cell.key} (attempt {h.attempt} of {retries + 1}): "
                f"{results[h.cell.key].error}")
        engine.start(again)
        results.update(engine.wait(again))
    outcomes.update(results)
    return [outcomes[c.key] for c in cells]
