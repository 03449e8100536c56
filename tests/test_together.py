"""benchmarks/_together.sh, which the benchmark scripts source to run WORKERS `eebench run`
processes on one grid: a signal to the script reaches every worker, and the script waits for
them to save before it ends."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# A stand-in for `eebench`: says it started, then on SIGTERM says so, as a worker saving its
# step would, and ends with 143. Run by the script in the background, it ignores SIGINT.
FAKE = """#!/usr/bin/env bash
trap 'echo "$$ terminated" >> "$LOG"; exit 143' TERM
echo "$$ started $*" >> "$LOG"
for _ in $(seq 600); do sleep 0.1; done  # a minute at most, should the signal not come
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_the_script_reaches_every_worker(tmp_path, sig):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "eebench"
    fake.write_text(FAKE)
    fake.chmod(0o755)
    log = tmp_path / "workers.log"
    script = tmp_path / "grid.sh"
    script.write_text(f"""set -euo pipefail
WORKERS=2 DATA_DIR=data CONFIG=grid.toml
source {ROOT / "benchmarks" / "_together.sh"}
together --out runs
echo "after together" >> "$LOG"
""")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "LOG": str(log)}
    proc = subprocess.Popen(["bash", str(script)], env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while (log.read_text().count("started") if log.exists() else 0) < 2:
            assert proc.poll() is None and time.monotonic() < deadline, "the workers did not start"
            time.sleep(0.1)
        proc.send_signal(sig)
        assert proc.wait(timeout=240) == 143  # generous: a loaded machine is slow to reap
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        for line in log.read_text().splitlines() if log.exists() else []:
            if " started " in line:  # a worker the signal did not reach
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(line.split()[0]), signal.SIGKILL)
    lines = log.read_text().splitlines()
    started = [line.split()[0] for line in lines if " started " in line]
    assert len(started) == 2
    assert all("run --config grid.toml --data-dir data --out runs" in line
               for line in lines if " started " in line)
    assert sorted(line.split()[0] for line in lines if line.endswith(" terminated")) == \
        sorted(started)
    assert "after together" not in lines
