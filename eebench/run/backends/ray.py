"""Cells as Ray core tasks (not Tune): one task per cell, `num_cpus`/`num_gpus` each.

With `--ray-address` the driver attaches to a running cluster, whose workers must see the same
`--out`, `--checkpoints` and data paths (shared storage); otherwise it starts a local cluster for
the command, bound to loopback only, without the dashboard, and stops it at the end. A task whose
worker process dies (killed, out of memory, a lost node) is re-run by Ray itself up to
`--retries` times (`max_retries`); a cell that raises is retried by the driver. At most
`--max-parallel` cells are in flight at once (default: as many as the cluster's resources allow).
An address that does not answer within a few seconds is refused before Ray's own retries (which
last minutes), and a GPU per cell that the local cluster does not have, before any cell waits for
it (eebench.run.backends.resources).
"""

from __future__ import annotations

import os
from collections import deque
from typing import Any

from eebench.errors import EebenchError, one_line
from eebench.run.backends.cells import CellOutcome, cell_dir, run_cell, write_error
from eebench.run.backends.engine import Engine, Handle, engine_missing
from eebench.run.backends.resources import check_reachable

# A local cluster: loopback only, no dashboard, workers' logs not echoed. On Linux, Ray turns a
# node address of 127.0.0.1 into the machine's outward address unless it runs in its
# single-machine mode, which it reads from the environment when it is imported.
LOCAL_CLUSTER = {"include_dashboard": False, "_node_ip_address": "127.0.0.1",
                 "log_to_driver": False, "configure_logging": False}
LOCAL_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}


class RayEngine(Engine):
    name = "ray"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        if not self.opts.ray_address:
            for name, value in LOCAL_ENV.items():
                os.environ.setdefault(name, value)
        try:
            import ray
        except ImportError:
            raise engine_missing("ray") from None
        self.ray = ray
        self.started = False
        if not ray.is_initialized():
            try:
                if self.opts.ray_address:
                    check_reachable(self.opts.ray_address)  # seconds, not Ray's minutes
                    ray.init(address=self.opts.ray_address, log_to_driver=False)
                else:
                    ray.init(**LOCAL_CLUSTER)
            except (ConnectionError, RuntimeError, ValueError, TimeoutError) as e:
                where = self.opts.ray_address or "a local cluster"
                raise EebenchError(f"--backend ray: cannot start or reach {where}: "
                                   f"{one_line(e, limit=300, named=True)}") from None
            self.started = True
        self._check_gpus()
        self.task = ray.remote(run_cell).options(
            num_cpus=self.opts.cpus_per_job or 1, num_gpus=self.opts.gpus_per_job or 0,
            max_retries=self.opts.retries or 0, retry_exceptions=False)

    def _check_gpus(self) -> None:
        """A GPU per cell where the cluster has them: a local cluster without enough is refused
        (its cells would wait for ever); a remote one may add nodes, so it is said, once."""
        need = self.opts.gpus_per_job or 0
        if not need:
            return
        have = int(self.ray.cluster_resources().get("GPU", 0))
        if have >= need:
            return
        if not self.opts.ray_address:
            self.close()
            raise EebenchError(f"--gpus-per-job {need}: the local Ray cluster has {have} GPU(s),"
                               " so no cell could ever start", hint="run on a machine with "
                               "GPUs, or leave out --gpus-per-job")
        self.say(f"ray: the cluster has {have} GPU(s) now; each cell waits for a node with "
                 f"{need} to join")

    def start(self, handles: list[Handle]) -> None:
        """Nothing yet: tasks are submitted as slots free, while waiting."""

    def wait(self, handles: list[Handle]) -> dict[str, CellOutcome]:
        queue = deque(handles)
        limit = self.opts.max_parallel or len(handles)
        in_flight: dict[Any, Handle] = {}
        outcomes: dict[str, CellOutcome] = {}
        while queue or in_flight:
            while queue and len(in_flight) < limit:
                h = queue.popleft()
                in_flight[self.task.remote(h.cell, self.worker, h.attempt)] = h
            done, _ = self.ray.wait(list(in_flight), num_returns=1)
            for ref in done:
                h = in_flight.pop(ref)
                outcomes[h.cell.key] = self._outcome(ref, h)
        return outcomes

    def _outcome(self, ref: Any, h: Handle) -> CellOutcome:
        try:
            return self.ray.get(ref)
        except Exception as e:  # the task could not finish: Ray's own errors
            # A dead worker was already re-run max_retries times by Ray; an error raised in
            # the task itself (RayTaskError) was not.
            retried = not isinstance(e, self.ray.exceptions.RayTaskError)
            error = f"ray task failed: {one_line(e, limit=300, named=True)}"
            run_dir = cell_dir(h.cell, self.worker.out)
            write_error(run_dir, error, type(e).__name__, h.attempt, self.name, str(e))
            return CellOutcome(h.cell.key, "failed", h.attempt, error=error,
                               run_dir=str(run_dir), engine_retried=retried)

    def close(self) -> None:
        if self.started:
            self.ray.shutdown()
