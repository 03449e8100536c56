"""A full disk (ENOSPC) while a command writes: one line, and every file it writes is whole or
not there at all. Simulated in-process (moving a written file into place fails as on a full
disk; or the disk fills during a write), and, where this process may mount one, on a real
64 KiB tmpfs filled to the last byte."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from tests.hostile.conftest import copy_run, run_args
from tests.hostile.helpers import fails, fill_disk, invoke, temporaries, tmpfs, unchanged

FULL = "no space left on device"


def previous(path: Path, text: str = "the previous file\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_score_csv(bench, tmp_path, monkeypatch):
    csv = previous(tmp_path / "points.csv")
    fill_disk(monkeypatch)
    with unchanged(tmp_path, bench.pabee):
        fails("score", bench.pabee, "--csv", csv, code=1, needle=f"{csv}: cannot write")


def test_reference_build(bench, tmp_path, monkeypatch):
    ref = previous(tmp_path / "ref.json")
    fill_disk(monkeypatch)
    with unchanged(tmp_path, bench.static):
        fails("reference", "build", bench.static, "--out", ref, code=1, needle=f"{ref}: {FULL}")


def test_plot_writes_no_figure_and_creates_no_directory(bench, tmp_path, monkeypatch):
    old = previous(tmp_path / "figs" / "index.md")
    fill_disk(monkeypatch)
    with unchanged(tmp_path, bench.pabee):
        fails("plot", bench.pabee, "--out", old.parent, code=1, needle=FULL)
        fails("plot", bench.pabee, "--out", tmp_path / "new" / "figs", code=1, needle=FULL)


def test_submit(bench, tmp_path, monkeypatch):
    sub = previous(tmp_path / "sub.json")
    fill_disk(monkeypatch)
    with unchanged(tmp_path, bench.pabee):
        fails("submit", bench.pabee, "--data-dir", bench.data, "--out", sub, code=1,
              needle=f"{sub}: {FULL}")


def test_export_elue_when_the_files_are_moved_into_place(bench, tmp_path, monkeypatch):
    out = tmp_path / "elue"
    previous(out / "rte_patience-1.tsv")
    fill_disk(monkeypatch)
    with unchanged(tmp_path, bench.test):
        fails("export-elue", bench.test, "--out", out, code=1, needle=FULL)


def test_export_elue_when_the_disk_fills_during_the_second_file(bench, tmp_path, monkeypatch):
    out = tmp_path / "elue"
    previous(out / "rte_patience-1.tsv")
    real, calls = Path.write_text, []

    def write_text(self, text, *args, **kwargs):
        calls.append(self)
        if len(calls) == 2:  # half of the second file fits
            real(self, text[: len(text) // 2], *args, **kwargs)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(self, text, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write_text)
    with unchanged(tmp_path, bench.test):
        fails("export-elue", bench.test, "--out", out, code=1, needle=FULL)
    assert len(calls) == 2


def test_leaderboard_build(bench, tmp_path, monkeypatch):
    index = previous(tmp_path / "site" / "index.html")
    fill_disk(monkeypatch)
    with unchanged(tmp_path, bench.submissions):
        fails("leaderboard", "build", bench.submissions, "--out", index.parent, code=1,
              needle=f"{index}: {FULL}")


def test_leaderboard_schema(tmp_path, monkeypatch):
    schema = previous(tmp_path / "schema.json")
    fill_disk(monkeypatch)
    with unchanged(tmp_path):
        fails("leaderboard", "schema", "--out", schema, code=1, needle=f"{schema}: {FULL}")


def test_train_leaves_no_checkpoint_and_resumes(bench, tmp_path, monkeypatch):
    args = ["train", "--method", "pabee", "--task", "rte", "--model", bench.backbone,
            "--data-dir", bench.data, "--max-train-samples", "8", "--epochs", "1",
            "--max-seq-length", "32", "--out", tmp_path / "ckpt"]
    fill_disk(monkeypatch)
    fails(*args, code=1, banner=True, needle=FULL)
    assert [p for p in (tmp_path / "ckpt").rglob("*") if not p.is_dir()] == []  # no file at all
    monkeypatch.undo()  # space again: the same command trains and saves
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    assert temporaries(tmp_path) == []


def test_train_when_the_weights_writer_fails_on_a_full_disk(bench, tmp_path, monkeypatch):
    """safetensors' own writer raises its own error type (not an OSError) on a full disk: one
    line too, and no checkpoint left half written."""
    from safetensors import SafetensorError

    def full(*args, **kwargs):
        raise SafetensorError("Error while serializing: IoError(No space left on device)")

    monkeypatch.setattr("safetensors.torch.save_model", full)
    args = ["train", "--method", "pabee", "--task", "rte", "--model", bench.backbone,
            "--data-dir", bench.data, "--max-train-samples", "8", "--epochs", "1",
            "--max-seq-length", "32", "--out", tmp_path / "ckpt"]
    fails(*args, code=1, banner=True, needle="No space left on device")
    assert [p for p in (tmp_path / "ckpt").rglob("*") if not p.is_dir()] == []


def test_run_keeps_what_is_whole_and_resumes(bench, tmp_path, monkeypatch):
    args = run_args(bench.backbone, bench.data, tmp_path, "--method", "pabee")
    fill_disk(monkeypatch, when=lambda target: target.endswith("predictions.safetensors"))
    fails(*args, code=1, banner=True, needle=f"predictions.safetensors: {FULL}")
    assert temporaries(tmp_path) == []
    assert list((tmp_path / "runs").rglob("summary.json")) == []  # not marked finished
    assert list((tmp_path / "runs").rglob("predictions.safetensors")) == []
    monkeypatch.undo()
    result = invoke(*args, "--json")
    assert result.exit_code == 0, result.output
    assert "already trained" in result.stderr  # the checkpoint written before is reused
    assert temporaries(tmp_path) == []


# ----------------------------------------------------------------- a real full file system
@pytest.fixture
def tiny_disk(tmp_path):
    """A 64 KiB tmpfs (unmounted when the test ends); `fill_up(path)` writes a filler file until
    it is full."""
    with tmpfs(tmp_path / "disk", "size=64k") as mount:
        yield mount


def fill_up(mount: Path) -> None:
    with open(mount / ".filler", "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError as e:
            assert e.errno == errno.ENOSPC


def test_a_real_full_disk(bench, tiny_disk):
    sub, csv = previous(tiny_disk / "sub.json"), previous(tiny_disk / "points.csv")
    index = previous(tiny_disk / "site" / "index.html")
    fill_up(tiny_disk)
    with unchanged(tiny_disk, bench.pabee, bench.test, bench.submissions):
        fails("submit", bench.pabee, "--data-dir", bench.data, "--out", sub, code=1, needle=FULL)
        fails("score", bench.pabee, "--csv", csv, code=1, needle=f"{csv}: cannot write")
        fails("export-elue", bench.test, "--out", tiny_disk / "elue", code=1, needle=FULL)
        fails("leaderboard", "build", bench.submissions, "--out", index.parent, code=1,
              needle=FULL)
        fails("leaderboard", "schema", "--out", tiny_disk / "schema.json", code=1, needle=FULL)
        fails("plot", bench.pabee, "--out", tiny_disk / "figs", code=1, needle=FULL)


def test_a_real_full_disk_under_runs(bench, tiny_disk):
    finished = copy_run(bench.pabee, tiny_disk / "runs")  # a finished run on the same disk
    fill_up(tiny_disk)
    args = run_args(bench.backbone, bench.data, tiny_disk, "--method", "deebert")
    with unchanged(finished):
        fails(*args, code=1, banner=True, needle=FULL)
    assert temporaries(tiny_disk) == []
    assert list((tiny_disk / "runs").rglob("summary.json")) == [finished / "summary.json"]
