"""ELUE scores on hand-made curves with known answers, and a static method scoring exactly 0
against a reference built from its own runs (through the JSON file)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from eebench.errors import DataError, UsageError
from eebench.run.artifacts import OperatingPoint, RunConfig
from eebench.score import (
    Run,
    aggregate_seeds,
    build_reference,
    curve_at,
    elue_by_seed,
    load_reference,
    raw_points,
    score,
)
from eebench.score.elue import elue_deltas, overall
from eebench.score.reference import save_reference
from tests.tiny import variant_records

# A curve through (10, 60), (20, 70), (40, 80): slopes 1 and 0.5 per MFLOP.
CX, CY = [10.0, 20.0, 40.0], [60.0, 70.0, 80.0]


def elue_score(curve_flops, curve_main, flops, main, extrapolate="clamp") -> float:
    """One method on one task: the mean of its points' deltas."""
    return float(np.mean(elue_deltas(curve_flops, curve_main, flops, main, extrapolate)))


def test_inside_the_range_is_linear():
    assert curve_at(CX, CY, [15.0, 30.0, 25.0]).tolist() == pytest.approx([65.0, 75.0, 72.5])


def test_exactly_at_reference_points():
    assert curve_at(CX, CY, CX).tolist() == CY  # exact, not approximate
    assert elue_score(CX, CY, CX, CY) == 0.0


@pytest.mark.parametrize("policy", ["clamp", "linear"])
def test_at_the_ends_both_policies_agree(policy: str):
    assert curve_at(CX, CY, [10.0, 40.0], policy).tolist() == [60.0, 80.0]


def test_outside_the_range():
    x = [4.0, 50.0]
    assert curve_at(CX, CY, x, "clamp").tolist() == [60.0, 80.0]
    # linear: slope 1 below (60 - 6), slope 0.5 above (80 + 5)
    assert curve_at(CX, CY, x, "linear").tolist() == pytest.approx([54.0, 85.0])


def test_elue_score_known_answer():
    flops = [15.0, 30.0, 50.0, 5.0]
    main = [70.0, 70.0, 82.0, 58.0]
    # deltas: 70-65, 70-75, 82-80 (clamp) or 82-85 (linear), 58-60 (clamp) or 58-55 (linear)
    assert elue_score(CX, CY, flops, main, "clamp") == pytest.approx((5 - 5 + 2 - 2) / 4)
    assert elue_score(CX, CY, flops, main, "linear") == pytest.approx((5 - 5 - 3 + 3) / 4)


def test_unsorted_and_one_point_curves():
    assert curve_at(CX[::-1], CY[::-1], [15.0]).tolist() == [65.0]
    for policy in ("clamp", "linear"):  # one point: no slope to extend, flat
        assert curve_at([10.0], [60.0], [5.0, 10.0, 99.0], policy).tolist() == [60.0] * 3


def test_overall_is_the_mean_over_tasks_and_policy_is_checked():
    assert overall({"rte": 1.0, "sst2": -3.0, "mrpc": float("nan")}) == -1.0
    with pytest.raises(UsageError):
        curve_at(CX, CY, [1.0], "cubic")


# ------------------------------------------------------------------ the reference's own runs
def run(tmp: Path, method: str, task: str, seed: int, rows: list[tuple[float, float, float]],
        split: str = "dev") -> Run:
    config = RunConfig(model="m", method=method, task=task, split=split, seed=seed,
                       sweep=[r[0] for r in rows], max_seq_length=64, flops_convention="c")
    points = [
        OperatingPoint(method=method, task=task, split=split, seed=seed,
                       variant=f"k{int(v)}" if method == "static" else "all",
                       sweep={"layers" if method == "static" else "threshold": v},
                       n_samples=10, num_layers=4, metrics={"accuracy": acc},
                       main_metric="accuracy", main=acc, avg_exit_layer=_layer(method, v),
                       exit_histogram=[10 * (i == _layer(method, v)) for i in range(1, 5)],
                       flops_convention="c",
                       mean_flops=flops, mean_mflops=flops / 1e6, speedup=1.0, layer_saving=0.0,
                       params_total=1, params_mean_used=1.0)
        for v, flops, acc in rows
    ]
    return Run(path=tmp / f"{method}-{task}-{seed}", config=config, points=points,
               variants=variant_records(method, config.sweep, 4))


def _layer(method: str, value: float) -> int:
    """Where every sample exits: after layer k for static k, after layer 2 otherwise."""
    return int(value) if method == "static" else 2


def static_runs(tmp: Path) -> list[Run]:
    rng = np.random.default_rng(0)
    out = []
    for task in ("rte", "sst2"):
        for seed in (3, 1, 2):  # unsorted seeds, awkward floats: the mean must still match
            rows = [(float(k), 1e7 * k + rng.uniform(0, 1e3), 55 + 5 * k + rng.uniform(0, 3))
                    for k in range(1, 5)]
            out.append(run(tmp, "static", task, seed, rows))
    return out


def test_static_scores_exactly_zero_against_its_own_reference(tmp_path: Path):
    runs = static_runs(tmp_path)
    save_reference(build_reference(runs, name="own"), tmp_path / "ref.json")
    ref = load_reference(tmp_path / "ref.json")
    points = aggregate_seeds(raw_points(runs))
    for policy in ("clamp", "linear"):
        report = score(points, ref, policy)
        assert report.elue == {"static": {"rte": 0.0, "sst2": 0.0}}
        assert all(d == 0.0 for t in report.tasks.values() for d in t.deltas)
    assert ref.tasks["rte"].points[0].seeds == [1, 2, 3]
    assert [p.layers for p in ref.tasks["sst2"].points] == [1, 2, 3, 4]


def test_score_refuses_a_reference_without_the_task(tmp_path: Path):
    runs = static_runs(tmp_path)
    ref = build_reference([r for r in runs if r.config.task == "rte"])
    points = aggregate_seeds(raw_points(runs))
    with pytest.raises(DataError, match="no curve for task sst2"):
        score(points, ref)


def test_build_refuses_non_static_runs(tmp_path: Path):
    runs = static_runs(tmp_path) + [run(tmp_path, "pabee", "rte", 0, [(0.5, 2e7, 70.0)])]
    with pytest.raises(DataError, match="not of single-exit models"):
        build_reference(runs)


def test_score_with_a_method_against_the_reference(tmp_path: Path):
    ref = build_reference([run(tmp_path, "static", "rte", 0,
                               [(1.0, 10e6, 60.0), (2.0, 20e6, 70.0), (4.0, 40e6, 80.0)])])
    pabee = run(tmp_path, "pabee", "rte", 0, [(0.1, 15e6, 70.0), (0.2, 50e6, 82.0)])
    report = score(aggregate_seeds(raw_points([pabee])), ref, "clamp")
    assert report.elue["pabee"]["rte"] == pytest.approx((5.0 + 2.0) / 2)
    assert report.ranking[0].label == "pabee" and report.ranking[0].mean_rank == 1.0
    data = report.to_dict()
    assert data["units"] == {"metric": "percent", "flops": "MFLOPs per sample"}
    assert [p["mflops"] for p in data["tasks"]["rte"]["points"]] == [15.0, 50.0]


def test_elue_by_seed_scores_each_seed_alone(tmp_path: Path):
    ref = build_reference([run(tmp_path, "static", "rte", 0,
                               [(1.0, 10e6, 60.0), (2.0, 20e6, 70.0), (4.0, 40e6, 80.0)])])
    # seed 1: +5 at 15 MFLOPs; seed 2: -1 at 30 MFLOPs (curve 75); their mean is a third answer
    seeds = [run(tmp_path, "pabee", "rte", 1, [(0.1, 15e6, 70.0)]),
             run(tmp_path, "pabee", "rte", 2, [(0.1, 30e6, 74.0)])]
    raw = raw_points(seeds)
    assert elue_by_seed(raw, ref) == {"pabee": {"rte": {1: pytest.approx(5.0),
                                                        2: pytest.approx(-1.0)}}}
    # the seed-averaged point (22.5 MFLOPs, 72.0) against the curve there (71.25)
    assert score(aggregate_seeds(raw), ref).elue["pabee"]["rte"] == pytest.approx(0.75)
