"""Training precision by hardware: `auto` is bf16 where the device multiplies bfloat16 natively
fast (a CUDA GPU of compute capability 8.0+, a CPU with AMX, an AMD CPU with AVX-512 BF16), fp32
elsewhere; a run is
named by the precision it trains in, and the runs made before `auto` keep their names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from eebench.cli import app
from eebench.measure import env
from eebench.run import artifacts as R
from eebench.run.config import BenchConfig, load_config, merge
from eebench.run.grid import expand
from eebench.train.checkpoint import STATE_FILE
from eebench.train.config import TrainConfig
from eebench.train.precision import resolve
from tests import tiny
from tests.cli import tiny_run
from tests.committed import is_decoder

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()
AMX = "fpu sse2 avx avx2 avx512f avx512bw avx512_bf16 amx_bf16 amx_tile amx_int8".split()
AVX512_BF16 = "fpu sse2 avx avx2 avx512f avx512bw avx512_bf16".split()
AVX2 = "fpu sse2 avx avx2 fma".split()


def pretend(monkeypatch, cpu: list[str], cuda: bool | None = None,
            vendor: str = "GenuineIntel") -> None:
    """This machine's CPU flags and vendor and, with `cuda`, a CUDA GPU with (True) or without
    native bf16."""
    monkeypatch.setattr(env, "cpu_flags", lambda: frozenset(cpu))
    monkeypatch.setattr(env, "cpu_vendor", lambda: vendor)
    monkeypatch.setattr(env, "cuda_bf16", lambda device=None: bool(cuda))
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda is not None)


INTEL, AMD = "GenuineIntel", "AuthenticAMD"


@pytest.mark.parametrize(("cpu", "vendor", "cuda", "device", "expected"), [
    (AMX, INTEL, None, None, "bf16"),  # Sapphire Rapids and later: AMX tiles
    (AVX512_BF16, AMD, None, "cpu", "bf16"),  # AMD Zen 4 on: AVX-512 BF16, measured fast
    (AVX512_BF16, INTEL, None, "cpu", "fp32"),  # Intel without AMX: measured slower than fp32
    (AVX512_BF16, None, None, None, "fp32"),  # vendor unknown: the flag alone is no promise
    (AVX2, AMD, None, None, "fp32"),  # AVX2 only: bf16 would be emulated
    (AVX2, INTEL, True, None, "bf16"),  # an A100/H100 (compute capability 8.0+), the default
    (AVX2, INTEL, True, "cuda:0", "bf16"),
    (AVX2, INTEL, False, None, "fp32"),  # a V100 or T4: no native bf16
    (AMX, INTEL, False, "cuda", "fp32"),  # the GPU decides where training runs on it
    (AVX2, INTEL, True, "cpu", "fp32"),  # --device cpu on a GPU machine: the CPU decides
    (AMX, INTEL, None, "mps", "fp32"),
])
def test_auto_resolves_by_the_hardware_training_runs_on(monkeypatch, cpu, vendor, cuda, device,
                                                        expected):
    pretend(monkeypatch, cpu, cuda, vendor)
    assert resolve("auto", device) == expected
    assert env.bf16_hardware()["cpu_vendor"] == vendor
    assert env.bf16_hardware()["cpu_bf16"] == [f for f in ("amx_bf16", "avx512_bf16")
                                               if f in cpu]
    for asked in ("fp32", "bf16"):  # asked for by name: as asked, whatever the hardware
        assert resolve(asked, device) == asked


def test_a_config_records_the_precision_it_trains_in(monkeypatch):
    pretend(monkeypatch, AVX2)
    fp32 = TrainConfig.parse({"epochs": 1, "precision": "auto"}).with_precision()
    assert fp32.precision == "fp32" and fp32.given() == {"epochs": 1}
    assert fp32.hashed()["precision"] == "fp32"  # the checkpoint is named by it
    named = TrainConfig.parse({"epochs": 1, "precision": "fp32"}).with_precision()
    assert named.given() == fp32.given()  # fp32 however asked: one name
    pretend(monkeypatch, AMX)
    bf16 = TrainConfig.parse({"epochs": 1, "precision": "auto"}).with_precision()
    assert bf16.given() == {"epochs": 1, "precision": "bf16"}
    assert bf16.hashed()["precision"] == "bf16"
    assert TrainConfig.parse({"epochs": 1, "precision": "bf16"}).with_precision().given() == \
        bf16.given()
    assert TrainConfig().precision == "fp32"  # built in code: the same on every machine
    assert TrainConfig().with_precision().given() == {}


def _keys(config: BenchConfig) -> list[str]:
    return [run.key() for run in expand(config).runs]


def test_auto_is_the_default_of_a_run_and_names_it_by_what_it_resolved_to(monkeypatch):
    grid = merge(BenchConfig(), {"methods": ["pabee"], "tasks": ["rte", "stsb"], "seeds": [1],
                                 "train": {"epochs": 1}, "sweeps": {"pabee": [1.0, 2.0]}})
    asked = {p: merge(grid, {"train": {"precision": p}}) for p in ("fp32", "bf16", "auto")}
    pretend(monkeypatch, AVX2)
    on_avx2 = _keys(grid)
    assert on_avx2 == _keys(asked["fp32"]) == _keys(asked["auto"])
    assert all("precision" not in r.model_dump(mode="json")["train"] for r in expand(grid).runs)
    pretend(monkeypatch, AMX)
    on_amx = _keys(grid)
    assert on_amx == _keys(asked["bf16"]) == _keys(asked["auto"])
    assert set(on_amx).isdisjoint(on_avx2)  # a bf16 run never takes an fp32 run's name
    assert _keys(asked["fp32"]) == on_avx2  # named: the same run on every machine
    pretend(monkeypatch, AVX2, cuda=True)
    assert _keys(grid) == on_amx  # a GPU with native bf16


@pytest.mark.parametrize("cpu", [AVX2, AMX], ids=["avx2", "amx"])
def test_the_committed_benchmark_keeps_its_run_names_on_any_cpu(monkeypatch, cpu, minilm_path):
    """elue-minilm.toml names its precision (bf16): its grid expands to the committed runs
    whatever the machine; every committed config.json still loads to its own name."""
    pretend(monkeypatch, cpu)
    results = ROOT / "benchmarks" / "results" / "elue-minilm"
    from eebench.run.execute import run_dir_for

    methods = ["static", "deebert", "pabee"]
    config = merge(load_config(ROOT / "benchmarks" / "elue-minilm.toml"), {"methods": methods})
    dirs = {run_dir_for(run, results) for run in expand(config).runs}
    committed = {p.parent for m in methods
                 for p in results.glob(f"minilm-l6/{m}/*/*/summary.json")}
    assert dirs and dirs == committed
    for path in sorted((ROOT / "benchmarks" / "results").glob("**/config.json")):
        if is_decoder(path.parent):  # a decoder run's config: tests/test_decoder_audit.py
            continue
        assert R.RunConfig.model_validate_json(path.read_text()).key() == path.parent.name


@pytest.fixture(scope="module")
def backbone(tmp_path_factory):
    return tiny.save_tiny_backbone(tmp_path_factory.mktemp("tiny-bert"), num_layers=2)


def _run(tmp_path, backbone, data_dir, *extra) -> Path:
    return Path(tiny_run(tmp_path, backbone, data_dir, "--method", "pabee", *extra,
                         train_samples=16, max_seq_length=32, eval_samples=8,
                         time_samples=None)["run_dir"])


def test_a_run_records_its_precision_and_the_cpu_it_was_resolved_on(tmp_path, backbone, data_dir,
                                                                    monkeypatch):
    monkeypatch.chdir(tmp_path)
    pretend(monkeypatch, AMX)
    bf16 = _run(tmp_path, backbone, data_dir)
    written = json.loads((bf16 / R.ENV_FILE).read_text())
    assert written["training_precision"] == "bf16"
    assert written["cpu_bf16"] == ["amx_bf16", "avx512_bf16"]
    assert written["cpu_capability"] == env.cpu_capability() and written["cuda_bf16"] is None
    assert R.read_run(bf16).config.train.precision == "bf16"
    [variant] = R.read_run(bf16).summary.variants
    state = json.loads((Path(variant.checkpoint) / STATE_FILE).read_text())
    assert state["config"]["train"]["precision"] == "bf16"  # the training record
    pretend(monkeypatch, AVX2)
    fp32 = _run(tmp_path, backbone, data_dir)
    assert fp32 != bf16
    assert json.loads((fp32 / R.ENV_FILE).read_text())["training_precision"] == "fp32"
    assert "precision" not in json.loads((fp32 / R.CONFIG_FILE).read_text())["train"]
    assert _run(tmp_path, backbone, data_dir, "--precision", "fp32") == fp32  # already done


def test_train_prints_the_precision_it_resolved_to(tmp_path, backbone, data_dir, monkeypatch):
    pretend(monkeypatch, AMX)
    result = runner.invoke(app, [
        "train", "--method", "pabee", "--task", "rte", "--model", str(backbone),
        "--data-dir", str(data_dir), "--max-train-samples", "16", "--epochs", "1",
        "--max-seq-length", "32", "--out", str(tmp_path / "ckpt"), "--json"])
    assert result.exit_code == 0, result.output + str(result.exception)
    out = json.loads(result.stdout)
    assert out["precision"] == "bf16"
    assert out["cpu_capability"] == f"{env.cpu_capability()} + amx_bf16, avx512_bf16"
    assert "bf16 (CPU " in result.stderr
