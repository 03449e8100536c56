"""Stand-in cell functions for the backend tests (`WorkerOptions.cell_fn`), so that the engines'
own behaviour (arrays, retries, dead workers, collecting) is tested in seconds.

Each writes a small but complete run directory (what `status` verifies as done) and leaves a
call record under `<out>/calls/`, one file per execution, so tests count how often a cell ran.
Markers under `<out>/markers/` make a cell misbehave on its first attempt only.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import numpy as np

from eebench.io import atomic_write_text, write_json
from eebench.run import artifacts as R
from eebench.run.backends.cells import Cell, WorkerOptions, cell_dir
from eebench.run.execute import run_dir_for

SLEEP_SECONDS = 4.0


def calls(out: Path, key: str) -> int:
    return len(list((Path(out) / "calls").glob(f"{key}.*")))


def _record_call(cell: Cell, opts: WorkerOptions) -> None:
    folder = Path(opts.out) / "calls"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{cell.key}.{uuid.uuid4().hex[:8]}").write_text(str(os.getpid()))


def _first_time(cell: Cell, opts: WorkerOptions, what: str) -> bool:
    marker = Path(opts.out) / "markers" / f"{cell.key}.{what}"
    if marker.exists():
        return False
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text("")
    return True


def fake_run(cell: Cell, opts: WorkerOptions) -> Path:
    """A finished run per run of the cell, its one 'prediction' the seed."""
    _record_call(cell, opts)
    for rc in cell.runs:
        run_dir = run_dir_for(rc, Path(opts.out))
        run_dir.mkdir(parents=True, exist_ok=True)
        write_json(run_dir / R.CONFIG_FILE, rc)
        write_json(run_dir / R.ENV_FILE, {"pid": os.getpid()})
        atomic_write_text(run_dir / R.POINTS_FILE, "")
        atomic_write_text(run_dir / R.IDS_FILE, "0\n")
        from safetensors.numpy import save_file

        save_file({"prediction": np.array([rc.seed], dtype=np.int64)},
                  str(run_dir / R.PREDICTIONS_FILE))
        summary = R.RunSummary(model=rc.model, method=rc.label, task=rc.task, split=rc.split,
                               seed=rc.seed, config_hash=rc.key(), n_samples=1, num_points=0,
                               variants=[], files=R.file_hashes(run_dir), wall_seconds=0.1)
        write_json(run_dir / R.SUMMARY_FILE, summary)
    return cell_dir(cell, opts.out)


def raises_once(cell: Cell, opts: WorkerOptions) -> Path:
    if _first_time(cell, opts, "raised"):
        _record_call(cell, opts)
        raise RuntimeError(f"cell {cell.key} fails on its first attempt")
    return fake_run(cell, opts)


def dies_once(cell: Cell, opts: WorkerOptions) -> Path:
    """Its worker process is killed (SIGKILL: no exception, no result) the first time."""
    if _first_time(cell, opts, "died"):
        _record_call(cell, opts)
        os.kill(os.getpid(), signal.SIGKILL)
    return fake_run(cell, opts)


def always_fails(cell: Cell, opts: WorkerOptions) -> Path:
    _record_call(cell, opts)
    raise ValueError("this cell is broken")


def sleeps(cell: Cell, opts: WorkerOptions) -> Path:
    time.sleep(SLEEP_SECONDS)
    return fake_run(cell, opts)


def by_seed(cell: Cell, opts: WorkerOptions) -> Path:
    """Seed 0 runs, seed 1 raises once, seed 2 is killed once (and so on, modulo 3)."""
    return (fake_run, raises_once, dies_once)[cell.config.seed % 3](cell, opts)
