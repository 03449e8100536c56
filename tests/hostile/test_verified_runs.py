"""Nothing in a runs folder can lie (cause 2b: results read from runs that were unfinished or
edited by hand). Every reader of results (`score`, `submit`, `plot`, `reference build`,
`eebench.api.results` and `score`) reads a run through eebench.run.artifacts.verify_run: a run
without `summary.json` and a `points.jsonl` that is not the one its summary vouched for are
refused in one line naming the run and the file, nothing written. `submit` recomputes each point
from the predictions it records; `validate`, which sees no predictions, refuses scores that no
predictions over the run's samples give."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eebench import api
from eebench.errors import DataError
from eebench.run.artifacts import POINTS_FILE, PREDICTIONS_FILE, SUMMARY_FILE, file_hashes
from tests.hostile.conftest import copy_run
from tests.hostile.helpers import fails, unchanged

COMMANDS = ["score", "submit", "plot", "reference build"]


def command(name: str, run: Path, bench, out: Path) -> list[object]:
    """`name` on `run`, writing (if it got that far) under `out`."""
    return {
        "score": ["score", run],
        "submit": ["submit", run, "--data-dir", bench.data, "--out", out / "sub.json"],
        "plot": ["plot", run, "--out", out / "figs"],
        "reference build": ["reference", "build", run, "--out", out / "ref.json"],
    }[name]


def claim_99(run: Path) -> Path:
    """The run's first point claims 99 % accuracy: valid JSON, a valid point, a lie."""
    lines = (run / POINTS_FILE).read_text().splitlines()
    point = json.loads(lines[0])
    point["metrics"]["accuracy"] = point["main"] = 99.0
    lines[0] = json.dumps(point)
    (run / POINTS_FILE).write_text("\n".join(lines) + "\n")
    return run


def edited(bench, tmp_path: Path) -> Path:
    return claim_99(copy_run(bench.static, tmp_path / "runs"))


def unfinished(bench, tmp_path: Path) -> Path:
    run = copy_run(bench.static, tmp_path / "runs")
    (run / SUMMARY_FILE).unlink()
    return run


@pytest.mark.parametrize("name", COMMANDS)
def test_a_points_file_edited_by_hand_is_refused(bench, tmp_path, name):
    run = edited(bench, tmp_path)
    with unchanged(tmp_path):
        fails(*command(name, run, bench, tmp_path / "out"), code=1,
              needle=f"{run / POINTS_FILE}: does not match the sha256 its run's {SUMMARY_FILE}")


@pytest.mark.parametrize("name", COMMANDS)
def test_an_unfinished_run_is_refused(bench, tmp_path, name):
    run = unfinished(bench, tmp_path)
    with unchanged(tmp_path):
        fails(*command(name, run, bench, tmp_path / "out"), code=1,
              needle=f"{run / SUMMARY_FILE}: missing: the run is unfinished")


@pytest.mark.parametrize("call", [api.results, api.score], ids=["results", "score"])
@pytest.mark.parametrize("damage,file", [(edited, POINTS_FILE), (unfinished, SUMMARY_FILE)],
                         ids=["edited", "unfinished"])
def test_the_api_refuses_an_edited_or_unfinished_run(bench, tmp_path, call, damage, file):
    run = damage(bench, tmp_path)
    with unchanged(tmp_path), pytest.raises(DataError) as refused:
        call(run)
    assert refused.value.message.startswith(f"{run / file}: ")


def test_a_folder_of_runs_holding_an_unfinished_or_edited_one_is_refused(bench, tmp_path):
    """A run found in a folder is read as a named one: no run is left out or scored unchecked."""
    copy_run(bench.pabee, tmp_path / "runs")  # finished, untouched
    run = unfinished(bench, tmp_path)
    with unchanged(tmp_path):
        fails("score", tmp_path / "runs", code=1, needle=str(run / SUMMARY_FILE))
    (run / SUMMARY_FILE).write_bytes((bench.static / SUMMARY_FILE).read_bytes())
    (run / POINTS_FILE).unlink()  # deleting the points hides no run
    with unchanged(tmp_path):
        fails("score", tmp_path / "runs", code=1, needle=f"{run / POINTS_FILE}: missing")


def test_submit_refuses_points_its_predictions_do_not_give(bench, tmp_path):
    """Points edited and the summary rewritten to vouch for them: the hashes agree, the
    predictions the submission would record do not."""
    run = edited(bench, tmp_path)
    summary = json.loads((run / SUMMARY_FILE).read_text())
    summary["files"] = file_hashes(run)
    (run / SUMMARY_FILE).write_text(json.dumps(summary))
    with unchanged(tmp_path):
        line = fails(*command("submit", run, bench, tmp_path / "out"), code=1,
                     needle=f"{run / POINTS_FILE}:1: accuracy 99 is not what its predictions")
    assert str(run / PREDICTIONS_FILE) in line


def test_validate_refuses_a_metric_its_predictions_cannot_give(bench, tmp_path):
    """99 % of a run's 8 samples is 7.92 of them: no predictions give it."""
    data = json.loads(bench.submission.read_text())
    run = next(iter(data["tasks"].values()))["runs"][0]
    point = run["points"][0]
    point["metrics"]["accuracy"] = point["main"] = 99.0
    path = tmp_path / "sub.json"
    path.write_text(json.dumps(data))
    with unchanged(tmp_path):
        fails("validate", path, code=1, prefix=f"{path}: ",
              needle=f"accuracy 99 is no whole number of its {run['n_samples']} samples")
