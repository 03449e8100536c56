"""Parameters per exit (a shared module counted once), the environment record, timing helpers."""

from __future__ import annotations

import json
import math
import re
import subprocess

import numpy as np
import pytest
import torch

from eebench.measure import env as env_module
from eebench.measure.env import environment
from eebench.measure.params import ParamCounts, count_unique, params_per_exit, params_total
from eebench.measure.timing import (
    Stopwatch,
    device_description,
    peak_memory_mb,
    reset_peak_memory,
    summarize,
)
from eebench.models.multi_exit import ExitHead
from tests import tiny

D, C = 32, 2
POOLER = D * D + D  # dense weight + bias
CLASSIFIER = D * C + C


def _n(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


# -- parameters --------------------------------------------------------------------------------
def test_pabee_shared_pooler_is_counted_once():
    model = tiny.tiny_model("pabee", num_labels=C)
    backbone = _n(model.embeddings)
    per_layer = _n(model.layers[0])
    counts = params_per_exit(model)
    for j in range(model.num_exits):  # one pooler, however many heads ran it
        assert counts.per_exit[j] == backbone + (j + 1) * per_layer + POOLER + (j + 1) * CLASSIFIER
    assert counts.per_exit[-1] == counts.total == params_total(model) == _n(model)


def test_deebert_heads_each_own_a_pooler():
    model = tiny.tiny_model("deebert", num_labels=C)
    counts = params_per_exit(model)
    steps = np.diff(counts.per_exit)
    assert (steps == _n(model.layers[0]) + POOLER + CLASSIFIER).all()
    assert counts.per_exit[-1] == counts.total == _n(model)


def test_static_model_has_one_exit_with_every_parameter():
    model = tiny.tiny_model("static", num_labels=C, num_layers=2)
    counts = params_per_exit(model)
    assert counts.per_exit == [counts.total] == [_n(model)]


def test_a_shared_module_owned_by_a_later_head_is_still_counted():
    # the pooler is registered only under the last head; exit 0 runs it all the same
    model = tiny.tiny_model("pabee", num_labels=C, num_layers=2)
    shared = model.heads[0].pooler
    heads = [ExitHead(shared, model.config, C, own_pooler=(j == 1)) for j in range(2)]
    model.heads = torch.nn.ModuleList(heads)
    backbone = _n(model.embeddings) + _n(model.layers[0])
    counts = params_per_exit(model)
    assert counts.per_exit[0] == backbone + POOLER + CLASSIFIER
    assert counts.per_exit[1] == counts.total == params_total(model)


def test_count_unique_and_mean_used():
    lin = torch.nn.Linear(3, 4)
    assert count_unique([lin, lin]) == 16
    counts = ParamCounts(total=40, per_exit=[10, 20, 40])
    assert counts.mean_used(np.array([0, 2, 2, 1])) == pytest.approx(27.5)
    assert counts.mean_used(np.array([], dtype=int)) == 0.0


# -- environment -------------------------------------------------------------------------------
def test_environment_has_the_keys_and_is_json():
    env = environment()
    assert {"schema_version", "cpu", "cpu_cores", "cpu_cores_usable", "torch_threads", "gpu",
            "python", "packages", "os", "git"} <= set(env)
    assert {"eebench", "torch", "transformers", "fvcore"} <= set(env["packages"])
    assert env["packages"]["torch"] == torch.__version__
    assert env["torch_threads"] == torch.get_num_threads() >= 1
    assert env["python"].count(".") == 2
    assert (env["gpu"] is None) == (not torch.cuda.is_available())
    assert json.loads(json.dumps(env)) == env
    if env["git"] is not None:
        assert re.fullmatch(r"[0-9a-f]{40}", env["git"]["commit"])


def test_environment_outside_git_does_not_fail(monkeypatch):
    def no_git(*args, **kwargs):
        raise FileNotFoundError("git")

    monkeypatch.setattr(subprocess, "run", no_git)
    env = env_module.environment()
    assert env["git"] is None
    assert env["cpu"]


# -- timing ------------------------------------------------------------------------------------
def test_summarize_known_values():
    stats = summarize(list(range(1, 101)))
    assert stats["p50"] == pytest.approx(50.5)
    assert stats["p90"] == pytest.approx(90.1)
    assert stats["p99"] == pytest.approx(99.01)
    assert stats["mean"] == pytest.approx(50.5)
    assert stats["std"] == pytest.approx(math.sqrt((100**2 - 1) / 12))
    assert (stats["min"], stats["max"]) == (1, 100)
    assert summarize([]) == {}


class FakeClock:
    """A clock that only moves when the timed function says so."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_stopwatch_on_a_fake_clock():
    clock = FakeClock()
    watch = Stopwatch(clock=clock)
    for ms in (2, 5, 3):
        with watch.time():
            clock.sleep(ms / 1000)
    assert watch.raw_ms == pytest.approx([2, 5, 3])
    assert watch.summary()["p50"] == pytest.approx(3)


def test_device_description_names_the_threads():
    assert device_description("cpu") == f"cpu ({torch.get_num_threads()} threads)"


def test_cpu_peak_memory_sees_an_allocation():
    if not reset_peak_memory("cpu"):
        pytest.skip("this kernel cannot reset the RSS high-water mark")
    before = peak_memory_mb("cpu")
    block = np.ones(64 * 2**20 // 8)  # 64 MiB, touched
    after = peak_memory_mb("cpu")
    assert block.sum() > 0
    assert after - before >= 48


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_timing_and_peak_memory():
    x = torch.randn(1024, 1024, device="cuda")
    assert reset_peak_memory("cuda")
    watch = Stopwatch(device="cuda")
    for _ in range(5):
        with watch.time():
            y = x @ x
    assert device_description("cuda").startswith("cuda: ")
    assert len(watch.raw_ms) == 5 and all(v > 0 for v in watch.raw_ms)
    assert y.shape == x.shape
    assert peak_memory_mb("cuda") >= 4  # x and the product: 4 MiB each


def test_git_state_is_dirty_only_when_the_code_changed(tmp_path):
    from eebench.measure.env import git_state

    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path,
                       check=True, capture_output=True)

    (tmp_path / "eebench").mkdir()
    (tmp_path / "eebench" / "a.py").write_text("x = 1\n")
    (tmp_path / "docs.md").write_text("results\n")
    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "first")
    state = git_state(tmp_path)
    assert state is not None and re.fullmatch(r"[0-9a-f]{40}", state["commit"])
    assert state["dirty"] is False
    (tmp_path / "docs.md").write_text("new results\n")  # a written result is not a code change
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "points.jsonl").write_text("{}\n")
    assert git_state(tmp_path)["dirty"] is False
    (tmp_path / "eebench" / "a.py").write_text("x = 2\n")
    assert git_state(tmp_path)["dirty"] is True
    assert git_state(tmp_path / "eebench") is None  # not the top of a checkout
