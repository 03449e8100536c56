"""Seed averages (eebench.score.seeds): the same bits from run points and from the results frame,
and the same bits as numpy group by group; the ranks of the method ranking as scipy's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from eebench import score as sc
from eebench.score.seeds import group_mean_std, sample_std
from eebench.tasks.metrics import average_ranks
from tests.test_score_stats import make_run

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "elue-minilm"


def test_group_reductions_are_numpys_bits_group_by_group():
    rng = np.random.default_rng(0)
    counts = rng.integers(1, 20, size=400)
    values = rng.normal(size=int(counts.sum())) * 10.0 ** rng.integers(-3, 12, size=counts.sum())
    values += 1e9 * rng.normal()
    starts = np.cumsum(counts) - counts
    mean, std = group_mean_std(values, starts, counts)
    for g, (s, n) in enumerate(zip(starts, counts, strict=True)):
        group = list(values[s:s + n])  # a fresh array, as a per-group loop would make
        assert mean[g] == np.mean(np.asarray(group)) and std[g] == sample_std(group)
    assert (std[counts == 1] == 0).all()


def _runs():
    """Three seeds of two methods, one seed listed first out of order, quality on some seeds
    of a point only."""
    runs = []
    for method in ("pabee", "deebert"):
        for seed in (2, 0, 1):
            run = make_run(method, seed, [(0.1, 1e7 + seed * 3.1, 70.0 + seed / 3),
                                          (0.2, 2e7 - seed, 80.0 + seed * 0.7)])
            run.points = [p.model_copy(update={"ece": 1.5 + seed / 7 + p.sweep_value}
                                       if seed != 1 else {}) for p in run.points]
            runs.append(run)
    return runs


def _same(a: list[sc.Point], b: list[sc.Point]) -> None:
    assert len(a) == len(b)
    for p, q in zip(a, b, strict=True):
        assert p == q  # every field, the floats to the bit, the sources by identity


def test_run_points_and_the_results_frame_give_the_same_points():
    raw = sc.raw_points(_runs())
    points = sc.aggregate_seeds(raw)
    _same(points, sc.seed_points(sc.results_frame(sc.run_records(raw)), raw))
    p = next(p for p in points if p.label == "deebert" and p.sweep_value == 0.2)
    assert p.seeds == (0, 1, 2) and [rp.point.seed for rp in p.sources] == [0, 1, 2]
    assert p.main == np.mean([80.0, 80.7, 81.4]) and p.main_std == sample_std([80.0, 80.7, 81.4])
    ece = [1.5 + 0.2, 1.5 + 2 / 7 + 0.2]  # seeds 0 and 2: seed 1 lacks it
    assert p.quality == {"ece": (np.mean(ece), sample_std(ece), 2)}


def test_the_committed_benchmark_aggregates_alike_both_ways():
    raw = sc.raw_points(sc.load_runs([BENCHMARK]))
    points = sc.aggregate_seeds(raw)
    _same(points, sc.seed_points(sc.results_frame(sc.run_records(raw)), raw))
    assert len(points) < len(raw) and all(len(p.seeds) == 3 for p in points)


def _sample(kind: str, rng, n: int) -> np.ndarray:
    if kind == "ints":
        return rng.integers(0, 4, n)
    if kind == "rounded":
        return rng.normal(size=n).round(1)
    if kind == "float32":
        return rng.integers(0, 3, n).astype(np.float32)
    return np.r_[rng.normal(size=n), np.nan]


@pytest.mark.parametrize("kind", ["ints", "rounded", "float32", "nan"])
def test_average_ranks_are_scipys(kind: str):
    from scipy.stats import rankdata

    rng = np.random.default_rng(1)
    for n in range(1, 40):
        x = _sample(kind, rng, n)
        ours, theirs = average_ranks(x), rankdata(x)
        assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs, equal_nan=True)
