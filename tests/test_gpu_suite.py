"""benchmarks/gpu.sh, the GPU suite, runs on a CPU as a smoke test: every step, tiny sizes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
SUITE = REPO / "benchmarks" / "gpu.sh"
STEPS = ["setup", "cuda_tests", "timing", "sweep_vs_rerun", "dynamic_speedup", "serve_replay",
         "train_step", "cuda_graphs", "decoder"]


def suite(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable, "OMP_NUM_THREADS": "1"}
    return subprocess.run(["bash", str(SUITE), *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def summary(out: Path) -> dict[str, str]:
    rows = [line.split() for line in (out / "summary.txt").read_text().splitlines()
            if line and not line.startswith("#")]
    assert all(len(r) == 3 for r in rows), rows
    return {name: status for name, status, _ in rows}


@pytest.mark.parametrize(("args", "message"), [
    (["--device", "tpu"], "--device must be cuda or cpu"),
    (["--frobnicate"], "unknown argument --frobnicate"),
    (["--data-dir", "/nonexistent/eebench-data"], "no data directory at /nonexistent"),
])
def test_the_suite_refuses_bad_arguments(args, message):
    proc = suite(*args, timeout=60)
    assert proc.returncode == 2 and message in proc.stderr


@pytest.mark.slow  # about a minute on two loaded cores: nine steps, each its own interpreter
def test_the_gpu_suite_passes_on_cpu_as_a_smoke_test(data_dir, minilm_path, tmp_path):
    out = tmp_path / "gpu"
    proc = suite("--device", "cpu", "--data-dir", str(data_dir), "--out", str(out))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    status = summary(out)
    assert list(status) == [*STEPS, "total"]
    # the CUDA-only steps skip on cpu (the CUDA tests run where a GPU is, even with --device cpu)
    expected = {s: "ok" for s in [*STEPS, "total"]}
    expected["cuda_graphs"] = "skipped"
    if not torch.cuda.is_available():
        expected["cuda_tests"] = "skipped"
    assert status == expected
    for step in STEPS:
        assert f"==> [{STEPS.index(step) + 1}/{len(STEPS)}] {step}" in proc.stdout
        assert (out / f"{step}.log").is_file()
    # the CUDA tests were selected (and only skipped), not missing
    assert "test_measure.py" in (out / "cuda_tests.log").read_text()
    assert "skipped: no CUDA" in (out / "cuda_graphs.log").read_text()
    timing = json.loads((out / "timing.json").read_text())
    assert timing["results"] and all(r["agree"] for r in timing["results"])
    for method in ("deebert", "pabee"):
        replay = out / "serve_replay" / f"replay-{method}"
        serving = json.loads((replay / "serving.json").read_text())
        assert len({r["rate_rps"] for r in serving["results"]}) == 2
        # every answer as the offline simulation gave it, or within float tolerance of the rule
        assert all(r["disagreements"] == r["near_threshold"] for r in serving["results"])
    assert (out / "serve_replay" / "table.md").is_file() and (out / "env.json").is_file()
    assert "same decisions: 240 / 240" in (out / "sweep_vs_rerun.log").read_text()
    # the decoder track: every self-spec point checked by real decoding agrees, and it was timed
    decoded = json.loads((out / "decoder.json").read_text())
    assert decoded["skipped"] and decoded["summary"]["all_checks_agree"] is True
    assert any(p["timing"] and p["peer_timing"] for p in decoded["points"])
