"""`eebench analyze` and `eebench select` on hand-made runs: Spearman's rho is scipy's, the
easiest and hardest samples are the ones the rule names, the selection's guarantee holds on a
consistency curve known in advance, and what cannot be analysed is one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr
from typer.testing import CliRunner

from eebench.score.difficulty import analyze, default_point, load_samples, softmax
from eebench.score.select import clopper_pearson_lower, fixed_sequence, select
from eebench.tasks.loaders import load_split
from tests import handmade
from tests.cli import invoke

runner = CliRunner()
MFLOPS = [100.0, 70.0, 52.0, 30.0]  # half the full model's 100: the point at 52
SWEEP = [0.0, 0.2, 0.4, 0.6]


def arrays(n: int = 40, exits: int = 4, seed: int = 0):
    """Exit after the first exit whose max prob reaches 1 - value (the last exit otherwise)."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(0, 1.5, (exits, n, 2)).astype(np.float32)
    probs = softmax(logits).max(-1)  # [E, N]
    layers, preds = [], []
    for value in SWEEP:
        hit = probs >= 1 - value
        hit[-1] = True
        first = hit.argmax(0)
        layers.append(first + 1)
        preds.append(logits[first, np.arange(n)].argmax(-1))
    labels = rng.integers(0, 2, n)
    lengths = rng.integers(5, 60, n)
    return np.array(layers), np.array(preds), labels, logits, lengths


@pytest.fixture
def run_dir(tmp_path):
    layers, preds, labels, logits, lengths = arrays()
    return handmade.write_run(tmp_path / "runs", layers, preds, labels, logits, MFLOPS, SWEEP,
                              lengths)


def test_rho_is_scipys_at_the_point_nearest_half_the_flops(run_dir):
    samples = load_samples(run_dir)
    assert default_point(samples.points) == 2
    result = analyze(samples)
    assert result.sweep_value == 0.4 and result.default_point
    layers, preds, labels, logits, lengths = arrays()
    expected = {
        "first_exit_confidence": spearmanr(layers[2], softmax(logits[0]).max(-1)),
        "length": spearmanr(layers[2], lengths),
        "agreement": spearmanr(layers[2], (logits.argmax(-1) == logits[-1].argmax(-1)).mean(0)),
        "correct": spearmanr(layers[2], preds[2] == labels),
    }
    got = {c.quantity: c for c in result.correlations}
    assert set(got) == set(expected)
    for name, res in expected.items():
        assert got[name].rho == pytest.approx(res.statistic, abs=1e-12), name
        assert got[name].p_value == pytest.approx(res.pvalue, rel=1e-9), name
        assert got[name].n == 40
    assert got["first_exit_confidence"].rho < 0  # confident first exits leave early
    other = analyze(samples, value=0.0)  # the full model: every sample at the last layer
    assert other.sweep_value == 0.0 and not other.default_point
    assert all(c.rho is None for c in other.correlations)  # constant exit layer: undefined


def test_easiest_and_hardest_samples():
    n = 8
    layers = np.array([[3, 1, 1, 2, 3, 1, 3, 2]])
    conf0 = np.array([0.6, 0.9, 0.99, 0.7, 0.55, 0.8, 0.51, 0.95])  # the first exit's
    logit = np.log(conf0 / (1 - conf0))
    logits = np.zeros((3, n, 2), dtype=np.float64)
    logits[:, :, 1] = logit  # every exit predicts class 1
    preds = np.ones((1, n), dtype=int)
    s = handmade.samples(layers, preds, np.ones(n, dtype=int), logits, [10.0], [0.5])
    result = analyze(s, top=3)
    assert [it["id"] for it in result.easiest] == ["2", "1", "5"]  # layer 1, most confident
    assert [it["id"] for it in result.hardest] == ["6", "4", "0"]  # layer 3, least confident
    assert result.hardest[0]["exit_layer"] == 3
    assert result.hardest[0]["first_exit_confidence"] == pytest.approx(0.51, abs=1e-4)
    assert all(it["agreement"] == 1.0 for it in result.easiest)


def one_line_error(result, code: int) -> str:
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_analyze_cli_ids_only_without_data(run_dir, tmp_path, monkeypatch):
    monkeypatch.delenv("EEBENCH_DATA_DIR", raising=False)
    out = tmp_path / "analysis"
    result = invoke("analyze", run_dir, "--json", "--out", out)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["texts"].startswith("not loaded") and "ids only" in data["texts"]
    assert all("text" not in it for it in data["easiest"])
    assert (out / "exit-layer-vs-length.png").stat().st_size > 0
    assert json.loads((out / "analysis.json").read_text())["sweep_value"] == 0.4
    assert "point" in one_line_error(invoke("analyze", run_dir, "--point", "0.33"), 2)


def test_analyze_cli_reads_the_texts_of_the_runs_ids(run_dir, data_dir):
    result = invoke("analyze", run_dir, "--json", "--data-dir", data_dir)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    dev = load_split("sst2", "dev", data_dir)
    # a hand-made run records no hash of its samples, as runs written before it was recorded
    assert data["texts"].startswith("loaded (not checked: the run records no hash")
    for it in data["easiest"] + data["hardest"]:
        assert it["text"] == dev.texts[dev.ids.index(it["id"])][0]


def test_analyze_refuses_a_model_with_one_exit(tmp_path):
    layers, preds, labels, logits, lengths = arrays(exits=1)
    run = handmade.write_run(tmp_path, layers, preds, labels, logits, MFLOPS, SWEEP, lengths)
    assert "one exit" in one_line_error(invoke("analyze", run), 2)


# --- select ---------------------------------------------------------------------------------

def test_clopper_pearson_lower_bound():
    assert clopper_pearson_lower(0, 10, 0.05) == 0.0
    assert clopper_pearson_lower(100, 100, 0.05) == pytest.approx(0.05 ** (1 / 100))
    assert clopper_pearson_lower(90, 100, 0.05) < 0.9


def test_fixed_sequence_stops_at_the_first_failure():
    n = 200
    ok = np.ones((4, n), dtype=bool)
    ok[1, :40] = False  # 80 %: fails
    chosen, tested = fixed_sequence(ok, [0, 1, 2, 3], epsilon=0.05, delta=0.05)
    assert chosen == 0 and [t[0] for t in tested] == [0, 1]  # 2 and 3 never tested


# The disagreement rate of each threshold, the most conservative first (none: the full model);
# none sits exactly on epsilon = 5 %, where fresh samples would realise 95 % only half the time.
RATES = np.r_[0.0, np.arange(0.0025, 0.12, 0.005)]


def synthetic(n: int, rng: np.random.Generator):
    """A run whose consistency curve is known: threshold j changes the full model's prediction
    of a sample exactly when its u < RATES[j] (u uniform), so its consistency is 1 - RATES[j]."""
    u = rng.uniform(size=n)
    full = rng.integers(0, 2, n)
    logits = np.zeros((2, n, 2), dtype=np.float32)
    logits[-1, np.arange(n), full] = 1.0
    logits[0, np.arange(n), 1 - full] = 1.0
    wrong = u[None, :] < RATES[:, None]
    preds = np.where(wrong, 1 - full, full)
    layers = np.where(wrong, 1, 2)
    labels = np.where(rng.uniform(size=n) < 0.9, full, 1 - full)
    mflops = list(np.linspace(100, 40, len(RATES)))
    return handmade.samples(layers, preds, labels, logits, mflops, list(RATES))


def test_the_guarantee_holds_on_fresh_samples_in_95_percent_of_calibrations():
    epsilon, delta = 0.05, 0.05
    fresh_u = np.random.default_rng(10_000).uniform(size=100_000)
    held, realised_ok, chose = 0, 0, []
    for trial in range(200):
        s = synthetic(1000, np.random.default_rng(trial))  # 500 calibration samples
        res = select(s, consistency=1 - epsilon, delta=delta, seed=trial)
        assert res.chosen is not None  # the full model itself always passes
        j = int(np.flatnonzero(np.isclose(RATES, res.chosen["sweep_value"]))[0])
        chose.append(j)
        held += 1 - RATES[j] >= 1 - epsilon - 1e-12  # the true consistency of the choice
        realised_ok += (fresh_u >= RATES[j]).mean() >= 1 - epsilon  # on 100,000 fresh samples
        assert res.chosen["test"]["consistency"] == pytest.approx(
            float((s.prediction[j][_test(trial)] == s.full_prediction()[_test(trial)]).mean()))
    assert held >= 190 and realised_ok >= 190
    assert max(chose) > 2  # and it is not vacuous: it goes well below the full model


def _test(seed: int) -> np.ndarray:
    from eebench.score.select import split_halves

    return split_halves(1000, seed)[1]


def test_select_cli(run_dir):
    result = invoke("select", run_dir, "--consistency", "0.9", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["n_calibration"] == 20 and data["n_test"] == 20
    assert data["steps"][0]["sweep_value"] == 0.0  # the most conservative first
    assert data["steps"][0]["passed"] is False  # 20 samples cannot certify 90 % at 95 %
    assert data["chosen"] is None
    assert invoke("select", run_dir, "--consistency", "0.5").exit_code == 0


def test_select_one_line_errors(tmp_path):
    layers, preds, labels, logits, lengths = arrays()
    stsb = handmade.write_run(tmp_path / "a", layers, preds, labels, logits, MFLOPS, SWEEP,
                              lengths, task="stsb")
    assert "regression" in one_line_error(invoke("select", stsb), 2)
    unlabelled = handmade.write_run(tmp_path / "b", layers, preds, None, logits, MFLOPS, SWEEP,
                                    lengths, split="test")
    assert "no labels" in one_line_error(invoke("select", unlabelled), 2)
    good = handmade.write_run(tmp_path / "c", layers, preds, labels, logits, MFLOPS, SWEEP,
                              lengths)
    assert "--consistency" in one_line_error(invoke("select", good, "--consistency", "1"), 2)
    assert "--delta" in one_line_error(invoke("select", good, "--delta", "0"), 2)
    missing = one_line_error(invoke("select", tmp_path / "nope"), 1)
    assert "nope" in missing


def test_helpers_match_the_run_directory(run_dir: Path):
    s = load_samples(run_dir)
    assert s.exit_layer.shape == (4, 40) and s.ids[:3] == ["0", "1", "2"]
