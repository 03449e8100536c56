"""What a grid asks of an engine, checked before anything starts: nothing waits forever.

A request no machine can meet (a GPU per cell where there is none) would sit in Ray's or Slurm's
queue for ever; a newline in a Slurm option would end its `#SBATCH` line and start another line
of the job script; an engine address that does not answer would be retried for minutes. Each is
one line, before any cell is started.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
from urllib.parse import urlparse

from eebench.errors import EebenchError, UsageError, printable
from eebench.run.backends.engine import BackendOptions

CONNECT_TIMEOUT_S = 5.0  # an engine's address must answer within this
SINFO_TIMEOUT_S = 30.0
_SLURM_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
_GPU_GRES = re.compile(r"gpu(?::[^:,()]+)?:(\d+)")


def check_slurm_text(opts: BackendOptions) -> None:
    """Every string that goes into the job script is one printable line: the option names are
    words (`qos`, `mail-type`), the values and the partition and account hold no control
    character (a newline would start a line of its own in the script)."""
    for key, value in opts.slurm_options.items():
        if not _SLURM_KEY.fullmatch(key):
            raise UsageError(f"--slurm-option '{printable(key)}': not an option name",
                             hint="e.g. --slurm-option qos=high")
        _printable_line(f"--slurm-option {key}", value)
    for flag, value in (("--partition", opts.partition), ("--account", opts.account)):
        if value is not None:
            _printable_line(flag, value)


def _printable_line(flag: str, value: str) -> None:
    if not value.isprintable():
        raise UsageError(f"{flag} '{printable(value)}': holds a control character (a newline, "
                         "a tab, NUL)", hint="give one line of printable text")


def check_gpus(opts: BackendOptions) -> None:
    """`--gpus-per-job N` only where a machine has N GPUs: Ray's local cluster has this
    machine's; on Slurm, some node (of the partition) must list N GPUs in its GRES. A remote
    Ray cluster is asked once connected (RayEngine), since it may add nodes."""
    need = opts.gpus_per_job or 0
    if not need:
        return
    if opts.backend == "ray" and not opts.ray_address:
        have = local_gpus()
        if have < need:
            raise EebenchError(
                f"--gpus-per-job {need}: this machine has {_gpus(have)}, so the local Ray "
                "cluster could never start a cell", hint="run on a machine with GPUs, attach "
                "to a cluster with --ray-address, or leave out --gpus-per-job")
    elif opts.backend == "slurm":
        have = slurm_gpus(opts.partition)
        if have is not None and have < need:
            where = f"partition {opts.partition}" if opts.partition else "the Slurm cluster"
            raise EebenchError(
                f"--gpus-per-job {need}: no node of {where} has {_gpus(need)} (sinfo lists "
                f"at most {have} per node), so the jobs would wait in the queue forever",
                hint="choose a --partition with GPU nodes, or leave out --gpus-per-job")


def _gpus(n: int) -> str:
    return "no GPU" if n == 0 else f"{n} GPU" + ("s" if n > 1 else "")


def local_gpus() -> int:
    """The CUDA devices this process sees (CUDA_VISIBLE_DEVICES respected), as Ray counts them."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def slurm_gpus(partition: str | None) -> int | None:
    """The most GPUs any node (of `partition`) lists in its GRES; None when sinfo cannot say
    (not installed, or failing: the engine then reports the cluster itself)."""
    if shutil.which("sinfo") is None:
        return None
    command = ["sinfo", "--noheader", "--format=%G"] + (["-p", partition] if partition else [])
    try:
        listing = subprocess.run(command, capture_output=True, text=True, check=True,
                                 timeout=SINFO_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    counts = [int(n) for line in listing.stdout.splitlines() for n in _GPU_GRES.findall(line)]
    return max(counts, default=0)


def check_reachable(address: str) -> None:
    """A Ray cluster address ("host:port", "ray://host:port") answers a TCP connection within
    CONNECT_TIMEOUT_S; "auto" is the cluster RAY_ADDRESS names (else Ray's own lookup, which
    fails at once when it finds none)."""
    import os

    if address == "auto":
        address = os.environ.get("RAY_ADDRESS", "").strip()
        if not address or address in ("auto", "local"):
            return
    url = urlparse(address if "://" in address else f"tcp://{address}")
    try:
        host, port = url.hostname, url.port
    except ValueError:
        host = port = None
    if not host or port is None:
        raise UsageError(f"--ray-address '{printable(address)}': expected HOST:PORT (or "
                         "ray://HOST:PORT, or auto)")
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as e:
        reason = "no answer" if isinstance(e, TimeoutError) else (e.strerror or str(e))
        raise EebenchError(f"--backend ray: cannot reach {printable(address)} within "
                           f"{CONNECT_TIMEOUT_S:g} s ({reason})",
                           hint="is the cluster up (ray status), and its port open?") from None
