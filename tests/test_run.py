"""`eebench run` end to end on a tiny local backbone and real RTE rows."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file
from typer.testing import CliRunner

from eebench.cli import app
from eebench.errors import DataError
from eebench.methods.base import get_method
from eebench.run import artifacts as R
from tests import tiny
from tests.cli import tiny_run

runner = CliRunner()


@pytest.fixture(scope="module")
def backbone(tmp_path_factory):
    return tiny.save_tiny_backbone(tmp_path_factory.mktemp("tiny-bert"), num_layers=3)


def _run(tmp_path, backbone, data_dir, *extra):
    return tiny_run(tmp_path, backbone, data_dir, *extra)


@pytest.mark.parametrize("method", ["pabee", "deebert"])
def test_run_writes_a_complete_run_directory(tmp_path, backbone, data_dir, method, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = _run(tmp_path, backbone, data_dir, "--method", method)
    run_dir = tmp_path / "runs" / out["run_dir"].split("runs/", 1)[1]
    for name in (R.CONFIG_FILE, R.ENV_FILE, R.POINTS_FILE, R.PREDICTIONS_FILE, R.SUMMARY_FILE):
        assert (run_dir / name).is_file(), name
    cfg = R.RunConfig.model_validate_json((run_dir / R.CONFIG_FILE).read_text())
    assert run_dir.name == cfg.key()
    run = R.read_run(run_dir)
    points = run.points
    assert [p.sweep_value for p in points] == cfg.sweep
    arrays = load_file(str(run_dir / R.PREDICTIONS_FILE))
    assert arrays["exit_layer"].shape == (len(points), 20)
    assert arrays["prediction"].dtype == arrays["labels"].dtype == np.int16  # compact class ids
    assert arrays["exit_logits"].shape[:2] == (3, 20)
    [variant] = run.summary.variants  # one model, an exit after each of its 3 layers
    assert (variant.name, variant.exit_layers, variant.logits_key) == ("all", [1, 2, 3],
                                                                       "exit_logits")
    # the cost of its model, as its checkpoint records it; a run reusing it records the same
    from eebench.train.checkpoint import read_state

    trained = read_state(Path(variant.checkpoint)).train_seconds
    assert 0 < trained <= run.summary.wall_seconds  # the checkpoint's, unrounded
    assert run.summary.train_seconds == round(trained, 1)
    again = _run(tmp_path, backbone, data_dir, "--method", method, "--time-samples", "4")
    assert R.read_run(Path(again["run_dir"])).summary.train_seconds == round(trained, 1)
    assert variant.hidden_size == 32 and variant.pooling == cfg.pooling
    for row, p in enumerate(points):
        assert sum(p.exit_histogram) == p.n_samples == 20
        layers = arrays["exit_layer"][row]
        assert p.avg_exit_layer == pytest.approx(layers.mean())
        assert np.bincount(layers, minlength=4)[1:].tolist() == p.exit_histogram
        correct = (arrays["prediction"][row] == arrays["labels"]).mean() * 100
        assert p.metrics["accuracy"] == pytest.approx(correct)
        assert p.main == p.metrics["accuracy"]
        assert p.speedup == pytest.approx(3 / p.avg_exit_layer)
        assert p.mean_flops > 0 and p.mean_mflops == pytest.approx(p.mean_flops / 1e6)
        assert p.disagreements is not None
        assert p.disagreements == p.disagreements_near_threshold  # only near-ties may differ
        modes = {(t.mode, t.batch_size) for t in p.timings}
        assert modes == {("dynamic", 1), ("dynamic", 32), ("full", 1), ("full", 32)}
    # the quality fields are stored, and are what `eebench score` computes from the arrays
    from eebench.score import load_run
    from eebench.score.quality import fill_quality

    assert all(p.ece is not None and p.consistency is not None for p in points)
    blank = load_run(run_dir)
    blank.points = [p.model_copy(update=dict.fromkeys(
        ("ece", "nll", "consistency", "exit_gain", "exit_loss"))) for p in blank.points]
    fill_quality([blank])
    for stored, computed in zip(points, blank.points, strict=True):
        for q in ("ece", "nll", "consistency", "exit_gain", "exit_loss"):
            assert getattr(stored, q) == pytest.approx(getattr(computed, q), abs=1e-6), q
    # more layers on average never costs fewer FLOPs (one model, same samples)
    by_layer = sorted(points, key=lambda p: p.avg_exit_layer)
    assert all(a.mean_flops <= b.mean_flops for a, b in zip(by_layer, by_layer[1:]))
    # rerunning the same command returns the finished run untouched
    before = (run_dir / R.POINTS_FILE).stat().st_mtime_ns
    again = _run(tmp_path, backbone, data_dir, "--method", method)
    assert again["run_dir"] == out["run_dir"]
    assert (run_dir / R.POINTS_FILE).stat().st_mtime_ns == before
    assert set(run.summary.files) == set(R.VOUCHED_FILES)  # the summary vouches for its files
    assert run.summary.wall_seconds > 0


def test_a_damaged_finished_run_is_named_not_trusted_and_overwrite_redoes_it(
        tmp_path, backbone, data_dir):
    out = _run(tmp_path, backbone, data_dir, "--method", "pabee", "--no-timing")
    run_dir = Path(out["run_dir"])
    predictions = run_dir / R.PREDICTIONS_FILE
    whole = predictions.read_bytes()
    args = ["run", "--method", "pabee", "--task", "rte", "--model", str(backbone), "--data-dir",
            str(data_dir), "--max-train-samples", "32", "--epochs", "1", "--max-seq-length", "48",
            "--max-eval-samples", "20", "--time-samples", "6", "--no-timing", "--out",
            str(tmp_path / "runs"), "--checkpoints", str(tmp_path / "ckpt")]
    damages = {
        R.PREDICTIONS_FILE: (whole[: len(whole) // 2], "does not match the sha256"),
        R.SUMMARY_FILE: (b'{"schema_version": 2', "finished run damaged"),
        R.IDS_FILE: (None, "missing from a finished run"),
    }
    for name, (content, message) in damages.items():
        original = (run_dir / name).read_bytes()
        if content is None:
            (run_dir / name).unlink()
        else:
            (run_dir / name).write_bytes(content)
        result = runner.invoke(app, args)
        assert result.exit_code == 1, result.output
        [line] = result.stderr.strip().splitlines()[-1:]
        assert message in line and "--overwrite" in line and "already done" not in result.stderr
        (run_dir / name).write_bytes(original)
    predictions.write_bytes(whole[:100])
    redo = runner.invoke(app, [*args, "--overwrite"])
    assert redo.exit_code == 0, redo.output
    assert predictions.read_bytes() == whole  # the same run again, bit for bit
    assert R.verify_run(run_dir).summary is not None


def test_ids_with_a_tab_or_a_line_break_are_refused():
    assert R.ids_text(["0", "a b"], "x.tsv") == "0\na b\n"
    for bad in ("a\tb", "a\nb"):
        with pytest.raises(DataError, match=r"x.tsv: sample id .* \(row 2\) holds a tab"):
            R.ids_text(["0", bad], "x.tsv")


def test_static_run_trains_one_model_per_k(tmp_path, backbone, data_dir, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = _run(tmp_path, backbone, data_dir, "--method", "static", "--sweep", "1,3",
               "--no-timing")
    points = out["points"]
    assert [p["sweep"] for p in points] == [{"layers": 1}, {"layers": 3}]  # named, typed
    assert [p["avg_exit_layer"] for p in points] == [1.0, 3.0]
    assert points[0]["mean_flops"] < points[1]["mean_flops"]
    variants = out["summary"]["variants"]
    assert [(v["name"], v["exit_layers"], v["logits_key"]) for v in variants] == [
        ("k1", [1], "exit_logits_k1"), ("k3", [3], "exit_logits_k3")]
    assert [p["variant"] for p in points] == ["k1", "k3"]
    # calibration is stored; agreement with the deepest k is left to `eebench score`
    assert all(p["ece"] is not None and p["consistency"] is None for p in points)


def test_pooling_is_part_of_the_run_and_its_checkpoint(tmp_path, backbone, data_dir,
                                                       monkeypatch):
    monkeypatch.chdir(tmp_path)
    mean = _run(tmp_path, backbone, data_dir, "--method", "pabee", "--pooling", "mean")
    run_dir = tmp_path / "runs" / mean["run_dir"].split("runs/", 1)[1]
    cfg = R.RunConfig.model_validate_json((run_dir / R.CONFIG_FILE).read_text())
    assert cfg.pooling == "mean" and run_dir.name == cfg.key()
    [variant] = mean["summary"]["variants"]
    assert variant["pooling"] == "mean" and variant["name"] == "all"
    checkpoint = variant["checkpoint"]
    model_config = json.loads((tmp_path / checkpoint / "model_config.json").read_text())
    assert model_config["pooling"] == "mean"
    for p in mean["points"]:  # real dynamic inference on mean-pooled heads agrees
        assert p["disagreements"] == p["disagreements_near_threshold"]
    # a config file's pooling is the same run
    toml = tmp_path / "bench.toml"
    toml.write_text('pooling = "mean"\n')
    same = _run(tmp_path, backbone, data_dir, "--method", "pabee", "--config", str(toml))
    assert same["run_dir"] == mean["run_dir"]
    # [CLS] (this backbone's default: no sentence-transformers pooling config) is another run
    cls = _run(tmp_path, backbone, data_dir, "--method", "pabee", "--no-timing")
    cls_dir = tmp_path / "runs" / cls["run_dir"].split("runs/", 1)[1]
    assert R.RunConfig.model_validate_json((cls_dir / R.CONFIG_FILE).read_text()).pooling == "cls"
    assert cls_dir.parent == run_dir.parent and cls_dir != run_dir
    assert cls["summary"]["variants"][0]["checkpoint"] != checkpoint


def test_training_options_name_the_run_like_a_configs(tmp_path, backbone, data_dir,
                                                      monkeypatch):
    monkeypatch.chdir(tmp_path)
    flags = _run(tmp_path, backbone, data_dir, "--method", "pabee", "--no-timing", "--lr", "1e-4",
                 "--batch-size", "8", "--group-by-length")
    run_dir = tmp_path / "runs" / flags["run_dir"].split("runs/", 1)[1]
    train = R.RunConfig.model_validate_json((run_dir / R.CONFIG_FILE).read_text()).train
    assert (train.lr, train.batch_size, train.group_by_length) == (1e-4, 8, True)
    toml = tmp_path / "bench.toml"
    toml.write_text("[train]\nlr = 1e-4\nbatch_size = 8\ngroup_by_length = true\n")
    same = _run(tmp_path, backbone, data_dir, "--method", "pabee", "--no-timing",
                "--config", str(toml))
    assert same["run_dir"] == flags["run_dir"]
    # a flag overrides the config: --no-group-by-length is another run
    other = _run(tmp_path, backbone, data_dir, "--method", "pabee", "--no-timing",
                 "--config", str(toml), "--no-group-by-length")
    assert other["run_dir"] != flags["run_dir"]


def test_run_refuses_bad_input(tmp_path, backbone, data_dir):
    base = ["run", "--model", str(backbone), "--data-dir", str(data_dir)]
    cases = [
        (["--method", "deebert", "--task", "stsb"], 2),
        (["--method", "pabe", "--task", "rte"], 2),
        (["--method", "pabee", "--task", "rte", "--sweep", "a,b"], 2),
        (["--method", "pabee", "--task", "rte", "--split", "validation_matched"], 2),
        (["--method", "pabee"], 2),
        (["--method", "pabee", "--task", "rte", "--pooling", "max"], 2),
    ]
    toml = tmp_path / "bad.toml"
    toml.write_text('pooling = "max"\n')
    cases.append((["--method", "pabee", "--task", "rte", "--config", str(toml)], 2))
    for extra, code in cases:
        result = runner.invoke(app, base + extra)
        assert result.exit_code == code, (extra, result.output)
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_config_grid_skips_pairs_a_method_cannot_run(tmp_path, backbone, data_dir):
    cfg = tmp_path / "bench.toml"
    cfg.write_text(f'model = "{backbone}"\nmethods = ["deebert"]\ntasks = ["stsb", "nonsense"]\n')
    result = runner.invoke(app, ["run", "--config", str(cfg), "--data-dir", str(data_dir)])
    assert result.exit_code == 2  # the unknown task is still refused before any work
    assert "nonsense" in result.stderr
    cfg.write_text(f'model = "{backbone}"\nmethods = ["deebert"]\ntasks = ["stsb"]\n'
                   f'max_seq_length = 32\n[train]\nmax_train_samples = 8\nepochs = 1\n')
    result = runner.invoke(app, ["run", "--config", str(cfg), "--data-dir", str(data_dir),
                                 "--out", str(tmp_path / "runs")])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == ("error: nothing to run: deebert on stsb: deebert cannot do "
                                     "regression (its entropy rule needs classes)")
    assert not (tmp_path / "runs").exists()


def test_config_task_budgets_and_a_second_process_on_the_same_grid(tmp_path, backbone, data_dir):
    from eebench.run import execute as run_module
    from eebench.run.config import load_config
    from eebench.run.grid import expand

    cfg = tmp_path / "bench.toml"
    cfg.write_text(
        f'model = "{backbone}"\nmethods = ["pabee"]\ntasks = ["rte", "wnli"]\n'
        'max_seq_length = 32\nmax_eval_samples = 10\n'
        '[train]\nmax_train_samples = 16\nepochs = 1\n'
        '[timing]\nsamples = 4\n'
        '[tasks_settings.rte]\nmax_seq_length = 40\nmax_eval_samples = 12\n'
        'train = { max_train_samples = 24, group_by_length = true }\n')
    args = ["run", "--config", str(cfg), "--data-dir", str(data_dir), "--json",
            "--out", str(tmp_path / "runs"), "--checkpoints", str(tmp_path / "ckpt")]
    # Another process holds the RTE run: this one runs the rest, then says so and exits 1.
    rte_cfg = expand(load_config(cfg)).runs[0]  # seed by seed, task by task: RTE first
    assert (rte_cfg.task, rte_cfg.max_seq_length, rte_cfg.timing.samples) == ("rte", 40, 4)
    rte_dir = run_module.run_dir_for(rte_cfg, tmp_path / "runs")
    held = run_module._claim(rte_dir)
    assert held is not None and run_module._claim(rte_dir) is None
    result = runner.invoke(app, args)
    assert result.exit_code == 1, result.output
    line = " ".join(result.stderr.split())
    assert "1 of 2 cells are being run by another process (e.g. pabee on rte, seed 42)" in line
    assert "rerun the same command when it has finished" in line
    done = json.loads(result.stdout)
    assert [d["summary"]["task"] for d in done] == ["wnli"]
    assert done[0]["summary"]["n_samples"] == 10
    assert not (rte_dir / R.SUMMARY_FILE).exists()
    held.close()  # the other process ended: the next run picks the RTE run up
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    done = json.loads(result.stdout)
    assert [d["summary"]["task"] for d in done] == ["rte", "wnli"]
    assert done[0]["run_dir"] == str(rte_dir)
    rc = R.RunConfig.model_validate_json((rte_dir / R.CONFIG_FILE).read_text())
    assert rc.max_seq_length == 40 and rc.max_eval_samples == 12
    assert rc.train.max_train_samples == 24 and rc.train.epochs == 1
    assert done[0]["summary"]["n_samples"] == 12
    assert not (rte_dir / run_module.LOCK_FILE).exists()
    cfg.write_text(cfg.read_text() + '[tasks_settings.rtee]\nmax_seq_length = 8\n')
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "rtee" in result.stderr


def test_a_configs_evaluation_budget_is_for_dev_only(tmp_path, backbone, data_dir):
    cfg = tmp_path / "bench.toml"
    cfg.write_text(f'model = "{backbone}"\nmethods = ["pabee"]\ntasks = ["wnli"]\n'
                   'max_seq_length = 32\nmax_eval_samples = 10\n'
                   '[train]\nmax_train_samples = 16\nepochs = 1\n')
    args = ["run", "--config", str(cfg), "--data-dir", str(data_dir), "--json", "--no-timing",
            "--out", str(tmp_path / "runs"), "--checkpoints", str(tmp_path / "ckpt")]
    dev = runner.invoke(app, args)
    assert dev.exit_code == 0, dev.output
    assert json.loads(dev.stdout)["summary"]["n_samples"] == 10
    test = runner.invoke(app, [*args, "--split", "test"])
    assert test.exit_code == 0, test.output
    assert json.loads(test.stdout)["summary"]["n_samples"] == 146  # every WNLI test row


def test_a_test_split_run_holds_no_labels(tmp_path, backbone, data_dir):
    """Test labels are withheld: IMDb's test file has them, and the run still neither scores
    nor stores them."""
    args = ["run", "--method", "pabee", "--task", "elue-imdb", "--model", str(backbone),
            "--data-dir", str(data_dir), "--max-train-samples", "16", "--epochs", "1",
            "--max-seq-length", "32", "--max-eval-samples", "12", "--no-timing", "--json",
            "--out", str(tmp_path / "runs"), "--checkpoints", str(tmp_path / "ckpt")]
    found = {}
    for split in ("dev", "test"):
        result = runner.invoke(app, [*args, "--split", split])
        assert result.exit_code == 0, result.output + str(result.exception)
        run_dir = Path(json.loads(result.stdout)["run_dir"])
        found[split] = (load_file(str(run_dir / R.PREDICTIONS_FILE)),
                        R.read_run(run_dir).points)
    arrays, points = found["dev"]
    assert "labels" in arrays and all(p.metrics for p in points)
    arrays, points = found["test"]
    assert "labels" not in arrays and arrays["prediction"].shape[1] == 12
    assert not any(p.metrics for p in points) and all(p.main is None for p in points)


FIELD = [m for m in tiny.TEXT_METHODS if len(get_method(m).variants([1.0, 2.0])) == 1]


@pytest.mark.parametrize("method", FIELD)
def test_every_method_runs_end_to_end_with_no_disagreement(tmp_path, backbone, data_dir, method):
    """A tiny run of every method that puts its exits on one model: every sweep value's real
    batched dynamic inference decided exactly as the one-pass simulation."""
    out = _run(tmp_path, backbone, data_dir, "--method", method, "--max-train-samples", "40")
    points = out["points"]
    assert points and all(p["method"] == method for p in points)
    assert [p["disagreements"] for p in points] == [0] * len(points)
    # (tests/test_evaluate.py checks the agreement where exits are mixed, with confident heads)


def test_sweet_with_placed_exits_runs_with_no_disagreement(tmp_path, backbone, data_dir):
    """SWEET with fewer exits than layers (the paper's four on BERT-base): the exits sit where
    they were set, and the real inference decides as the simulation."""
    out = _run(tmp_path, backbone, data_dir, "--method", "sweet", "--setting",
               "exit_layers=[1,3]", "--max-train-samples", "40")
    points = out["points"]
    assert points and [p["disagreements"] for p in points] == [0] * len(points)
    run_dir = Path(out["run_dir"])
    assert R.read_run(run_dir).summary.variants[0].exit_layers == [1, 3]
    exits = load_file(str(run_dir / R.PREDICTIONS_FILE))["exit_layer"]
    assert set(np.unique(exits)) <= {1, 3} and (exits[-1] == 3).all()  # threshold 1: the last


def test_calibrated_maxprob_points_report_the_calibrated_probabilities(tmp_path, backbone,
                                                                         data_dir):
    """ECE and NLL measure the probabilities the rule reads: maxprob's own rule softmax(z / T_j),
    the plain max-prob rule on the same model softmax(z)."""
    from eebench.measure.quality import exited_logits, point_quality
    from eebench.train.checkpoint import load_trained

    args = ["run", "--task", "rte", "--model", str(backbone), "--data-dir", str(data_dir),
            "--max-train-samples", "40", "--epochs", "1", "--max-seq-length", "48",
            "--max-eval-samples", "20", "--time-samples", "4", "--out", str(tmp_path / "runs"),
            "--checkpoints", str(tmp_path / "ckpt"), "--json", "--method", "maxprob",
            "--rule", "maxprob"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    runs = {o["points"][0]["method"]: Path(o["run_dir"]) for o in json.loads(result.stdout)}
    temps = None
    for label, run_dir in runs.items():
        run = R.read_run(run_dir)
        [variant] = run.summary.variants
        if temps is None:
            temps = np.asarray(load_trained(Path(variant.checkpoint))[0].temperatures())
            assert np.abs(temps - 1).max() > 1e-3
        arrays = load_file(str(run_dir / R.PREDICTIONS_FILE))
        logits = arrays["exit_logits"] / (temps[:, None, None] if label == "maxprob" else 1.0)
        for row, p in enumerate(run.points):
            index = np.searchsorted(variant.exit_layers, arrays["exit_layer"][row])
            q = point_quality(exited_logits(logits, index), arrays["prediction"][row],
                              logits[-1].argmax(-1),
                              arrays["labels"])
            assert (p.ece, p.nll) == pytest.approx((q.ece, q.nll), rel=1e-5), (label, row)


def test_two_rules_on_one_trained_model_in_one_pass(tmp_path, backbone, data_dir):
    """`--rule` sweeps other rules on the method's model: one training, one pass over the split,
    a run directory per rule, labelled method+rule; a rule the model cannot serve is refused."""
    args = ["run", "--task", "rte", "--model", str(backbone), "--data-dir", str(data_dir),
            "--max-train-samples", "32", "--epochs", "1", "--max-seq-length", "48",
            "--max-eval-samples", "20", "--time-samples", "6", "--out", str(tmp_path / "runs"),
            "--checkpoints", str(tmp_path / "ckpt"), "--json", "--method", "pabee"]
    result = runner.invoke(app, [*args, "--rule", "entropy", "--rule", "maxprob"])
    assert result.exit_code == 0, result.output
    runs = {o["points"][0]["method"]: o for o in json.loads(result.stdout)}
    assert set(runs) == {"pabee", "pabee+entropy", "pabee+maxprob"}
    assert result.stderr.count("full pass") <= 1  # progress is transient; the log line counts
    assert result.stderr.count("one pass over 20 samples: sweeping pabee, pabee+entropy, "
                               "pabee+maxprob") == 1
    assert len(list((tmp_path / "ckpt").rglob("model.safetensors"))) == 1  # trained once
    for label, o in runs.items():
        run_dir = Path(o["run_dir"])
        assert run_dir.parent.parent.name == label
        cfg = R.RunConfig.model_validate_json((run_dir / R.CONFIG_FILE).read_text())
        assert cfg.label == label and cfg.rule == (label.partition("+")[2] or None)
        assert all(p["disagreements"] == 0 for p in o["points"])
    entropy = runs["pabee+entropy"]["points"]
    assert {tuple(p["sweep"]) for p in entropy} == {("threshold",)} and len(entropy) == 21
    # the same exit logits: the rules read one pass
    logits = {label: load_file(str(Path(o["run_dir"]) / R.PREDICTIONS_FILE))["exit_logits"]
              for label, o in runs.items()}
    np.testing.assert_array_equal(logits["pabee"], logits["pabee+entropy"])
    np.testing.assert_array_equal(logits["pabee"], logits["pabee+maxprob"])
    # a rerun finds all three done; a rule the model cannot serve is refused in one line
    again = runner.invoke(app, [*args, "--rule", "entropy", "--rule", "maxprob"])
    assert again.exit_code == 0 and again.stderr.count("already done") == 3
    refused = runner.invoke(app, [*args, "--rule", "calibrated-maxprob"])
    assert refused.exit_code == 2
    assert refused.stderr.strip().splitlines() == [
        "error: rule 'calibrated-maxprob' needs a temperature per exit, fit after training "
        "(trained by: maxprob): pabee on rte has none (hint: `eebench rules` lists what each "
        "rule needs)"]


def test_paired_timing_times_the_full_model_beside_each_point(tmp_path, backbone, data_dir,
                                                             monkeypatch):
    """`--paired-timing`: each point holds its own full-model timings, taken batch by batch
    beside its own, not one measurement shared by the sweep; the choice names the run, and the
    default ("once") is left out of config.json, so no earlier run is renamed."""
    monkeypatch.chdir(tmp_path)
    once = _run(tmp_path, backbone, data_dir, "--method", "pabee")
    paired = _run(tmp_path, backbone, data_dir, "--method", "pabee", "--paired-timing")
    assert paired["run_dir"] != once["run_dir"]
    recorded = [json.loads((Path(o["run_dir"]) / R.CONFIG_FILE).read_text())["timing"]
                for o in (once, paired)]
    assert "baseline" not in recorded[0] and recorded[1]["baseline"] == "paired"

    def full_raw(run_dir: str) -> list[tuple]:
        return [tuple(t.raw_ms) for p in R.read_run(Path(run_dir)).points for t in p.timings
                if t.mode == "full" and t.batch_size == 1]

    shared, own = full_raw(once["run_dir"]), full_raw(paired["run_dir"])
    points = len(R.read_run(Path(paired["run_dir"])).points)
    assert points > 1 and len(shared) == len(own) == points
    assert len(set(shared)) == 1  # one measurement, repeated in every point
    assert len(set(own)) == points  # one measurement per point
    assert all(len(raw) == 6 for raw in own)  # a batch of one per timed sample
    for p in R.read_run(Path(paired["run_dir"])).points:
        modes = [(t.mode, t.batch_size) for t in p.timings]
        assert modes == [("dynamic", 1), ("dynamic", 32), ("full", 1), ("full", 32)]
        assert p.disagreements == p.disagreements_near_threshold


def test_paired_timing_and_no_timing_together_are_one_line_exit_2(tmp_path):
    """The two flags contradict each other: refused before anything loads. (A config's
    `baseline = "paired"` with `--no-timing` is not: the test-split runs of a paired benchmark.)"""
    result = CliRunner().invoke(app, ["run", "--method", "pabee", "--task", "rte",
                                      "--no-timing", "--paired-timing", "--out",
                                      str(tmp_path / "runs")])
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: --paired-timing") and "drop one" in line
    assert not (tmp_path / "runs").exists()


def test_a_run_without_timing_is_the_same_run_whatever_its_timing_baseline():
    """`--no-timing` times nothing, so "paired" changes nothing: the key (and config.json) is
    that of the run without it, as for the test-split runs of a paired benchmark."""
    def config(**timing) -> R.RunConfig:
        return R.RunConfig(model="m", method="pabee", task="rte", split="test", seed=1,
                           sweep=[1.0], max_seq_length=32, flops_convention="fvcore",
                           timing=timing)

    untimed = config(enabled=False)
    assert config(enabled=False, baseline="paired").key() == untimed.key()
    assert "baseline" not in untimed.model_dump(mode="json")["timing"]
    assert config(baseline="paired").key() != config().key()  # timed: the baseline names it


def test_paired_timing_alternates_the_full_model_and_the_point_batch_by_batch(monkeypatch):
    import torch

    import eebench.run.evaluate as E
    from eebench.run.config import TimingConfig

    calls: list[tuple[str, int]] = []
    batches = [{"index": torch.tensor([i])} for i in range(3)]
    monkeypatch.setattr(E, "_batches", lambda enc, subset, bs: batches)

    def infer(feed, timer):
        for b in feed:
            with timer():
                calls.append(("point", int(b["index"][0])))
        return "decisions"

    timing = TimingConfig(samples=3, batch_sizes=[1], warmup=1, baseline="paired")
    timings, decisions = E.timed_inference(
        torch.nn.Linear(1, 1), None, np.arange(3), timing, False,
        warm=lambda b: calls.append(("warm", int(b["index"][0]))), infer=infer,
        beside=lambda b: calls.append(("full", int(b["index"][0]))))
    assert calls == [("full", 0), ("warm", 0),  # warm-up, untimed
                     ("full", 0), ("point", 0), ("full", 1), ("point", 1), ("full", 2),
                     ("point", 2)]
    assert decisions == ["decisions"]
    assert [(t.mode, t.batch_size, len(t.raw_ms)) for t in timings] == [
        ("dynamic", 1, 3), ("full", 1, 3)]


def test_without_timing_real_inference_runs_once_unwarmed_at_the_largest_batch_size(
        monkeypatch):
    """`--no-timing` (the test-split runs of --test-out): the check against the simulation needs
    one pass, at the batch size whose batched exit it exercises; no warm-up, no other sizes."""
    import torch

    import eebench.run.evaluate as E
    from eebench.run.config import TimingConfig

    sizes: list[int] = []
    monkeypatch.setattr(E, "_batches", lambda enc, subset, bs: sizes.append(bs) or [{}] * 2)
    calls: list[str] = []

    def infer(feed, timer):
        calls.extend("infer" for _ in feed)
        return "decisions"

    timing = TimingConfig(enabled=False, samples=3, batch_sizes=[1, 32, 8], warmup=2, repeats=3)
    timings, decisions = E.timed_inference(
        torch.nn.Linear(1, 1), None, np.arange(3), timing, False,
        warm=lambda b: calls.append("warm"), infer=infer)
    assert sizes == [32] and calls == ["infer", "infer"] and decisions == ["decisions"]
    assert [t.batch_size for t in timings] == [32]  # what the caller drops: nothing is timed
    timed = TimingConfig(samples=3, batch_sizes=[1, 32], warmup=1)
    sizes.clear()
    calls.clear()
    _, decisions = E.timed_inference(torch.nn.Linear(1, 1), None, np.arange(3), timed, False,
                                     warm=lambda b: calls.append("warm"), infer=infer)
    assert sizes == [1, 32] and calls.count("warm") == 2 and len(decisions) == 2


def test_timing_at_a_few_points_times_those_and_checks_every_point(tmp_path, backbone, data_dir,
                                                                   monkeypatch):
    """`--time-points 3` (a config's `[timing] points`) of five thresholds: the first, the
    middle and the last are timed (with the full model's shared timing), the other two hold no
    timings, and every point is still checked against the simulation, the untimed ones once at
    the largest batch size. Static times the models of the values picked: the full model is
    timed for those alone."""
    import eebench.run.evaluate as E

    monkeypatch.chdir(tmp_path)
    calls: list[tuple[bool, bool]] = []
    real = E._real_inference

    def spy(model, rule, enc, subset, timing, spec, full, walk=None):
        calls.append((full, timing.enabled))
        return real(model, rule, enc, subset, timing, spec, full, walk=walk)

    monkeypatch.setattr(E, "_real_inference", spy)
    out = _run(tmp_path, backbone, data_dir, "--method", "deebert", "--sweep",
               "0.1,0.2,0.3,0.4,0.5", "--time-points", "3")
    run = R.read_run(Path(out["run_dir"]))
    assert [p.sweep_value for p in run.points if p.timings] == [0.1, 0.3, 0.5]
    assert calls == [(True, True)] + [(False, v in (0.1, 0.3, 0.5)) for v in
                                      (0.1, 0.2, 0.3, 0.4, 0.5)]
    for p in run.points:
        assert {(t.mode, t.batch_size) for t in p.timings} == (
            {("dynamic", 1), ("dynamic", 32), ("full", 1), ("full", 32)} if p.timings else set())
        assert p.disagreements is not None and p.disagreements == p.disagreements_near_threshold
    assert run.config.timing.points == 3
    assert json.loads((run.path / R.CONFIG_FILE).read_text())["timing"]["points"] == 3

    calls.clear()
    static = R.read_run(Path(_run(tmp_path, backbone, data_dir, "--method", "static",
                                  "--sweep", "1,2,3", "--time-points", "2")["run_dir"]))
    assert [(p.sweep_value, bool(p.timings)) for p in static.points] == [
        (1.0, True), (2.0, False), (3.0, True)]
    assert calls == [(True, True), (False, True), (False, False), (True, True), (False, True)]
    refused = CliRunner().invoke(app, ["run", "--method", "pabee", "--task", "rte",
                                       "--no-timing", "--time-points", "2"])
    assert refused.exit_code == 2 and "--time-points 2" in refused.stderr
