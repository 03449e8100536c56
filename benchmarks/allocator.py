"""Does the memory allocator change how fast a CPU training step is?

Runs `benchmarks/train_step.py` (one PABEE training step: forward over every exit, loss, backward,
clipping, fused AdamW; fp32) in a fresh process under each allocator found on this machine:
glibc's own, and tcmalloc and jemalloc loaded with LD_PRELOAD (Debian: `apt-get install
libtcmalloc-minimal4 libjemalloc2`). Every training step frees and allocates the same large
buffers again (the activations; the 30,522 x 384 word-embedding gradient); glibc hands buffers
that large back to the kernel and faults their pages in again each step, the other two keep
them. Rounds alternate the allocators, so a change in the machine's load falls on all of them;
prints each one's median step time over the rounds and its ratio to glibc's, e.g.

    python benchmarks/allocator.py --data-dir ../shared/data --task elue-stsb --max-seq-length 128
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

from _common import base_parser, hardware

HERE = Path(__file__).resolve().parent
# where Debian, Ubuntu and Fedora put them
CANDIDATES = {
    "tcmalloc": ("libtcmalloc_minimal.so.4", "libtcmalloc.so.4"),
    "jemalloc": ("libjemalloc.so.2", "libjemalloc.so"),
}
LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib")
LINE = re.compile(r"^fp32, fused AdamW\s+(random|grouped)\s+([0-9.]+)")


def found() -> dict[str, str | None]:
    """glibc (no preload) and each other allocator whose library is on this machine."""
    out: dict[str, str | None] = {"glibc": None}
    for name, files in CANDIDATES.items():
        for d in LIB_DIRS:
            hit = next((Path(d) / f for f in files if (Path(d) / f).exists()), None)
            if hit:
                out[name] = str(hit)
                break
    return out


def main() -> None:
    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=8, help="timed steps per process")
    p.add_argument("--rounds", type=int, default=3, help="processes per allocator, alternating")
    args = p.parse_args()
    allocators = found()
    print(f"{hardware()}; allocators: {', '.join(allocators)}")
    print(f"{args.model}, {args.task}, max {args.max_seq_length} tokens, fp32, one thread, "
          f"median of {args.steps} steps a process, {args.rounds} rounds")
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.rounds):
        for name, lib in allocators.items():
            env = {**os.environ, "OMP_NUM_THREADS": "1"}
            env.pop("LD_PRELOAD", None)
            if lib:
                env["LD_PRELOAD"] = lib
            cmd = [sys.executable, str(HERE / "train_step.py"), "--data-dir", str(args.data_dir),
                   "--task", args.task, "--model", args.model, "--max-seq-length",
                   str(args.max_seq_length), "--threads", "1", "--settings", "fp32",
                   "--steps", str(args.steps)]
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            for line in done.stdout.splitlines():
                if m := LINE.match(line):
                    times.setdefault((name, m.group(1)), []).append(float(m.group(2)))
    print(f"{'allocator':<10} {'batches':<9} {'median s/step':>14} {'vs glibc':>9}   rounds")
    for batches in ("random", "grouped"):
        base = statistics.median(times[("glibc", batches)])
        for name in allocators:
            got = times[(name, batches)]
            m = statistics.median(got)
            print(f"{name:<10} {batches:<9} {m:>14.3f} {base / m:>8.2f}x   "
                  + ", ".join(f"{t:.3f}" for t in got), flush=True)


if __name__ == "__main__":
    main()
