"""The material hostile cases start from: real runs of a tiny random backbone on real RTE rows
(8 to train, 8 to evaluate, no timing), a reference, a submission, and broken model directories.
Built once per session; no case may change them (`unchanged` checks)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import tiny
from tests.hostile.helpers import invoke

FAST = ("--max-train-samples", "8", "--epochs", "1", "--max-seq-length", "32",
        "--max-eval-samples", "8", "--no-timing")


def run_args(backbone: Path, data_dir: Path, root: Path, *extra: object) -> list[object]:
    return ["run", "--task", "rte", "--model", backbone, "--data-dir", data_dir, *FAST,
            "--out", root / "runs", "--checkpoints", root / "ckpt", *extra]


def _run(backbone: Path, data_dir: Path, root: Path, *extra: object) -> Path:
    result = invoke(*run_args(backbone, data_dir, root, *extra), "--json")
    assert result.exit_code == 0, result.output + repr(result.exception)
    return Path(json.loads(result.stdout)["run_dir"])


@pytest.fixture(scope="session")
def bench(tmp_path_factory, data_dir) -> SimpleNamespace:
    root = tmp_path_factory.mktemp("hostile-bench")
    backbone = tiny.save_tiny_backbone(root / "tiny", num_layers=2)
    pabee = _run(backbone, data_dir, root, "--method", "pabee")
    static = _run(backbone, data_dir, root, "--method", "static", "--sweep", "1,2")
    test = _run(backbone, data_dir, root, "--method", "pabee", "--split", "test")
    reference = root / "reference.json"
    result = invoke("reference", "build", static, "--out", reference)
    assert result.exit_code == 0, result.output
    submissions = root / "submissions"
    result = invoke("submit", pabee, "--data-dir", data_dir, "--out",
                    submissions / "tiny-pabee.json")
    assert result.exit_code == 0, result.output
    return SimpleNamespace(root=root, backbone=backbone, data=data_dir, pabee=pabee,
                           static=static, test=test, reference=reference,
                           submissions=submissions,
                           submission=submissions / "tiny-pabee.json")


def _edit_config(path: Path, **changes) -> Path:
    config = json.loads((path / "config.json").read_text())
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    (path / "config.json").write_text(json.dumps(config))
    return path


@pytest.fixture(scope="session")
def models(tmp_path_factory, bench) -> SimpleNamespace:
    """Model directories that are not loadable models, each broken in one way."""
    import torch
    from safetensors.torch import load_file

    root = tmp_path_factory.mktemp("hostile-models")

    def copy(name: str) -> Path:
        return Path(shutil.copytree(bench.backbone, root / name))

    not_a_model = root / "etc"
    not_a_model.mkdir()
    (not_a_model / "hosts").write_text("127.0.0.1 localhost\n")
    pickled = copy("pickled")
    weights = pickled / "model.safetensors"
    torch.save(load_file(str(weights)), pickled / "pytorch_model.bin")  # a pickle
    weights.unlink()
    binary = copy("binary-config")
    (binary / "config.json").write_bytes(bytes(range(256)))
    not_json = copy("not-json-config")
    (not_json / "config.json").write_text('{"model_type": "bert", ')
    dir_config = copy("config-is-a-directory")
    (dir_config / "config.json").unlink()
    (dir_config / "config.json").mkdir()
    damaged = copy("damaged-weights")
    (damaged / "model.safetensors").write_bytes(b"\x00" * 64)
    return SimpleNamespace(
        not_a_model=not_a_model, pickled=pickled, binary=binary, not_json=not_json,
        dir_config=dir_config, damaged=damaged,
        heads=_edit_config(copy("hidden-100-heads-7"), hidden_size=100, num_attention_heads=7),
        negative=_edit_config(copy("negative-size"), intermediate_size=-4),
        no_type=_edit_config(copy("no-model-type"), model_type=None),
    )


@pytest.fixture
def rte(tmp_path, data_dir) -> Path:
    """A data directory holding a copy of the real RTE files, for a case to break."""
    root = tmp_path / "data"
    shutil.copytree(data_dir / "RTE", root / "RTE")
    return root


def copy_run(run: Path, where: Path) -> Path:
    """A copy of run directory `run` under `where`, for a case to damage."""
    return Path(shutil.copytree(run, where / run.name))
