"""The ensemble of all exits: probabilities averaged (not votes), regression outputs averaged."""

from __future__ import annotations

import numpy as np
import pytest

from eebench.errors import DataError
from eebench.score.ensemble import ensemble_point, ensemble_prediction
from tests.test_score_stats import make_run


def test_classification_averages_probabilities_not_votes():
    # Two exits lean weakly to class 0, one is sure of class 1: a vote says 0, the mean
    # probability says 1.
    logits = np.array([[[0.2, 0.0]], [[0.2, 0.0]], [[0.0, 5.0]]])
    assert ensemble_prediction(logits, regression=False).tolist() == [1]
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    assert probs.mean(0).argmax(-1).tolist() == [1]
    assert ensemble_prediction(logits[:2], regression=False).tolist() == [0]


def test_regression_averages_outputs():
    logits = np.array([[[1.0], [4.0]], [[3.0], [0.0]]])
    assert ensemble_prediction(logits, regression=True) == pytest.approx([2.0, 2.0])


def test_ensemble_point_of_a_run_scores_against_its_labels():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, size=10)
    logits = rng.normal(size=(4, 10, 2)).astype(np.float32)
    run = make_run("pabee", 1, [(1.0, 2e6, 50.0), (4.0, 5e6, 60.0)],
                   predictions={"labels": labels, "exit_logits": logits})
    point = ensemble_point(run)
    expected = (ensemble_prediction(logits, False) == labels).mean() * 100
    assert point.main == pytest.approx(expected) and point.metrics["accuracy"] == point.main
    assert point.n_exits == 4 and point.task == "rte" and point.seed == 1
    assert point.flops == 5e6  # the deepest point: every head ran


def test_runs_without_exit_logits_or_labels_are_refused():
    run = make_run("static", 1, [(1.0, 2e6, 50.0)], predictions={"labels": np.zeros(10)})
    with pytest.raises(DataError, match="no per-exit logits"):
        ensemble_point(run)
    run = make_run("pabee", 1, [(1.0, 2e6, 50.0)],
                   predictions={"exit_logits": np.zeros((2, 10, 2), np.float32)})
    with pytest.raises(DataError, match="no labels"):
        ensemble_point(run)
    with pytest.raises(DataError, match="exits, samples, classes"):
        ensemble_prediction(np.zeros((3, 2)), regression=False)
