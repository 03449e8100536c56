"""Measurement: FLOPs (per-module cost table), parameters, timing and peak memory, environment.

- flops.py   count one module at one token length (fvcore, cross-checked by FlopCounterMode)
- cost_table.py  the table of every module's FLOPs by token length, fitted from a few counts;
             a sample's FLOPs are the sum along its executed path at its real length
- params.py  total parameters, and those a sample touches when it exits at exit j
- timing.py  CUDA events or perf_counter, raw values + p50/p90/p99/mean/std, peak memory
- env.py     hardware, threads, versions, git commit: the context of every timing

Names are re-exported lazily, so importing this package does not import torch.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "CONVENTIONS": "flops", "DEFAULT_CONVENTION": "flops", "CostTable": "cost_table",
    "build_cost_table": "cost_table", "count_flops": "flops", "fvcore_flops": "flops",
    "torch_flops": "flops",
    "params_total": "params", "params_per_exit": "params", "ParamCounts": "params",
    "count_unique": "params",
    "environment": "env",
    "summarize": "timing", "Stopwatch": "timing", "device_description": "timing",
    "peak_memory_mb": "timing",
    "reset_peak_memory": "timing",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(f"eebench.measure.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'eebench.measure' has no attribute {name!r}")
