"""Cells as Slurm job arrays, through submitit: one `sbatch --array=0-N%K` per round.

submitit's folder lives in the runs root, `<out>/.submitit/<submission>/` (a fresh folder per
submission: Slurm reuses job ids after its state is reset, and a reused folder would hand back an
old job's result). Each submitted cell leaves a record, `<out>/.submitit/cells/<key>.json` (its
job id, folder and attempt), until its job is settled, so that a driver that left early
(`--no-wait`) can be followed by another that waits for those jobs instead of submitting the
cells again, and that names the cells whose job died without a word (killed, out of memory, past
its time limit) by writing their error record.

Job states come from `sacct` (submitit needs Slurm's accounting for them), read once every few
seconds for all jobs together; a result file appearing ends the wait for its job at once.
"""

from __future__ import annotations

import getpass
import json
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from eebench.errors import EebenchError
from eebench.io import write_json
from eebench.run.backends.cells import (
    Cell,
    CellOutcome,
    cell_dir,
    one_line,
    run_cell,
    status,
    write_error,
)
from eebench.run.backends.driver import Engine, Handle, engine_missing

SUBMITIT_DIR = ".submitit"
RECORDS_DIR = "cells"
DEFAULT_TIME_LIMIT = 240  # minutes; submitit always asks for a limit, and 5 min is its default
POLL_SECONDS = 0.5
SACCT_EVERY = 3.0  # seconds between two sacct calls while waiting
LOST_AFTER = 60.0  # seconds after which a job sacct still does not know is looked up in squeue
LOG_TAIL = 60  # lines of a dead job's log kept in its cell's traceback.txt


def records_dir(out: Path | str) -> Path:
    return Path(out) / SUBMITIT_DIR / RECORDS_DIR


def records(out: Path | str) -> dict[str, dict[str, Any]]:
    """The cells submitted by earlier commands whose jobs are not settled yet, by key (read
    without asking Slurm: `--dry-run` lists them as submitted)."""
    found = {}
    for path in sorted(records_dir(out).glob("*.json")):
        try:
            found[path.stem] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # a record half-written by a killed driver: not a job
            continue
    return found


class SlurmEngine(Engine):
    name = "slurm"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        try:
            import submitit
        except ImportError:
            raise engine_missing("slurm") from None
        if shutil.which("sbatch") is None:
            raise EebenchError("--backend slurm: sbatch not found, so no Slurm cluster can be "
                               "reached from here", hint="run on a Slurm login node")
        self.submitit = submitit
        self.root = Path(self.worker.out) / SUBMITIT_DIR

    # ------------------------------------------------------------------------------- submit
    def _executor(self) -> Any:
        folder = self.root / f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"
        executor = self.submitit.SlurmExecutor(folder=folder, max_num_timeout=0)
        o = self.opts
        params: dict[str, Any] = {
            "job_name": "eebench", "cpus_per_task": o.cpus_per_job or 1,
            "time": o.time_limit or DEFAULT_TIME_LIMIT, "stderr_to_stdout": True,
            "additional_parameters": dict(o.slurm_options),
        }
        if o.max_parallel:
            params["array_parallelism"] = o.max_parallel
        if o.gpus_per_job:
            params["gpus_per_node"] = o.gpus_per_job
        if o.partition:
            params["partition"] = o.partition
        if o.account:
            params["account"] = o.account
        if o.exclusive:
            params["exclusive"] = True
        executor.update_parameters(**params)
        return executor

    def start(self, handles: list[Handle]) -> None:
        if not handles:
            return
        executor = self._executor()
        try:
            jobs = executor.map_array(run_cell, [h.cell for h in handles],
                                      [self.worker] * len(handles), [h.attempt for h in handles])
        except Exception as e:  # sbatch refused (a bad partition, account or option)
            raise EebenchError(f"sbatch refused the job array: {one_line(e)[:300]}",
                               hint="check --partition, --account and --slurm-option") from None
        for h, job in zip(handles, jobs):
            h.ref, h.job = job, str(job.job_id)
            write_json(records_dir(self.worker.out) / f"{h.cell.key}.json",
                       {"job": h.job, "folder": str(executor.folder), "attempt": h.attempt})
        self.say(f"slurm: job array {jobs[0].job_id.split('_')[0]} ({len(jobs)} cells) in "
                 f"{executor.folder}")

    # --------------------------------------------------------------------- earlier commands
    def collect(self, cells: list[Cell]) -> dict[str, Handle]:
        recs = records(self.worker.out)
        found = []
        for cell in cells:
            rec = recs.get(cell.key)
            if rec is not None:
                job = self.submitit.SlurmJob(folder=rec["folder"], job_id=rec["job"])
                found.append(Handle(cell, int(rec.get("attempt", 1)), job, rec["job"]))
        if not found:
            return {}
        found[0].ref.watcher.update()  # one sacct call for them all
        queued = None
        active = {}
        for h in found:
            if self._finished(h):
                self._settle(h)
                continue
            if h.ref.watcher.get_state(h.job, mode="cache").upper() == "UNKNOWN":
                # sacct lags behind the controller by a moment: ask the queue itself
                queued = _queue() if queued is None else queued
                if h.job not in queued:  # neither knows it (a reset cluster): run it again
                    self.say(f"slurm: job {h.job} of cell {h.cell.key} is unknown to Slurm; "
                             "the cell is run again")
                    self._drop(h)
                    continue
            active[h.cell.key] = h
        if active:
            self.say(f"slurm: {len(active)} cell(s) still queued or running from an earlier "
                     "command")
        return active

    # ----------------------------------------------------------------------------------- wait
    def wait(self, handles: list[Handle]) -> dict[str, CellOutcome]:
        pending = {h.cell.key: h for h in handles}
        outcomes: dict[str, CellOutcome] = {}
        started = last = time.monotonic()
        while pending:
            lost: set[str] = set()
            if time.monotonic() - last > SACCT_EVERY:
                next(iter(pending.values())).ref.watcher.update()
                last = time.monotonic()
                if last - started > LOST_AFTER:
                    lost = self._lost(list(pending.values()))
            for key, h in list(pending.items()):
                if self._finished(h) or h.job in lost:
                    outcomes[key] = self._settle(h)
                    del pending[key]
            if pending:
                time.sleep(POLL_SECONDS)
        return outcomes

    def _lost(self, handles: list[Handle]) -> set[str]:
        """Jobs that neither sacct nor the queue knows (long after submission): gone."""
        unknown = {h.job for h in handles
                   if h.ref.watcher.get_state(h.job, mode="cache").upper() == "UNKNOWN"}
        return unknown - _queue() if unknown else set()

    def _finished(self, h: Handle) -> bool:
        job = h.ref
        return job.paths.result_pickle.exists() or job.watcher.is_done(job.job_id, mode="cache")

    def _settle(self, h: Handle) -> CellOutcome:
        """A finished job's outcome: the worker's own, or (the job died before it could say) an
        error record written here, from the job's state and the end of its log."""
        job = h.ref
        self._drop(h)
        if job.paths.result_pickle.exists():
            try:
                result = job.result()
            except Exception as e:  # the worker itself could not start (an import failed)
                return self._failed(h, f"slurm job {h.job} failed: {one_line(e)[:300]}", str(e))
            if isinstance(result, CellOutcome):
                result.job = result.job or h.job
                return result
        if status(h.cell, self.worker.out) == "done":
            return CellOutcome(h.cell.key, "done", h.attempt, job=h.job)
        state = job.watcher.get_state(job.job_id, mode="cache")
        log = job.stdout() or ""
        tail = "".join(log.splitlines(keepends=True)[-LOG_TAIL:])
        return self._failed(h, f"slurm job {h.job} ended {state} without a result", tail)

    def _failed(self, h: Handle, error: str, trace: str) -> CellOutcome:
        write_error(cell_dir(h.cell, self.worker.out), error, "SlurmJobError", h.attempt,
                    self.name, trace, job=h.job)
        return CellOutcome(h.cell.key, "failed", h.attempt, error=error,
                           run_dir=str(cell_dir(h.cell, self.worker.out)), job=h.job)

    def _drop(self, h: Handle) -> None:
        (records_dir(self.worker.out) / f"{h.cell.key}.json").unlink(missing_ok=True)


def _queue() -> set[str]:
    """The ids of this user's jobs in the queue (pending or running), array tasks one by one."""
    command = ["squeue", "--noheader", "--array", "--format=%i", f"--user={getpass.getuser()}"]
    try:
        listing = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError) as e:
        raise EebenchError(f"squeue failed: {one_line(e)[:300]}") from None
    return {line.strip() for line in listing.stdout.splitlines() if line.strip()}
