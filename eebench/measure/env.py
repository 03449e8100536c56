"""The environment a result was measured in: hardware, threads, versions, git commit.

Wall time means nothing without the machine it ran on, so every run directory keeps an env.json
next to its points. Everything here is best effort: a missing GPU, tool or git checkout gives None,
never an error.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
_PACKAGES = ("eebench", "torch", "transformers", "fvcore", "numpy", "datasets")


def _run(cmd: list[str], cwd: Path | None = None) -> str | None:
    """stdout of a short command, or None when it is missing, fails or hangs."""
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=5, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def cpu_model() -> str:
    """The CPU's marketing name (Linux /proc/cpuinfo, else what platform knows)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith(("model name", "hardware")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def usable_cores() -> int | None:
    """Cores this process may run on (the affinity mask, which a container may narrow)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count()


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def gpu_info() -> dict[str, Any] | None:
    """Name, memory, driver and CUDA/cuDNN versions of the visible GPUs; None without CUDA."""
    import torch

    if not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(0)
    driver = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    return {
        "name": torch.cuda.get_device_name(0),
        "count": torch.cuda.device_count(),
        "memory_gb": round(props.total_memory / 2**30, 2),
        "capability": f"{props.major}.{props.minor}",
        "driver": driver.splitlines()[0] if driver else None,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
    }


# /proc/cpuinfo flags of CPUs that multiply bfloat16 natively (AMX tiles, AVX-512 BF16 dot products)
NATIVE_BF16_FLAGS = ("amx_bf16", "avx512_bf16")


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags from /proc/cpuinfo (Linux; empty elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def cpu_vendor() -> str | None:
    """The CPU's vendor id from /proc/cpuinfo ("GenuineIntel", "AuthenticAMD"; None elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_bf16() -> list[str]:
    """The CPU's native bfloat16 features (empty: none, bf16 matrix products are emulated)."""
    flags = cpu_flags()
    return [f for f in NATIVE_BF16_FLAGS if f in flags]


def cpu_bf16_fast() -> bool:
    """Whether bf16 training is faster than fp32 on this CPU, by its features: AMX tiles, or
    AVX-512 BF16 on an AMD CPU (Zen 4 on). An Intel CPU with AVX-512 BF16 and no AMX (Cooper
    Lake, or a newer Xeon whose AMX the hypervisor hides) trained MiniLM-L6 and MPNet-base
    about 1.5x slower in bf16 than in fp32 (docs/benchmarks.md): the flag alone is no promise."""
    native = cpu_bf16()
    return "amx_bf16" in native or ("avx512_bf16" in native and cpu_vendor() == "AuthenticAMD")


def cpu_capability() -> str:
    """The vector instructions torch's CPU kernels use: "AVX2", "AVX512", "NO AVX", ..."""
    import torch

    return str(torch.backends.cpu.get_cpu_capability())


def cpu_features() -> str:
    """torch's CPU capability and the CPU's native bf16 features, in words: "AVX2",
    "AVX512 + amx_bf16, avx512_bf16"."""
    native = cpu_bf16()
    return cpu_capability() + (f" + {', '.join(native)}" if native else "")


def cuda_bf16(device: Any = None) -> bool:
    """Whether the CUDA device (the current one by default) multiplies bfloat16 natively: compute
    capability 8.0 or later (A100, H100, RTX 30xx on), or ROCm; emulation does not count."""
    import torch

    if not torch.cuda.is_available():
        return False
    if torch.version.hip:
        return True
    index = torch.cuda.current_device() if device is None else torch.device(device)
    return torch.cuda.get_device_properties(index).major >= 8


def bf16_hardware() -> dict[str, Any]:
    """What a precision of `auto` reads (eebench.train.precision): torch's CPU capability, the
    CPU's vendor and native bf16 flags and, with CUDA, whether the GPU has native bf16 (None
    without)."""
    import torch

    return {
        "cpu_capability": cpu_capability(),
        "cpu_vendor": cpu_vendor(),
        "cpu_bf16": cpu_bf16(),
        "cuda_bf16": cuda_bf16() if torch.cuda.is_available() else None,
    }


def git_state(source: Path | None = None) -> dict[str, Any] | None:
    """Commit of the eebench source tree (and whether it has local changes); None outside git.

    Only the checkout eebench itself lives in counts: an installed copy inside some other
    repository (a virtualenv in a project) would otherwise report that project's commit.
    "dirty" looks at the code alone (the package and pyproject.toml): results, docs and
    reference files written next to it do not change what a run computes.
    """
    source = (source or Path(__file__).resolve().parents[2]).resolve()
    top = _run(["git", "rev-parse", "--show-toplevel"], cwd=source)
    if not top or Path(top).resolve() != source:
        return None
    commit = _run(["git", "rev-parse", "HEAD"], cwd=source)
    if not commit:
        return None
    status = _run(["git", "status", "--porcelain", "--untracked-files=no", "--", "eebench",
                   "pyproject.toml"], cwd=source)
    return {"commit": commit, "dirty": bool(status)}


def environment(training_precision: str | None = None) -> dict[str, Any]:
    """Everything that explains a timing: JSON-serialisable, written as env.json per run.
    `training_precision` is the precision the run's models trained in ("fp32" or "bf16", as
    resolved), recorded beside the hardware a precision of `auto` is resolved from."""
    import torch

    return {
        "schema_version": SCHEMA_VERSION,
        "cpu": cpu_model(),
        "cpu_cores": os.cpu_count(),
        "cpu_cores_usable": usable_cores(),
        "torch_threads": torch.get_num_threads(),
        **bf16_hardware(),
        **({"training_precision": training_precision} if training_precision else {}),
        "gpu": gpu_info(),
        "python": sys.version.split()[0],
        "packages": package_versions(),
        "os": platform.platform(),
        "git": git_state(),
    }
