"""Disks that refuse writes where a command writes more than one run or waits long before its
first write: a rule pass (`run --rule`: one pass, several run directories) on a disk that fills
while `predictions.safetensors` is written ends in one line, keeps every finished run whole and
reruns to bit-identical files; `train --out` and `run --out` on a read-only disk are refused
before any training."""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path

import pytest

from tests.hostile.conftest import FAST, run_args
from tests.hostile.helpers import fails, fill_disk, invoke, temporaries, tmpfs, unchanged

FULL = "no space left on device"
VARYING = ("env.json", "summary.json")  # the machine, and the wall time: not the results


def _pass(bench, root: Path) -> list:
    return run_args(bench.backbone, bench.data, root, "--method", "pabee", "--rule", "entropy")


def _files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((root / "runs").rglob("*")) if p.is_file() and p.name not in VARYING}


@pytest.fixture(scope="module")
def clean(bench, tmp_path_factory) -> Path:
    """The rule pass run on a disk with room."""
    root = tmp_path_factory.mktemp("clean-pass")
    result = invoke(*_pass(bench, root))
    assert result.exit_code == 0, result.output
    assert len(list((root / "runs").rglob("summary.json"))) == 2
    return root


def _check_rerun(bench, root: Path, clean: Path) -> None:
    result = invoke(*_pass(bench, root))
    assert result.exit_code == 0, result.output
    assert "already trained" in result.stderr  # the checkpoint is reused, not trained again
    assert _files(root) == _files(clean)  # bit for bit, no lock or temporary file left over
    assert temporaries(root) == []


@pytest.mark.parametrize("which", [1, 2], ids=["first-run", "second-run"])
def test_a_rule_pass_on_a_disk_that_fills_at_the_predictions(bench, tmp_path, monkeypatch,
                                                             clean, which):
    """The disk is full when the pass moves the `which`-th predictions file into place."""
    calls = []

    def when(target: str) -> bool:
        if target.endswith("predictions.safetensors"):
            calls.append(target)
            return len(calls) == which
        return False

    fill_disk(monkeypatch, when=when)
    fails(*_pass(bench, tmp_path), code=1, banner=True,
          needle=f"predictions.safetensors: {FULL}")
    assert temporaries(tmp_path) == []
    summaries = list((tmp_path / "runs").rglob("summary.json"))
    assert len(summaries) == which - 1  # the runs before it are finished, and whole
    for summary in summaries:
        assert not (summary.parent / ".lock").exists()
    monkeypatch.undo()
    _check_rerun(bench, tmp_path, clean)


def test_a_rule_pass_on_a_disk_that_fills_while_writing(bench, tmp_path, monkeypatch, clean):
    """The disk fills half-way through the second predictions file (safetensors' own writer
    raises an error of its own on a real full disk: the file is written by Python)."""
    real, calls = Path.write_bytes, []

    def write_bytes(self, data):
        if self.name.startswith(".predictions.safetensors."):
            calls.append(self)
            if len(calls) == 2:
                real(self, data[: len(data) // 2])
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", write_bytes)
    fails(*_pass(bench, tmp_path), code=1, banner=True,
          needle=f"predictions.safetensors: {FULL}")
    assert len(calls) == 2 and temporaries(tmp_path) == []
    assert len(list((tmp_path / "runs").rglob("summary.json"))) == 1
    monkeypatch.undo()
    _check_rerun(bench, tmp_path, clean)


# -------------------------------------------------------------------------- read-only disks
def _train(bench, out: Path) -> list:
    return ["train", "--method", "pabee", "--task", "rte", "--model", bench.backbone,
            "--data-dir", bench.data, *FAST[:4], "--out", out]


def test_train_out_without_write_permission_is_refused_before_training(bench, tmp_path,
                                                                       monkeypatch):
    locked = tmp_path / "locked"
    locked.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, *a, **k: False if Path(p) == locked
                        else real(p, mode, *a, **k))
    with unchanged(tmp_path):
        fails(*_train(bench, locked / "ckpt"), code=1,
              needle=f"{locked / 'ckpt'}: cannot write checkpoints ({locked}: no permission")


@pytest.fixture
def read_only_disk(tmp_path):
    """A read-only tmpfs (unmounted when the test ends)."""
    with tmpfs(tmp_path / "ro", "ro,size=64k") as mount:
        yield mount


def test_train_and_run_out_on_a_read_only_disk_are_refused_before_training(bench, tmp_path,
                                                                           read_only_disk):
    with unchanged(read_only_disk, tmp_path / "ckpt"):
        fails(*_train(bench, read_only_disk / "ckpt"), code=1,
              needle=f"cannot write checkpoints ({read_only_disk}: a read-only file system)")
        fails(*run_args(bench.backbone, bench.data, tmp_path, "--method", "pabee", "--out",
                        read_only_disk / "runs"), code=1,
              needle=f"cannot write runs ({read_only_disk}: a read-only file system)")
