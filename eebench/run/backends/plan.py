"""What a grid would do (`eebench run --dry-run`): each cell's status and what it would cost.

The cost is what can be known before running, and no more: the optimizer steps each model of the
cell would take (`ceil(samples / batch) x epochs`, summed over the method's stages and the models
it trains), the steps still to take (a model whose checkpoint under the grid's `checkpoints` has
finished costs none, whichever cell trained it, and a model that a cell still to run before it
trains counts there: the cascade reuses static's models; an unfinished one costs what is left of
it; known where the training split is on disk), and an estimate from a finished run: the cell's
own recorded wall time; else that of a run of the same model, method and task under the same
`--out` (another seed or setting); else that of a finished run of the same model and method on
another task (a cell of the grid, or a run under the same `--out` that the grid leaves out, as a
`--task` filter does; marked scaled). Another run's time is scaled to the cell: its training time
by the ratio of the steps the cell has left to its training steps, and the rest of its wall time
carried over with its timing replaced by the cell's (eebench.run.backends.timing_cost): the rest
is mostly the sweep's real inference and timing, on a subset of fixed size (`[timing] samples`)
for each point whatever the task, so what counts is how many points each times (`[timing]
points`, or none); the one full pass over the evaluated split, which does grow with the task, is
a small part. A run resumed from checkpoints trained earlier records less wall time than its
training took: its cost is the larger of the two, scaled by steps, its timing apart.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eebench.errors import DataError, EebenchError
from eebench.io import read_json
from eebench.run.artifacts import SUMMARY_FILE
from eebench.run.backends.cells import Cell, cell_dir, read_error, status
from eebench.run.backends.timing_cost import estimate, points_of, timing_cost

if TYPE_CHECKING:
    from eebench.run.artifacts import RunConfig


UNKNOWN_KEY = "?"  # a cell's key while the model that names its runs is not at hand


@dataclass
class PlannedCell:
    method: str  # the method, and method+rule for the other rules swept on its model
    task: str
    seed: int
    key: str
    # done, failed, todo, damaged (a finished run whose files do not match its summary), or
    # submitted (a Slurm job of an earlier command holds it)
    status: str
    train_steps: int | None  # None: the training split's size is unknown without loading it
    estimate_seconds: float | None  # a finished run's recorded wall time (its own, or a sibling's)
    estimate_from: str | None  # the key of that run
    error: str | None = None
    run_dir: str = ""
    # the estimate is another task's run scaled by training steps (`estimate_from` names it)
    estimate_scaled: bool = False
    # of `estimate_seconds`, the part spent training (None: unknown, or the run was resumed)
    estimate_train_seconds: float | None = None
    # of `train_steps`, those its checkpoints have not taken yet (None: unknown, the training
    # split not on disk)
    train_steps_left: int | None = None
    # when the run the estimate comes from finished (its summary's time): one that finished
    # while a grid's process ran is of that process's machine (eebench.run.backends.pace)
    estimate_written: float | None = None
    # the cell's points, and those it times (`[timing] points`; None: not known)
    points: int | None = None
    timed_points: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def plan(cells: list[Cell], out: Path, data_dir: Path | None,
         submitted: set[str] | None = None, checkpoints: Path | None = None,
         unread: str | None = None) -> list[PlannedCell]:
    """Each cell's row. `unread`: why the model or checkpoint folder that names the runs was
    not read (eebench.run.grid.model_unread): each cell is listed with its key, steps and
    estimate unknown and that reason as its error, and nothing is read."""
    if unread is not None:
        return [PlannedCell(cell.label, cell.config.task, cell.config.seed, UNKNOWN_KEY, "todo",
                            None, None, None, unread) for cell in cells]
    rows, claimed = [], set()  # the models of the cells still to run before this one
    for cell in cells:
        error = None
        try:
            state: str = status(cell, out)
        except DataError as e:  # a damaged finished run: listed, and the real run refuses it
            state, error = "damaged", e.message
        if state == "todo" and submitted and cell.key in submitted:
            state = "submitted"
        if state == "failed":
            error = str((read_error(cell, out) or {}).get("error"))
        seconds, trained, source, written = _estimate(cell, out)
        rc = cell.config
        steps = None if checkpoints is None else steps_left(
            cell, data_dir, checkpoints, claimed if state == "todo" else None)
        total, left = steps if steps is not None else (train_steps(cell, data_dir), None)
        timed, untimed = points_of(rc)
        rows.append(row := PlannedCell(
            cell.label, rc.task, rc.seed, cell.key, state, total, seconds, source, error,
            str(cell_dir(cell, out)), estimate_train_seconds=trained, train_steps_left=left,
            estimate_written=written, points=timed + untimed, timed_points=timed))
        if source is not None and source != cell.key and total:  # a sibling's: to scale
            sibling = _finished(cell_dir(cell, out).parent / source, data_dir, checkpoints)
            if sibling is not None:
                _adopt(row, sibling)
    keys = {r.key for r in rows}
    _scale_estimates(rows, [cell.config.model for cell in cells], lambda i: _finished_beside(
        cells[i], out, data_dir, checkpoints, keys))
    return rows


@dataclass
class _Finished:
    """A finished run that a cell's estimate can be scaled from."""

    key: str
    train_steps: int
    estimate_seconds: float
    estimate_train_seconds: float | None
    estimate_written: float | None = None
    run_dir: str = ""


def _adopt(row: PlannedCell, near: PlannedCell | _Finished) -> None:
    """The row's estimate from a finished run: its training time scaled by the ratio of the
    steps the row has left (all of them where that is unknown) to the run's steps, the rest
    carried over with the run's timing replaced by the row's (`timing_cost.estimate`)."""
    left = row.train_steps if row.train_steps_left is None else row.train_steps_left
    by_steps = left / near.train_steps
    trained = near.estimate_train_seconds
    cost = timing_cost(near.run_dir) if near.run_dir and row.timed_points is not None else None
    timed = row.timed_points or 0
    untimed = (row.points or 0) - timed
    row.estimate_seconds = estimate(near.estimate_seconds, trained, by_steps, cost, timed,
                                    untimed)
    row.estimate_train_seconds = None if trained is None else trained * by_steps
    row.estimate_from, row.estimate_written = near.key, near.estimate_written


def _scale_estimates(rows: list[PlannedCell], models: list[str],
                     beside: Callable[[int], list[_Finished]] | None = None) -> None:
    """A cell without an estimate takes that of a finished run of the same model and method on
    another task (the nearest in training steps): its training time scaled by the ratio of the
    steps still to take (all of them where that is unknown) to its steps, and the rest as it is
    (all of it scaled by steps where its training time is unknown). Those runs are the grid's
    finished cells, and where none is of the cell's model and method, `beside(i)`'s for row i:
    the runs finished under the grid's `out` on other tasks (a grid narrowed to some tasks still
    has the others' runs)."""
    # a cell's own finished run (its test-split twins may be still to do: --test-out)
    done = [(m, r) for m, r in zip(models, rows) if r.status in ("done", "todo")
            and r.train_steps and r.estimate_seconds is not None and r.estimate_from == r.key]
    for i, (model, row) in enumerate(zip(models, rows)):
        if row.estimate_seconds is not None or not row.train_steps:
            continue
        like: list[PlannedCell] | list[_Finished] = [
            r for m, r in done if m == model and r.method == row.method]
        if not like and beside is not None:
            like = beside(i)
        if like:
            _adopt(row, min(like, key=lambda r: abs(math.log(row.train_steps / r.train_steps))))
            row.estimate_scaled = True


def _finished_beside(cell: Cell, out: Path, data_dir: Path | None, checkpoints: Path | None,
                     grid_keys: set[str]) -> list[_Finished]:
    """The finished runs under `out` of the cell's model and method on the other tasks, the
    grid's own cells left out (a damaged or unreadable one gives nothing), with their training
    steps counted as the grid's own are."""
    task_dir = cell_dir(cell, out).parent
    found = []
    for summary in sorted(task_dir.parent.glob(f"*/*/{SUMMARY_FILE}")):
        run_dir = summary.parent
        if run_dir.parent == task_dir or run_dir.name in grid_keys:
            continue
        if (finished := _finished(run_dir, data_dir, checkpoints)) is not None:
            found.append(finished)
    return found


def _finished(run_dir: Path, data_dir: Path | None, checkpoints: Path | None
              ) -> _Finished | None:
    """A finished run with its training steps counted as the grid's own are (None: not
    finished, damaged or unreadable, or its steps unknown)."""
    from eebench.io import read_model
    from eebench.run.artifacts import CONFIG_FILE, RunConfig

    seconds, trained, _ = _recorded(run_dir)
    if seconds is None:
        return None
    try:
        rc = read_model(run_dir / CONFIG_FILE, RunConfig)
    except EebenchError:
        return None
    exact = None if checkpoints is None else steps_left(Cell((rc,)), data_dir, checkpoints)
    steps = exact[0] if exact is not None else _steps(rc, data_dir)
    if not steps:
        return None
    return _Finished(run_dir.name, steps, seconds, trained, _written(run_dir), str(run_dir))


def train_steps(cell: Cell, data_dir: Path | None) -> int | None:
    """Optimizer steps to train every model of the cell (its other rules' runs and its in-domain
    twins read the same training, counted once)."""
    return _steps(cell.config, data_dir)


def _steps(rc: RunConfig, data_dir: Path | None) -> int | None:
    from eebench.methods.base import get_method

    if rc.weights is not None:  # weights made elsewhere: nothing trains
        return 0
    train = rc.train
    n = train.max_train_samples
    size = _train_size(rc.trained_on, str(data_dir) if data_dir else None)
    if size is not None:
        n = size if n is None else min(n, size)
    if n is None:
        return None
    per_epoch = math.ceil(n / train.batch_size)
    steps = 0
    for variant in get_method(rc.method, **rc.method_settings).variants(rc.sweep):
        from eebench.run.names import backbone_layers

        # one model, or several run in turn
        for model in variant.method.models(backbone_layers(rc.model)):
            for stage in model.stages():
                steps += per_epoch * train.for_stage(stage.name, heads_only=False).epochs
    return steps


def steps_left(cell: Cell, data_dir: Path | None, checkpoints: Path,
               claimed: set[Path] | None = None) -> tuple[int, int] | None:
    """The cell's training steps exactly (what each model trains on, calibration examples held
    out) and those its models' checkpoints under `checkpoints` have not taken yet: each model's
    checkpoint is named as `eebench.train.loop.train` names it (so one that another cell
    finished counts as done); None where the training split is not on disk. `claimed`: the
    models that cells still to run before this one train (the cascade's are static's), left
    out of its steps left, and to which its own are added."""
    models = trained_models(cell, data_dir, checkpoints)
    if models is None:
        return None
    total = left = 0
    for m in models:
        total += m.steps
        if claimed is not None and m.path in claimed:
            continue  # an earlier cell trains it: counted there
        if m.state is None or not m.state.finished:
            left += max(0, m.steps - (m.state.global_step if m.state is not None else 0))
    if claimed is not None:
        claimed.update(m.path for m in models)
    return total, left


@dataclass
class TrainedModel:
    """One model a cell trains: its checkpoint, its training steps and where it stands (None:
    not started, or written for another configuration, which the run refuses)."""

    path: Path
    steps: int
    state: Any  # eebench.train.checkpoint.TrainState | None


def trained_models(cell: Cell, data_dir: Path | None, checkpoints: Path
                   ) -> list[TrainedModel] | None:
    """The models the cell trains, each named as `eebench.train.loop.train` names its
    checkpoint; None where the training split is not on disk (or cannot be read)."""
    from eebench.methods.base import get_method
    from eebench.run.names import backbone_layers
    from eebench.tasks.catalog import get_task
    from eebench.train.checkpoint import read_state
    from eebench.train.naming import name_checkpoint

    rc = cell.config
    if rc.weights is not None:  # weights made elsewhere: nothing trains
        return []
    examples = _train_split(rc.trained_on, str(data_dir) if data_dir else None)
    if examples is None:
        return None
    spec, found = get_task(rc.trained_on), []
    try:
        for variant in get_method(rc.method, **rc.method_settings).variants(rc.sweep):
            for model in variant.method.models(backbone_layers(rc.model)):
                named = name_checkpoint(model, spec, rc.model, examples, rc.train,
                                        Path(checkpoints), rc.pooling)
                per_epoch = math.ceil(len(named.train) / named.cfg.batch_size)
                steps = sum(per_epoch * named.cfg.for_stage(stage.name, heads_only=False).epochs
                            for stage in model.stages())
                state = read_state(named.path)
                if state is not None and state.config_hash != named.key:
                    state = None  # written for another configuration: the run refuses it
                found.append(TrainedModel(named.path, steps, state))
    except EebenchError:  # a dry run reports what it cannot know; the real run says why
        return None
    return found


def _train_size(task: str, data_dir: str | None) -> int | None:
    """Rows of the task's training split from a local TSV directory (None from the hub: a dry run
    downloads nothing)."""
    examples = _train_split(task, data_dir)
    return None if examples is None else len(examples)


@cache
def _train_split(task: str, data_dir: str | None):
    if data_dir is None:
        return None
    from eebench.tasks.loaders import load_split

    try:
        return load_split(task, "train", Path(data_dir))
    except EebenchError:  # a dry run reports what it cannot know; the real run says why
        return None


def _estimate(cell: Cell, out: Path
              ) -> tuple[float | None, float | None, str | None, float | None]:
    """The cell's own recorded wall time when it is done, else the latest finished sibling's
    (same model, method and task, another seed or setting), with the part of it spent training
    (None where unknown or where the run was resumed from earlier checkpoints), its key and when
    it finished."""
    here = cell_dir(cell, out)
    candidates = [here] + sorted((p for p in here.parent.glob("*") if p != here),
                                 key=lambda p: p.stat().st_mtime, reverse=True)
    for run_dir in candidates:
        seconds, trained, name = _recorded(run_dir)
        if seconds is not None:
            return seconds, trained, name, _written(run_dir)
    return None, None, None, None


def _written(run_dir: Path) -> float | None:
    """When a finished run finished: its summary's modification time."""
    try:
        return (run_dir / SUMMARY_FILE).stat().st_mtime
    except OSError:
        return None


def _recorded(run_dir: Path) -> tuple[float | None, float | None, str | None]:
    """A finished run's recorded wall time and the part of it spent training (None: not
    finished, damaged, or no record; the training part None where unknown or resumed)."""
    summary = run_dir / SUMMARY_FILE
    if not summary.is_file():
        return None, None, None
    try:
        data = read_json(summary)
    except EebenchError:  # a damaged sibling gives no estimate
        return None, None, None
    seconds = data.get("wall_seconds") if isinstance(data, dict) else None
    if not isinstance(seconds, (int, float)):
        return None, None, None
    trained = data.get("train_seconds")  # a resumed run's training took longer
    if not isinstance(trained, (int, float)):
        return float(seconds), None, run_dir.name
    if trained > seconds:
        return float(trained), None, run_dir.name
    return float(seconds), float(trained), run_dir.name
