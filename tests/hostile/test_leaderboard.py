"""`eebench submit`, `validate`, `export-elue` and `leaderboard build|schema`: output paths of
the wrong kind refused before any work, damaged input one line, nothing written."""

from __future__ import annotations

import pytest

from tests.hostile.conftest import copy_run
from tests.hostile.helpers import fails, unchanged

BINARY = bytes(range(256))


def test_submit_out_naming_a_directory_or_under_a_file(bench, tmp_path):
    (tmp_path / "sub.json").mkdir()
    (tmp_path / "a-file").write_text("x\n")
    with unchanged(tmp_path, bench.pabee):
        fails("submit", bench.pabee, "--out", tmp_path / "sub.json", code=1,
              needle="cannot write the submission (it is a directory)")
        fails("submit", bench.pabee, "--out", tmp_path / "a-file" / "sub.json", code=1,
              needle="a-file is a file, not a directory")


def test_submit_refuses_a_damaged_run_and_a_bad_reference(bench, tmp_path):
    run = copy_run(bench.pabee, tmp_path / "runs")
    (run / "summary.json").write_bytes(BINARY)
    (tmp_path / "ref").mkdir()
    with unchanged(tmp_path, bench.pabee):
        fails("submit", run, "--out", tmp_path / "sub.json", code=1, needle="summary.json")
        fails("submit", bench.pabee, "--reference", tmp_path / "ref", "--out",
              tmp_path / "sub.json", code=1, needle=str(tmp_path / "ref"))


@pytest.mark.parametrize("kind,needle", [
    ("directory", "not a regular file"),
    ("binary", "not UTF-8"),
    ("missing", "cannot read"),
    ("truncated", "JSON"),
])
def test_validate_gives_one_verdict_line(bench, tmp_path, kind, needle):
    path = tmp_path / "sub.json"
    if kind == "directory":
        path.mkdir()
    elif kind == "binary":
        path.write_bytes(BINARY)
    elif kind == "truncated":
        text = bench.submission.read_text()
        path.write_text(text[: len(text) // 2])
    with unchanged(tmp_path):
        fails("validate", path, code=1, prefix=f"{path}: ", needle=needle)


@pytest.mark.parametrize("edit,needle", [
    (lambda run, point: point.update(sweep_value=True), "sweep"),
    (lambda run, point: point.update(sweep_value=float("nan")), "NaN is not a JSON number"),
    (lambda run, point: run.update(chained_models="x"), "schema_version 2"),
    (lambda run, point: run.update(chained_models=[1, 2, 10**9]), "schema_version 2"),
])
def test_a_malformed_version_2_file_is_one_verdict_line(bench, tmp_path, edit, needle):
    """The upgrade of a version-2 file never raises: what it cannot read stays for the schema to
    refuse in one line."""
    import json

    data = json.loads(bench.submission.read_text())  # as version 2 wrote it:
    data["schema_version"] = 2  # one number per point, no exit paths
    for task in data["tasks"].values():
        for r in task["runs"]:
            del r["exit_paths"]
            for p in r["points"]:
                [p["sweep_value"]] = p.pop("sweep").values()
    run = next(iter(data["tasks"].values()))["runs"][0]
    edit(run, run["points"][0])
    path = tmp_path / "v2.json"
    path.write_text(json.dumps(data))
    with unchanged(tmp_path):
        fails("validate", path, code=1, prefix=f"{path}: ", needle=needle)


def test_validate_usage_error():
    fails("validate", code=2, needle="Missing argument")


def test_export_elue_out_naming_a_file_or_under_a_file(bench, tmp_path):
    a_file = tmp_path / "elue"
    a_file.write_text("x\n")
    with unchanged(tmp_path, bench.test):
        fails("export-elue", bench.test, "--out", a_file, code=1,
              needle="cannot write the ELUE files (it is a file)")
        fails("export-elue", bench.test, "--out", a_file / "sub", code=1,
              needle="elue is a file, not a directory")


def test_export_elue_refuses_dev_runs_and_directories_that_are_no_runs(bench, tmp_path):
    with unchanged(tmp_path, bench.pabee):
        fails("export-elue", bench.pabee, "--out", tmp_path / "elue", code=2,
              needle="a dev-split run")
        fails("export-elue", tmp_path, "--out", tmp_path / "elue", code=1,
              needle="not a run directory")


@pytest.mark.parametrize("file", ["ids.txt", "predictions.safetensors", "summary.json"])
def test_export_elue_refuses_a_damaged_test_run(bench, tmp_path, file):
    run = copy_run(bench.test, tmp_path / "runs")
    (run / file).write_bytes(BINARY)
    with unchanged(tmp_path):
        fails("export-elue", run, "--out", tmp_path / "elue", code=1, needle=file)


def test_leaderboard_build_out_naming_a_file_or_under_a_file(bench, tmp_path):
    a_file = tmp_path / "site"
    a_file.write_text("x\n")
    with unchanged(tmp_path, bench.submissions):
        fails("leaderboard", "build", bench.submissions, "--out", a_file, code=1,
              needle="cannot write the page (it is a file)")
        fails("leaderboard", "build", bench.submissions, "--out", a_file / "sub", code=1,
              needle="site is a file, not a directory")


def test_leaderboard_build_refuses_a_file_or_nothing_as_submissions(bench, tmp_path):
    with unchanged(tmp_path):
        fails("leaderboard", "build", bench.submission, "--out", tmp_path / "site", code=1,
              needle=str(bench.submission))
        fails("leaderboard", "build", tmp_path / "missing", "--out", tmp_path / "site", code=1,
              needle="missing")


def test_leaderboard_schema_out_naming_a_directory_or_under_a_file(tmp_path):
    (tmp_path / "schema.json").mkdir()
    (tmp_path / "a-file").write_text("x\n")
    with unchanged(tmp_path):
        fails("leaderboard", "schema", "--out", tmp_path / "schema.json", code=1,
              needle="cannot write the JSON Schema (it is a directory)")
        fails("leaderboard", "schema", "--out", tmp_path / "a-file" / "schema.json", code=1,
              needle="a-file is a file, not a directory")


@pytest.mark.parametrize("kind,needle", [
    ("binary", "not UTF-8 text"),
    ("missing", "missing"),
    ("stale", "is out of date"),
])
def test_leaderboard_schema_check(tmp_path, kind, needle):
    path = tmp_path / "schema.json"
    if kind == "binary":
        path.write_bytes(BINARY)
    elif kind == "stale":
        path.write_text("{}\n")
    with unchanged(tmp_path):
        fails("leaderboard", "schema", "--check", "--out", path, code=1, needle=needle)
