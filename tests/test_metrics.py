"""Metrics against scikit-learn and scipy, including the degenerate cases early exits produce."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

from eebench.errors import EebenchError
from eebench.tasks.catalog import all_tasks, get_task
from eebench.tasks.metrics import (
    accuracy,
    compute_metrics,
    f1,
    majority_baseline,
    mcc,
    pearson,
    spearman,
)

SEEDS = range(8)


def _classes(seed: int, n: int = 200, k: int = 2, bias: float = 0.7):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    p = np.where(rng.random(n) < bias, y, rng.integers(0, k, n))  # correlated with y
    return p, y


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("k", [2, 3])
def test_classification_metrics_match_sklearn(seed, k):
    p, y = _classes(seed, k=k)
    assert accuracy(p, y) == pytest.approx(accuracy_score(y, p), abs=1e-12)
    assert mcc(p, y) == pytest.approx(matthews_corrcoef(y, p), abs=1e-12)
    if k == 2:
        assert f1(p, y) == pytest.approx(f1_score(y, p), abs=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_correlations_match_scipy(seed):
    rng = np.random.default_rng(seed)
    y = rng.uniform(0, 5, 300).round(1)  # rounded: many ties, like STS-B scores
    p = y + rng.normal(0, 1.0, 300)
    assert pearson(p, y) == pytest.approx(pearsonr(p, y)[0], abs=1e-12)
    assert spearman(p, y) == pytest.approx(spearmanr(p, y)[0], abs=1e-12)
    q = np.round(p)  # ties on both sides
    assert spearman(q, y) == pytest.approx(spearmanr(q, y)[0], abs=1e-12)


def test_lists_and_arrays_give_the_same_values():
    p, y = _classes(3)
    for fn in (accuracy, f1, mcc, pearson, spearman):
        assert fn(list(p), list(y)) == fn(p, y)


@pytest.mark.filterwarnings("ignore:A single label was found")
@pytest.mark.parametrize("p,y", [
    ([1, 1, 1, 1], [0, 1, 0, 1]),  # one class predicted everywhere
    ([0, 0, 0, 0], [0, 1, 0, 1]),
    ([0, 1, 0, 1], [1, 1, 1, 1]),  # one class in the labels
    ([1, 1, 1], [1, 1, 1]),
])
def test_constant_predictions_or_labels_give_mcc_zero_like_sklearn(p, y):
    assert mcc(p, y) == matthews_corrcoef(y, p) == 0.0


def test_f1_without_positives_is_zero_like_sklearn():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn warns that F1 is ill-defined here
        assert f1([0, 0, 0], [0, 0, 0]) == f1_score([0, 0, 0], [0, 0, 0]) == 0.0
    assert f1([0, 0, 0], [1, 0, 1]) == f1_score([1, 0, 1], [0, 0, 0]) == 0.0
    assert f1([1, 1, 0], [1, 1, 0]) == 1.0


def test_constant_regression_output_has_correlation_zero_not_nan():
    y = [0.5, 1.0, 4.0, 2.5]
    assert pearson([2.0] * 4, y) == 0.0 and spearman([2.0] * 4, y) == 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.isnan(pearsonr([2.0] * 4, y)[0])  # what scipy does, and why we do not


def test_perfect_and_inverse_correlation_are_exactly_one():
    y = np.linspace(0, 5, 50)
    assert pearson(y * 3 + 1, y) == pytest.approx(1.0) and spearman(y ** 3, y) == 1.0
    assert pearson(-y, y) == pytest.approx(-1.0)


def test_length_mismatch_and_empty_inputs_are_errors():
    with pytest.raises(EebenchError, match="3 predictions for 2 labels"):
        accuracy([0, 1, 1], [0, 1])
    with pytest.raises(EebenchError, match="zero examples"):
        mcc([], [])


@pytest.mark.parametrize("spec", [s for s in all_tasks() if s.unit == "sequence"],
                         ids=lambda s: s.name)  # token tasks: tests/test_token_tasks.py
def test_compute_metrics_reports_every_spec_metric_in_percent(spec):
    rng = np.random.default_rng(0)
    if spec.is_regression:
        y = rng.uniform(0, 5, 100)
        p = y + rng.normal(0, 1, 100)
    else:
        p, y = _classes(1, n=100, k=spec.num_labels)
    m = compute_metrics(spec, p, y)
    assert list(m) == list(spec.metrics) and spec.main_metric in m
    if "accuracy" in m:
        assert m["accuracy"] == pytest.approx(100 * accuracy_score(y, p))
    if "f1" in m:
        assert m["f1"] == pytest.approx(100 * f1_score(y, p))
        assert m["acc_and_f1"] == pytest.approx((m["accuracy"] + m["f1"]) / 2)
    if "mcc" in m:
        assert m["mcc"] == pytest.approx(100 * matthews_corrcoef(y, p))
    if "pearson" in m:
        assert m["pearson"] == pytest.approx(100 * pearsonr(p, y)[0])
        assert m["spearman"] == pytest.approx(100 * spearmanr(p, y)[0])
        assert m["pearson_and_spearman"] == pytest.approx((m["pearson"] + m["spearman"]) / 2)


def test_compute_metrics_accepts_logits_and_column_scores():
    logits = np.array([[2.0, -1.0], [0.1, 0.3], [0.0, 5.0], [1.0, 0.0]])
    assert compute_metrics(get_task("sst2"), logits, [0, 1, 0, 0]) == {"accuracy": 75.0}
    scores = np.array([[1.0], [2.0], [3.0]])
    m = compute_metrics(get_task("stsb"), scores, [1.5, 2.5, 3.5])
    assert m["pearson"] == pytest.approx(100.0) and m["spearman"] == pytest.approx(100.0)


def test_compute_metrics_needs_labels():
    with pytest.raises(EebenchError, match="no labels"):
        compute_metrics(get_task("sst2"), [0, 1], None)


def test_majority_baseline():
    y = [1, 1, 0, 1, 0]
    assert majority_baseline(get_task("sst2"), y) == {"accuracy": 60.0}
    m = majority_baseline(get_task("mrpc"), y)  # always 1: recall 1, precision 0.6
    assert m["f1"] == pytest.approx(100 * f1_score(y, [1] * 5)) == pytest.approx(75.0)
    assert majority_baseline(get_task("cola"), y)["mcc"] == 0.0
    assert majority_baseline(get_task("snli"), [2, 0, 2, 1])["accuracy"] == 50.0
    assert majority_baseline(get_task("rte"), [0, 1])["accuracy"] == 50.0  # tie: lowest id
    reg = majority_baseline(get_task("stsb"), [0.0, 2.0, 4.0])
    assert reg == {"pearson": 0.0, "spearman": 0.0, "pearson_and_spearman": 0.0}
