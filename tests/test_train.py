"""Fine-tuning on a tiny random BERT and a few real RTE rows: reproducible, resumable, safe to load.

The tiny model is a local directory (save_pretrained + the MiniLM tokenizer), which is also how
the CLI takes it (--model PATH).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from eebench.cli import app
from eebench.errors import EebenchError, UsageError
from eebench.methods.base import get_method
from eebench.tasks.catalog import get_task
from eebench.tasks.loaders import load_split
from eebench.train import checkpoint as ckpt
from eebench.train.checkpoint import load_trained
from eebench.train.config import TrainConfig
from eebench.train.loop import train

SMALL = dict(epochs=2, batch_size=8, max_train_samples=16, max_seq_length=32, save_every=3,
             eval_batch_size=16)  # 2 steps per epoch, 4 per stage; a save at step 3


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """A tiny model gains nothing from threads, and on busy shared cores they spin and wait."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory, minilm_path) -> str:
    from transformers import AutoTokenizer, BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=3,
                        num_attention_heads=2, intermediate_size=32, max_position_embeddings=64)
    path = tmp_path_factory.mktemp("tiny-bert")
    BertModel(config).save_pretrained(path)
    AutoTokenizer.from_pretrained(str(minilm_path)).save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def rte(data_dir):
    spec = get_task("rte")
    return spec, load_split(spec, "train", data_dir), load_split(spec, "dev", data_dir).take(16, 0)


def _train(method, rte, tiny_model, out, on_step=None, **overrides):
    spec, tr, dev = rte
    cfg = TrainConfig.parse({**SMALL, **overrides})
    return train(get_method(method), spec, tiny_model, tr, dev, cfg, out, on_step=on_step)


def _weights(path: Path) -> dict[str, torch.Tensor]:
    return load_file(str(path / ckpt.MODEL_FILE))


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _stop_at(step: int, exc: type[BaseException]):
    def hook(global_step: int) -> None:
        if global_step == step:
            raise exc("simulated interruption")
    return hook


@pytest.fixture(scope="module")
def pabee_run(rte, tiny_model, tmp_path_factory) -> Path:
    return _train("pabee", rte, tiny_model, tmp_path_factory.mktemp("pabee"))


@pytest.fixture(scope="module")
def deebert_run(rte, tiny_model, tmp_path_factory) -> Path:
    return _train("deebert", rte, tiny_model, tmp_path_factory.mktemp("deebert"))


def test_a_finished_run_is_a_complete_checkpoint(pabee_run, rte, tiny_model):
    spec = rte[0]
    assert pabee_run.parts[-4:-1] == (Path(tiny_model).name, "pabee", "rte")
    state = ckpt.read_state(pabee_run)
    assert state.finished and state.global_step == 4 and state.config_hash == pabee_run.name
    assert state.config["train"]["max_train_samples"] == 16 and state.config["data"]["n"] == 16
    for name in (ckpt.MODEL_FILE, ckpt.MODEL_CONFIG_FILE, "tokenizer.json", ckpt.STATE_FILE):
        assert (pabee_run / name).is_file()
    assert not (pabee_run / ckpt.OPTIMIZER_FILE).exists()  # training state dropped once finished
    last = state.history[-1]
    assert last["global_step"] == 4 and [e["layer"] for e in last["exits"]] == [1, 2, 3]
    for e in last["exits"]:
        assert set(e["metrics"]) == set(spec.metrics) and 0 <= e["main"] <= 100
    assert not list(pabee_run.parent.glob(".*"))  # no temporary or old directories left


def test_seeded_runs_give_identical_weights(pabee_run, rte, tiny_model, tmp_path):
    again = _train("pabee", rte, tiny_model, tmp_path / "again")
    assert again.name == pabee_run.name
    assert _same(_weights(again), _weights(pabee_run))
    other = _train("pabee", rte, tiny_model, tmp_path / "other", seed=7)
    assert other.name != pabee_run.name
    assert not _same(_weights(other), _weights(pabee_run))


def test_trained_weights_moved_and_rerun_returns_at_once(pabee_run, rte, tiny_model):
    from eebench.models.build import build_model

    torch.manual_seed(TrainConfig().seed)  # the initialisation the run started from
    fresh = build_model(tiny_model, get_method("pabee"), 2).state_dict()
    trained = _weights(pabee_run)
    assert any(not torch.equal(fresh[k], trained[k]) for k in trained)
    before = (pabee_run / ckpt.STATE_FILE).stat().st_mtime_ns
    assert _train("pabee", rte, tiny_model, pabee_run.parents[3]) == pabee_run
    assert (pabee_run / ckpt.STATE_FILE).stat().st_mtime_ns == before  # nothing rewritten


@pytest.mark.parametrize("stop_step,exc", [(1, KeyboardInterrupt), (4, RuntimeError)])
def test_resume_after_interruption_is_bit_identical(pabee_run, rte, tiny_model, tmp_path,
                                                     stop_step, exc):
    # Ctrl-C saves at once; a crash (like kill -9) loses the steps since the last save (step 3).
    # Either way the run resumes in the middle of an epoch.
    with pytest.raises(exc):
        _train("pabee", rte, tiny_model, tmp_path, on_step=_stop_at(stop_step, exc))
    path = tmp_path / pabee_run.relative_to(pabee_run.parents[3])
    state = ckpt.read_state(path)
    assert not state.finished
    assert state.global_step == (1 if exc is KeyboardInterrupt else 3)
    assert state.step_in_epoch == 1
    assert (path / ckpt.OPTIMIZER_FILE).is_file() and (path / ckpt.RNG_FILE).is_file()
    assert _train("pabee", rte, tiny_model, tmp_path) == path
    assert ckpt.read_state(path).finished
    assert _same(_weights(path), _weights(pabee_run))


def test_deebert_stage_two_freezes_the_backbone_and_resumes_identically(deebert_run, rte,
                                                                         tiny_model, tmp_path):
    # Ctrl-C at the last step of stage 1 (2 steps x 2 epochs) saves it; then stage 2 runs.
    with pytest.raises(KeyboardInterrupt):
        _train("deebert", rte, tiny_model, tmp_path, on_step=_stop_at(4, KeyboardInterrupt))
    path = tmp_path / deebert_run.relative_to(deebert_run.parents[3])
    state = ckpt.read_state(path)
    assert (state.stage, state.global_step) == (0, 4)
    after_stage1 = _weights(path)
    assert _train("deebert", rte, tiny_model, tmp_path) == path
    final = _weights(path)
    assert _same(final, _weights(deebert_run))  # resumed across the stage boundary: identical
    frozen = [k for k in final if not k.startswith("heads.") or k.startswith("heads.2.")]
    ramps = [k for k in final if k.startswith(("heads.0.", "heads.1."))]
    assert any(k.startswith("layers.") for k in frozen) and any("embeddings" in k for k in frozen)
    assert all(torch.equal(final[k], after_stage1[k]) for k in frozen)
    assert all(not torch.equal(final[k], after_stage1[k]) for k in ramps)
    stages = [h["stage"] for h in ckpt.read_state(path).history]
    assert stages == ["backbone", "backbone", "off-ramps", "off-ramps"]


def test_the_dev_log_shows_only_exits_a_stage_has_trained(rte, tiny_model, tmp_path):
    """DeeBERT's first stage trains the last exit alone: its off-ramps print as "-", not as the
    random scores of untrained heads; the second stage prints every exit."""
    from rich.console import Console

    console = Console(record=True, width=200)
    spec, tr, dev = rte
    train(get_method("deebert"), spec, tiny_model, tr, dev, TrainConfig.parse(SMALL), tmp_path,
          console=console)
    lines = [line.split(": ", 1)[1].split() for line in console.export_text().splitlines()
             if "per exit @" in line]
    assert len(lines) == 4  # two dev evaluations per stage
    for shown in lines[:2]:  # stage 'backbone': exits 1-2 untrained
        assert shown[:2] == ["-", "-"] and float(shown[2]) >= 0
    for shown in lines[2:]:  # stage 'off-ramps': every exit trained
        assert all(value != "-" for value in shown) and len(shown) == 3


def test_checkpoint_round_trip_gives_identical_logits(tiny_model, tmp_path, rte):
    from eebench.data.batching import collate, encode
    from eebench.models.backbones import load_tokenizer
    from eebench.models.build import build_model

    spec, tr, _ = rte
    tok = load_tokenizer(tiny_model)
    batch = collate(encode(tr.take(6, 0), tok, 32), list(range(6)))
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    for method in ("pabee", "deebert", "static"):
        model = build_model(tiny_model, get_method(method), spec.num_labels).eval()
        state = ckpt.TrainState(config_hash="x", config={}, finished=True)
        ckpt.save_checkpoint(tmp_path / method, model, tok, state)
        loaded, tok2, meta = load_trained(tmp_path / method)
        assert not loaded.training and meta["finished"]
        assert loaded.exit_layers == model.exit_layers
        with torch.no_grad():
            assert torch.equal(loaded(**inputs), model(**inputs))
        assert tok2(*tr.texts[0])["input_ids"] == tok(*tr.texts[0])["input_ids"]


def test_corrupt_or_mismatched_checkpoints_fail_with_one_line(pabee_run, deebert_run, tmp_path,
                                                             rte, tiny_model):
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(pabee_run, bad)
    data = (bad / ckpt.MODEL_FILE).read_bytes()
    (bad / ckpt.MODEL_FILE).write_bytes(data[: len(data) // 2])
    with pytest.raises(EebenchError, match="corrupt") as err:
        load_trained(bad)
    assert "\n" not in str(err.value) and "model.safetensors" in str(err.value)

    (bad / ckpt.MODEL_FILE).write_bytes(b"\x00" * 64)  # not even a header
    with pytest.raises(EebenchError, match="corrupt"):
        load_trained(bad)

    shutil.copy(deebert_run / ckpt.MODEL_FILE, bad / ckpt.MODEL_FILE)  # another model's weights
    with pytest.raises(EebenchError, match="does not fit"):
        load_trained(bad)

    (bad / ckpt.STATE_FILE).write_text("{not json")
    with pytest.raises(EebenchError, match="train_state.json") as err:
        load_trained(bad)
    assert "\n" not in str(err.value)

    # The directory of this very configuration holds a checkpoint of another one.
    out = tmp_path / "out"
    target = out / pabee_run.relative_to(pabee_run.parents[3])
    shutil.copytree(deebert_run, target)
    with pytest.raises(EebenchError, match="another configuration") as err:
        _train("pabee", rte, tiny_model, out)
    assert "\n" not in str(err.value) and err.value.exit_code == 1


def test_interrupted_save_is_recovered(tmp_path):
    path = tmp_path / "abc"
    old = tmp_path / ".abc.old"
    old.mkdir()
    (old / "train_state.json").write_text("{}")
    stale = tmp_path / ".abc.tmp-99999999"  # a save that never finished: no process has that id
    stale.mkdir()
    ckpt.recover(path)
    assert (path / "train_state.json").is_file()
    assert not old.exists() and not stale.exists()


def test_optimizer_state_round_trips_without_pickle(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.8, 0.99))
    for _ in range(2):
        model(torch.randn(5, 4)).pow(2).sum().backward()
        opt.step()
    tensors, meta = ckpt.optimizer_to_tensors(opt)
    from safetensors.torch import save_file

    (tmp_path / "ck").mkdir()
    save_file(tensors, str(tmp_path / "ck" / ckpt.OPTIMIZER_FILE), metadata=meta)
    fresh = torch.optim.AdamW(model.parameters(), lr=5.0)
    ckpt.load_optimizer(fresh, tmp_path / "ck")
    a, b = opt.state_dict(), fresh.state_dict()
    assert a["param_groups"] == b["param_groups"]
    for pid in a["state"]:
        for k, v in a["state"][pid].items():
            assert torch.equal(v, b["state"][pid][k])


def test_invalid_requests_are_refused_before_any_work(rte, tiny_model, tmp_path, data_dir):
    with pytest.raises(UsageError, match="training setting max_train_samples"):
        _train("pabee", rte, tiny_model, tmp_path, max_train_samples=0)
    stsb = get_task("stsb")
    tr = load_split(stsb, "dev", data_dir)
    with pytest.raises(UsageError, match="regression") as err:
        train(get_method("deebert"), stsb, tiny_model, tr, None, TrainConfig(), tmp_path)
    assert err.value.exit_code == 2
    with pytest.raises(UsageError, match="no stage"):
        _train("pabee", rte, tiny_model, tmp_path, stage_overrides={"nope": {"lr": 1.0}})
    assert not any(tmp_path.iterdir())  # nothing was written


def test_bf16_and_length_grouped_training_is_its_own_resumable_run(pabee_run, rte, tiny_model,
                                                                    tmp_path):
    fast = dict(precision="bf16", group_by_length=True)
    with pytest.raises(KeyboardInterrupt):
        _train("pabee", rte, tiny_model, tmp_path / "a", on_step=_stop_at(1, KeyboardInterrupt),
               **fast)
    resumed = _train("pabee", rte, tiny_model, tmp_path / "a", **fast)
    whole = _train("pabee", rte, tiny_model, tmp_path / "b", **fast)
    assert resumed.name == whole.name != pabee_run.name  # both settings are in the hash
    assert ckpt.read_state(whole).config["train"]["precision"] == "bf16"
    assert _same(_weights(resumed), _weights(whole))
    trained = _weights(whole)
    assert all(v.dtype == torch.float32 for v in trained.values())  # autocast, fp32 weights
    assert not _same(trained, _weights(pabee_run))
    history = ckpt.read_state(whole).history[-1]
    assert all(0 <= e["main"] <= 100 for e in history["exits"])
    with pytest.raises(UsageError, match="precision"):
        _train("pabee", rte, tiny_model, tmp_path / "c", precision="fp16")


@pytest.mark.parametrize("init", ["label_mean", "zero"])
def test_regression_heads_start_at_the_label_mean(tiny_model, data_dir, tmp_path, init):
    spec = get_task("stsb")
    tr = load_split(spec, "train", data_dir)
    cfg = TrainConfig(**{**SMALL, "epochs": 1, "max_train_samples": 8, "lr": 1e-9,
                         "regression_bias_init": init})
    path = train(get_method("pabee"), spec, tiny_model, tr, None, cfg, tmp_path)
    subset = tr.take(8, cfg.seed)
    mean = sum(subset.labels) / 8
    weights = _weights(path)
    biases = [v for k, v in weights.items() if k.endswith("classifier.bias")]
    assert len(biases) == 3  # one per exit of the 3-layer model
    for b in biases:  # lr 1e-9: the biases are where they started
        assert b.item() == pytest.approx(mean if init == "label_mean" else 0.0, abs=1e-5)
    state = ckpt.read_state(path)
    assert state.config["train"]["regression_bias_init"] == init


def test_classification_checkpoints_do_not_hash_the_regression_bias(rte):
    from eebench.train.config import run_config

    spec, tr, _ = rte
    cfg = TrainConfig(max_train_samples=16)
    config = run_config(get_method("pabee"), spec, "minilm-l6", tr.take(16, 42), cfg, "mean")
    assert "regression_bias_init" not in config["train"]
    from eebench.run.config import BenchConfig
    from eebench.run.grid import run_config_for

    def run_train(task: str) -> dict:
        config = BenchConfig(sweeps={"pabee": [1.0]}, max_seq_length=64)
        return run_config_for(config, "pabee", task, 1).model_dump()["train"]

    assert run_train("stsb")["regression_bias_init"] == "label_mean"  # in the run's name
    assert "regression_bias_init" not in run_train("rte")
    with pytest.raises(UsageError, match="regression_bias_init"):
        TrainConfig.parse({"regression_bias_init": "median"})


def test_a_registered_backbone_brings_its_learning_rate(tiny_model):
    from eebench.models.backbones import recommended_lr
    from eebench.run.config import BenchConfig
    from eebench.run.grid import run_config_for

    def run_train(model: str, train: dict) -> dict:
        config = BenchConfig(model=model, pooling="mean", sweeps={"pabee": [1.0]},
                             max_seq_length=64, train=train)
        return run_config_for(config, "pabee", "rte", 1).model_dump()["train"]

    assert recommended_lr("minilm-l6") == 1e-4 and recommended_lr("bert-base") is None
    assert run_train("minilm-l6", {})["lr"] == 1e-4  # recorded: part of the run's name
    assert run_train("minilm-l6", {"lr": 3e-5})["lr"] == 3e-5  # a given lr wins
    assert recommended_lr(tiny_model) is None and "lr" not in run_train(tiny_model, {})


def test_stage_settings():
    cfg = TrainConfig(lr=2e-5, heads_lr=1e-3, stage_overrides={"b": {"epochs": 1, "lr": 3e-4}})
    assert cfg.for_stage("a", heads_only=False).lr == 2e-5
    assert cfg.for_stage("a", heads_only=True).lr == 1e-3
    b = cfg.for_stage("b", heads_only=True)
    assert (b.lr, b.epochs) == (3e-4, 1)
    assert cfg.for_stage("b", heads_only=True).weight_decay == cfg.weight_decay  # not overridden
    with pytest.raises(UsageError, match="stage_overrides.a.batch_size"):
        TrainConfig.parse({"stage_overrides": {"a": {"batch_size": 4}}})
    with pytest.raises(UsageError, match="stage_overrides.a.lr: Input should be a finite"):
        TrainConfig.parse({"stage_overrides": {"a": {"lr": float("inf")}}})


# ---------------------------------------------------------------------------------------- CLI
def _cli(*args: str):
    return CliRunner().invoke(app, ["train", *args])


def test_cli_trains_a_tiny_model_end_to_end(tiny_model, data_dir, tmp_path):
    args = ["--method", "static", "--layers", "2", "--task", "rte", "--model", tiny_model,
            "--data-dir", str(data_dir), "--max-train-samples", "16", "--epochs", "1",
            "--batch-size", "8", "--max-seq-length", "32", "--out", str(tmp_path), "--json"]
    result = _cli(*args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    path = Path(report["checkpoint"])
    assert path.parent == tmp_path / Path(tiny_model).name / "static" / "rte"
    assert report["finished"] and report["global_step"] == 2
    assert [e["layer"] for e in report["dev"]] == [2] and "accuracy" in report["dev"][0]
    model, _, meta = load_trained(path)
    assert model.num_layers == 2 and meta["config"]["method_settings"] == {"layers": 2}
    again = _cli(*args)
    assert again.exit_code == 0 and "already trained" in again.stderr
    assert json.loads(again.stdout)["checkpoint"] == str(path)
    assert report["pooling"] == meta["config"]["pooling"] == model.pooling == "cls"
    # no sentence-transformers pooling config: [CLS] is the default, so saying it changes nothing
    same = _cli(*args, "--pooling", "cls")
    assert same.exit_code == 0 and json.loads(same.stdout)["checkpoint"] == str(path)
    # mean pooling is another model structure: another checkpoint
    mean = _cli(*args, "--pooling", "mean")
    assert mean.exit_code == 0, mean.output
    other = json.loads(mean.stdout)
    assert other["pooling"] == "mean" and other["config_hash"] != report["config_hash"]
    assert Path(other["checkpoint"]).parent == path.parent
    model, _, meta = load_trained(Path(other["checkpoint"]))
    assert model.pooling == meta["model_config"]["pooling"] == meta["config"]["pooling"] == "mean"
    assert {h.pooler.pooling for h in model.heads} == {"mean"}


def test_cli_usage_errors_exit_2(tiny_model, data_dir, tmp_path):
    base = ["--task", "rte", "--model", tiny_model, "--data-dir", str(data_dir),
            "--out", str(tmp_path)]
    result = _cli("--method", "pabee", *base, "--max-train-samples", "0")
    assert result.exit_code == 2 and "max_train_samples" in result.stderr
    result = _cli("--method", "deebert", "--task", "stsb", "--data-dir", str(data_dir),
                  "--model", tiny_model, "--out", str(tmp_path))
    assert result.exit_code == 2
    assert "cannot do regression" in result.stderr and len(result.stderr.splitlines()) == 1
    result = _cli("--method", "pabee", *base, "--setting", "oops")
    assert result.exit_code == 2 and "key=value" in result.stderr
    result = _cli("--method", "pabee", *base, "--stage", "joint.batch_size=4")
    assert result.exit_code == 2
    result = _cli("--method", "pabee", *base, "--pooling", "max")
    assert result.exit_code == 2 and "pooling" in result.stderr
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("poison", ["loss", "gradient"])
def test_a_diverging_run_stops_with_one_line_and_leaves_no_finished_checkpoint(
        poison, tiny_model, data_dir, tmp_path, monkeypatch):
    """From the second step on, the loss (or only its gradient) is NaN: training stops there with
    one error line, and the checkpoint stays at its last good step, unfinished, with finite
    weights."""
    from eebench.methods.pabee import PABEE

    real, steps = PABEE.loss, []

    def poisoned(self, exit_logits, labels, stage, is_regression, step=0):
        loss = real(self, exit_logits, labels, stage, is_regression, step)
        steps.append(1)
        if len(steps) < 2:
            return loss
        if poison == "loss":
            return loss * float("nan")
        zero = exit_logits[0].sum() * 0  # 0, on a path to every weight: d sqrt(x)/dx = inf at 0
        return loss + 0.0 * torch.sqrt(zero)  # a finite loss whose gradient is NaN

    monkeypatch.setattr(PABEE, "loss", poisoned)
    result = _cli("--method", "pabee", "--task", "rte", "--model", tiny_model, "--data-dir",
                  str(data_dir), "--max-train-samples", "24", "--batch-size", "8", "--epochs", "1",
                  "--max-seq-length", "32", "--save-every", "1", "--out", str(tmp_path))
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    last = result.stderr.strip().splitlines()[-1]
    what = "the loss is nan" if poison == "loss" else "the gradient norm is nan"
    assert last.startswith("error: training diverged: ") and f"{what} at step 2" in last
    [state_file] = tmp_path.rglob(ckpt.STATE_FILE)
    state = json.loads(state_file.read_text())
    assert not state["finished"] and state["global_step"] == 1
    model, _, _ = load_trained(state_file.parent, allow_unfinished=True)
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_sigterm_saves_as_ctrl_c_does_where_the_command_line_asks(pabee_run, rte, tiny_model,
                                                                   tmp_path):
    """With the command line's handler (`terminate_as_interrupt`), SIGTERM mid-epoch saves the
    step it reached, as Ctrl-C does, and the run resumes to the uninterrupted weights."""
    import os
    import signal

    from eebench.errors import Terminated, terminate_as_interrupt, terminates_as_interrupt

    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL), signal.getsignal(signal.SIGINT)
    try:
        terminate_as_interrupt()
        assert terminates_as_interrupt()

        def hook(step: int) -> None:
            if step == 1:
                os.kill(os.getpid(), signal.SIGTERM)

        with pytest.raises(Terminated):
            _train("pabee", rte, tiny_model, tmp_path, on_step=hook)
    finally:  # the command line's handlers (of Ctrl-C too) end with the test
        signal.signal(signal.SIGTERM, previous[0])
        signal.signal(signal.SIGINT, previous[1])
    path = tmp_path / pabee_run.relative_to(pabee_run.parents[3])
    state = ckpt.read_state(path)
    assert not state.finished and state.global_step == 1 and state.step_in_epoch == 1
    assert _train("pabee", rte, tiny_model, tmp_path) == path
    assert _same(_weights(path), _weights(pabee_run))


def test_a_terminated_command_says_so_in_one_line_and_exits_143(tiny_model, data_dir, tmp_path):
    """`eebench train` sent SIGTERM (`kill`, `timeout`, a scheduler's time limit): one line, exit
    code 143, and an unfinished checkpoint that the same command resumes."""
    import os
    import signal
    import subprocess
    import sys
    import time

    args = ["--method", "pabee", "--task", "rte", "--model", tiny_model, "--data-dir",
            str(data_dir), "--max-train-samples", "16", "--batch-size", "8", "--epochs", "1000",
            "--max-seq-length", "32", "--save-every", "1", "--out", str(tmp_path)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "eebench", "train", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not list(tmp_path.rglob(ckpt.STATE_FILE)) and proc.poll() is None:
            assert time.monotonic() < deadline, "no checkpoint within 2 minutes"
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 143, stderr
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1] == "terminated: rerun the same command to resume"
    [state_file] = tmp_path.rglob(ckpt.STATE_FILE)
    state = ckpt.read_state(state_file.parent)
    assert not state.finished and 0 < state.global_step < 2000
