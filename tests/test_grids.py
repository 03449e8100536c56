"""A benchmark run unevenly: `[timing] points` (real inference timed at a few points of each
sweep) and `[[grids]]` (several grids in one config, each an override of its fields, the grid
their union). Neither renames a run that does not use it."""

from __future__ import annotations

from pathlib import Path

import pytest

from eebench.errors import UsageError
from eebench.run.artifacts import RunConfig
from eebench.run.config import TimingConfig, load_config, merge
from eebench.run.grid import expand


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


def _toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bench.toml"
    path.write_text('model = "minilm-l6"\nmethods = ["static", "pabee", "deebert"]\n'
                    'tasks = ["rte", "mrpc"]\nseeds = [1]\n[timing]\nsamples = 50\n' + text)
    return path


PLAN = ('[[grids]]\ntiming = { points = 2 }\n'
        '[[grids]]\nmethods = ["static", "pabee"]\ntasks = ["rte"]\nseeds = [2, 3]\n'
        'sweeps = { static = [6] }\ntiming = { enabled = false }\n')


def test_grids_are_the_union_of_their_entries_in_the_files_order(tmp_path):
    config = load_config(_toml(tmp_path, PLAN))
    runs = expand(config).runs
    assert [(r.method, r.task, r.seed) for r in runs] == [
        ("static", "rte", 1), ("pabee", "rte", 1), ("deebert", "rte", 1),
        ("static", "mrpc", 1), ("pabee", "mrpc", 1), ("deebert", "mrpc", 1),
        ("static", "rte", 2), ("pabee", "rte", 2), ("static", "rte", 3), ("pabee", "rte", 3)]
    first, later = runs[0], runs[6]
    assert (first.sweep, first.timing.points, first.timing.samples) == (
        [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 2, 50)  # the config's own samples kept
    assert (later.sweep, later.timing.enabled) == ([6.0], False)
    # one entry that gives nothing is the config's own grid, the grid without [[grids]]
    plain = [r.key() for r in expand(load_config(_toml(tmp_path, ""))).runs]
    assert [r.key() for r in expand(load_config(_toml(tmp_path, "[[grids]]\n"))).runs] == plain
    assert [r.key() for r in runs[:6]] != plain  # timed at 2 points: other runs


def test_a_cell_two_entries_give_is_refused_naming_both(tmp_path):
    config = load_config(_toml(tmp_path, '[[grids]]\ntasks = ["rte"]\n[[grids]]\n'
                                         'methods = ["pabee"]\ntiming = { points = 3 }\n'))
    with pytest.raises(UsageError, match=r"grids\[1\] and grids\[2\] both give pabee on rte, "
                                         "seed 1"):
        expand(config)


def test_the_command_line_selects_cells_of_the_grids_and_goes_over_every_entry(tmp_path):
    """--method, --task and --seed keep cells of the union (they do not replace an entry's
    lists); every other flag goes over each entry's own setting, as over the config's."""
    config = load_config(_toml(tmp_path, PLAN))

    def cells(**flags):
        return [(r.method, r.task, r.seed) for r in expand(merge(config, flags)).runs]

    assert cells(seeds=[2]) == [("static", "rte", 2), ("pabee", "rte", 2)]
    assert cells(methods=["PABEE"], tasks=["rte"]) == [
        ("pabee", "rte", 1), ("pabee", "rte", 2), ("pabee", "rte", 3)]
    assert cells(methods=["deebert"], seeds=[1]) == [("deebert", "rte", 1),
                                                     ("deebert", "mrpc", 1)]
    flagged = expand(merge(config, {"timing": {"enabled": False},
                                    "sweeps": {"static": [1.0, 2.0]}})).runs
    assert {r.timing.enabled for r in flagged} == {False}
    assert {tuple(r.sweep) for r in flagged if r.method == "static"} == {(1.0, 2.0)}
    with pytest.raises(UsageError, match="setting seeds: 4 is in none of the config's"):
        merge(config, {"seeds": [4]})
    with pytest.raises(UsageError, match="no entry of the config's .* has a cell with "
                                         "--method deebert, --seed 2"):
        merge(config, {"methods": ["deebert"], "seeds": [2]})


@pytest.mark.parametrize(("entry", "message"), [
    ('methods = ["deebert"]\nmethods_settings = { pabee = { regression_threshold = 0.2 } }',
     "grids[1]: setting methods_settings.pabee: pabee is not one of the config's methods "
     "(deebert)"),
    ('sweeps = { pabee = [0.5] }', "grids[1]: rule 'patience': patience must be a whole"),
    ('tasks = ["rtee"]', "grids[1]: setting tasks: "),
    ('seeds = []', "setting grids[1].seeds: "),
    ('timing = { points = 1 }', "setting grids[1].timing.points: Input should be greater"),
    ('model = "bert-base"', "setting grids[1].model: Extra inputs are not permitted"),
])
def test_a_bad_grid_entry_is_one_line_naming_it(tmp_path, entry, message):
    with pytest.raises(UsageError) as refused:
        expand(load_config(_toml(tmp_path, f"[[grids]]\n{entry}\n")))
    assert message in refused.value.message
