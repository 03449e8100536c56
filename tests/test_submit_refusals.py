"""A submission cannot lie: every refusal of `eebench validate` beyond the schema (a forged ELUE
score, implausible FLOPs or parameters, a train or scored test split, a bad date, an unknown task
or reference, a reference that is not the one scored against), each through the command line:
exit code 1 and one line per file on stderr. And `eebench leaderboard check`, the pull-request
check that validates a folder and builds its page.
"""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

import eebench.cli.submit  # noqa: F401  (registers the commands)
from eebench.cli import app
from eebench.submit.build import build_submission, write_submission
from eebench.submit.rescore import References
from eebench.submit.validate import validate_data
from tests.test_submit_schema import write_method_runs, write_reference

runner = CliRunner()
POINT = "tasks.rte.runs.0.points"


@pytest.fixture(scope="module")
def good(tmp_path_factory, data_dir):
    """leaderboard/{submissions,references}: a two-seed pabee submission scored against the
    tiny reference, laid out as in the repository."""
    root = tmp_path_factory.mktemp("refusals")
    ref = write_reference(root / "leaderboard")  # leaderboard/references/ref.json
    sub = build_submission(write_method_runs(root / "runs"), data_dir=data_dir, reference=ref,
                           name="tiny pabee")
    path = root / "leaderboard" / "submissions" / "good.json"
    path.parent.mkdir()
    write_submission(sub, path)
    return {"root": root, "path": path, "ref": ref, "data": json.loads(path.read_text())}


def _edit(data: dict, path: str, value) -> None:
    keys = path.split(".")
    node = data
    for k in keys[:-1]:
        node = node[int(k)] if isinstance(node, list) else node[k]
    if isinstance(node, list):
        node[int(keys[-1])] = value
    else:
        node[keys[-1]] = value


def _get(data: dict, path: str):
    node = data
    for k in path.split("."):
        node = node[int(k)] if isinstance(node, list) else node[k]
    return node


def forge_elue(d):
    d["elue"]["tasks"]["rte"] = 42.0
    d["elue"]["overall"] = 42.0  # consistent with its tasks: only recomputation can tell


def flops(value: float, point: int):
    def edit(d):
        _edit(d, f"{POINT}.{point}.mean_flops", value)
        _edit(d, f"{POINT}.{point}.mean_mflops", value / 1e6)
    return edit


def split(value: str):
    return lambda d: _edit(d, "tasks.rte.split", value)


def params(factor: float):
    """Every parameter count scaled alike: consistent, but not what the model holds."""
    def edit(d):
        for run in d["tasks"]["rte"]["runs"]:
            for p in run["points"]:
                p["params_total"] = int(p["params_total"] * factor)
                p["params_mean_used"] = p["params_mean_used"] * factor
        d["model"]["params"] = int(d["model"]["params"] * factor)
    return edit


def rename_task(key: str):
    def edit(d):
        d["tasks"] = {key: d["tasks"]["rte"]}
        d["elue"]["tasks"] = {key: d["elue"]["tasks"]["rte"]}
    return edit


def other_model(d):
    d["model"]["hidden_size"] = 768  # the FLOPs of a 32-wide model are far below a 768-wide's


# (edit, words the one-line reason holds)
REFUSALS = {
    "forged ELUE score": (forge_elue, "elue.tasks.rte: 42 is not the score its points give"),
    "forged overall": (lambda d: _edit(d, "elue.overall", d["elue"]["overall"] + 1e-3),
                       "elue.overall"),
    "FLOPs 1e308": (flops(1e308, 2), f"{POINT}.2: mean_flops 1e+308 is outside"),
    "FLOPs 1.0": (flops(1.0, 0), f"{POINT}.0: mean_flops 1 is outside"),
    "FLOPs of another model": (other_model, "mean_flops"),
    "split train": (split("train"), "tasks.rte.split: Input should be 'dev' or 'test'"),
    "test split with scores": (split("test"), "tasks.rte: a test split carries no scores"),
    "bad date": (lambda d: _edit(d, "created", "not a date"),
                 "created: Value error, not an ISO 8601 date and time"),
    "date without offset": (lambda d: _edit(d, "created", "2026-11-24T00:55:42"),
                            "created: Value error, an ISO 8601 time without its UTC offset"),
    "unknown task": (rename_task("rte-forged"), "tasks.rte-forged: unknown task"),
    "task alias": (rename_task("RTE"), "tasks.RTE: not a task's own name (write 'rte')"),
    "wrong main metric": (lambda d: _edit(d, "tasks.rte.main_metric", "f1"),
                          "tasks.rte: main_metric 'f1' is not the task's ('accuracy')"),
    "unknown reference": (lambda d: _edit(d, "elue.reference", "my-own-curve"),
                          "elue.reference: unknown reference 'my-own-curve'"),
    "reference hash mismatch": (lambda d: _edit(d, "elue.reference_sha256", "0" * 64),
                                "elue.reference_sha256: 000000000000... is not the sha256 of "
                                "reference 'tiny-static'"),
    "reference model": (lambda d: _edit(d, "elue.reference_model", "bert-base"),
                        "elue.reference_model 'bert-base' is not the model of reference"),
    "params doubled": (params(2.0), f"{POINT}.0: params_total"),
    "params halved": (params(0.5), f"{POINT}.0: params_total"),
    "model params": (lambda d: _edit(d, "model.params", d["model"]["params"] + 1),
                     "model.params"),
    "unknown convention": (lambda d: _edit(d, "flops.convention", "my-flops"),
                           "flops.convention: 'my-flops' is not a convention eebench bounds"),
    "mean length over max": (lambda d: _edit(d, "tasks.rte.runs.0.mean_length", 65.0),
                             "tasks.rte.runs.0: mean_length 65 exceeds its max_length 64"),
    "max length over positions": (lambda d: _edit(d, "tasks.rte.runs.0.max_length", 513),
                                  "max_length 513 exceeds the model's max_position_embeddings"),
    "too many points": (lambda d: _edit(d, f"{POINT}", _get(d, POINT) * 400),
                        f"{POINT}: List should have at most 1000 items"),
    "long name": (lambda d: _edit(d, "name", "x" * 201), "name: String should have at most"),
}


def _write(directory: Path, name: str, data: dict) -> Path:
    path = directory / f"{name.replace(' ', '-')}.json"
    path.write_text(json.dumps(data))
    return path


def test_the_good_file_validates_with_the_references_next_to_it(good):
    result = runner.invoke(app, ["validate", str(good["path"])])
    assert result.exit_code == 0, result.output
    assert result.stderr.strip() == f"{good['path']}: ok"


@pytest.mark.parametrize("case", list(REFUSALS))
def test_each_lie_is_refused_in_one_line(good, case):
    edit, words = REFUSALS[case]
    data = copy.deepcopy(good["data"])
    edit(data)
    path = _write(good["path"].parent, f"bad-{case}", data)
    try:
        result = runner.invoke(app, ["validate", str(path)])
    finally:
        path.unlink()
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{path}: "), result.stderr
    assert words in lines[0], lines[0]


def test_one_line_per_file_and_json(good, tmp_path):
    files = [good["path"]]
    for case, (edit, _) in REFUSALS.items():
        data = copy.deepcopy(good["data"])
        edit(data)
        files.append(_write(tmp_path, case, data))
    refs = str(good["ref"].parent)
    result = runner.invoke(app, ["validate", *map(str, files), "--references", refs, "--json"])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == len(files)
    assert lines[0] == f"{good['path']}: ok"
    for path, line, (words,) in zip(files[1:], lines[1:], [(w,) for _, w in REFUSALS.values()]):
        assert line.startswith(f"{path}: ") and words in line, line
    verdicts = json.loads(result.stdout)
    assert [v["ok"] for v in verdicts] == [True] + [False] * len(REFUSALS)


def test_without_references_an_elue_block_is_refused(good, tmp_path):
    alone = tmp_path / "alone" / "sub.json"  # no references/ next to its folder
    alone.parent.mkdir()
    shutil.copy(good["path"], alone)
    result = runner.invoke(app, ["validate", str(alone)])
    assert result.exit_code == 1
    assert "elue.reference: unknown reference 'tiny-static'" in result.stderr
    assert "--references" in result.stderr  # the hint says how
    given = runner.invoke(app, ["validate", str(alone), "--references",
                                str(good["ref"].parent)])
    assert given.exit_code == 0, given.output
    data = copy.deepcopy(good["data"])
    data["elue"] = None  # no ELUE block: no reference needed
    (tmp_path / "alone" / "no-elue.json").write_text(json.dumps(data))
    assert runner.invoke(app, ["validate", str(tmp_path / "alone" / "no-elue.json")]
                         ).exit_code == 0


def test_an_edited_reference_file_is_refused_by_its_hash(good, tmp_path):
    refs = tmp_path / "references"
    refs.mkdir()
    ref = json.loads(good["ref"].read_text())
    ref["tasks"]["rte"]["points"][0]["main"] -= 20.0  # a lower curve scores everyone higher
    (refs / "ref.json").write_text(json.dumps(ref))
    result = runner.invoke(app, ["validate", str(good["path"]), "--references", str(refs)])
    assert result.exit_code == 1 and "elue.reference_sha256" in result.stderr
    # a file without the hash is scored against what the folder holds: its score is wrong there
    data = copy.deepcopy(good["data"])
    data["elue"]["reference_sha256"] = None
    path = _write(tmp_path, "no-hash", data)
    result = runner.invoke(app, ["validate", str(path), "--references", str(refs)])
    assert result.exit_code == 1 and "elue.tasks.rte" in result.stderr
    ok = runner.invoke(app, ["validate", str(path), "--references", str(good["ref"].parent)])
    assert ok.exit_code == 0, ok.output


def test_a_test_split_without_scores_is_accepted_and_shown(good, tmp_path):
    data = copy.deepcopy(good["data"])
    data["tasks"]["rte"]["split"] = "test"
    data["tasks"]["rte"]["metrics"] = []
    for run in data["tasks"]["rte"]["runs"]:
        for p in run["points"]:
            p["metrics"], p["main"] = {}, None
    with_score = copy.deepcopy(data)
    data["elue"] = None
    subs = tmp_path / "submissions"
    subs.mkdir()
    _write(subs, "test-split", data)
    out = tmp_path / "site"
    result = runner.invoke(app, ["leaderboard", "check", str(subs), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert 'data-file="test-split.json"' in (out / "index.html").read_text()
    refused = validate_data_reason(with_score, References.from_dir(good["ref"].parent))
    assert refused.startswith("elue.tasks: score for a task without dev-split runs (rte)")


def validate_data_reason(data: dict, references: References) -> str:
    from eebench.errors import DataError

    try:
        validate_data(data, references)
    except DataError as e:
        return str(e)
    return "ok"


def test_leaderboard_check_is_one_command_for_a_pull_request(good, tmp_path):
    board = tmp_path / "leaderboard"
    shutil.copytree(good["path"].parent.parent, board)  # submissions/ and references/
    ok = runner.invoke(app, ["leaderboard", "check", str(board / "submissions"), "--json"])
    assert ok.exit_code == 0, ok.output
    report = json.loads(ok.stdout)
    assert report["rejected"] == [] and len(report["accepted"]) == 1
    digest = hashlib.sha256(good["ref"].read_bytes()).hexdigest()
    assert report["references"] == [{"name": "tiny-static", "path": str(
        (board / "references" / "ref.json").resolve()), "sha256": digest}]
    assert report["index"] is None  # built in a temporary directory, then removed
    assert "1 accepted, 0 refused" in ok.stderr

    for case in ("forged ELUE score", "FLOPs 1e308"):
        data = copy.deepcopy(good["data"])
        REFUSALS[case][0](data)
        _write(board / "submissions", case, data)
    out = tmp_path / "site"
    bad = runner.invoke(app, ["leaderboard", "check", str(board / "submissions"), "--out",
                              str(out)])
    assert bad.exit_code == 1
    refused = [line for line in bad.stderr.splitlines() if ".json: " in line]
    assert len(refused) == 2
    assert any("FLOPs-1e308.json: " in line and "mean_flops" in line for line in refused)
    assert any("forged-ELUE-score.json: elue.tasks.rte" in line for line in refused)
    page = (out / "index.html").read_text()
    assert page.count("<tr data-params=") == 1  # only the accepted file is a row
    assert "forged-ELUE-score.json" in page  # listed with its reason

    build = runner.invoke(app, ["leaderboard", "build", str(board / "submissions"), "--out",
                                str(tmp_path / "built"), "--json"])
    assert build.exit_code == 0  # build lists the refused files; check fails on them
    assert len(json.loads(build.stdout)["rejected"]) == 2
