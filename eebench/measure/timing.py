"""Timing helpers: wall time of a callable or a block, summary statistics, peak memory.

On GPU a kernel launch returns before the work is done, so time is taken with CUDA events and a
synchronise; on CPU with time.perf_counter, and the thread count is recorded because it changes
the result. Raw values are always kept next to the p50/p90/p99/mean/std summary: a distribution,
not a single number, is what can be compared later.

Peak memory: torch.cuda.max_memory_allocated on GPU (reset before measuring); on CPU the resident
set's high-water mark (VmHWM), reset through /proc/self/clear_refs where Linux allows it, else the
process-lifetime peak from resource.getrusage.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np


def summarize(values_ms: Sequence[float]) -> dict[str, float]:
    """p50/p90/p99/mean/std/min/max of raw millisecond values (std is the population std)."""
    v = np.asarray(values_ms, dtype=np.float64)
    if v.size == 0:
        return {}
    p50, p90, p99 = np.percentile(v, [50, 90, 99])
    return {"p50": float(p50), "p90": float(p90), "p99": float(p99), "mean": float(v.mean()),
            "std": float(v.std()), "min": float(v.min()), "max": float(v.max())}


def _is_cuda(device: Any) -> bool:
    return str(device).startswith("cuda")


def device_description(device: Any = "cpu") -> str:
    """A label for where a timing ran: 'cpu (8 threads)' or 'cuda: NVIDIA H100 80GB HBM3'."""
    import torch

    if _is_cuda(device):
        return f"cuda: {torch.cuda.get_device_name(torch.device(device))}"
    return f"cpu ({torch.get_num_threads()} threads)"


# -- peak memory -----------------------------------------------------------------------------------
def _read_vm_hwm_mb() -> float | None:
    try:
        with open("/proc/self/status", encoding="utf-8") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    return None


def reset_peak_memory(device: Any = "cpu") -> bool:
    """Start a fresh peak; False where only the process-lifetime peak can be read."""
    if _is_cuda(device):
        import torch

        torch.cuda.reset_peak_memory_stats(torch.device(device))
        return True
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS (Linux >= 4.0)
        return True
    except OSError:
        return False


def peak_memory_mb(device: Any = "cpu") -> float | None:
    """Peak memory since the last reset: CUDA allocated bytes, or CPU resident set size."""
    if _is_cuda(device):
        import torch

        return torch.cuda.max_memory_allocated(torch.device(device)) / 2**20
    hwm = _read_vm_hwm_mb()
    if hwm is not None:
        return hwm
    try:
        import resource
    except ImportError:  # not on Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024  # bytes on macOS, else kB


# -- timers ----------------------------------------------------------------------------------------
@dataclass
class Stopwatch:
    """Times blocks: `with watch.time(): ...` appends one raw value in milliseconds.

    On CUDA each block is bracketed by events and synchronised at its end, so the value covers the
    GPU work, not just the launch. `clock` (seconds) can be replaced, e.g. by a fake clock in tests.
    """

    device: Any = "cpu"
    clock: Callable[[], float] = time.perf_counter
    raw_ms: list[float] = field(default_factory=list)

    @contextmanager
    def time(self):
        if _is_cuda(self.device):
            import torch

            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            yield
            end.record()
            end.synchronize()
            self.raw_ms.append(float(start.elapsed_time(end)))
        else:
            t0 = self.clock()
            yield
            self.raw_ms.append((self.clock() - t0) * 1000.0)

    def summary(self) -> dict[str, float]:
        return summarize(self.raw_ms)
