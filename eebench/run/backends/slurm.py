"""Cells as Slurm job arrays, through submitit: one `sbatch --array=0-N%K` per round.

submitit's folder lives in the runs root, `<out>/.submitit/<submission>/` (a fresh folder per
submission: Slurm reuses job ids after its state is reset, and a reused folder would hold an old
job's files). Each submitted cell leaves a record, `<out>/.submitit/cells/<key>.json` (its job id,
the name of its submission folder and its attempt), until its job is settled, so that a driver
that left early (`--no-wait`) can be followed by another that waits for those jobs instead of
submitting the cells again, and that names the cells whose job died without a word (killed, out
of memory, past its time limit) by writing their error record.

What a job did is read from its cell's run directories, as for every backend
(`cells.status`: each run's summary present and verified, or the error record its worker wrote),
never from the result pickle submitit leaves: the driver unpickles nothing. A record is data
checked field by field: its job id is a Slurm id, its submission folder a name eebench gives,
resolved under `<out>/.submitit/` (never a path read back from it), so a record planted in a
runs folder can name no file elsewhere; one that is not a record is refused in one line.

Job states come from `sacct` (submitit needs Slurm's accounting for them), read once every few
seconds for all jobs together.
"""

from __future__ import annotations

import getpass
import os
import re
import shutil
import stat
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eebench.errors import DataError, EebenchError, one_line
from eebench.io import read_json, write_json
from eebench.io.locks import held_elsewhere
from eebench.run.backends.cells import (
    Cell,
    CellOutcome,
    cell_dir,
    read_error,
    run_cell,
    status,
    write_error,
)
from eebench.run.backends.engine import Engine, Handle, engine_missing

SUBMITIT_DIR = ".submitit"
RECORDS_DIR = "cells"
DEFAULT_TIME_LIMIT = 240  # minutes; submitit always asks for a limit, and 5 min is its default
POLL_SECONDS = 0.5
SACCT_EVERY = 3.0  # seconds between two sacct calls while waiting
LOST_AFTER = 60.0  # seconds after which a job sacct still does not know is looked up in squeue
LOG_TAIL = 60  # lines of a dead job's log kept in its cell's traceback.txt
LOG_BYTES = 64 << 10  # the end of a dead job's log read for them
RECORD_BYTES = 4096  # a record is a few fields
SUBMISSION = re.compile(r"\d{8}-\d{6}-[0-9a-f]{8}")  # the folder names `_executor` gives
JOB_ID = re.compile(r"\d{1,20}(_\d{1,9})?")  # a job, or an array task <array>_<index>


def records_dir(out: Path | str) -> Path:
    return Path(out) / SUBMITIT_DIR / RECORDS_DIR


@dataclass(frozen=True)
class Record:
    """A submitted cell's record, checked: its job, its submission folder's name, its attempt."""

    job: str
    submission: str
    attempt: int

    def folder(self, out: Path | str) -> Path:
        return Path(out) / SUBMITIT_DIR / self.submission


def records(out: Path | str) -> dict[str, Record]:
    """The cells submitted by earlier commands whose jobs are not settled yet, by key (read
    without asking Slurm: `--dry-run` lists them as submitted). A file that is not a record is
    refused in one line: it could make a driver wait for, or settle, a job it never submitted."""
    return {path.stem: read_record(path) for path in sorted(records_dir(out).glob("*.json"))}


def read_record(path: Path) -> Record:
    hint = ("remove it if no job of that cell is queued or running: a cell's results are read "
            "from its run directories")
    if not path.is_file() or path.stat().st_size > RECORD_BYTES:
        raise DataError(f"{path}: not a Slurm cell record (not a small regular file)", hint=hint)
    data = read_json(path, hint=hint)
    if not isinstance(data, dict):
        raise DataError(f"{path}: not a Slurm cell record (not a JSON object)", hint=hint)
    # `folder`: the records of earlier versions named the folder's path; only its name is used
    name = data.get("submission", Path(str(data["folder"])).name if "folder" in data else None)
    job, attempt = data.get("job"), data.get("attempt", 1)
    why = ("no job id" if job is None else
           "its job is not a Slurm job id" if not isinstance(job, str) or not JOB_ID.fullmatch(job)
           else "no submission folder" if name is None else
           "its submission folder is not one eebench names" if not isinstance(name, str)
           or not SUBMISSION.fullmatch(name) else
           "its attempt is not a count" if isinstance(attempt, bool)
           or not isinstance(attempt, int) or not 1 <= attempt <= 10_000 else None)
    if why:
        raise DataError(f"{path}: not a Slurm cell record ({why})", hint=hint)
    return Record(job, name, attempt)


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
            why = one_line(e, limit=300, named=True)
            raise EebenchError(f"sbatch refused the job array: {why}",
                               hint="check --partition, --account and --slurm-option") from None
        for h, job in zip(handles, jobs):
            h.ref, h.job = job, str(job.job_id)
            write_json(records_dir(self.worker.out) / f"{h.cell.key}.json",
                       {"job": h.job, "submission": Path(executor.folder).name,
                        "attempt": h.attempt})
        self.say(f"slurm: job array {jobs[0].job_id.split('_')[0]} ({len(jobs)} cells) in "
                 f"{executor.folder}")

    # --------------------------------------------------------------------- earlier commands
    def collect(self, cells: list[Cell]) -> dict[str, Handle]:
        recs = records(self.worker.out)
        found = []
        for cell in cells:
            rec = recs.get(cell.key)
            if rec is not None:
                job = self.submitit.SlurmJob(folder=rec.folder(self.worker.out), job_id=rec.job)
                found.append(Handle(cell, rec.attempt, job, rec.job))
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
        return h.ref.watcher.is_done(h.ref.job_id, mode="cache")

    def _settle(self, h: Handle) -> CellOutcome:
        """A finished job's outcome, from its cell's run directories: done (every summary
        present and verified), the error record its worker wrote, busy (another process holds
        one of its runs), or (the job died before it could say) an error record written here,
        from the job's state and the end of its log."""
        out, key = self.worker.out, h.cell.key
        self._drop(h)
        if status(h.cell, out) == "done":
            return CellOutcome(key, "done", h.attempt, job=h.job)
        run_dir = str(cell_dir(h.cell, out))
        error = read_error(h.cell, out)
        if isinstance(error, dict) and error.get("job") == h.job:  # this job's own record
            return CellOutcome(key, "failed", h.attempt, error=" ".join(
                str(error.get("error")).split())[:300], run_dir=run_dir, job=h.job)
        if _held(h.cell, out):
            return CellOutcome(key, "busy", h.attempt, run_dir=run_dir, job=h.job)
        state = h.ref.watcher.get_state(h.ref.job_id, mode="cache")
        return self._failed(h, f"slurm job {h.job} ended {state} without a result",
                            _log_tail(Path(h.ref.paths.stdout)))

    def _failed(self, h: Handle, error: str, trace: str) -> CellOutcome:
        write_error(cell_dir(h.cell, self.worker.out), error, "SlurmJobError", h.attempt,
                    self.name, trace, job=h.job)
        return CellOutcome(h.cell.key, "failed", h.attempt, error=error,
                           run_dir=str(cell_dir(h.cell, self.worker.out)), job=h.job)

    def _drop(self, h: Handle) -> None:
        (records_dir(self.worker.out) / f"{h.cell.key}.json").unlink(missing_ok=True)


def _held(cell: Cell, out: Path | str) -> bool:
    """Whether another process holds the lock of one of the cell's run directories."""
    from eebench.run.execute import LOCK_FILE, run_dir_for

    return any(held_elsewhere(run_dir / LOCK_FILE) for run_dir in
               (*(run_dir_for(rc, Path(out)) for rc in cell.in_domain), *cell.run_dirs(out)))


def _log_tail(path: Path) -> str:
    """The last lines of a job's log: a regular file, read from its end, at most LOG_BYTES."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return ""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return ""
        os.lseek(fd, max(0, st.st_size - LOG_BYTES), os.SEEK_SET)
        text = os.read(fd, LOG_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ""
    finally:
        os.close(fd)
    return "".join(text.splitlines(keepends=True)[-LOG_TAIL:])


def _queue() -> set[str]:
    """The ids of this user's jobs in the queue (pending or running), array tasks one by one."""
    command = ["squeue", "--noheader", "--array", "--format=%i", f"--user={getpass.getuser()}"]
    try:
        listing = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError) as e:
        raise EebenchError(f"squeue failed: {one_line(e, limit=300, named=True)}") from None
    return {line.strip() for line in listing.stdout.splitlines() if line.strip()}
