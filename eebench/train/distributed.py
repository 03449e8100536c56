"""One training job across processes: every process trains on its part of each global batch.

`eebench train --processes N` starts N local processes itself (`launch`); `accelerate launch
-m eebench train ...` or `torchrun -m eebench train ...` start them from outside. Either way
each process joins the job through accelerate (`join`: NCCL between GPUs, one per process; gloo
between CPU processes) and runs the same training loop (eebench.train.loop):

- The global batch size stays the configured one: every process draws the same global batches in
  the same order (eebench.data.batching) and takes its contiguous part of each.
- A process's loss (a mean over its rows) is weighted by its rows' share of the global batch, and
  the gradients are summed over the processes: the update is the one a single process makes on
  the whole batch, for a loss that is a mean over rows (every built-in method's), a last batch
  that does not split evenly included. A process whose part is empty runs one stand-in row with
  weight 0, so that every process takes part in every sum.
- Only the main process (rank 0) writes checkpoints, evaluates and prints; the others wait at
  barriers. A checkpoint holds one process's copy of what all hold alike, so it resumes with any
  number of processes, and the number is not part of its name.

Why not DistributedDataParallel: a method's stages change which tensors train (DeeBERT freezes
the backbone for its second stage) and a stage's loss may leave exits out, which a wrapper built
once would wait for. One sum over a flat buffer of the trainable tensors' gradients after the
backward pass is the same arithmetic, without the overlap of communication with the backward
pass that matters for large models only.

accelerate and torch.distributed are imported inside functions: `eebench --help` loads neither.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import tempfile
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eebench.errors import EebenchError, UsageError, one_line

if TYPE_CHECKING:
    import torch

# What launchers set (torchrun and `accelerate launch`; mpirun's, which accelerate reads on CPUs).
WORLD_SIZE_ENV = ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")
RANK_ENV = ("RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "MV2_COMM_WORLD_RANK")
LAUNCH_HINT = "start the processes with `eebench train --processes N` or `accelerate launch`"


def _env_int(names: tuple[str, ...]) -> int | None:
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            try:
                return int(value)
            except ValueError:
                raise UsageError(f"{name}={value!r} is not a whole number",
                                 hint=LAUNCH_HINT) from None
    return None


def launched_processes() -> int:
    """How many processes the launcher of this one says the job has (1 without a launcher)."""
    return _env_int(WORLD_SIZE_ENV) or 1


def is_main_process() -> bool:
    """Whether this process is the job's main one (rank 0), or alone; read before `join`."""
    return launched_processes() <= 1 or _env_int(RANK_ENV) == 0


@dataclass(frozen=True)
class Processes:
    """This process's place in the job, and the collective steps of a training step. With one
    process every method returns at once or hands back what it was given."""

    rank: int = 0
    size: int = 1
    device: str | None = None  # where this process computes; None: the configured device

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def part(self) -> tuple[int, int]:
        """(rank, processes): which part of each global batch is this process's."""
        return self.rank, self.size

    def barrier(self) -> None:
        """Wait until every process gets here."""
        if self.size > 1:
            from accelerate import PartialState

            PartialState().wait_for_everyone()

    def weigh(self, loss: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """This process's part of the global batch's loss: `loss` (a mean over this process's
        rows) times their share of the batch's rows."""
        if self.size == 1:
            return loss
        return loss * batch["share"].item()

    def total(self, part: torch.Tensor) -> torch.Tensor:
        """The global batch's loss (detached) from every process's `weigh`ed part."""
        if self.size == 1:
            return part
        import torch.distributed as dist

        total = part.detach().clone()
        dist.all_reduce(total)
        return total

    def sum_gradients(self, params: list[torch.nn.Parameter]) -> None:
        """Sum every trainable tensor's gradient over the processes, in one flat buffer per
        dtype. A tensor that has no gradient on any process keeps none (AdamW skips it, as it
        does with one process)."""
        if self.size == 1 or not params:
            return
        import torch
        import torch.distributed as dist

        by_dtype: dict[torch.dtype, list[torch.nn.Parameter]] = {}
        for p in params:
            by_dtype.setdefault(p.dtype, []).append(p)
        for dtype, group in by_dtype.items():
            has = torch.tensor([p.grad is not None for p in group], dtype=dtype,
                               device=group[0].device)
            flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                              for p in group] + [has])
            dist.all_reduce(flat)
            chunks = flat[:-len(group)].split([p.numel() for p in group])
            for p, chunk, count in zip(group, chunks, flat[-len(group):].tolist()):
                if count > 0:
                    p.grad = chunk.view_as(p)

    def seed_step(self, seed: int, step: int) -> None:
        """Dropout draws of the other processes: a stream per (seed, step, rank), so that the
        processes draw unlike masks and a resumed run draws what an uninterrupted one would. The
        main process keeps the stream the checkpoint saves."""
        if self.rank == 0:
            return
        import torch

        digest = hashlib.sha256(f"{seed}/{step}/{self.rank}".encode()).digest()
        torch.manual_seed(int.from_bytes(digest[:8], "little") >> 1)

    def broadcast(self, model: torch.nn.Module) -> None:
        """Make every process's weights the main process's (they agree already, by seeding and
        loading the same files; this guards against a head initialised otherwise)."""
        if self.size == 1:
            return
        import torch.distributed as dist

        for tensor in model.state_dict().values():
            dist.broadcast(tensor, 0)


ONE = Processes()


def resolve_device(device: str | None) -> str:
    """The device asked for, or cuda where there is one, else cpu."""
    import torch

    return device or ("cuda" if torch.cuda.is_available() else "cpu")


def _check_device(processes: int, device: str) -> None:
    """`processes` processes on this machine each need a GPU of their own on CUDA (NCCL); gloo
    runs any number on CPU; other devices have no backend."""
    import torch

    kind, index = torch.device(device).type, torch.device(device).index
    if kind == "cuda":
        if index is not None:
            raise UsageError(f"--device {device} is one GPU, and several processes need one "
                             f"each", hint="pass --device cuda: process i uses GPU i")
        have = torch.cuda.device_count()
        if have < processes:
            raise UsageError(f"{processes} processes need {processes} GPUs, this machine has "
                             f"{have}", hint="use fewer processes, or --device cpu (gloo)")
    elif kind != "cpu":
        raise UsageError(f"--device {device} cannot run several processes (no distributed "
                         f"backend)", hint="use --device cuda or --device cpu")


def _check_batch(processes: int, batch_size: int) -> None:
    if batch_size % processes:
        raise UsageError(f"the batch size {batch_size} does not split over {processes} "
                         f"processes", hint=f"use a multiple of {processes} as --batch-size")


def _check_available(device: str) -> None:
    """A device this machine has."""
    import torch

    try:
        dev = torch.device(device)
    except RuntimeError:
        raise UsageError(f"--device {device!r} is not a device",
                         hint="cpu, cuda, cuda:N or mps") from None
    have = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if dev.type == "cuda" and (dev.index or 0) >= have:
        raise UsageError(f"--device {device}: this machine has {have} GPU(s)",
                         hint="use --device cpu")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise UsageError("--device mps: MPS is not available here", hint="use --device cpu")


def check_launch(processes: int, batch_size: int, device: str | None) -> None:
    """Refuse, in one line, a device this machine lacks, and `processes` local processes that the
    batch size or the device cannot run: each takes an equal part of every full batch, and on
    CUDA each needs a GPU."""
    if processes < 1:
        raise UsageError(f"--processes must be at least 1, got {processes}")
    if processes > 1:
        _check_batch(processes, batch_size)
        _check_device(processes, resolve_device(device))
    if device is not None:
        _check_available(device)


def join(batch_size: int, device: str | None) -> Processes:
    """This process's place in the job it was launched into; `ONE` without a launcher.

    Refused in one line: a launcher's world size without this process's rank (each process would
    act as the main one and write the same checkpoint), a batch size that does not split over the
    processes, a device that cannot run them (`check_launch`), and a job that accelerate does not
    set up as that many processes.
    """
    size = launched_processes()
    if size <= 1:
        return ONE
    rank = _env_int(RANK_ENV)
    if rank is None or not 0 <= rank < size:
        what = "no rank" if rank is None else f"rank {rank}"
        raise UsageError(f"the launcher says {size} processes but gives this one {what}: each "
                         f"would act as the main process and write the same checkpoint",
                         hint=LAUNCH_HINT)
    _check_batch(size, batch_size)
    device = resolve_device(device)
    local_rank = _env_int(("LOCAL_RANK",))
    local_rank = rank if local_rank is None else local_rank
    _check_device(local_rank + 1, device)  # this machine's processes up to this one
    try:
        from accelerate import PartialState
    except ImportError:
        raise UsageError("several processes need the accelerate package",
                         hint="pip install accelerate") from None
    cpu = not device.startswith("cuda")
    try:
        state = PartialState(cpu=cpu)
    except (RuntimeError, ValueError, OSError) as e:
        why = one_line(e, limit=2000)
        if "EADDRINUSE" in why:  # rank 0 serves the rendezvous at MASTER_ADDR:MASTER_PORT
            where = f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}"
            raise UsageError(f"process {rank} cannot serve the job's rendezvous at {where}: "
                             f"the port is taken, by another process that acts as the main one "
                             f"too, or by another program",
                             hint="give each process its own RANK, or another MASTER_PORT"
                             ) from None
        raise EebenchError(f"process {rank} could not join the {size}-process job: {why[:200]}",
                           hint=LAUNCH_HINT) from None
    if state.num_processes != size or state.process_index != rank:
        raise UsageError(f"the launcher says {size} processes, but this one (rank {rank}) found "
                         f"{state.num_processes}: each would act as the main process",
                         hint=LAUNCH_HINT)
    return Processes(rank=rank, size=size, device="cpu" if cpu else str(state.device))


# ----------------------------------------------------------------------------- local launch
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def _launcher_quiet() -> Iterator[None]:
    """The launcher's own log lines (a worker's traceback, "terminating process ...") stay out
    of the output: a failure is reported once, by `launch`. Its signal handlers are undone."""
    import logging

    prefixes = ("torch.distributed.elastic", "torch.multiprocessing")
    names = [*prefixes, *(name for name in logging.Logger.manager.loggerDict
                          if name.startswith(tuple(p + "." for p in prefixes)))]
    levels = {name: logging.getLogger(name).level for name in names}
    signals = [s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None))
               if s is not None]
    handlers = {s: signal.getsignal(s) for s in signals}
    for name in names:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
        for s, handler in handlers.items():
            if handler is not None:
                signal.signal(s, handler)


def _worker(fn: Callable[..., Any], args: tuple, errors: str) -> Any:
    """Run `fn(*args)` in a launched process; a failure is written for `launch` to report."""
    try:
        return fn(*args)
    except BaseException as e:
        from eebench.errors import expected

        err = None if isinstance(e, KeyboardInterrupt) else expected(e)
        info: dict[str, Any] = ({"interrupted": True} if isinstance(e, KeyboardInterrupt) else
                                {"message": err.message, "hint": err.hint,
                                 "exit_code": err.exit_code} if err is not None else
                                {"traceback": traceback.format_exc()})
        rank = os.environ.get("RANK", "0")
        Path(errors, f"{rank}.json").write_text(json.dumps(info), encoding="utf-8")
        raise SystemExit(130 if "interrupted" in info else info.get("exit_code", 1)) from None


class WorkerFailed(RuntimeError):
    """A launched process failed with an unexpected error (a bug): its traceback."""


def _failure(errors: Path, codes: dict[int, int]) -> BaseException:
    """The error `launch` raises for failed processes: the main process's own where it wrote
    one, else the first process's that did; an interruption wins."""
    reports = {int(f.stem): json.loads(f.read_text(encoding="utf-8"))
               for f in errors.glob("*.json")}
    if any(r.get("interrupted") for r in reports.values()):
        return KeyboardInterrupt()
    for rank in sorted(reports):
        report = reports[rank]
        if "traceback" in report:
            return WorkerFailed(f"process {rank} failed:\n{report['traceback']}")
        return EebenchError(report["message"], hint=report.get("hint"),
                            exit_code=report.get("exit_code"))
    listed = ", ".join(f"process {r}: exit code {c}" for r, c in sorted(codes.items()))
    return EebenchError(f"a training process ended without a report ({listed or 'no code'})",
                        hint="it may have run out of memory")


def launch(processes: int, fn: Callable[..., Any], *args: Any) -> Any:
    """Run `fn(*args)` in `processes` new local processes that form one job (each calls `join`
    when it trains); returns the main process's result. A failure is raised here once: the
    main process's one-line error (or the first other's), KeyboardInterrupt after Ctrl-C.

    The processes are started the way `torchrun` starts them (torch's elastic launcher, which
    `accelerate launch` uses too), by "spawn": a fresh interpreter each, since forking a process
    that has run torch's thread pools can hang. Each gets OMP_NUM_THREADS = cores / processes
    unless it is set."""
    from accelerate.utils import patch_environment
    from torch.distributed.elastic.multiprocessing import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    port = _free_port()
    config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=processes,
                          run_id=f"eebench-{os.getpid()}-{port}", rdzv_backend="static",
                          rdzv_endpoint=f"127.0.0.1:{port}", rdzv_configs={"rank": 0},
                          max_restarts=0, monitor_interval=0.1, start_method="spawn")
    env = {}
    if not os.environ.get("OMP_NUM_THREADS"):
        env["omp_num_threads"] = str(max(1, (os.cpu_count() or 1) // processes))
    with tempfile.TemporaryDirectory(prefix="eebench-launch-") as errors, _launcher_quiet(), \
            patch_environment(**env):
        try:
            results = elastic_launch(config, _worker)(fn, args, errors)
        except ChildFailedError as e:
            codes = {f.local_rank: f.exitcode for f in e.failures.values()}
            raise _failure(Path(errors), codes) from None
        except SignalException:
            raise KeyboardInterrupt from None
    return results[0]
