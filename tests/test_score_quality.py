"""Calibration, consistency, overthinking and budgets (eebench.measure.quality, eebench.score.
quality) on inputs whose answers are known by hand."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from eebench.measure.quality import (
    budget_value,
    ece,
    exited_logits,
    nll,
    param_bucket,
    point_quality,
    run_quality,
)
from eebench.run.artifacts import PREDICTIONS_FILE
from eebench.score import load_runs, raw_points
from eebench.score.quality import budget_table, fill_quality, run_qualities
from tests.test_score_cli import invoke, write_run


def _binary(confidence: np.ndarray, correct: np.ndarray):
    """Logits [N, 2] predicting class 0 with `confidence`, and labels right where `correct`."""
    logits = np.stack([np.log(confidence), np.log1p(-confidence)], axis=1)
    return logits, np.where(correct, 0, 1)


def test_ece_of_a_perfectly_calibrated_set_is_about_zero():
    rng = np.random.default_rng(0)
    conf = rng.uniform(0.5, 0.999, 200_000)
    correct = rng.random(conf.size) < conf
    logits, labels = _binary(conf, correct)
    q = point_quality(logits, np.zeros(conf.size, dtype=int), np.zeros(conf.size, dtype=int),
                      labels)
    assert q.ece < 0.5  # percent; sampling noise only


def test_ece_of_a_known_miscalibrated_set():
    # every sample at confidence 0.9, 60% right: one bin, |0.6 - 0.9| = 30%
    n = 1000
    assert ece(np.full(n, 0.9), np.arange(n) < 600) == pytest.approx(30.0)
    # half at 0.95 and all right (gap 5), half at 0.55 and half right (gap 5): weighted 5%
    conf = np.r_[np.full(500, 0.95), np.full(500, 0.55)]
    correct = np.r_[np.ones(500, bool), np.arange(500) < 250]
    assert ece(conf, correct) == pytest.approx(5.0)
    # bins are weighted by size: 900 at 0.95 all right (gap 5), 100 at 0.35 none right (gap 35)
    conf = np.r_[np.full(900, 0.95), np.full(100, 0.35)]
    correct = np.r_[np.ones(900, bool), np.zeros(100, bool)]
    assert ece(conf, correct) == pytest.approx(0.9 * 5 + 0.1 * 35)
    # a confidence of exactly 1 goes in the last bin
    assert ece(np.ones(4), np.ones(4, bool)) == pytest.approx(0.0)


def test_nll_of_uniform_logits_is_log_c():
    from eebench.measure.quality import log_softmax

    assert nll(log_softmax(np.zeros((10, 3))), np.arange(10) % 3) == pytest.approx(np.log(3))


def test_consistency_gain_and_loss():
    labels = np.array([0, 0, 1, 1, 0])
    full = np.array([0, 1, 1, 0, 0])  # right on 0, 2, 4
    pred = np.array([0, 0, 0, 0, 1])  # right on 0, 1
    logits = np.eye(2)[pred] * 3.0
    q = point_quality(logits, pred, full, labels)
    assert q.consistency == pytest.approx(40.0)  # samples 0 and 3
    assert q.exit_gain == pytest.approx(20.0)  # sample 1
    assert q.exit_loss == pytest.approx(40.0)  # samples 2 and 4
    # accuracy(point) - accuracy(full) = gain - loss
    assert (pred == labels).mean() * 100 - (full == labels).mean() * 100 == pytest.approx(
        q.exit_gain - q.exit_loss)
    same = point_quality(logits, full, full, labels)
    assert (same.consistency, same.exit_gain, same.exit_loss) == (100.0, 0.0, 0.0)


def test_overthinking_on_hand_made_exits():
    labels = np.array([0, 0, 0, 0])
    # sample 0: exit 1 right, last wrong (overthinking); 1: exit 2 wrong, last right (mirror);
    # 2: always right; 3: always wrong
    preds = np.array([[0, 0, 0, 1],
                      [1, 1, 0, 1],
                      [1, 0, 0, 1]])
    q = run_quality(preds, labels, [2, 4, 6])
    assert q.exit_accuracy == pytest.approx([75.0, 25.0, 50.0])
    assert q.overthinking == pytest.approx(25.0)
    assert q.underthinking == pytest.approx(25.0)


def test_exited_logits_picks_each_samples_exit():
    logits = np.arange(3 * 2 * 2).reshape(3, 2, 2)
    assert exited_logits(logits, np.array([2, 0])).tolist() == [[8, 9], [2, 3]]


def test_budget_on_a_hand_made_front():
    flops = np.array([10.0, 20.0, 30.0, 40.0])
    metric = np.array([60.0, 70.0, 65.0, 80.0])  # 30 is dominated
    assert budget_value(flops, metric, 5.0) is None  # below the cheapest point
    assert budget_value(flops, metric, 10.0) == 60.0
    assert budget_value(flops, metric, 29.0) == 70.0  # step: no interpolation
    assert budget_value(flops, metric, 35.0) == 70.0  # the dominated point is not taken
    assert budget_value(flops, metric, 1e9) == 80.0


def test_param_buckets():
    assert param_bucket(22.7e6) == "<= 40M"
    assert param_bucket(40e6) == "<= 40M"
    assert param_bucket(66e6) == "<= 70M"
    assert param_bucket(109.5e6) == "<= 110M"
    assert param_bucket(125e6) == "> 110M"


def _with_logits(run: Path, layers: int = 6) -> None:
    """Exit logits that agree with the stored predictions at the stored exit layers."""
    arrays = load_file(str(run / PREDICTIONS_FILE))
    pred = arrays["prediction"]
    logits = np.zeros((layers, pred.shape[1], 2), dtype=np.float32)
    for row in range(pred.shape[0]):
        layer = int(arrays["exit_layer"][row, 0])
        logits[layer - 1] = np.eye(2, dtype=np.float32)[pred[row]] * 2.0
    save_file({**arrays, "exit_logits": logits}, str(run / PREDICTIONS_FILE))


def test_budgets_are_seed_averaged_on_each_methods_front(tmp_path: Path):
    # static k = 1..6 at 10k MFLOPs: full model 60 MFLOPs
    for seed, offset in ((0, -1.0), (1, 1.0)):
        write_run(tmp_path, "static", [(k, 10.0 * k, 60.0 + 3 * k + offset)
                                       for k in range(1, 7)], seed=seed)
    runs = load_runs([tmp_path])
    rows = {b.percent: b for b in budget_table(raw_points(runs), [10, 25, 50, 100])}
    assert rows[10].main is None  # 6 MFLOPs: no point fits
    assert rows[25].main == pytest.approx(63.0)  # 15 MFLOPs: only k = 1 (10 MFLOPs) fits
    assert rows[25].main_std == pytest.approx(np.sqrt(2))  # seeds 62 and 64
    assert rows[50].main == pytest.approx(69.0)  # k = 3 at 30 MFLOPs
    assert rows[100].main == pytest.approx(78.0)
    assert rows[100].mflops == pytest.approx(60.0)


def test_scores_fill_quality_from_stored_arrays_and_full_depth_is_consistent(tmp_path: Path):
    run = write_run(tmp_path, "deebert", [(0.0, 60.0, 70.0), (0.5, 30.0, 65.0)])
    # make the first point the never-exit one: every sample at layer 6
    arrays = load_file(str(run / PREDICTIONS_FILE))
    arrays["exit_layer"][0] = 6
    save_file(arrays, str(run / PREDICTIONS_FILE))
    _with_logits(run)
    runs = load_runs([tmp_path])
    fill_quality(runs)
    full, early = runs[0].points
    assert full.consistency == 100.0 and full.exit_gain == 0.0 and full.exit_loss == 0.0
    assert early.consistency is not None and early.consistency < 100
    assert early.exit_gain - early.exit_loss == pytest.approx(65.0 - 70.0)
    # confidence softmax(2, 0) ~ 0.881 everywhere: ECE = |accuracy - 88.1|
    conf = 1 / (1 + np.exp(-2.0)) * 100
    assert full.ece == pytest.approx(abs(70.0 - conf))
    (m,) = run_qualities(raw_points(runs))
    assert m.exit_layers == [1, 2, 3, 4, 5, 6]


def test_score_json_has_quality_budgets_and_buckets(tmp_path: Path):
    run = write_run(tmp_path, "deebert", [(0.0, 60.0, 70.0), (0.5, 30.0, 65.0)])
    _with_logits(run)
    result = invoke("score", tmp_path, "--json", "--budget", "50", "--budget", "100")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert {p["sweep_value"]: p["ece"] is not None for p in data["quality"]["points"]} == {
        0.0: True, 0.5: True}
    assert [b["percent"] for b in data["budgets"]] == [50.0, 100.0]
    assert data["budgets"][0]["main"] == pytest.approx(65.0)
    assert data["param_buckets"]["deebert"]["bucket"] == "<= 40M"
    assert invoke("score", tmp_path, "--budget", "0").exit_code == 2
