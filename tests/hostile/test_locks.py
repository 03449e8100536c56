"""Nothing planted at a lock file's path can clobber or hang a run, and two runs that import one
checkpoint at once both finish (issue "Nothing in a runs folder can clobber, hang or lie").

Cause 1: a run's `.lock` or a checkpoint's `.<key>.lock` planted as a symbolic link (to a file
someone cares about) or as a FIFO is refused in one line naming it, exit 1, the link's target
untouched, within seconds. Cause 6: two processes importing one checkpoint
(`run --from-checkpoint`) at the same moment: the second waits for the first and reuses what it
converted; neither deletes the other's work nor blames the disk.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from eebench.run import artifacts as R
from eebench.run.backends.cells import Cell
from eebench.run.backends.plan import trained_models
from eebench.run.config import load_config
from eebench.run.execute import LOCK_FILE, run_dir_for
from eebench.run.grid import expand
from eebench.train import checkpoint as ckpt
from eebench.train.naming import lock_file
from tests import authors as A
from tests.conftest import REPO
from tests.hostile.helpers import LIMIT_S, fails, fails_within, invoke

PRECIOUS = "a file someone cares about\n"
REFUSED = "not a regular file"


def _grid(tmp_path: Path, backbone: Path) -> Path:
    config = tmp_path / "grid.toml"
    config.write_text(f'model = "{backbone}"\nmethods = ["pabee"]\ntasks = ["rte"]\n'
                      "max_seq_length = 32\nmax_eval_samples = 8\n"
                      "[train]\nmax_train_samples = 8\nepochs = 1\n[timing]\nenabled = false\n")
    return config


def _lock(which: str, config: Path, bench, tmp_path: Path) -> Path:
    """Where the grid's run (`run`) or its model's checkpoint (`checkpoint`) takes its lock, its
    directory made (as a run that stopped would leave it)."""
    rc = expand(load_config(config)).runs[0]
    if which == "run":
        path = run_dir_for(rc, tmp_path / "runs") / LOCK_FILE
    else:
        [model] = trained_models(Cell((rc,)), bench.data, tmp_path / "ckpt")
        path = lock_file(model.path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _run(config: Path, bench, tmp_path: Path) -> list[object]:
    return ["run", "--config", config, "--data-dir", bench.data, "--out", tmp_path / "runs",
            "--checkpoints", tmp_path / "ckpt"]


@pytest.mark.parametrize("which", ["run", "checkpoint"])
def test_cause1_a_lock_linked_to_a_file_is_refused_and_the_file_kept(tmp_path, bench, which):
    config = _grid(tmp_path, bench.backbone)
    victim = tmp_path / "victim.txt"
    victim.write_text(PRECIOUS)
    lock = _lock(which, config, bench, tmp_path)
    lock.symlink_to(victim)
    line = fails(*_run(config, bench, tmp_path), code=1, banner=True,
                 needle=f"{lock}: is a symbolic link, {REFUSED}")
    assert "hint: " in line
    assert victim.read_text() == PRECIOUS and lock.is_symlink() and lock.resolve() == victim
    assert not (run_dir_for(expand(load_config(config)).runs[0], tmp_path / "runs")
                / R.SUMMARY_FILE).exists()


@pytest.mark.parametrize("which", ["run", "checkpoint"])
def test_cause1_a_lock_that_is_a_fifo_is_refused_without_hanging(tmp_path, bench, which):
    config = _grid(tmp_path, bench.backbone)
    lock = _lock(which, config, bench, tmp_path)
    os.mkfifo(lock)
    fails_within(*_run(config, bench, tmp_path), code=1, banner=True,
                 needle=f"{lock}: is a FIFO (named pipe), {REFUSED}")


# Another process importing the checkpoint: it stops while it writes the converted checkpoint
# (its temporary folder made) until told to go on.
IMPORTING = """
import pathlib, sys, time
import safetensors.torch as st
from eebench.tasks.catalog import get_task
from eebench.train.imported import import_checkpoint, planned_import
marks, source, root = pathlib.Path(sys.argv[1]), sys.argv[2], pathlib.Path(sys.argv[3])
real = st.save_model
def save_model(*args, **kwargs):
    (marks / "saving").touch()
    end = time.monotonic() + 60
    while not (marks / "go").exists() and time.monotonic() < end:
        time.sleep(0.05)
    return real(*args, **kwargs)
st.save_model = save_model
import_checkpoint(*planned_import(source, "pabee", {}, get_task("rte")), root)
"""


def _saving(marks: Path, source: Path, root: Path) -> subprocess.Popen:
    """The other process, once it is writing its temporary folder."""
    proc = subprocess.Popen([sys.executable, "-c", IMPORTING, marks, source, root], cwd=REPO,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + LIMIT_S
    while not (marks / "saving").exists():
        if proc.poll() is not None:
            pytest.fail(f"the other import ended first: exit {proc.returncode}\n"
                        f"{proc.communicate()[1]}")
        assert time.monotonic() < end, f"the other import not saving after {LIMIT_S} s"
        time.sleep(0.05)
    return proc


def test_cause6_two_runs_importing_one_checkpoint_at_once_both_finish(tmp_path, data_dir,
                                                                      monkeypatch):
    import eebench.train.imported as imported

    folder = A.write(tmp_path / "authors", *A.pabee())
    marks = tmp_path / "marks"
    marks.mkdir()
    real = imported.import_checkpoint

    def import_checkpoint(*args, **kwargs):  # the other process goes on a second after
        threading.Timer(1.0, (marks / "go").touch).start()  # this one's import starts
        return real(*args, **kwargs)

    monkeypatch.setattr(imported, "import_checkpoint", import_checkpoint)
    other = _saving(marks, folder, tmp_path / "ckpt")
    try:
        result = invoke("run", "--task", "rte", "--from-checkpoint", folder, "--method", "pabee",
                        "--data-dir", data_dir, "--max-seq-length", 32, "--max-eval-samples", 8,
                        "--no-timing", "--out", tmp_path / "runs", "--checkpoints",
                        tmp_path / "ckpt", "--json")
        _, err = other.communicate(timeout=LIMIT_S)
    finally:
        other.kill()
    assert other.returncode == 0 and "disk" not in err, err  # its work was not deleted
    assert result.exit_code == 0, result.output
    assert "imported pabee checkpoint" not in result.stderr  # it waited, then reused the other's
    assert not list((tmp_path / "ckpt").rglob(".*"))  # no temporary folder, no lock left


def test_cause6_recovery_keeps_a_live_process_s_temporary_folder(tmp_path):
    path = tmp_path / "ckpt" / "key"
    path.parent.mkdir()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    try:
        writing = path.with_name(f".key.tmp-{live.pid}")
        stale = path.with_name(f".key.tmp-{ended.pid}")
        for tmp in (writing, stale):
            tmp.mkdir()
            (tmp / "model.safetensors").write_bytes(b"half")
        ckpt.recover(path)
        assert writing.is_dir() and (writing / "model.safetensors").read_bytes() == b"half"
        assert not stale.exists()
    finally:
        live.kill()
        live.wait()
