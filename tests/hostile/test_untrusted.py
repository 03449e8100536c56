"""Nothing a user or a runs folder supplies is unpickled, and no file it names outside its place
is opened. A planted pickle whose `__reduce__` creates a marker file must leave no marker:

- `--backend slurm` collects a cell from its run directories, never from the result pickle a
  record's folder holds; a record is checked field by field (its folder only a name resolved
  under `<out>/.submitit/`), and one that is not a record is one line;
- a model directory's weights are safetensors only: a shard index listing a pickle, or a shard
  path out of the directory (`../../etc/passwd`, an absolute path, a link out), is refused before
  anything listed is opened; weights that exist only pickled are refused with the hint.

The Slurm cases run against stand-in `sbatch`, `sacct` and `squeue` commands: a job the records
name is, to `sacct`, finished."""

from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path

import pytest

from tests.hostile.conftest import FAST, run_args
from tests.hostile.helpers import fails, invoke, unchanged

CONVERT = "save the model with safetensors"


class Planted:
    """Unpickling this creates `marker` (any code could run there)."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def plant(path: Path, marker: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(Planted(marker)))
    return path


@pytest.fixture
def marker(tmp_path) -> Path:
    path = tmp_path / "MARKER-code-ran"
    yield path
    assert not path.exists(), "a planted pickle was unpickled"


# ------------------------------------------------------------------------------ model weights
def _model(bench, tmp_path: Path, name: str) -> Path:
    return Path(shutil.copytree(bench.backbone, tmp_path / "models" / name))


def _index(path: Path, shards: dict[str, str]) -> Path:
    (path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": shards}))
    return path


def _sharded(bench, tmp_path, name: str, shard: str) -> Path:
    """The tiny model's weights as the first of two shards; the second, `shard`, is hostile."""
    path = _model(bench, tmp_path, name)
    (path / "model.safetensors").rename(path / "model-00001-of-00002.safetensors")
    return _index(path, {"embeddings.word_embeddings.weight": "model-00001-of-00002.safetensors",
                         "encoder.layer.0.output.dense.weight": shard})


def pickle_shard(bench, tmp_path, marker):
    path = _sharded(bench, tmp_path, "pickle-shard", "pytorch_model-00002-of-00002.bin")
    plant(path / "pytorch_model-00002-of-00002.bin", marker)
    return path


def escaping_shard(bench, tmp_path, marker):
    return _sharded(bench, tmp_path, "escaping-shard", "../../../../../../etc/passwd")


def absolute_shard(bench, tmp_path, marker):
    return _sharded(bench, tmp_path, "absolute-shard", "/etc/passwd")


def linked_out_shard(bench, tmp_path, marker):
    outside = plant(tmp_path / "elsewhere" / "weights.safetensors", marker)
    path = _sharded(bench, tmp_path, "linked-shard", "model-00002-of-00002.safetensors")
    (path / "model-00002-of-00002.safetensors").symlink_to(outside)
    return path


def linked_out_weights(bench, tmp_path, marker):
    path = _model(bench, tmp_path, "linked-weights")
    outside = tmp_path / "elsewhere" / "model.safetensors"
    outside.parent.mkdir(parents=True, exist_ok=True)
    (path / "model.safetensors").rename(outside)
    (path / "model.safetensors").symlink_to(outside)
    return path


def fifo_shard(bench, tmp_path, marker):
    path = _sharded(bench, tmp_path, "fifo-shard", "model-00002-of-00002.safetensors")
    os.mkfifo(path / "model-00002-of-00002.safetensors")
    return path


def pickle_only(bench, tmp_path, marker):
    path = _model(bench, tmp_path, "pickle-only")
    (path / "model.safetensors").unlink()
    plant(path / "pytorch_model.bin", marker)
    return path


def pickle_index_only(bench, tmp_path, marker):
    path = _model(bench, tmp_path, "pickle-index-only")
    (path / "model.safetensors").unlink()
    plant(path / "pytorch_model-00001-of-00001.bin", marker)
    (path / "pytorch_model.bin.index.json").write_text(json.dumps(
        {"weight_map": {"embeddings.word_embeddings.weight": "pytorch_model-00001-of-00001.bin"}}))
    return path


WEIGHTS = {
    "pickle-shard": (pickle_shard, "lists 'pytorch_model-00002-of-00002.bin', which is not a "
                                   "safetensors file; eebench never unpickles a file"),
    "escaping-shard": (escaping_shard, "is not a file name inside the model directory"),
    "absolute-shard": (absolute_shard, "shard '/etc/passwd' is not a file name inside"),
    "linked-out-shard": (linked_out_shard, "links out of the model directory"),
    "linked-out-weights": (linked_out_weights, "'model.safetensors' links out of the model"),
    "fifo-shard": (fifo_shard, "not a regular file"),
    "pickle-only": (pickle_only, "pytorch_model.bin: pickled weights; eebench never unpickles"),
    "pickle-index-only": (pickle_index_only, "pytorch_model.bin.index.json: pickled weights"),
}


@pytest.mark.parametrize("case", list(WEIGHTS))
def test_train_refuses_weights_it_would_unpickle_or_find_elsewhere(bench, tmp_path, marker,
                                                                  case):
    make, needle = WEIGHTS[case]
    model = make(bench, tmp_path, marker)
    watched = tmp_path / "ckpt" if case == "fifo-shard" else tmp_path  # a FIFO is not read
    with unchanged(watched):
        line = fails("train", "--method", "pabee", "--task", "rte", "--model", model,
                     "--data-dir", bench.data, *FAST[:2], "--out", tmp_path / "ckpt", code=1,
                     needle=needle)
    if "pickle" in case:
        assert CONVERT in line


@pytest.mark.parametrize("case", ["pickle-shard", "escaping-shard", "linked-out-shard"])
def test_flops_and_run_refuse_them_too(bench, tmp_path, marker, case):
    make, needle = WEIGHTS[case]
    model = make(bench, tmp_path, marker)
    with unchanged(tmp_path):
        fails("flops", "--model-config", model, code=1, needle=needle)
        fails(*run_args(model, bench.data, tmp_path, "--method", "pabee"), code=1,
              needle=needle)


# ------------------------------------------------------------------------------ Slurm records
SUBMISSION = "20250101-120000-deadbeef"


@pytest.fixture
def slurm(tmp_path, monkeypatch):
    """Stand-in Slurm commands on PATH: `sbatch` refuses (nothing may be submitted), `sacct`
    reports task 0 of every job array it is asked about in the state of $FAKE_SLURM_STATE
    (COMPLETED), `squeue` lists none. (submitit keeps the states it read for the process:
    each test names its own job.)"""
    pytest.importorskip("submitit")
    bin_dir = tmp_path / "fake-slurm"
    bin_dir.mkdir()
    scripts = {
        "sbatch": 'echo "sbatch: not in this test" >&2; exit 1',
        "sacct": 'printf "JobID|State|NodeList\\n"; while [ $# -gt 0 ]; do '
                 'if [ "$1" = -j ]; then printf "%s_0|%s|node1\\n" "$2" '
                 '"${FAKE_SLURM_STATE:-COMPLETED}"; fi; shift; done',
        "squeue": "exit 0",
    }
    for name, body in scripts.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir


def _finished_runs(bench, tmp_path: Path) -> Path:
    """A copy of the bench's runs: the pabee cell is done."""
    return Path(shutil.copytree(bench.root / "runs", tmp_path / "runs"))


def _record(out: Path, key: str, record: object) -> Path:
    path = out / ".submitit" / "cells" / f"{key}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(record if isinstance(record, str) else json.dumps(record))
    return path


def _slurm_args(bench, tmp_path):
    return run_args(bench.backbone, bench.data, tmp_path, "--method", "pabee", "--backend",
                    "slurm")


def test_a_planted_result_pickle_is_never_read(bench, tmp_path, slurm, marker):
    """The record names a folder eebench would give, holding submitit's result pickle of the
    job: the cell is collected from its run directory (done), the pickle left alone."""
    out = _finished_runs(bench, tmp_path)
    plant(out / ".submitit" / SUBMISSION / "4242_0_0_result.pkl", marker)
    record = _record(out, bench.pabee.name, {"job": "4242_0", "submission": SUBMISSION,
                                             "attempt": 1})
    with unchanged(out / bench.pabee.relative_to(bench.root / "runs")):
        result = invoke(*_slurm_args(bench, tmp_path), "--json")
    assert result.exit_code == 0, result.output
    assert [row["status"] for row in json.loads(result.stdout)] == ["done"]
    assert not record.exists()  # the job is settled


@pytest.mark.parametrize("record,why", [
    ({"job": "4242_0", "folder": "EVIL"}, "its submission folder is not one eebench names"),
    ({"job": "4242_0", "folder": "/tmp/x/../../etc"}, "not one eebench names"),
    ({"job": "4242_0", "attempt": 1}, "no submission folder"),
    ({"job": "$(touch /tmp/x)", "submission": SUBMISSION}, "its job is not a Slurm job id"),
    ({"job": "4242_0", "submission": SUBMISSION, "attempt": "1"}, "its attempt is not a count"),
    ({"submission": SUBMISSION}, "no job id"),
    (["4242_0"], "not a JSON object"),
    ('{"job": "4242_0", ', "not JSON"),
], ids=["folder-elsewhere", "folder-path", "no-folder", "job-command", "attempt-text",
        "no-job", "a-list", "not-json"])
def test_a_record_that_is_not_one_is_refused_in_one_line(bench, tmp_path, slurm, marker,
                                                        record, why):
    out = _finished_runs(bench, tmp_path)
    plant(out / ".submitit" / "EVIL" / "4242_0_0_result.pkl", marker)
    path = _record(out, bench.pabee.name, record)
    with unchanged(tmp_path):
        fails(*_slurm_args(bench, tmp_path), code=1, needle=f"{path}: not")
        fails(*_slurm_args(bench, tmp_path), "--dry-run", code=1, needle=why)


def test_a_record_of_an_earlier_version_names_its_folder_by_path(bench, tmp_path, slurm,
                                                                 marker):
    """Records written before named the folder's whole path: its name is what is used."""
    out = _finished_runs(bench, tmp_path)
    plant(out / ".submitit" / SUBMISSION / "4242_0_0_result.pkl", marker)
    _record(out, bench.pabee.name, {"job": "4242_0", "attempt": 1,
                                    "folder": str(tmp_path / "anywhere" / SUBMISSION)})
    result = invoke(*_slurm_args(bench, tmp_path), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)[0]["status"] == "done"


def test_a_job_that_died_is_named_from_a_log_that_is_a_fifo(tmp_path, slurm, monkeypatch,
                                                            marker):
    """A job that ended without its cell's results: its error record is written from its state
    and its log, and a FIFO planted as the log does not block the driver."""
    from eebench.run.artifacts import RunConfig
    from eebench.run.backends import BackendOptions, Cell, WorkerOptions, run_cells
    from eebench.run.backends.cells import read_error

    monkeypatch.setenv("FAKE_SLURM_STATE", "FAILED")
    cell = Cell((RunConfig(model="standin", method="pabee", task="rte", split="dev", seed=1,
                           sweep=[1.0], max_seq_length=32, flops_convention="mac2-matmul"),))
    out = tmp_path / "runs"
    folder = out / ".submitit" / SUBMISSION
    folder.mkdir(parents=True)
    os.mkfifo(folder / "4343_0_0_log.out")
    plant(folder / "4343_0_0_result.pkl", marker)
    _record(out, cell.key, {"job": "4343_0", "submission": SUBMISSION, "attempt": 1})
    worker = WorkerOptions(out=str(out), checkpoints=str(tmp_path / "ckpt"), backend="slurm",
                           cell_fn="tests.backend_cells:fake_run")
    [outcome] = run_cells([cell], BackendOptions(backend="slurm"), worker, lambda line: None)
    # settled while collecting: the cell failed before this command, and is left alone
    assert outcome.status == "skipped" and "ended FAILED without a result" in outcome.error
    assert read_error(cell, out)["job"] == "4343_0"
    assert not (out / "calls").exists()  # nothing ran, nothing was submitted
