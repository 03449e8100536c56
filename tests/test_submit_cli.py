"""`eebench submit`, `validate` and `leaderboard build|schema` on runs of the real pipeline
(a tiny local backbone fine-tuned on 32 real RTE rows, evaluated on 20)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

import eebench.cli.submit  # noqa: F401  (registers the commands)
from eebench.cli import app
from eebench.run import artifacts as R
from eebench.submit.schema import json_schema
from tests import tiny
from tests.cli import tiny_run

runner = CliRunner()
REPO = Path(__file__).resolve().parents[1]


def _run(root: Path, backbone: Path, data_dir: Path, *extra: str) -> Path:
    return Path(tiny_run(root, backbone, data_dir, *extra)["run_dir"])


@pytest.fixture(scope="module")
def runs(tmp_path_factory, data_dir):
    """pabee with two seeds, static k = 1 and 3 for the reference curve, and its reference."""
    root = tmp_path_factory.mktemp("submit-cli")
    backbone = tiny.save_tiny_backbone(root / "tiny-bert", num_layers=3)
    pabee = [_run(root, backbone, data_dir, "--method", "pabee", "--seed", str(s))
             for s in (1, 2)]
    static = _run(root, backbone, data_dir, "--method", "static", "--sweep", "1,3",
                  "--seed", "1", "--no-timing")
    ref = root / "references" / "ref.json"  # validation finds it with --references
    result = runner.invoke(app, ["reference", "build", str(static), "--out", str(ref)])
    assert result.exit_code == 0, result.output
    return {"root": root, "pabee": pabee, "static": static, "ref": ref, "backbone": backbone}


def _submit(runs, out: Path, *args: str):
    return runner.invoke(app, ["submit", *map(str, args), "--out", str(out), "--json"])


def test_submit_writes_a_valid_submission_with_the_elue_score(runs, data_dir, tmp_path):
    out = tmp_path / "sub.json"
    result = _submit(runs, out, *runs["pabee"], "--reference", runs["ref"], "--data-dir",
                     data_dir, "--name", "tiny pabee")
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert json.loads(result.stdout) == data  # --json prints exactly the file
    jsonschema.Draft202012Validator(json_schema()).validate(data)
    check = runner.invoke(app, ["validate", str(out), "--references", str(runs["ref"].parent)])
    assert check.exit_code == 0 and check.stderr.strip() == f"{out}: ok"
    assert data["elue"]["reference_sha256"] == hashlib.sha256(
        runs["ref"].read_bytes()).hexdigest()
    model = data["model"]
    assert (model["hidden_size"], model["intermediate_size"], model["num_layers"]) == (32, 64, 3)
    for entry in data["tasks"]["rte"]["runs"]:
        assert 1 <= entry["mean_length"] <= entry["max_length"] == 48

    assert data["name"] == "tiny pabee" and data["seeds"] == [1, 2]
    assert data["model"]["source"] == "local" and data["model"]["num_layers"] == 3
    assert data["method"]["name"] == "pabee" and data["method"]["sweep_param"] == "patience"
    task = data["tasks"]["rte"]
    for run_dir, entry in zip(runs["pabee"], task["runs"]):
        points = R.read_run(run_dir).points
        assert [p["sweep"] for p in entry["points"]] == [p.sweep for p in points]
        assert [p["mean_flops"] for p in entry["points"]] == [p.mean_flops for p in points]
        assert [p["main"] for p in entry["points"]] == [p.main for p in points]
        assert entry["n_samples"] == 20
        digest = hashlib.sha256((run_dir / R.PREDICTIONS_FILE).read_bytes()).hexdigest()
        assert entry["predictions_sha256"] == digest
        timing = {(t["mode"], t["batch_size"]) for t in entry["points"][0]["timings"]}
        assert timing == {("dynamic", 1), ("dynamic", 32), ("full", 1), ("full", 32)}
    for f in task["data_files"]:
        assert f["sha256"] == hashlib.sha256((data_dir / f["path"]).read_bytes()).hexdigest()
    env = data["environments"][0]
    assert env["cpu"] and env["packages"]["torch"]

    # the ELUE score is the one `eebench score` computes from the same runs and reference
    scored = runner.invoke(app, ["score", *map(str, runs["pabee"]), "--reference",
                                 str(runs["ref"]), "--json"])
    assert scored.exit_code == 0, scored.output
    report = json.loads(scored.stdout)
    assert data["elue"]["tasks"]["rte"] == pytest.approx(report["tasks"]["rte"]["methods"]
                                                         ["pabee"]["elue"], abs=1e-6)
    assert data["elue"]["overall"] == pytest.approx(report["overall"]["pabee"], abs=1e-6)


def test_submit_without_a_reference_or_data_dir(runs, tmp_path, monkeypatch):
    monkeypatch.delenv("EEBENCH_DATA_DIR", raising=False)
    out = tmp_path / "sub.json"
    result = _submit(runs, out, runs["pabee"][0])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["elue"] is None and data["seeds"] == [1]
    files = data["tasks"]["rte"]["data_files"]
    assert files and all(f["source"] == "hub" and f["sha256"] is None for f in files)
    assert runner.invoke(app, ["validate", str(out)]).exit_code == 0


def test_submit_refuses_mixed_runs_in_one_line(runs, tmp_path):
    mixed = _submit(runs, tmp_path / "a.json", runs["pabee"][0], runs["static"])
    assert mixed.exit_code == 1
    assert mixed.stderr.strip().startswith("error: runs of mixed methods: pabee, static")
    assert len(mixed.stderr.strip().splitlines()) == 1

    other = tmp_path / "other-model"  # the same run, relabelled as another model's
    shutil.copytree(runs["pabee"][1], other)
    cfg = json.loads((other / R.CONFIG_FILE).read_text())
    cfg["model"] = "org/another-model"
    (other / R.CONFIG_FILE).write_text(json.dumps(cfg))
    edited = _submit(runs, tmp_path / "b.json", runs["pabee"][0], other)
    assert edited.exit_code == 1 and "config.json: does not match the sha256" in edited.stderr
    summary = json.loads((other / R.SUMMARY_FILE).read_text())  # as that model's run says
    summary["files"] = R.file_hashes(other)
    (other / R.SUMMARY_FILE).write_text(json.dumps(summary))
    result = _submit(runs, tmp_path / "b.json", runs["pabee"][0], other)
    assert result.exit_code == 1 and "runs of mixed models" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1

    same_seed = _submit(runs, tmp_path / "c.json", runs["pabee"][0], runs["pabee"][0].parent)
    assert same_seed.exit_code == 0  # a directory given twice is one run, not two
    assert not (tmp_path / "a.json").exists() and not (tmp_path / "b.json").exists()


def test_validate_reports_each_file_and_fails_on_any_bad_one(runs, tmp_path):
    good = tmp_path / "good.json"
    assert _submit(runs, good, runs["pabee"][0]).exit_code == 0
    bad = tmp_path / "bad.json"
    data = json.loads(good.read_text())
    data["tasks"]["rte"]["runs"][0]["points"][0]["exit_histogram"] = [1, 2, 3]
    bad.write_text(json.dumps(data))
    result = runner.invoke(app, ["validate", str(good), str(bad), "--json"])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert lines[0] == f"{good}: ok"
    assert lines[1].startswith(f"{bad}: tasks.rte.runs.0.points.0: exit_histogram adds up to 6")
    verdicts = json.loads(result.stdout)
    assert [v["ok"] for v in verdicts] == [True, False]
    assert verdicts[1]["reason"] in lines[1]


def test_leaderboard_build_renders_good_and_lists_rejected(runs, tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    assert _submit(runs, subs / "good.json", *runs["pabee"], "--reference", runs["ref"],
                   "--name", "<b>bold</b> & co").exit_code == 0
    (subs / "broken.json").write_text('{"schema_version": 1, "name": NaN}')
    out = tmp_path / "site"
    result = runner.invoke(app, ["leaderboard", "build", str(subs), "--out", str(out), "--json",
                                 "--references", str(runs["ref"].parent)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["accepted"] == [str(subs / "good.json")]
    assert report["rejected"][0]["reason"] == "not valid JSON: NaN is not a JSON number"
    page = (out / "index.html").read_text()
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; co" in page and "<b>bold</b>" not in page
    assert "broken.json" in page and 'data-file="good.json"' in page


def test_leaderboard_schema_command(tmp_path):
    out = tmp_path / "schema.json"
    assert runner.invoke(app, ["leaderboard", "schema", "--out", str(out)]).exit_code == 0
    committed = REPO / "leaderboard" / "schema.json"
    assert out.read_text() == committed.read_text()
    check = runner.invoke(app, ["leaderboard", "schema", "--out", str(committed), "--check"])
    assert check.exit_code == 0, check.output
    out.write_text("{}")
    stale = runner.invoke(app, ["leaderboard", "schema", "--out", str(out), "--check"])
    assert stale.exit_code == 1 and "out of date" in stale.stderr
    printed = runner.invoke(app, ["leaderboard", "schema"])
    assert json.loads(printed.stdout) == json_schema()
