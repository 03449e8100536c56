"""Nothing waits forever: a FIFO or a link to /dev/zero where `validate` or `leaderboard check`
reads a file (a submission, a reference folder's file), a Ray address that does not answer, a
GPU per cell where there is none. Each case runs `eebench` in a process of its own under a time
limit, so a regression fails the case instead of hanging the suite."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from tests.hostile.helpers import fails_within, unchanged


@pytest.fixture
def board(bench, tmp_path) -> Path:
    """A copy of the hostile bench's submission with its reference in references/ beside it."""
    root = tmp_path / "board"
    (root / "submissions").mkdir(parents=True)
    (root / "references").mkdir()
    shutil.copy(bench.submission, root / "submissions" / "tiny-pabee.json")
    shutil.copy(bench.reference, root / "references" / "reference.json")
    return root


def _plant(where: Path, what: str) -> Path:
    path = where / "planted.json"
    if what == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    return path


@pytest.mark.parametrize("what,needle", [("fifo", "is a FIFO (named pipe), not a regular file"),
                                         ("zero", "is a character device, not a regular file")])
def test_a_fifo_or_dev_zero_in_the_references_folder_is_refused_unread(board, what, needle):
    planted = _plant(board / "references", what)
    with unchanged(board / "submissions"):
        fails_within("leaderboard", "check", board / "submissions", code=1,
                     needle=f"{planted}: {needle}")
        fails_within("leaderboard", "check", board / "submissions", "--references",
                     board / "references", code=1, needle=f"{planted}: {needle}")
        # validate: the file's verdict says why its references could not be read
        sub = board / "submissions" / "tiny-pabee.json"
        fails_within("validate", sub, code=1, prefix=f"{sub}: ", needle=f"{planted}: {needle}")
        fails_within("validate", sub, "--references", board / "references", code=1,
                     needle=f"{planted}: {needle}")


@pytest.mark.parametrize("what,needle", [("fifo", "is a FIFO (named pipe), not a regular file"),
                                         ("zero", "is a character device, not a regular file")])
def test_a_fifo_or_dev_zero_given_to_validate_is_refused_unread(tmp_path, what, needle):
    planted = _plant(tmp_path, what)
    fails_within("validate", planted, code=1, prefix=f"{planted}: ", needle=needle)


def test_a_fifo_named_as_a_folder_is_said_to_be_one(board, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    fails_within("leaderboard", "check", fifo, code=1,
                 needle=f"{fifo}: is a FIFO (named pipe), not a directory of submissions")
    fails_within("leaderboard", "check", board / "submissions", "--references", fifo, code=1,
                 needle=f"{fifo}: is a FIFO (named pipe), not a directory of reference curves")


def _run(bench, tmp_path, *extra: object) -> list[object]:
    return ["run", "--method", "pabee", "--task", "rte", "--model", bench.backbone,
            "--data-dir", bench.data, "--out", tmp_path / "runs", "--checkpoints",
            tmp_path / "ckpt", "--max-train-samples", "8", "--epochs", "1", "--no-timing",
            *extra]


def _installed(module: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed")


@pytest.mark.parametrize("address,needle", [
    ("127.0.0.1:1", "cannot reach 127.0.0.1:1 within 5 s"),
    ("192.0.2.1:6379", "cannot reach 192.0.2.1:6379 within 5 s"),  # TEST-NET-1: no answer
])
def test_an_unreachable_ray_address_fails_in_seconds(bench, tmp_path, address, needle):
    _installed("ray")
    start = time.perf_counter()
    fails_within(*_run(bench, tmp_path, "--backend", "ray", "--ray-address", address), code=1,
                 needle=needle)
    assert time.perf_counter() - start < 30  # Ray's own retries last minutes
    assert not any(tmp_path.iterdir())


def test_a_bad_ray_address_is_a_usage_error(bench, tmp_path):
    fails_within(*_run(bench, tmp_path, "--backend", "ray", "--ray-address", "nowhere"), code=2,
                 needle="--ray-address 'nowhere': expected HOST:PORT")
    assert not any(tmp_path.iterdir())


def test_a_gpu_per_cell_without_a_gpu_is_refused_up_front(bench, tmp_path):
    _installed("ray")
    from eebench.run.backends.resources import local_gpus

    if local_gpus() > 0:
        pytest.skip("this machine has a GPU")
    fails_within(*_run(bench, tmp_path, "--backend", "ray", "--gpus-per-job", "1"), code=1,
                 needle="--gpus-per-job 1: this machine has no GPU")
    assert not any(tmp_path.iterdir())


def _fake_sinfo(tmp_path: Path, listing: str) -> dict[str, str]:
    """A `sinfo` on PATH that lists these nodes' GRES."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    sinfo = bin_dir / "sinfo"
    sinfo.write_text(f"#!/bin/sh\nprintf '{listing}'\n")
    sinfo.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


@pytest.mark.parametrize("listing,gpus,needle", [
    ("(null)\\n(null)\\n", 1, "--gpus-per-job 1: no node of the Slurm cluster has 1 GPU "
                              "(sinfo lists at most 0 per node)"),
    ("gpu:a100:2(S:0-1)\\n(null)\\n", 4, "--gpus-per-job 4: no node of the Slurm cluster has 4 "
                                         "GPUs (sinfo lists at most 2 per node)"),
])
def test_slurm_gpus_no_node_has_are_refused_up_front(bench, tmp_path, listing, gpus, needle):
    env = _fake_sinfo(tmp_path / "tools", listing)
    work = tmp_path / "work"
    work.mkdir()
    fails_within(*_run(bench, work, "--backend", "slurm", "--gpus-per-job", gpus), code=1,
                 needle=needle, env=env)
    assert not any(work.iterdir())
