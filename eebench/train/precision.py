"""Which precision a training run uses: `auto` resolves to bf16 where the hardware has it natively.

bf16 autocast is fast only where the matrix units take bfloat16 themselves: CUDA GPUs of compute
capability 8.0 and later (A100, H100, RTX 30xx on), CPUs with Intel AMX (Sapphire Rapids and later
Xeons) and AMD CPUs with AVX-512 BF16 (Zen 4 and later). Elsewhere bf16 is slower than fp32 (all
measured in docs/benchmarks.md): on an AVX2-only AMD EPYC a MiniLM-L6 training step took 15x
longer, and on an Intel Xeon with AVX-512 BF16 but no AMX 1.5x longer. So `auto` picks bf16 on
the former and fp32 on the rest.

The hardware is read by eebench.measure.env (what env.json records); tests replace its
`cpu_flags`, `cpu_vendor` and `cuda_bf16` to pretend other machines.
"""

from __future__ import annotations

PRECISIONS = ("auto", "fp32", "bf16")
# What a run that records no precision trained in: the only precision before bf16 was added, and
# what `auto` gives without native bf16. A run records its precision only when it is another.
UNRECORDED = "fp32"


def device_type(device: str | None) -> str:
    """The kind of device training runs on: the one named, else cuda when there is one."""
    if device:
        return device.split(":", 1)[0]
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve(precision: str, device: str | None = None) -> str:
    """The precision to train in: "fp32" or "bf16" as asked, or for "auto" bf16 where the
    device has fast native bfloat16 (a CUDA GPU of compute capability 8.0+, a CPU with AMX, an
    AMD CPU with AVX-512 BF16), else fp32 (mps and other devices too: their autocast support
    varies)."""
    from eebench.measure import env

    if precision != "auto":
        return precision
    kind = device_type(device)
    if kind == "cuda":
        return "bf16" if env.cuda_bf16(device if device and ":" in device else None) else "fp32"
    if kind == "cpu":
        return "bf16" if env.cpu_bf16_fast() else "fp32"
    return "fp32"
