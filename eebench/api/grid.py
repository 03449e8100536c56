"""Running a grid from Python: a config, its runs and cells, and the backend that runs them
(the calls `eebench run` makes; see eebench.api)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eebench.errors import EebenchError, UsageError

if TYPE_CHECKING:

    from eebench.run.backends import BackendOptions, Cell, CellOutcome, PlannedCell
    from eebench.run.config import BenchConfig
    from eebench.run.grid import Grid, Skipped

Runs = str | Path | Sequence[str | Path]  # run directories, their parents or glob patterns


def config(path: str | Path | None = None, **settings: Any) -> BenchConfig:
    """A benchmark config: the TOML file at `path` (None: the defaults), with `settings` (any
    BenchConfig field; tables such as `train` merge key by key) over it, validated."""
    from eebench.run.config import load_config, merge

    return merge(load_config(Path(path) if path is not None else None), settings)


def expand(cfg: BenchConfig, strict: bool = False) -> Grid:
    """The grid's validated runs. `strict`: a pair a method cannot run is refused (one line)
    instead of skipped with its reason."""
    import eebench.run.grid

    grid = eebench.run.grid.expand(cfg, skip_unrunnable=not strict)
    if not grid.runs:
        why = "; ".join(str(s) for s in grid.skipped[:3])
        raise UsageError(f"nothing to run: {why}" if why else "nothing to run: the config has "
                         "no methods or no tasks")
    return grid


def data_dir_of(data_dir: str | Path | None) -> Path | None:
    """The data directory given, else $EEBENCH_DATA_DIR, else None (the hub)."""
    if data_dir is not None:
        return Path(data_dir)
    env = os.environ.get("EEBENCH_DATA_DIR")
    return Path(env) if env else None


def _cells(grid: Grid) -> list[Cell]:
    from eebench.run.backends import cells_of

    test_out = Path(grid.test_out).resolve() if grid.test_out is not None else None
    return cells_of(grid.runs, grid.in_domain, grid.test, test_out)


def plan(cfg: BenchConfig, data_dir: str | Path | None = None, strict: bool = False,
         grid: Grid | None = None) -> list[PlannedCell]:
    """What running the grid would do, cell by cell (status, training steps, an estimate from
    finished siblings); nothing is started. `grid`: `expand(cfg)` where the caller has it."""
    import eebench.run.backends
    from eebench.run.backends.slurm import records

    out = Path(cfg.out).resolve()
    grid = grid or expand(cfg, strict)
    return eebench.run.backends.plan(_cells(grid), out, data_dir_of(data_dir),
                                     submitted=set(records(out)),
                                     checkpoints=Path(cfg.checkpoints).resolve(),
                                     unread=grid.unread)


@dataclass
class RunResult:
    """What `run` did: every cell of the grid and its outcome, in the grid's order."""

    grid: Grid
    cells: list[Cell]
    outcomes: list[CellOutcome]
    out: Path

    @property
    def skipped(self) -> list[Skipped]:
        return self.grid.skipped

    @property
    def run_dirs(self) -> list[Path]:
        """The run directories of the finished cells (each run of a cell: its own rule and the
        other rules swept on its model)."""
        from eebench.run.execute import run_dir_for

        return [run_dir_for(rc, self.out) for c, o in zip(self.cells, self.outcomes)
                if o.status == "done" for rc in c.runs]

    def cells_with(self, *status: str) -> list[tuple[Cell, CellOutcome]]:
        return [(c, o) for c, o in zip(self.cells, self.outcomes) if o.status in status]


def run(cfg: BenchConfig, *, backend: str | BackendOptions = "local",
        data_dir: str | Path | None = None, overwrite: bool = False, strict: bool = False,
        say: Callable[[str], None] | None = None, console: Any = None, progress: Any = None,
        on_outcome: Callable[[Cell, CellOutcome], None] | None = None,
        grid: Grid | None = None) -> RunResult:
    """Run the grid of `cfg` on `backend` (a name, or BackendOptions for a cluster's settings)
    and return every cell's outcome. Local cells run one after another here and a failure raises;
    on Slurm or Ray a failed cell is recorded in its error.json and returned as `failed`. A cell
    another process is running comes back `busy`, and with a local `stop_by` one whose estimate
    would end after it `deferred` (not started). `say` receives one line per event; `console`
    and `progress` (rich) show training and evaluation as they go (local only); `on_outcome` is
    called as each local cell finishes. `grid`: `expand(cfg)` where the caller has it."""
    from eebench.run.backends import BackendOptions, WorkerOptions, run_cells
    from eebench.run.backends.driver import check_backend

    opts = BackendOptions(backend=backend) if isinstance(backend, str) else backend
    check_backend(opts)
    grid = grid or expand(cfg, strict)
    if grid.unread is not None:  # listed without its model folder: read now, or refused
        import eebench.run.grid

        grid = eebench.run.grid.expand(cfg, skip_unrunnable=not strict, absent_ok=False)
    cells = _cells(grid)
    out, data = Path(cfg.out).resolve(), data_dir_of(data_dir)
    say = say or (lambda line: None)
    local = opts.backend == "local"
    worker = WorkerOptions(
        out=str(out), checkpoints=str(Path(cfg.checkpoints).resolve()),
        data_dir=str(data.resolve()) if data else None, cwd=os.getcwd(), overwrite=overwrite,
        eval_batch_size=cfg.eval_batch_size, threads=None if local else opts.cpus_per_job or 1,
        backend=opts.backend)
    _check_shifted_data(cells, data, out, overwrite)
    if local:
        _check_models(cells, out, overwrite)
    else:
        from eebench.run.backends import prepare, require_engine

        require_engine(opts.backend)
        prepare(cells, data)
    extra = {"console": console, "progress": progress, "on_outcome": on_outcome} if local else {}
    if local and opts.stop_by is not None:  # what each cell still to do would take
        import eebench.run.backends

        extra["estimates"] = lambda: {r.key: r for r in eebench.run.backends.plan(
            cells, out, data, checkpoints=Path(cfg.checkpoints).resolve())}
    outcomes = run_cells(cells, opts, worker, say, **extra)
    return RunResult(grid, cells, _finished_meanwhile(cells, outcomes, out, on_outcome), out)


def _finished_meanwhile(cells: list[Cell], outcomes: list[CellOutcome], out: Path,
                        on_outcome: Callable[[Cell, CellOutcome], None] | None
                        ) -> list[CellOutcome]:
    """The outcomes, with a cell found busy that the process holding it has finished since
    (while this one ran the later cells) now done: nothing of it is left to rerun for.
    `on_outcome` hears of each such cell again, done."""
    from dataclasses import replace

    from eebench.run.backends.cells import status

    now = []
    for cell, o in zip(cells, outcomes, strict=True):
        if o.status == "busy" and status(cell, out) == "done":
            o = replace(o, status="done", run_dir=str(cell.run_dirs(out)[0]))
            if on_outcome is not None:
                on_outcome(cell, o)
        now.append(o)
    return now


def _check_shifted_data(cells: list[Cell], data: Path | None, out: Path,
                        overwrite: bool) -> None:
    """The evaluated split of every domain-shift run and test-split twin still to do loads
    before anything trains: they run after training, and a missing or broken file would be found
    only then."""
    from eebench.run.artifacts import SUMMARY_FILE
    from eebench.run.execute import run_dir_for
    from eebench.tasks.loaders import load_split

    later = [(rc, out) for c in cells if c.in_domain for rc in c.runs] + [
        (rc, Path(c.test_out or out)) for c in cells for rc in c.test]
    needed = dict.fromkeys(
        (rc.task, rc.split) for rc, root in later
        if overwrite or not (run_dir_for(rc, root) / SUMMARY_FILE).exists())
    for task, split in needed:
        load_split(task, split, data)


def _check_models(cells: list[Cell], out: Path, overwrite: bool) -> None:
    """Every backbone a cell still to do trains is found before the first cell starts: a hub id
    offline and not cached is one line, not a line after a cell announced itself."""
    from eebench.models.backbones import check_trainable
    from eebench.run.artifacts import SUMMARY_FILE
    from eebench.run.execute import run_dir_for

    for model in dict.fromkeys(
            c.config.model for c in cells if c.config.weights is None
            and (overwrite or not all((run_dir_for(rc, out) / SUMMARY_FILE).exists()
                                      for rc in c.runs))):
        check_trainable(model)  # a directory's weights there, a hub id's files found or fetched


def check(result: RunResult) -> None:
    """Raise, in one line, unless every cell of `result` is done (failed, busy or submitted
    cells are named)."""
    bad = [(c, o) for c, o in zip(result.cells, result.outcomes) if o.status != "done"]
    if bad:
        c, o = bad[0]
        raise EebenchError(f"{len(bad)} of {len(result.cells)} cells not done: {c.label} on "
                           f"{c.config.task} is {o.status}" + (f" ({o.error})" if o.error else ""))
