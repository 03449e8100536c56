"""`eebench run --eval-task`: a model trained on one task evaluated on another with the same
labels, next to its in-domain run, on a tiny local backbone; another label set is refused in one
line before any work; and no earlier run changes its name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from eebench.cli import app
from eebench.run import artifacts as R
from eebench.run.config import BenchConfig
from eebench.run.grid import expand
from eebench.tasks.loaders import load_split
from tests import tiny

runner = CliRunner()


@pytest.fixture(scope="module")
def backbone(tmp_path_factory):
    return tiny.save_tiny_backbone(tmp_path_factory.mktemp("tiny-bert"), num_layers=3)


def _args(tmp_path, backbone, data_dir, *extra):
    return ["run", "--model", str(backbone), "--data-dir", str(data_dir),
            "--max-train-samples", "32", "--epochs", "1", "--max-seq-length", "48",
            "--max-eval-samples", "20", "--no-timing", "--out", str(tmp_path / "runs"),
            "--checkpoints", str(tmp_path / "ckpt"), "--json", *extra]


def test_a_sst2_model_evaluated_on_elue_sst2(tmp_path, backbone, data_dir, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, _args(tmp_path, backbone, data_dir, "--method", "pabee",
                                      "--task", "sst2", "--eval-task", "elue-sst2"))
    assert result.exit_code == 0, result.output + str(result.exception)
    out = json.loads(result.stdout)
    run_dir = Path(out["run_dir"])
    assert run_dir.parent.name == "elue-sst2"  # under the evaluated task
    cfg = R.read_run(run_dir).config
    assert (cfg.task, cfg.train_task, cfg.trained_on) == ("elue-sst2", "sst2", "sst2")
    assert json.loads((run_dir / R.CONFIG_FILE).read_text())["train_task"] == "sst2"
    dev = load_split("elue-sst2", "dev", data_dir)
    ids = (run_dir / R.IDS_FILE).read_text().splitlines()
    assert len(ids) == 20 and set(ids) <= set(dev.ids)  # the evaluated task's samples
    assert {p.task for p in R.read_run(run_dir).points} == {"elue-sst2"}
    # the same training, evaluated on its own task, next to it; one checkpoint for both
    rows = out["in_domain"]
    assert [r["sweep_value"] for r in rows] == cfg.sweep
    for r in rows:
        assert r["in_domain"]["task"] == "sst2" and r["shifted"]["task"] == "elue-sst2"
        assert 1 <= r["shifted"]["avg_exit_layer"] <= 3 and r["shifted"]["main"] is not None
        for field in ("ece", "consistency"):  # the points' quality fields, where they carry them
            if field in R.OperatingPoint.model_fields:
                assert field in r["in_domain"] and field in r["shifted"]
    own = [p.parent for p in (tmp_path / "runs").rglob(R.SUMMARY_FILE)
           if p.parent.parent.name == "sst2"]
    assert len(own) == 1
    own_cfg = R.read_run(own[0]).config
    assert own_cfg.train_task is None and own_cfg.key() == own[0].name
    assert "train_task" not in json.loads((own[0] / R.CONFIG_FILE).read_text())
    summary = R.read_run(run_dir).summary
    assert summary.variants[0].checkpoint == R.read_run(own[0]).summary.variants[0].checkpoint


def test_another_label_set_is_refused_before_any_work(tmp_path, backbone, data_dir):
    result = runner.invoke(app, _args(tmp_path, backbone, data_dir, "--method", "pabee",
                                      "--task", "rte", "--eval-task", "sst2"))
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --eval-task sst2"), result.stderr
    assert "labels" in lines[0]
    assert not (tmp_path / "ckpt").exists() and not any((tmp_path / "runs").rglob("*.json"))
    pair = runner.invoke(app, _args(tmp_path, backbone, data_dir, "--method", "pabee",
                                    "--task", "sst2", "--eval-task", "mrpc"))
    assert pair.exit_code == 2 and "sentence pairs" in pair.stderr


def test_the_field_renames_nothing():
    plain = expand(BenchConfig(methods=["pabee"], tasks=["rte"], seeds=[1])).runs[0]
    assert "train_task" not in plain.model_dump(mode="json")
    shifted = expand(BenchConfig(methods=["pabee"], tasks=["rte"], seeds=[1],
                                 eval_task="qnli"))
    [run], [own] = shifted.runs, shifted.in_domain
    assert own == plain and own.key() == plain.key()
    assert (run.task, run.train_task) == ("qnli", "rte") and run.key() != plain.key()
    assert run.train == plain.train  # trained as the in-domain run: the same checkpoint
    same = expand(BenchConfig(methods=["pabee"], tasks=["rte"], seeds=[1], eval_task="rte"))
    assert same.runs[0] == plain  # evaluating on the trained task itself is no shift
