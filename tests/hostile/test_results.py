"""`eebench score`, `reference build` and `plot` on damaged runs, bad references and output
paths that cannot be written: one line, nothing written, the runs untouched."""

from __future__ import annotations

import pytest

from tests.hostile.conftest import copy_run
from tests.hostile.helpers import fails, unchanged

BINARY = bytes(range(256))


def damaged(bench, tmp_path, file: str, content: bytes | None):
    """A copy of the pabee run whose `file` holds `content` (None: a directory in its place)."""
    run = copy_run(bench.pabee, tmp_path / "runs")
    path = run / file
    path.unlink()
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    return run


@pytest.mark.parametrize("file,content,needle", [
    ("summary.json", BINARY, "summary.json: not UTF-8 text"),
    ("summary.json", b'{"model": ', "summary.json: not JSON"),
    ("summary.json", None, "summary.json: is a directory, not a file"),
    ("points.jsonl", BINARY, "points.jsonl"),
    ("config.json", b"[]", "config.json"),
], ids=["summary-binary", "summary-not-json", "summary-a-directory", "points-binary",
        "config-a-list"])
def test_score_refuses_a_damaged_finished_run(bench, tmp_path, file, content, needle):
    run = damaged(bench, tmp_path, file, content)
    with unchanged(tmp_path):
        fails("score", run, code=1, needle=needle)


def test_score_refuses_an_empty_directory_and_a_missing_path(tmp_path):
    (tmp_path / "empty").mkdir()
    with unchanged(tmp_path):
        fails("score", tmp_path / "empty", code=1)
        fails("score", tmp_path / "missing", code=1)


@pytest.mark.parametrize("kind", ["binary", "directory", "not JSON"])
def test_score_refuses_a_bad_reference(bench, tmp_path, kind):
    ref = tmp_path / "ref.json"
    if kind == "directory":
        ref.mkdir()
    else:
        ref.write_bytes(BINARY if kind == "binary" else b"{not json")
    with unchanged(tmp_path, bench.pabee):
        fails("score", bench.pabee, "--reference", ref, code=1, needle=str(ref))


def test_score_csv_naming_a_directory_or_under_a_file(bench, tmp_path):
    (tmp_path / "out.csv").mkdir()
    (tmp_path / "a-file").write_text("x\n")
    with unchanged(tmp_path, bench.pabee):
        fails("score", bench.pabee, "--csv", tmp_path / "out.csv", code=1,
              needle="(it is a directory)")
        fails("score", bench.pabee, "--csv", tmp_path / "a-file" / "out.csv", code=1,
              needle="a-file is a file, not a directory")


@pytest.mark.parametrize("args,needle", [
    (["--compare", "pabee", "pabee", "--bootstrap", "100000000000000000000"], "--bootstrap"),
    (["--compare", "pabee", "pabee", "--seed", "-1"], "--seed must be in"),
    (["--compare", "pabee", "bert"], "no method 'bert'"),
    (["--extrapolate", "cubic"], "Invalid value for '--extrapolate'"),
])
def test_score_usage_errors(bench, args, needle):
    with unchanged(bench.pabee):
        fails("score", bench.pabee, *args, code=2, needle=needle)


def test_reference_build_out_naming_a_directory_or_under_a_file(bench, tmp_path):
    (tmp_path / "ref.json").mkdir()
    (tmp_path / "a-file").write_text("x\n")
    with unchanged(tmp_path, bench.static):
        fails("reference", "build", bench.static, "--out", tmp_path / "ref.json", code=1,
              needle="(it is a directory)")
        fails("reference", "build", bench.static, "--out", tmp_path / "a-file" / "ref.json",
              code=1, needle="a-file is a file, not a directory")


def test_reference_build_refuses_runs_it_cannot_use(bench, tmp_path):
    run = damaged(bench, tmp_path, "summary.json", BINARY)
    with unchanged(tmp_path, bench.pabee):
        fails("reference", "build", bench.pabee, "--out", tmp_path / "ref.json", code=1,
              needle="not of single-exit models")
        fails("reference", "build", run, "--out", tmp_path / "ref.json", code=1,
              needle="summary.json")


def test_plot_out_naming_a_file_or_under_a_file(bench, tmp_path):
    a_file = tmp_path / "figures"
    a_file.write_text("x\n")
    with unchanged(tmp_path, bench.pabee):
        fails("plot", bench.pabee, "--out", a_file, code=1, needle="(it is a file)")
        fails("plot", bench.pabee, "--out", a_file / "sub", code=1,
              needle="figures is a file, not a directory")


def test_plot_refuses_a_bad_reference_a_damaged_run_and_a_bad_format(bench, tmp_path):
    ref = tmp_path / "ref.json"
    ref.write_bytes(BINARY)
    run = damaged(bench, tmp_path, "points.jsonl", b'{"sweep_value": \n')
    with unchanged(tmp_path, bench.pabee):
        fails("plot", bench.pabee, "--out", tmp_path / "figs", "--reference", ref, code=1,
              needle=str(ref))
        fails("plot", run, "--out", tmp_path / "figs", code=1, needle="points.jsonl")
        fails("plot", bench.pabee, "--out", tmp_path / "figs", "--format", "bmp", code=2,
              needle="unknown figure format")
