"""A benchmark run unevenly: `[timing] points` (real inference timed at a few points of each
sweep). It renames no run that does not use it."""

from __future__ import annotations

import pytest

from eebench.run.artifacts import RunConfig
from eebench.run.config import TimingConfig


@pytest.mark.parametrize(("n", "points", "picked"), [
    (12, 5, [0, 3, 6, 8, 11]),  # 2.75 -> 3, 5.5 -> 6 (halves up), 8.25 -> 8
    (21, 4, [0, 7, 13, 20]),
    (27, 4, [0, 9, 17, 26]),
    (12, 2, [0, 11]),
    (5, 5, [0, 1, 2, 3, 4]),
    (3, 4, [0, 1, 2]),  # more points than values: every one
    (1, 4, [0]),  # static's [12]: its one model
])
def test_timing_points_pick_the_first_the_last_and_evenly_between(n, points, picked):
    sweep = [float(v) for v in range(10, 10 + n)]
    assert TimingConfig(points=points).timed_values(sweep) == [sweep[i] for i in picked]
    assert TimingConfig().timed_values(sweep) == sweep  # every point, as before
    assert TimingConfig(enabled=False, points=points).timed_values(sweep) == []
    at = TimingConfig(points=points)
    assert [at.at(v, sweep).enabled for v in sweep] == [i in picked for i in range(n)]


def test_timing_points_name_a_run_only_where_they_are_given():
    """A run without `points` keeps its name (the committed runs: tests/test_config.py); with
    points it is another run, unless nothing is timed (then it is the same run either way)."""
    def config(**timing) -> RunConfig:
        return RunConfig(model="m", method="pabee", task="rte", split="dev", seed=1,
                         sweep=[1.0, 2.0, 3.0], max_seq_length=32, flops_convention="fvcore",
                         timing=timing)

    assert config(points=None).key() == config().key()
    assert "points" not in config().model_dump(mode="json")["timing"]
    assert config(points=2).key() != config().key()
    assert config(points=2).model_dump(mode="json")["timing"]["points"] == 2
    assert config(enabled=False, points=2).key() == config(enabled=False).key()
    with pytest.raises(ValueError, match="greater than or equal to 2"):
        TimingConfig(points=1)
