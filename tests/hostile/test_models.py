"""`eebench flops`, `train` and `run` given directories that are not models, broken configs and
bad options: refused in one line before any work, nothing written."""

from __future__ import annotations

import shutil

import pytest

from tests.hostile.conftest import FAST, run_args
from tests.hostile.helpers import fails, unchanged

# which broken model directory, and what the one line says
BROKEN = [
    ("not_a_model", "not a model directory (no config.json)"),
    ("heads", "hidden_size 100 is not a multiple of num_attention_heads 7"),
    ("pickled", "pytorch_model.bin: pickled weights; eebench never unpickles"),
    ("binary", "config.json: not UTF-8 text"),
    ("not_json", "config.json: not JSON"),
    ("dir_config", "not a model directory (config.json is not a file)"),
    ("negative", "intermediate_size: -4 is not an integer"),
    ("no_type", "no model_type"),
]


@pytest.mark.parametrize("broken,needle", BROKEN)
def test_flops_refuses_a_directory_that_is_not_a_model(models, broken, needle):
    path = getattr(models, broken)
    with unchanged(path):
        fails("flops", "--model-config", path, code=1, needle=needle)


@pytest.mark.parametrize("args,needle", [
    (["--num-labels", "100000000000000000000"], "--num-labels must be in 1..1,000,000"),
    (["--seq-len", "0"], "--seq-len must be in"),
    (["--convention", "macs"], "unknown FLOPs convention"),
    (["--pooling", "max"], "unknown pooling"),
])
def test_flops_bad_options_are_usage_errors(bench, args, needle):
    with unchanged(bench.backbone):
        fails("flops", "--model-config", bench.backbone, *args, code=2, needle=needle)


@pytest.mark.parametrize("broken,needle", [BROKEN[0], BROKEN[1], BROKEN[2]])
def test_train_refuses_a_model_directory_before_any_work(models, bench, tmp_path, broken,
                                                         needle):
    with unchanged(tmp_path, getattr(models, broken)):
        fails("train", "--method", "pabee", "--task", "rte", "--model", getattr(models, broken),
              "--data-dir", bench.data, *FAST[:2], "--out", tmp_path / "ckpt", code=1,
              needle=needle)


def test_train_damaged_weights_are_one_line(models, bench, tmp_path):
    with unchanged(tmp_path):
        fails("train", "--method", "pabee", "--task", "rte", "--model", models.damaged,
              "--data-dir", bench.data, *FAST[:2], "--out", tmp_path / "ckpt", code=1,
              banner=True, needle="cannot load the model directory")


def test_train_refuses_a_directory_in_place_of_the_dev_file(bench, rte, tmp_path):
    (rte / "RTE" / "dev.tsv").unlink()
    (rte / "RTE" / "dev.tsv").mkdir()
    with unchanged(tmp_path):
        fails("train", "--method", "pabee", "--task", "rte", "--model", bench.backbone,
              "--data-dir", rte, *FAST[:2], "--out", tmp_path / "ckpt", code=1,
              needle="dev.tsv: is a directory, not a file")


def test_train_out_naming_a_file_is_one_line(bench, tmp_path):
    a_file = tmp_path / "ckpt"
    a_file.write_text("not a directory\n")
    with unchanged(tmp_path):
        fails("train", "--method", "pabee", "--task", "rte", "--model", bench.backbone,
              "--data-dir", bench.data, *FAST[:2], "--out", a_file, code=1,
              needle=f"{a_file}: cannot write checkpoints (it is a file)")


@pytest.mark.parametrize("args,needle", [
    (["--method", "nope", "--task", "rte"], "unknown method 'nope'"),
    (["--method", "pabee", "--task", "rtee"], "unknown task 'rtee'"),
    (["--method", "pabee", "--task", "rte", "--setting", "junk"], "not key=value"),
    (["--method", "pabee", "--task", "rte", "--lr", "nan"], "finite"),
    (["--method", "pabee"], "Missing option '--task'"),
])
def test_train_usage_errors(bench, tmp_path, args, needle):
    with unchanged(tmp_path):
        fails("train", *args, "--model", bench.backbone, "--out", tmp_path / "ckpt", code=2,
              needle=needle)


@pytest.mark.parametrize("broken,needle", [BROKEN[0], BROKEN[1], BROKEN[2], BROKEN[6]])
def test_run_refuses_a_model_directory_before_any_work(models, bench, tmp_path, broken, needle):
    with unchanged(tmp_path, getattr(models, broken)):
        fails(*run_args(getattr(models, broken), bench.data, tmp_path, "--method", "pabee"),
              code=1, needle=needle)


def test_run_refuses_a_binary_or_a_directory_as_config(bench, tmp_path):
    binary = tmp_path / "bench.toml"
    binary.write_bytes(bytes(range(256)))
    with unchanged(tmp_path):
        fails(*run_args(bench.backbone, bench.data, tmp_path, "--config", binary), code=1,
              needle="not UTF-8 text")
        fails(*run_args(bench.backbone, bench.data, tmp_path, "--config", tmp_path), code=1,
              needle=f"{tmp_path}: is a directory, not a file")


@pytest.mark.parametrize("toml,needle", [
    ("methods = [", "not valid TOML"),
    ('methods = ["pabee"]\nepochs = "many"\n', "setting epochs"),
    ('[train]\nlr = -1\n', "training setting lr"),
], ids=["not-toml", "unknown-setting", "negative-lr"])
def test_run_refuses_a_bad_config_file(bench, tmp_path, toml, needle):
    config = tmp_path / "bench.toml"
    config.write_text(toml)
    with unchanged(tmp_path):
        fails(*run_args(bench.backbone, bench.data, tmp_path, "--config", config, "--method",
                        "pabee"), code=2, needle=needle)


@pytest.mark.parametrize("args,needle", [
    (["--method", "pabee", "--sweep", "1,two"], "not a comma-separated list"),
    (["--method", "pabee", "--sweep", "1e999"], "finite"),
    (["--method", "pabee", "--seed", "100000000000000000000"], "seeds"),
    (["--method", "pabee", "--split", "train"], "split"),
])
def test_run_usage_errors(bench, tmp_path, args, needle):
    with unchanged(tmp_path):
        fails(*run_args(bench.backbone, bench.data, tmp_path, *args), code=2, needle=needle)


def test_run_out_naming_a_file_is_refused_before_training(bench, tmp_path):
    a_file = tmp_path / "runs"
    a_file.write_text("not a directory\n")
    with unchanged(tmp_path):
        fails(*run_args(bench.backbone, bench.data, tmp_path, "--method", "pabee"), code=1,
              needle=f"{a_file}: cannot write runs (it is a file)")
    assert not (tmp_path / "ckpt").exists()  # refused before any training


@pytest.mark.parametrize("content,needle", [
    (b'{"model": "tiny", ', "summary.json: not JSON"),
    (bytes(range(256)), "summary.json: not UTF-8 text"),
], ids=["not-json", "binary"])
def test_run_refuses_a_finished_run_with_a_broken_summary(bench, tmp_path, content, needle):
    shutil.copytree(bench.root / "runs", tmp_path / "runs")
    [summary] = [p for p in (tmp_path / "runs").rglob("summary.json")
                 if p.parent.name == bench.pabee.name]
    summary.write_bytes(content)
    with unchanged(tmp_path):
        fails(*run_args(bench.backbone, bench.data, tmp_path, "--method", "pabee"), code=1,
              banner=True, needle=needle)
