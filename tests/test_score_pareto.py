"""Pareto fronts against a brute-force O(n^2) check; hypervolume against an exact union of
rectangles; AUC on hand-worked fronts."""

from __future__ import annotations

import numpy as np
import pytest

from eebench.score.pareto import front, front_auc, hypervolume, normalized, pareto_mask


def brute_force_front(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Point i is on the front unless some j is no worse in both and strictly better in one."""
    n = len(x)
    keep = np.ones(n, dtype=bool)
    for i in range(n):
        for j in range(n):
            if x[j] <= x[i] and y[j] >= y[i] and (x[j] < x[i] or y[j] > y[i]):
                keep[i] = False
                break
    return keep


def union_area(x: np.ndarray, y: np.ndarray, ref_x: float, ref_y: float) -> float:
    """Exact area of the union of rectangles [x_i, ref_x] x [ref_y, y_i], cell by cell on the
    grid of all coordinates (inclusion of each cell checked against every rectangle)."""
    xs = np.unique(np.clip(np.r_[x, ref_x], None, ref_x))
    ys = np.unique(np.clip(np.r_[y, ref_y], ref_y, None))
    area = 0.0
    for x0, x1 in zip(xs[:-1], xs[1:], strict=True):
        for y0, y1 in zip(ys[:-1], ys[1:], strict=True):
            if np.any((x <= x0) & (y >= y1)):  # some rectangle covers this cell
                area += (x1 - x0) * (y1 - y0)
    return area


@pytest.mark.parametrize("seed", range(40))
def test_front_matches_brute_force_with_ties(seed: int):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    # Small integer grids force ties in FLOPs, in metric, and exact duplicate points.
    x = rng.integers(0, 8, n).astype(float)
    y = rng.integers(0, 8, n).astype(float)
    assert np.array_equal(pareto_mask(x, y), brute_force_front(x, y))


@pytest.mark.parametrize("seed", range(10))
def test_front_matches_brute_force_continuous(seed: int):
    rng = np.random.default_rng(100 + seed)
    x, y = rng.uniform(1, 100, 200), rng.uniform(40, 95, 200)
    assert np.array_equal(pareto_mask(x, y), brute_force_front(x, y))


def test_front_edge_cases():
    assert pareto_mask(np.array([]), np.array([])).shape == (0,)
    assert pareto_mask(np.array([3.0]), np.array([50.0])).tolist() == [True]
    # identical points do not dominate each other
    assert pareto_mask(np.array([2.0, 2.0]), np.array([7.0, 7.0])).tolist() == [True, True]
    # same FLOPs, lower metric: dominated; same metric, more FLOPs: dominated
    assert pareto_mask(np.array([2.0, 2.0, 3.0]), np.array([7.0, 6.0, 7.0])).tolist() == [
        True, False, False]
    fx, fy = front(np.array([3.0, 1.0, 2.0, 1.0]), np.array([9.0, 5.0, 4.0, 5.0]))
    assert fx.tolist() == [1.0, 3.0] and fy.tolist() == [5.0, 9.0]


@pytest.mark.parametrize("seed", range(25))
def test_hypervolume_equals_union_of_rectangles(seed: int):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 30))
    x = rng.integers(1, 12, n).astype(float) * 7.5
    y = rng.integers(40, 90, n).astype(float)
    ref_x, ref_y = 80.0, float(rng.integers(35, 70))  # some points fall outside the box
    assert hypervolume(x, y, ref_x, ref_y) == pytest.approx(union_area(x, y, ref_x, ref_y))


def test_hypervolume_and_auc_by_hand():
    x, y = np.array([10.0, 30.0, 20.0]), np.array([60.0, 80.0, 50.0])  # (20, 50) is dominated
    # staircase: 60-50=10 over [10, 30), 80-50=30 over [30, 40)
    assert hypervolume(x, y, 40.0, 50.0) == pytest.approx(10 * 20 + 30 * 10)
    # straight line from (10, 10) to (30, 30) above the base, then flat at 30 until 40
    assert front_auc(x, y, 40.0, 50.0) == pytest.approx((10 + 30) / 2 * 20 + 30 * 10)
    box = 40.0 * (100 - 50)
    assert normalized(500.0, 40.0, 50.0) == pytest.approx(500 / box)


def test_points_outside_the_box_add_nothing():
    x, y = np.array([50.0, 5.0]), np.array([99.0, 40.0])
    assert hypervolume(x, y, 40.0, 50.0) == 0.0 and front_auc(x, y, 40.0, 50.0) == 0.0
    assert normalized(0.0, 0.0, 50.0) == 0.0


@pytest.mark.parametrize("seed", range(10))
def test_auc_bounds(seed: int):
    rng = np.random.default_rng(seed)
    x, y = rng.uniform(1, 100, 30), rng.uniform(50, 95, 30)
    hv, auc = hypervolume(x, y, 100.0, 50.0), front_auc(x, y, 100.0, 50.0)
    assert 0 < hv <= auc <= 100.0 * 50.0
    single = hypervolume(x[:1], y[:1], 100.0, 50.0)
    assert front_auc(x[:1], y[:1], 100.0, 50.0) == pytest.approx(single)  # one point: the same
