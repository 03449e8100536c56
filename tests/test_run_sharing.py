"""Work that processes and runs share: a checkpoint one process trains at a time, a worker that
finds a run of several models busy training the ones the other has not reached, and a grid's
test-split twins run on the models its dev runs have just trained."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eebench.run import artifacts as R
from eebench.run import execute as run_module
from tests import tiny
from tests.cli import invoke


@pytest.fixture(scope="module")
def backbone(tmp_path_factory):
    return tiny.save_tiny_backbone(tmp_path_factory.mktemp("tiny-bert"), num_layers=3)


def _config(tmp_path: Path, backbone: Path, methods: str, extra: str = "") -> Path:
    cfg = tmp_path / "bench.toml"
    cfg.write_text(f'model = "{backbone}"\nmethods = [{methods}]\ntasks = ["wnli"]\n'
                   'max_seq_length = 32\nmax_eval_samples = 10\n'
                   f'[train]\nmax_train_samples = 16\nepochs = 1\n{extra}')
    return cfg


def _args(tmp_path: Path, cfg: Path, data_dir: Path, *extra: object) -> list[object]:
    return ["run", "--config", cfg, "--data-dir", data_dir, "--json", "--no-timing",
            "--out", tmp_path / "runs", "--checkpoints", tmp_path / "ckpt", *extra]


def _static_checkpoints(tmp_path: Path, backbone: Path, cfg: Path, data_dir: Path) -> list[Path]:
    """Where the static run's models (k = 1, 2, 3) are trained, before anything trains."""
    from eebench import api
    from eebench.methods.base import get_method
    from eebench.tasks.catalog import get_task
    from eebench.tasks.loaders import load_split
    from eebench.train.naming import name_checkpoint

    [rc] = api.expand(api.config(cfg)).runs
    spec = get_task("wnli")
    train_ex = load_split(spec, "train", data_dir)
    return [name_checkpoint(get_method("static", layers=k), spec, str(backbone), train_ex,
                            rc.train, tmp_path / "ckpt", rc.pooling).path for k in (1, 2, 3)]


def test_a_checkpoint_another_process_trains_is_left_to_it_or_waited_for(tmp_path, backbone,
                                                                         data_dir, monkeypatch):
    from eebench.train import checkpoint as ckpt
    from eebench.train.naming import claimed

    cfg = _config(tmp_path, backbone, '"static"')
    k1, k2, k3 = _static_checkpoints(tmp_path, backbone, cfg, data_dir)
    with claimed(k2) as ours:  # another process is training k = 2
        assert ours
        with claimed(k2, wait=False) as again:
            assert not again
    # The run trains k = 1 and 3, leaves k = 2 to its holder, then waits for it: the holder
    # lets go once k = 3 is trained (whatever the machine's pace) without training k = 2, so
    # the run trains it itself.
    held = claimed(k2)
    assert held.__enter__()
    order: list[int] = []
    real = run_module._train

    def train(cfg, method, *args, **kwargs):
        path = real(cfg, method, *args, **kwargs)
        order.append((method.config.layers, path is not None))
        if method.config.layers == 3:
            held.__exit__(None, None, None)
        return path

    monkeypatch.setattr(run_module, "_train", train)
    result = invoke(*_args(tmp_path, cfg, data_dir))
    assert result.exit_code == 0, result.output
    assert order == [(1, True), (2, False), (3, True), (2, True)]
    assert all(ckpt.read_state(p).finished for p in (k1, k2, k3))


def test_a_worker_finding_a_static_run_busy_trains_its_models_from_the_last(tmp_path, backbone,
                                                                            data_dir, monkeypatch):
    from eebench import api
    from eebench.train.naming import claimed

    cfg = _config(tmp_path, backbone, '"static"')
    paths = _static_checkpoints(tmp_path, backbone, cfg, data_dir)
    [rc] = api.expand(api.config(cfg, timing={"enabled": False})).runs  # --no-timing's run
    run_dir = run_module.run_dir_for(rc, tmp_path / "runs")
    other = run_module._claim(run_dir)  # another worker runs the static run and trains k = 1
    assert other is not None
    from eebench.train import loop

    trained: list[int] = []
    real = loop._Trainer.run

    def run(self):
        trained.append(self.method.config.layers)
        return real(self)

    monkeypatch.setattr(loop._Trainer, "run", run)
    with claimed(paths[0]):
        result = invoke(*_args(tmp_path, cfg, data_dir))
    assert result.exit_code == 1 and "being run by another process" in result.stderr
    assert trained == [3, 2]  # from the last back; k = 1 was the other worker's
    assert not (run_dir / R.SUMMARY_FILE).exists()
    other.close()  # the other worker stopped: the run trains k = 1 and reuses the others
    trained.clear()
    result = invoke(*_args(tmp_path, cfg, data_dir))
    assert result.exit_code == 0, result.output
    assert trained == [1]
    assert [p["sweep"]["layers"] for p in json.loads(result.stdout)["points"]] == [1, 2, 3]


def test_test_out_runs_each_cells_models_on_the_test_split_without_training_again(
        tmp_path, backbone, data_dir, monkeypatch):
    cfg = _config(tmp_path, backbone, '"pabee", "static"', '[timing]\nsamples = 4\n')
    tests = tmp_path / "runs-test"
    result = invoke(*_args(tmp_path, cfg, data_dir, "--test-out", tests))
    assert result.exit_code == 0, result.output
    dev = json.loads(result.stdout)
    assert [d["summary"]["split"] for d in dev] == ["dev", "dev"]
    found = sorted(tests.rglob(R.SUMMARY_FILE))
    assert len(found) == 2
    _made_by_their_dev_runs(found, [Path(d["run_dir"]) for d in dev])
    # the runs `--split test --no-timing --out` names, found finished: nothing trains again
    from eebench.train import loop

    monkeypatch.setattr(loop._Trainer, "run", lambda self: pytest.fail("trained again"))
    again = invoke("run", "--config", cfg, "--data-dir", data_dir, "--json", "--split", "test",
                   "--no-timing", "--out", tests, "--checkpoints", tmp_path / "ckpt")
    assert again.exit_code == 0, again.output
    assert "already done" in again.stderr
    runs = json.loads(again.stdout)
    assert sorted(Path(r["run_dir"]) / R.SUMMARY_FILE for r in runs) == found
    for r in runs:
        run = R.read_run(Path(r["run_dir"]))
        assert run.config.split == "test" and not run.config.timing.enabled
        assert run.summary.n_samples == 146  # every WNLI test row: the dev budget is dev's
        assert not any(p.metrics for p in run.points)
    # a dev run whose test twin is missing is not done: the grid runs the twin alone; the dry
    # run lists the cell to do, estimated from its own finished dev run
    twin = Path(runs[0]["run_dir"])
    for f in twin.iterdir():
        f.unlink()
    listed = invoke(*_args(tmp_path, cfg, data_dir, "--test-out", tests, "--dry-run"))
    assert listed.exit_code == 0, listed.output
    rows = {r["method"]: r for r in json.loads(listed.stdout)}
    assert rows["pabee"]["status"] == "todo" and rows["static"]["status"] == "done"
    assert rows["pabee"]["estimate_from"] == rows["pabee"]["key"]
    result = invoke(*_args(tmp_path, cfg, data_dir, "--test-out", tests))
    assert result.exit_code == 0, result.output
    assert (twin / R.SUMMARY_FILE).exists()  # run alone, it still names its dev run
    _made_by_their_dev_runs([twin / R.SUMMARY_FILE], [Path(d["run_dir"]) for d in dev])


def _made_by_their_dev_runs(summaries: list[Path], dev_dirs: list[Path]) -> None:
    """Each test-split twin's summary names its dev twin's key and every checkpoint the dev run
    read (key, training seed, the weights' sha256); the dev runs record none."""
    from eebench.io import sha256_file

    dev = {R.read_run(d).config.method: R.read_run(d) for d in dev_dirs}
    for path in summaries:
        twin = R.read_run(path.parent)
        made = twin.summary.provenance
        own = dev[twin.config.method]
        assert made is not None and made.dev_run == own.config.key()
        ckpts = [Path(c) for v in own.summary.variants for c in v.checkpoint.split(";")]
        assert [m.checkpoint for m in made.models] == [c.name for c in ckpts]
        assert [m.seed for m in made.models] == [own.config.seed] * len(ckpts)
        assert [m.weights_sha256 for m in made.models] == [
            sha256_file(c / "model.safetensors") for c in ckpts]
    for run in dev.values():
        assert run.summary.provenance is None
        assert "provenance" not in json.loads((run.path / R.SUMMARY_FILE).read_text())


def test_test_out_beside_a_test_split_or_a_domain_shift_is_one_line(tmp_path, backbone,
                                                                      data_dir):
    cfg = _config(tmp_path, backbone, '"pabee"')
    for extra in (["--split", "test"], ["--eval-task", "rte"]):
        result = invoke(*_args(tmp_path, cfg, data_dir, "--test-out", tmp_path / "t", *extra))
        assert result.exit_code == 2, result.output
        assert "test_out adds test-split runs beside dev runs" in result.stderr
        assert "Traceback" not in result.output


def test_a_busy_cell_its_holder_finishes_meanwhile_counts_as_done(tmp_path, backbone, data_dir,
                                                                  monkeypatch):
    """Another process holds the first cell; it finishes it while this one runs the second: the
    command then has nothing left to rerun for, reports both and exits 0."""
    from eebench import api
    from eebench.run.backends import cells as cells_module

    cfg = _config(tmp_path, backbone, '"pabee", "deebert"')
    first = api.expand(api.config(cfg, timing={"enabled": False})).runs[0]
    assert first.method == "pabee"
    other = run_module._claim(run_module.run_dir_for(first, tmp_path / "runs"))
    assert other is not None
    real = cells_module.execute_group
    held: list = []

    def group(cfgs, opts):
        if cfgs[0].method == "pabee" and other is not None and not held:
            held.append(cfgs)  # found busy: this process goes on to the next cell
        elif cfgs[0].method == "deebert" and held:
            other.close()  # meanwhile the other process finishes the first cell
            real(held.pop(), opts)
        return real(cfgs, opts)

    monkeypatch.setattr(cells_module, "execute_group", group)
    result = invoke(*_args(tmp_path, cfg, data_dir))
    assert result.exit_code == 0, result.output
    assert "another process" not in result.stderr
    assert [r["summary"]["method"] for r in json.loads(result.stdout)] == ["deebert", "pabee"]
