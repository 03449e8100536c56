"""Seed aggregation, the paired bootstrap (coverage of the true difference, reproducibility),
matching at FLOPs, and the method ranking."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from eebench.errors import DataError
from eebench.run.artifacts import OperatingPoint, RunConfig
from eebench.score import Run, aggregate_seeds, compare_methods, raw_points
from eebench.score.stats import match_by_flops, paired_bootstrap, paired_scores, rank_methods


def make_run(method: str, seed: int, rows: list[tuple[float, float, float]], *,
             task: str = "rte", predictions: dict | None = None) -> Run:
    config = RunConfig(model="m", method=method, task=task, split="dev", seed=seed,
                       sweep=[r[0] for r in rows], max_seq_length=64, flops_convention="c")
    points = [
        OperatingPoint(method=method, variant="all", task=task, split="dev", seed=seed,
                       sweep={"threshold": v}, n_samples=10, num_layers=4,
                       metrics={"accuracy": acc},
                       main_metric="accuracy", main=acc, avg_exit_layer=2.0,
                       exit_histogram=[0, 10, 0, 0], flops_convention="c", mean_flops=flops,
                       mean_mflops=flops / 1e6, speedup=2.0, layer_saving=0.5, params_total=1,
                       params_mean_used=1.0)
        for v, flops, acc in rows
    ]
    return Run(path=Path(f"/runs/{method}/{task}/{seed}"), config=config, points=points,
               arrays=predictions)


def test_seeds_average_to_mean_and_sample_std():
    runs = [make_run("pabee", s, [(0.1, 1e7 + s, 70.0 + 2 * s), (0.2, 2e7, 80.0)])
            for s in (0, 1, 2)]
    points = aggregate_seeds(raw_points(runs))
    assert len(points) == 2
    p = next(p for p in points if p.sweep_value == 0.1)
    assert p.seeds == (0, 1, 2) and p.main == pytest.approx(72.0)
    assert p.main_std == pytest.approx(2.0)  # sample std (ddof=1) of 70, 72, 74
    assert p.flops == pytest.approx(1e7 + 1) and p.mflops == pytest.approx(10.000001)
    single = aggregate_seeds(raw_points(runs[:1]))
    assert all(q.main_std == 0.0 and q.seeds == (0,) for q in single)


def test_a_seed_given_twice_is_refused():
    runs = [make_run("pabee", 0, [(0.1, 1e7, 70.0)]), make_run("pabee", 0, [(0.1, 1e7, 71.0)])]
    with pytest.raises(DataError, match="seed 0 appears twice"):
        aggregate_seeds(raw_points(runs))


def correlated_correctness(rng, n: int, p_a: float, p_b: float):
    """Shared per-sample difficulty makes the two methods' correctness correlated (paired)."""
    u = rng.uniform(size=n)
    return (u < p_a).astype(float) * 100, (u < p_b).astype(float) * 100


def test_bootstrap_ci_covers_the_true_difference():
    # A is right where u < 0.80, B where u < 0.72: the population difference is 8 points.
    true_diff = (0.80 - 0.72) * 100
    trials = 60
    covered = 0
    for trial in range(trials):
        a, b = correlated_correctness(np.random.default_rng(trial), 400, 0.80, 0.72)
        boot = paired_bootstrap(a, b, n_resamples=400, seed=trial)
        covered += boot.ci_low <= true_diff <= boot.ci_high
    assert covered / trials >= 0.85  # a 95% interval: close to 95% of trials


def test_bootstrap_is_reproducible_with_a_seed():
    rng = np.random.default_rng(5)
    a, b = correlated_correctness(rng, 300, 0.7, 0.65)
    first = paired_bootstrap(a, b, n_resamples=500, seed=11)
    assert first == paired_bootstrap(a, b, n_resamples=500, seed=11)
    other = paired_bootstrap(a, b, n_resamples=500, seed=12)
    assert (other.ci_low, other.ci_high) != (first.ci_low, first.ci_high)
    assert first.difference == pytest.approx(a.mean() - b.mean())
    assert first.ci_low <= first.difference <= first.ci_high


def test_bootstrap_p_values():
    a = np.array([100.0, 0.0] * 100)
    same = paired_bootstrap(a, a.copy(), n_resamples=200)
    assert same.difference == 0.0 and same.p_value == 1.0
    rng = np.random.default_rng(0)
    strong_a, strong_b = correlated_correctness(rng, 500, 0.9, 0.6)
    assert paired_bootstrap(strong_a, strong_b, n_resamples=500).p_value < 0.01


def test_bootstrap_chunks_give_the_same_answer_as_one_pass():
    # n large enough that the resamples are drawn in several chunks
    rng = np.random.default_rng(1)
    a, b = correlated_correctness(rng, 50_000, 0.8, 0.79)
    boot = paired_bootstrap(a, b, n_resamples=200, seed=3)
    assert boot.ci_low < boot.difference < boot.ci_high and boot.n_samples == 50_000


def test_match_by_flops_nearest_and_ties_to_the_cheaper():
    assert match_by_flops([5.0, 15.0, 39.0], [30.0, 10.0, 20.0]) == [(0, 1), (1, 1), (2, 0)]


def test_per_sample_scores_and_compare_on_regression():
    labels = np.array([1.0, 2.0, 3.0, 4.0])
    preds_a = {"labels": labels, "prediction": np.array([[1.0, 2.0, 3.0, 5.0]])}
    preds_b = {"labels": labels, "prediction": np.array([[2.0, 2.0, 3.0, 6.0],
                                                         [1.0, 2.0, 3.0, 4.0]])}
    a = make_run("pabee", 0, [(0.1, 1e7, 50.0)], task="stsb", predictions=preds_a)
    b = make_run("deebert", 0, [(0.1, 9e6, 40.0), (0.2, 3e7, 60.0)], task="stsb",
                 predictions=preds_b)
    points = aggregate_seeds(raw_points([a, b]))
    pabee = next(p for p in points if p.label == "pabee")
    scores, _, how = paired_scores(pabee, pabee, regression=True)
    assert scores.tolist() == [0.0, 0.0, 0.0, 1.0] and how == "same samples, seeds averaged"
    rows = compare_methods(points, "pabee", "deebert", n_resamples=100)
    assert rows[0].statistic == "squared error"
    assert rows[0].b.sweep_value == 0.1  # 9 MFLOPs is nearer to 10 than 30 is
    assert rows[0].result.difference == pytest.approx((1 - 5) / 4)  # MSE 0.25 vs 1.25


def test_seeds_on_different_subsets_pair_seed_by_seed():
    # Each seed evaluated its own seeded subset: seed s of A pairs with seed s of B.
    subsets = {0: np.array([0, 1, 1, 0]), 1: np.array([1, 1, 0, 0, 1, 0])}
    runs = []
    for s, labels in subsets.items():
        right = {"labels": labels, "prediction": labels[None, :].copy()}
        wrong_first = labels.copy()
        wrong_first[0] = 1 - wrong_first[0]
        runs.append(make_run("pabee", s, [(0.1, 1e7, 0.0)], predictions=right))
        runs.append(make_run("deebert", s, [(0.1, 1e7, 0.0)],
                             predictions={"labels": labels, "prediction": wrong_first[None, :]}))
    points = aggregate_seeds(raw_points(runs))
    _, _, how = paired_scores(points[0], points[1], regression=False)
    assert how == "paired by seed (2)"  # the seeds' samples differ: never averaged together
    (row,) = compare_methods(points, "pabee", "deebert", n_resamples=50)
    assert row.pairing == "paired by seed (2)" and row.result.n_samples == 4 + 6
    assert row.result.difference == pytest.approx(2 * 100 / 10)  # one miss per seed, 10 samples


def test_compare_refuses_unpaired_samples():
    a = make_run("pabee", 0, [(0.1, 1e7, 50.0)],
                 predictions={"labels": np.array([0, 1]), "prediction": np.array([[0, 1]])})
    b = make_run("deebert", 0, [(0.1, 1e7, 50.0)],
                 predictions={"labels": np.array([1, 0]), "prediction": np.array([[0, 1]])})
    with pytest.raises(DataError, match="different samples"):
        compare_methods(aggregate_seeds(raw_points([a, b])), "pabee", "deebert")


def test_ranking_with_ties_and_missing_tasks():
    scores = {
        "a": {"rte": 2.0, "sst2": 1.0},
        "b": {"rte": 2.0, "sst2": 3.0},
        "c": {"rte": -1.0},
    }
    ranks = rank_methods(scores)
    assert [r.label for r in ranks] == ["b", "a", "c"]
    by = {r.label: r for r in ranks}
    assert by["a"].ranks == {"rte": 1.5, "sst2": 2.0}  # tie on rte shares ranks 1 and 2
    assert by["b"].mean_rank == pytest.approx(1.25) and by["c"].mean_rank == 3.0
    assert by["b"].overall == pytest.approx(2.5)
