"""A model trained elsewhere, evaluated like one eebench trained (`eebench run --from-checkpoint`).

An authors' checkpoint (DeeBERT, PABEE, ElasticBERT) or an exported eebench model is checked when
the run is planned (`planned_import`: the method fits its exits and heads, the task its labels,
nothing trains), then converted once into an ordinary checkpoint directory,
`<checkpoints>/imported/<model>/<method>/<key>/` (`import_checkpoint`, one process at a time under
the lock training takes), which the run's one full pass loads as it loads a trained one. The
run's config.json records where the weights came from and their sha256 (`CheckpointSource`), so
that different weights never share a run directory and a rerun on changed weights is refused
rather than mixed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eebench.errors import DataError, UsageError
from eebench.io import config_hash
from eebench.methods.base import EarlyExitMethod, get_method
from eebench.methods.derived import trains
from eebench.models.convert import CheckpointSource, open_checkpoint
from eebench.models.convert.source import Checkpoint
from eebench.train.checkpoint import (
    TrainState,
    checkpoint_path,
    read_state,
    recover,
    save_checkpoint,
)
from eebench.train.naming import claimed, lock_file

IMPORTED = "imported"  # under the checkpoints root
# Checkpoints opened in this process: a hub id by its id (fetched once), a folder by its files'
# sizes and modification times too (a grid plans many runs on one checkpoint: hashed once).
_OPENED: dict[tuple, Checkpoint] = {}


def _signature(source: str) -> tuple:
    folder = Path(source).expanduser()
    if not folder.is_dir():
        return (source,)
    files = sorted(p for p in folder.iterdir() if p.is_file())
    return (source, *((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in files))


def opened(source: str) -> Checkpoint:
    """The checkpoint at `source`, opened once per process while its files stay as they are."""
    key = _signature(source)
    if key not in _OPENED:
        _OPENED[key] = open_checkpoint(source)
    return _OPENED[key]


def planned_import(source: str, method: str, settings: dict[str, Any], task: Any,
                   pooling: str | None = None) -> tuple[CheckpointSource, EarlyExitMethod]:
    """The record of the checkpoint at `source` and the method it is evaluated as, checked
    before any work: one model with the checkpoint's exits and heads, the task's label count,
    the checkpoint's own pooling. An exported eebench model's method settings are the default
    of its own method (`settings` given on the command line go over them)."""
    from eebench.models.convert.build import check_fits

    checkpoint = opened(source)
    exported = checkpoint.exported
    if exported.get("method") == get_method(method).name:
        settings = {**(exported.get("method_settings") or {}), **settings}
    m = get_method(method, **settings)
    record = checkpoint.record()
    if len(m.variants([1.0, 2.0])) > 1 or len(m.models(record.num_layers)) > 1:
        raise UsageError(f"--from-checkpoint evaluates one model; {m.name} trains {trains(m)}",
                         hint="use a method with exits on one model (eebench methods)")
    check_fits(checkpoint, m)
    if record.num_labels != task.num_labels:
        raise UsageError(f"{source}: its classifiers have {record.num_labels} outputs, task "
                         f"{task.name} has {task.num_labels} labels",
                         hint="evaluate a checkpoint on the task it was fine-tuned for")
    if pooling is not None and pooling != record.pooling:
        raise UsageError(f"--pooling {pooling}: the checkpoint's exit heads pool with "
                         f"{record.pooling}", hint="leave --pooling out with --from-checkpoint")
    return record, m


def imported_path(root: Path, record: CheckpointSource, method: EarlyExitMethod) -> Path:
    key = config_hash({"weights": record.model_dump(mode="json"), "method": method.name,
                       "settings": method.settings})
    return checkpoint_path(Path(root) / IMPORTED, record.source, method.name, "any", key)


def import_checkpoint(record: CheckpointSource, method: EarlyExitMethod, root: Path,
                      console: Any = None) -> Path:
    """The checkpoint directory of `record` converted for `method` (made once, then reused).
    One process converts it at a time (`claimed`, the lock training takes): another one waits,
    then finds it finished. Weights whose sha256 is no longer the recorded one are refused."""
    path = imported_path(root, record, method)
    with claimed(path):
        _convert(record, method, path, console)
        lock_file(path).unlink(missing_ok=True)  # finished: nothing left to hold
    return path


def _convert(record: CheckpointSource, method: EarlyExitMethod, path: Path, console: Any) -> None:
    """Write the converted checkpoint at `path` (its lock held), unless it is there finished."""
    from eebench.models.convert.build import load_model, load_tokenizer

    recover(path)
    state = read_state(path)
    if state is not None and state.finished:
        return
    checkpoint = opened(record.source)
    if checkpoint.sha256 != record.sha256:
        raise DataError(f"{record.source}: its weights changed since the run was planned "
                        f"(sha256 {checkpoint.sha256[:12]}, planned {record.sha256[:12]})",
                        hint="rerun the command: it plans the run on the weights as they are")
    model = load_model(checkpoint, method)
    tokenizer = load_tokenizer(checkpoint, model.config)
    if console is not None:
        console.print(f"imported {record.format} checkpoint {record.source} as {method.name}")
    state = TrainState(config_hash=path.name, finished=True,
                            config={"imported": record.model_dump(mode="json")})
    save_checkpoint(path, model, tokenizer, state)
