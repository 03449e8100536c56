"""What a backend is: its options (checked before any work), whether its engine's package is
installed, and the engine protocol (`Engine`, `Handle`) the local, Slurm and Ray engines
implement. A leaf: the engines build on it, and the driver that opens them imports them, so it
imports neither.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from eebench.errors import EebenchError, UsageError
from eebench.run.backends.cells import Cell, CellOutcome, WorkerOptions

BACKENDS = ("local", "slurm", "ray")
EXTRAS = {"slurm": ("submitit", "eebench[slurm]"), "ray": ("ray", "eebench[ray]")}


@dataclass(frozen=True)
class BackendOptions:
    """How a grid runs (nothing here changes its results). None: not given."""

    backend: str = "local"
    max_parallel: int | None = None
    retries: int | None = None
    rerun_failed: bool = False
    cpus_per_job: int | None = None
    gpus_per_job: int | None = None
    partition: str | None = None
    time_limit: int | None = None  # minutes
    account: str | None = None
    slurm_options: dict[str, str] = field(default_factory=dict)
    exclusive: bool = False
    wait: bool = True
    ray_address: str | None = None
    # local: start no cell whose estimate (`eebench run --dry-run`'s) would end after this Unix
    # time; a cell without an estimate is not started either
    stop_by: float | None = None

    # options that only one engine reads, by the flag that sets them
    SLURM_ONLY = {"partition": "--partition", "time_limit": "--time-limit",
                  "account": "--account", "slurm_options": "--slurm-option",
                  "exclusive": "--exclusive", "wait": "--no-wait"}
    RAY_ONLY = {"ray_address": "--ray-address"}
    LOCAL_ONLY = {"stop_by": "--stop-by"}
    ENGINE_ONLY = {"max_parallel": "--max-parallel", "retries": "--retries",
                   "rerun_failed": "--rerun-failed", "cpus_per_job": "--cpus-per-job",
                   "gpus_per_job": "--gpus-per-job"}


def check_options(opts: BackendOptions) -> None:
    """Refuse, in one line, an option the chosen backend would silently ignore."""
    if opts.backend not in BACKENDS:
        raise UsageError(f"unknown backend {opts.backend!r}", hint=f"choose from: "
                         f"{', '.join(BACKENDS)}")
    default = BackendOptions()
    foreign = {"local": {**BackendOptions.RAY_ONLY, **BackendOptions.SLURM_ONLY,
                         **BackendOptions.ENGINE_ONLY},
               "slurm": {**BackendOptions.RAY_ONLY, **BackendOptions.LOCAL_ONLY},
               "ray": {**BackendOptions.SLURM_ONLY, **BackendOptions.LOCAL_ONLY}}[opts.backend]
    for name, flag in foreign.items():
        if getattr(opts, name) != getattr(default, name):
            where = ("slurm" if name in BackendOptions.SLURM_ONLY else
                     "ray" if name in BackendOptions.RAY_ONLY else
                     "local" if name in BackendOptions.LOCAL_ONLY else "slurm or ray")
            raise UsageError(f"{flag} does not apply to --backend {opts.backend}",
                             hint=f"it is an option of --backend {where}")


def engine_missing(backend: str) -> EebenchError:
    module, extra = EXTRAS[backend]
    return EebenchError(f"--backend {backend} needs the package {module}, which is not "
                        "installed", hint=f"pip install '{extra}'")


def require_engine(backend: str) -> None:
    """The engine's package is installed (checked before models and data are prepared; found,
    not imported: Ray reads its settings from the environment when it is imported)."""
    import importlib.util

    try:
        found = importlib.util.find_spec(EXTRAS[backend][0]) is not None
    except (ImportError, ValueError):  # ValueError: a module entry without a spec
        found = False
    if not found:
        raise engine_missing(backend)


@dataclass
class Handle:
    """A cell handed to an engine: its attempt, and the engine's own reference."""

    cell: Cell
    attempt: int
    ref: Any = None
    job: str | None = None


class Engine:
    """What a backend does: settle earlier submissions, start cells, wait for them."""

    name = "engine"
    # Cells run in this process (the local engine), in the grid's order, finished ones too (they
    # say so); a failure raises at once instead of being recorded, so a failure record of another
    # backend does not stop a cell here.
    in_process = False

    def __init__(self, opts: BackendOptions, worker: WorkerOptions,
                 say: Callable[[str], None]) -> None:
        self.opts, self.worker, self.say = opts, worker, say

    def collect(self, cells: list[Cell]) -> dict[str, Handle]:
        """Cells an earlier command's jobs still hold (queued or running), by key."""
        return {}

    def start(self, handles: list[Handle]) -> None:
        raise NotImplementedError

    def wait(self, handles: list[Handle]) -> dict[str, CellOutcome]:
        raise NotImplementedError

    def close(self) -> None:
        """Release what the engine started (a local Ray cluster)."""
