"""`eebench serve-replay` on a finished run of a tiny local backbone over real RTE rows."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from eebench.cli import app
from tests import tiny

runner = CliRunner()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, data_dir):
    tmp = tmp_path_factory.mktemp("serve-run")
    backbone = tiny.save_tiny_backbone(tmp / "tiny-bert", num_layers=3)
    result = runner.invoke(app, [
        "run", "--task", "rte", "--method", "pabee", "--model", str(backbone), "--data-dir",
        str(data_dir), "--max-train-samples", "32", "--epochs", "1", "--max-seq-length", "48",
        "--max-eval-samples", "24", "--no-timing", "--out", str(tmp / "runs"),
        "--checkpoints", str(tmp / "ckpt"), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["run_dir"]


def test_replay_reports_every_scheduler_and_rate_with_no_decision_differing(
        run_dir, data_dir, tmp_path):
    out = tmp_path / "replay"
    result = runner.invoke(app, [
        "serve-replay", run_dir, "--data-dir", str(data_dir), "--rates", "100,400",
        "--requests", "40", "--max-batch", "8", "--target-ms", "50", "--arrivals", "bursty",
        "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [(r["scheduler"], r["rate_rps"]) for r in report["results"]] == [
        (s, rate) for rate in (100.0, 400.0) for s in ("full", "shrink", "continuous")]
    for r in report["results"]:
        assert r["checked"] == 40 and r["disagreements"] == 0
        lat = r["latency"]
        assert 0 < lat["p50_ms"] <= lat["p95_ms"] <= lat["p99_ms"] <= lat["max_ms"]
        assert 0 <= lat["within_target"] <= 1 and lat["mean_batch"] <= 8
    assert report["method"] == "pabee" and report["target_ms"] == 50 and report["capacity_rps"] > 0
    assert json.loads((out / "serving.json").read_text()) == report
    assert (out / "latency-vs-load.png").stat().st_size > 0


def test_a_trace_replays_at_its_own_timing(run_dir, data_dir, tmp_path):
    trace = tmp_path / "trace.txt"
    trace.write_text("".join(f"{0.01 * i:.2f}\n" for i in range(30)))
    result = runner.invoke(app, ["serve-replay", run_dir, "--data-dir", str(data_dir),
                                 "--arrivals", "trace", "--trace", str(trace), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["requests"] == 30 and report["arrivals"] == "trace"
    assert [r["rate_rps"] for r in report["results"]] == [pytest.approx(100.0)] * 3


def test_the_table_and_progress_go_to_stderr_and_nothing_to_stdout(run_dir, data_dir):
    result = runner.invoke(app, ["serve-replay", run_dir, "--data-dir", str(data_dir),
                                 "--rates", "200", "--requests", "16", "--max-batch", "4"])
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert "replaying: continuous at 200 requests/s" in result.stderr
    assert "p99 ms" in result.stderr and "0 of 16" in result.stderr


def test_help_names_the_schedulers_and_the_options():
    result = runner.invoke(app, ["serve-replay", "--help"])
    assert result.exit_code == 0
    for word in ("continuous rebatching", "--arrivals", "--rates", "--max-batch", "--target-ms"):
        assert word in result.output


@pytest.mark.parametrize("args,message", [
    (["--arrivals", "uniform"], "--arrivals 'uniform': one of poisson, bursty, trace"),
    (["--burst", "0.5"], "--burst 0.5: a mean burst size is at least 1"),
    (["--target-ms", "nan"], "--target-ms nan: give a positive number of milliseconds"),
    (["--arrivals", "trace"], "--trace FILE goes with --arrivals trace"),
    (["--rates", "10,fast"], "--rates '10,fast': not a comma-separated list of numbers"),
    (["--load", "0"], "--load '0': give positive numbers"),
    (["--point", "9"], "--point 9: no such sweep value in the run"),
    (["--device", "tpu"], "--device 'tpu': cpu, cuda or cuda:N"),
])
def test_bad_options_are_one_line_usage_errors(run_dir, data_dir, args, message):
    result = runner.invoke(app, ["serve-replay", run_dir, "--data-dir", str(data_dir), *args])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


def test_data_that_is_not_the_runs_is_refused(run_dir, tmp_path):
    rte = tmp_path / "data" / "RTE"
    rte.mkdir(parents=True)
    (rte / "dev.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n")
    (rte / "train.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n")
    result = runner.invoke(app, ["serve-replay", run_dir, "--data-dir", str(tmp_path / "data")])
    assert result.exit_code == 1, result.output
    assert "sample ids" in result.output and "Traceback" not in result.output


def test_a_bad_trace_is_one_line_naming_its_row(run_dir, data_dir, tmp_path):
    trace = tmp_path / "trace.txt"
    trace.write_text("0.0\n0.5\nsoon\n")
    args = ["serve-replay", run_dir, "--data-dir", str(data_dir), "--arrivals", "trace"]
    result = runner.invoke(app, [*args, "--trace", str(trace)])
    assert result.exit_code == 1, result.output
    assert "trace.txt:3: not a timestamp: 'soon'" in result.output
    assert "Traceback" not in result.output
    result = runner.invoke(app, [*args, "--trace", str(tmp_path / "absent.txt")])
    assert result.exit_code == 1 and "absent.txt: missing" in result.output
    trace.write_text("3\n3\n")
    result = runner.invoke(app, [*args, "--trace", str(trace)])
    assert result.exit_code == 2 and "every arrival of the trace is at one instant" in result.output


def test_a_run_whose_checkpoint_is_gone_is_refused(run_dir, data_dir, tmp_path):
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    summary = json.loads((copy / "summary.json").read_text())
    for variant in summary["variants"]:
        variant["checkpoint"] = str(tmp_path / "gone")
    (copy / "summary.json").write_text(json.dumps(summary))
    result = runner.invoke(app, ["serve-replay", str(copy), "--data-dir", str(data_dir)])
    assert result.exit_code == 1, result.output
    assert "gone: the checkpoint of run" in result.output and "Traceback" not in result.output


def test_a_directory_that_is_not_a_run_is_refused(data_dir, tmp_path):
    result = runner.invoke(app, ["serve-replay", str(tmp_path), "--data-dir", str(data_dir)])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) <= 2
