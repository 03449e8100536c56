"""`eebench run --stop-by`: a local grid starts no cell whose estimate (the dry run's) would end
after the time given, nor one without an estimate; what it leaves is listed, not started, and the
command does not exit 0."""

from __future__ import annotations

import re
import time
from datetime import datetime
from pathlib import Path

import pytest

from eebench import api
from eebench.cli.backends import parse_stop_by
from eebench.errors import UsageError
from eebench.run.backends import BackendOptions
from eebench.run.execute import run_dir_for
from tests import tiny
from tests.cli import invoke

NOW = datetime(2026, 12, 2, 1, 30)


@pytest.mark.parametrize(("raw", "expected"), [
    ("2h30m", datetime(2026, 12, 2, 4, 0)),
    ("90m", datetime(2026, 12, 2, 3, 0)),
    ("45s", datetime(2026, 12, 2, 1, 30, 45)),
    ("04:20", datetime(2026, 12, 2, 4, 20)),
    ("4:20", datetime(2026, 12, 2, 4, 20)),
    ("00:15", datetime(2026, 12, 3, 0, 15)),  # passed today: tomorrow's
    ("2026-12-02T03:05", datetime(2026, 12, 2, 3, 5)),
])
def test_stop_by_reads_a_clock_time_a_date_and_time_or_a_time_from_now(raw, expected):
    assert parse_stop_by(raw, NOW) == expected.timestamp()
    assert parse_stop_by(None, NOW) is None


@pytest.mark.parametrize(("raw", "says"), [("soon", "is not a time"), ("", "is not a time"),
                                           ("25:00", "is not a time"),
                                           ("2026-12-01T23:00", "has passed")])
def test_stop_by_refuses_what_is_not_a_time_to_come(raw, says):
    with pytest.raises(UsageError, match=says):
        parse_stop_by(raw, NOW)


@pytest.fixture(scope="module")
def backbone(tmp_path_factory):
    return tiny.save_tiny_backbone(tmp_path_factory.mktemp("tiny-bert"), num_layers=2)


def _config(tmp_path: Path, backbone: Path, seeds: str) -> Path:
    cfg = tmp_path / f"bench-{seeds.replace(',', '-')}.toml"
    cfg.write_text(f'model = "{backbone}"\nmethods = ["pabee"]\ntasks = ["wnli"]\n'
                   f'seeds = [{seeds}]\nmax_seq_length = 32\nmax_eval_samples = 10\n'
                   f'out = "{tmp_path / "runs"}"\ncheckpoints = "{tmp_path / "ckpt"}"\n'
                   '[train]\nmax_train_samples = 16\nepochs = 1\n[timing]\nenabled = false\n')
    return cfg


def _run(cfg: Path, data_dir: Path, *extra: object):
    return invoke("run", "--config", cfg, "--data-dir", data_dir, "--json", *extra)


def test_a_cell_without_an_estimate_or_past_the_time_is_not_started(tmp_path, backbone,
                                                                     data_dir):
    first = _config(tmp_path, backbone, "1")
    [seed1] = api.expand(api.config(first)).runs
    # Nothing has run: no estimate tells whether the cell ends in time, so it does not start.
    result = _run(first, data_dir, "--stop-by", "2h")
    assert result.exit_code == 1, result.output
    assert "not started: pabee on wnli (seed 1): no estimate" in result.stderr
    line = " ".join(result.stderr.split())
    assert "1 of 1 cells were not started before --stop-by (e.g. pabee on wnli, seed 1); the " \
        "rest is done (hint: rerun the same command later" in line
    assert not run_dir_for(seed1, tmp_path / "runs").exists()
    assert _run(first, data_dir).exit_code == 0  # without --stop-by it runs
    assert (run_dir_for(seed1, tmp_path / "runs") / "summary.json").exists()

    # Seed 2 is estimated from seed 1's run (same model, method and task): it fits in 2 hours.
    both = _config(tmp_path, backbone, "1, 2")
    result = _run(both, data_dir, "--stop-by", "2h")
    assert result.exit_code == 0, result.output
    seed2 = api.expand(api.config(both)).runs[1]
    assert (run_dir_for(seed2, tmp_path / "runs") / "summary.json").exists()

    # Seed 3 would end after a stop a millisecond away: not started; the finished cells are
    # still reported done.
    cfg = api.config(_config(tmp_path, backbone, "1, 2, 3"))
    lines: list[str] = []
    outcome = api.run(cfg, backend=BackendOptions(stop_by=time.time() + 1e-3),
                      data_dir=data_dir, say=lines.append)
    assert [o.status for o in outcome.outcomes] == ["done", "done", "deferred"]
    seed3 = outcome.cells[2]
    assert re.fullmatch(r"its estimate, ~\d+ min, would end at \d\d:\d\d, after \d\d:\d\d",
                        outcome.outcomes[2].error)
    assert any(line.startswith("not started: pabee on wnli (seed 3)") for line in lines)
    assert not run_dir_for(seed3.config, tmp_path / "runs").exists()


@pytest.mark.parametrize(("extra", "says"), [
    (["--backend", "slurm"], "--stop-by does not apply to --backend slurm"),
    (["--backend", "ray"], "--stop-by does not apply to --backend ray"),
    (["--dry-run"], "--stop-by does not apply to --dry-run"),
])
def test_stop_by_is_refused_where_it_would_be_ignored(tmp_path, backbone, data_dir, extra, says):
    result = _run(_config(tmp_path, backbone, "1"), data_dir, "--stop-by", "2h", *extra)
    assert result.exit_code == 2, result.output
    assert says in result.stderr and "Traceback" not in result.output


def test_the_estimates_are_read_again_after_each_cell_that_ran(tmp_path, backbone, data_dir,
                                                               monkeypatch):
    """Each cell still to do is weighed on estimates read after the last cell this process ran:
    they count what that run took and the steps other processes have trained since."""
    import eebench.run.backends as backends

    assert _run(_config(tmp_path, backbone, "1"), data_dir).exit_code == 0
    real, reads = backends.plan, []

    def plan(cells, *args, **kwargs):
        rows = real(cells, *args, **kwargs)
        reads.append({r.key: r.status for r in rows})
        return rows

    monkeypatch.setattr(backends, "plan", plan)
    cfg = api.config(_config(tmp_path, backbone, "1, 2, 3"))
    done = api.run(cfg, backend=BackendOptions(stop_by=time.time() + 3600), data_dir=data_dir)
    assert [o.status for o in done.outcomes] == ["done"] * 3
    seed2, seed3 = (c.key for c in done.cells[1:])
    # none for seed 1 (finished), one before seed 2, one before seed 3 (seed 2 now done)
    assert [(r[seed2], r[seed3]) for r in reads] == [("todo", "todo"), ("done", "todo")]


def test_estimates_from_runs_finished_elsewhere_go_at_this_machines_measured_pace(monkeypatch):
    """Training here took twice what the estimates' run took for as many steps: a later estimate
    from a run that finished before the process started doubles; one from a run finished since
    (on this machine) is taken as it is."""
    import eebench.run.backends.pace as P
    from eebench.run.backends.plan import PlannedCell

    pace = P.Pace(started=1000.0)

    def row(written: float, trained: float | None = 100.0) -> PlannedCell:
        return PlannedCell("pabee", "rte", 1, "k", "todo", train_steps=10,
                           estimate_seconds=300.0, estimate_from="s",
                           estimate_train_seconds=trained, estimate_written=written)

    elsewhere, here = row(written=500.0), row(written=2000.0)
    assert P.seconds_per_step(elsewhere) == 10.0
    assert pace.factor is None and pace.estimate(elsewhere) == 300.0  # nothing measured yet
    assert pace.watch(None, here, None, Path()) is None  # already this machine's pace
    assert pace.watch(None, row(500.0, trained=None), None, Path()) is None  # no training part
    progress = iter([{Path("a"): (0, 0.0), Path("b"): (4, 50.0)},
                     {Path("a"): (6, 120.0), Path("b"): (8, 130.0), Path("c"): (0, 0.0)}])
    monkeypatch.setattr(P, "_progress", lambda cell, data_dir, checkpoints: next(progress))
    pace.watch(None, elsewhere, None, Path())()
    # 10 steps trained meanwhile (6 of a, 4 more of b) in 200 s, where the run took 10 s a step
    assert pace.factor == 2.0
    assert pace.estimate(elsewhere) == 600.0 and pace.estimate(here) == 300.0


def test_a_grid_defers_a_cell_that_this_machines_pace_puts_after_the_stop(
        tmp_path, backbone, data_dir, monkeypatch):
    """Every estimate's run is taken as made elsewhere, training a billion times faster than
    here: seed 2 runs on its estimate (seed 1's run), and this machine's pace, measured on it,
    puts seed 3 past the stop an hour away; the line says why."""
    import eebench.run.backends as backends

    assert _run(_config(tmp_path, backbone, "1"), data_dir).exit_code == 0
    real = backends.plan

    def plan(cells, *args, **kwargs):
        rows = real(cells, *args, **kwargs)
        for r in rows:
            if r.estimate_train_seconds is not None:  # a tiny run may record 0.0
                r.estimate_written, r.estimate_train_seconds = 0.0, 1e-9 * r.train_steps
        return rows

    monkeypatch.setattr(backends, "plan", plan)
    cfg = api.config(_config(tmp_path, backbone, "1, 2, 3"))
    lines: list[str] = []
    done = api.run(cfg, backend=BackendOptions(stop_by=time.time() + 3600), data_dir=data_dir,
                   say=lines.append)
    assert [o.status for o in done.outcomes] == ["done", "done", "deferred"]
    assert re.fullmatch(r"its estimate, ~\d+ min at this machine's pace so far \(\S+x the "
                        r"recorded runs'\), would end at \d\d:\d\d, after \d\d:\d\d",
                        done.outcomes[2].error), done.outcomes[2].error


def test_a_cells_timing_is_its_sources_cost_per_timed_point_times_its_own():
    """The estimate takes the source run's measured timing (and its untimed checks) out of its
    time and puts the cell's in: its timed points at the source's cost per timed point, a check
    for each other point; a source that timed nothing, or a cell timing as it did, changes
    nothing."""
    from eebench.run.backends.timing_cost import TimingCost, estimate

    cost = TimingCost(seconds=1000.0, timed=20, untimed=0, check=5.0)
    # 1500 s training (x2 by steps), 500 s of the rest not timing
    assert estimate(3000.0, 1500.0, 2.0, cost, 20, 0) == 3000 + 500 + 1000  # as timed
    assert estimate(3000.0, 1500.0, 2.0, cost, 4, 16) == 3000 + 500 + 200 + 80
    assert estimate(3000.0, 1500.0, 2.0, cost, 0, 20) == 3000 + 500 + 100  # timing off
    assert estimate(3000.0, 1500.0, 2.0, None, 0, 20) == 4500  # nothing known: as before
    untimed = TimingCost(seconds=0.0, timed=0, untimed=20, check=0.0)
    assert estimate(3000.0, 1500.0, 2.0, untimed, 4, 16) == 4500
    # training unknown: all but the timing scales by steps; a resumed run's time is training
    assert estimate(3000.0, None, 2.0, cost, 4, 16) == 4000 + 280
    resumed = TimingCost(seconds=1000.0, timed=20, untimed=0, check=5.0, resumed=True)
    assert estimate(3000.0, None, 2.0, resumed, 4, 16) == 6000 + 280
    # a source with untimed points: their checks are taken out too
    part = TimingCost(seconds=200.0, timed=4, untimed=16, check=5.0)
    assert estimate(3000.0, 1500.0, 1.0, part, 20, 0) == 1500 + 1220 + 1000


@pytest.mark.parametrize("method", ["pabee", "deebert", "pcee", "berxit", "maxprob"])
def test_the_committed_timing_with_its_warm_up_is_what_the_runs_sweeps_took(method):
    """ELUE MRPC's committed 12-layer runs (every point timed, the full model beside it, 100
    samples at batch sizes 1 and 32): their raw batch times and their warm-up (5 batches of
    the mean, at most the 4 batches of 32) are all of their time after training but 40-60 s
    (the full pass over the split, FLOPs, the files)."""
    from eebench.run.artifacts import read_run
    from eebench.run.backends.timing_cost import timing_cost

    [run_dir] = (Path(__file__).resolve().parent.parent / "benchmarks" / "results" /
                 "mpnet-recipes" / "mpnet-base" / method / "elue-mrpc").iterdir()
    run, cost = read_run(run_dir), timing_cost(run_dir)
    raw = sum(sum(t.raw_ms) for p in run.points for t in p.timings) / 1e3
    assert (cost.timed, cost.untimed) == (len(run.points), 0) and 1.4 * raw < cost.seconds
    rest = run.summary.wall_seconds - run.summary.train_seconds
    assert 40 < rest - cost.seconds < 60
    assert 3 < cost.check < 12  # one pass at batch size 32 of 100 samples


def test_a_sibling_is_scaled_by_its_steps_and_a_grids_shared_models_count_once(
        tmp_path, backbone, data_dir):
    """Static on seed 2 with k = 2 alone is estimated from seed 1's static with k = 1 and 2:
    its training time scaled by the steps (half), the rest as it is (nothing timed). The
    cascade's models are static's: where static's cell comes first, they are its steps alone."""
    cfg = tmp_path / "bench.toml"
    cfg.write_text(_config(tmp_path, backbone, "1").read_text().replace(
        'methods = ["pabee"]', 'methods = ["static"]') + '[sweeps]\nstatic = [1, 2]\n')
    assert _run(cfg, data_dir).exit_code == 0
    [seed1] = api.plan(api.config(cfg), data_dir)
    planned = api.plan(api.config(cfg, seeds=[2], sweeps={"static": [2.0]}), data_dir)
    [seed2] = planned
    assert (seed2.train_steps, seed2.estimate_from, seed2.estimate_scaled) == (
        seed1.train_steps / 2, seed1.key, False)
    assert seed2.estimate_train_seconds == pytest.approx(seed1.estimate_train_seconds / 2)
    assert seed2.estimate_seconds == pytest.approx(
        seed1.estimate_seconds - seed1.estimate_train_seconds / 2)
    shared = api.plan(api.config(cfg, seeds=[3], methods=["static", "cascade"]), data_dir)
    assert [(r.method, r.train_steps_left) for r in shared] == [
        ("static", seed1.train_steps), ("cascade", 0)]
