"""Numerics are pinned: a tiny training run's trained weights and its stored predictions, byte for
byte. A change that moves them (an initialisation, the order of a sum, a data order, a dtype) fails
here and must say why in the CHANGELOG, then update the pins below.

Float kernels differ between CPU instruction sets (the order in which a matrix product
accumulates), so the bytes are pinned per torch version and CPU capability
(`torch.backends.cpu.get_cpu_capability()`); on a machine without a pin the test still checks that
two identical runs give identical bytes, and says which pin to add.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from eebench.cli import app
from tests import tiny

runner = CliRunner()

# (torch version, CPU capability) -> (sha256 of the trained weights, the sha256s of the
# predictions it was seen to give)
PINNED: dict[tuple[str, str], tuple[str, set[str]]] = {
    ("2.13.0", "AVX2"): ("18c4554f548094bc89e07e16ab301092505ae4307e5eedd79847bbc9edfa55ac",
                         {"83ec8f3973497a0416f236f760755ca660fcba0e94a606817e59fe1668cbe07a"}),
    # the same weights as AVX2's; the prediction bytes differ (the kernels sum in another order),
    # and differ again between an AMD EPYC and an Intel Xeon (AVX-512 BF16, no AMX)
    ("2.13.0", "AVX512"): ("18c4554f548094bc89e07e16ab301092505ae4307e5eedd79847bbc9edfa55ac",
                           {"e17adf353f82778e5bd4d86f2a7e0ded78d6d1df5d271b6b2cc17c1382573c49",
                            "1cb630bafadc22fb783e3625adee16415ace28269b0051555d3063e90073fb78"}),
}


def _tensor_digest(path) -> str:
    """sha256 over every tensor's name, dtype, shape and bytes, in name order (the file's own
    header layout is not what is pinned)."""
    from safetensors.numpy import load_file

    h = hashlib.sha256()
    for name, array in sorted(load_file(str(path)).items()):
        h.update(f"{name}:{array.dtype}:{array.shape}".encode())
        h.update(array.tobytes())
    return h.hexdigest()


def _train_and_run(tmp_path, backbone, data_dir) -> tuple[str, str]:
    args = ["run", "--method", "pabee", "--task", "rte", "--model", str(backbone),
            "--data-dir", str(data_dir), "--max-train-samples", "32", "--epochs", "1",
            "--max-seq-length", "32", "--max-eval-samples", "20", "--no-timing",
            "--precision", "fp32", "--seed", "7", "--json",
            "--out", str(tmp_path / "runs"), "--checkpoints", str(tmp_path / "ckpt")]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    run_dir = Path(json.loads(result.stdout)["run_dir"])
    weights = sorted((tmp_path / "ckpt").rglob("model.safetensors"))
    assert len(weights) == 1, weights
    return _tensor_digest(weights[0]), _tensor_digest(run_dir / "predictions.safetensors")


@pytest.mark.slow  # two tiny trainings: about half a minute on two cores
def test_a_tiny_training_run_is_reproducible_byte_for_byte(tmp_path, data_dir):
    import torch

    backbone = tiny.save_tiny_backbone(tmp_path / "tiny-bert", num_layers=2)
    first = _train_and_run(tmp_path / "a", backbone, data_dir)
    second = _train_and_run(tmp_path / "b", backbone, data_dir)
    assert first == second  # the same command twice: the same bytes
    key = (torch.__version__.split("+")[0], torch.backends.cpu.get_cpu_capability())
    if key not in PINNED:
        pytest.skip(f"no pin for {key}: add {key!r}: {first!r} to PINNED after checking that "
                    "the numerics are meant to be these")
    weights, predictions = PINNED[key]
    assert first[0] == weights and first[1] in predictions, (
        "trained weights or predictions moved: say why in the CHANGELOG and update PINNED")
