"""The results table (eebench.score.table): one row per point per run, from run directories and
from a submission alike, and what is computed from it (seed averages, `eebench score --csv`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from eebench import score as sc
from eebench.score.table import HEAD, TAIL
from eebench.submit.build import build_submission
from tests.test_score_cli import PABEE, invoke, one_line_error, write_run, write_runs
from tests.test_submit_schema import write_method_runs


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    return write_runs(tmp_path / "runs")


def test_a_row_per_point_of_every_run(runs: Path):
    loaded = sc.load_runs([runs])
    raw = sc.raw_points(loaded)
    frame = sc.results_frame(sc.run_records(raw))
    assert list(frame.columns) == [*HEAD, "metric.accuracy", *TAIL]
    assert len(frame) == 2 * 6 + 2 * 3  # two seeds of static k = 1..6 and of three thresholds
    for i, rp in enumerate(raw):  # in the order of the raw points
        row, p = frame.iloc[i], rp.point
        assert list(row[["label", "method", "task", "seed"]]) == [rp.label, p.method, p.task,
                                                                  p.seed]
        assert list(row[["model", "pooling", "split", "sweep_param", "sweep_value"]]) == [
            "minilm-l6", "cls", "dev", p.sweep_param, p.sweep_value]
        assert row["main"] == row["metric.accuracy"] == p.metrics["accuracy"]
        assert row["mean_flops"] == p.mean_flops and row["mflops"] == p.mean_flops / 1e6
        assert (row["run"], row["row"]) == (str(rp.run.path), rp.row)
        lines = (rp.run.path / "points.jsonl").read_text().splitlines()
        assert list(json.loads(lines[row["row"]])["sweep"].values()) == [row["sweep_value"]]
    assert frame["latency_bs1_ms"].isna().all() and frame["disagreements"].isna().all()
    assert frame["seed"].dtype == np.int64 and frame["disagreements"].dtype == "Int64"


def test_seed_averages_are_a_groupby_of_the_frame(runs: Path):
    raw = sc.raw_points(sc.load_runs([runs]))
    frame = sc.results_frame(sc.run_records(raw))
    means = frame.groupby(["label", "task", "sweep_param", "sweep_value"])[["main", "mflops"]]
    for p in sc.aggregate_seeds(raw):
        key = (p.label, p.task, p.sweep_param, p.sweep_value)
        assert p.main == pytest.approx(means.mean().loc[key, "main"])
        assert p.main_std == pytest.approx(means.std().loc[key, "main"])  # ddof=1
        assert p.mflops == pytest.approx(means.mean().loc[key, "mflops"])
        assert [rp.point.seed for rp in p.sources] == list(p.seeds) == [0, 1]


def test_a_submission_gives_the_rows_of_its_runs(tmp_path: Path, data_dir):
    """The two sources, through their adapters, make the same table (a submission keeps the
    run's config hash instead of its path, and records no disagreements)."""
    dirs = write_method_runs(tmp_path / "runs")
    sub = build_submission(dirs, data_dir=data_dir, name="tiny pabee")
    from_runs = sc.results_frame(sc.run_records(sc.raw_points(sc.load_runs(dirs))))
    from_sub = sc.results_frame(sc.submission_records(sub, label="pabee"))
    assert list(from_runs["latency_bs1_ms"]) == [1.5] * len(from_runs)  # bs=1 timed, 32 not
    assert from_runs["latency_bs32_ms"].isna().all()
    same = [c for c in from_runs.columns if c not in ("run", "disagreements")]
    order = ["seed", "row"]
    pd.testing.assert_frame_equal(from_runs.sort_values(order)[same].reset_index(drop=True),
                                  from_sub.sort_values(order)[same].reset_index(drop=True))
    assert set(from_sub["run"]) == {sc.load_run(d).config.key() for d in dirs}


def test_mixed_depths_and_a_seed_twice_are_refused(tmp_path: Path):
    write_run(tmp_path / "a", "pabee", PABEE, num_layers=6)
    write_run(tmp_path / "b", "pabee", PABEE, num_layers=12, seed=1)
    line = one_line_error(invoke("score", tmp_path))
    assert line == "error: pabee on rte: runs of models with [6, 12] layers mixed"
    write_run(tmp_path / "c", "pabee", PABEE, num_layers=12, seed=1)
    assert "seed 1 appears twice" in one_line_error(invoke("score", tmp_path / "b", tmp_path / "c"))


def test_sample_std_is_ddof_1_and_0_for_one_value():
    assert sc.sample_std([1.0, 2.0, 4.0]) == pytest.approx(np.std([1.0, 2.0, 4.0], ddof=1))
    assert sc.sample_std([3.0]) == 0.0


def test_help_does_not_import_pandas():
    code = ("import sys\nfrom typer.testing import CliRunner\nfrom eebench.cli import app\n"
            "r = CliRunner()\nassert r.invoke(app, ['--help']).exit_code == 0\n"
            "assert r.invoke(app, ['score', '--help']).exit_code == 0\n"
            "print('pandas' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
