"""One training job over two processes (gloo on CPU, real processes): it trains as one process does
on the same global batches, only its main process writes, its checkpoints resume with another
number of processes, and launches that cannot work are refused in one line.

The tiny BERT here has no dropout: with dropout, each process draws its own masks, and the runs
agree only in distribution. Without it, two processes and one compute the same sums in another
order: each process pads its rows to its own longest, a batch's loss is the weighted sum of two
means instead of one mean, and the gradients are added across processes. That is float32 rounding
(about 1e-7 of each value) per step. TOL = 1e-6 on the loss curve (values near 0.69) and on every
weight (of order 1) after six AdamW steps at lr 1e-3: measured, the largest differences are 6e-8
(loss) and 1.5e-8 (weight), while the curve itself moves by 5e-4, so a step computed on the wrong
rows or with the wrong weighting fails it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from eebench.cli import app
from eebench.methods.base import get_method
from eebench.tasks.catalog import get_task
from eebench.tasks.loaders import load_split
from eebench.train import checkpoint as ckpt
from eebench.train.config import TrainConfig
from eebench.train.distributed import launch
from eebench.train.loop import train

TOL = 1e-6  # losses and weights: float32 rounding in another summation order (see above)
# 21 rows in batches of 8: 8, 8, 5; over two processes the last batch splits 3 and 2.
SMALL = dict(epochs=2, batch_size=8, max_train_samples=21, max_seq_length=32, lr=1e-3,
             eval_every=1, eval_batch_size=32)
# 17 rows: 8, 8, 1; the second process has no row of the last batch (a stand-in of weight 0).
ODD = {**SMALL, "max_train_samples": 17}


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch thread here, and in the launched processes (OMP_NUM_THREADS)."""
    before, env = torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")
    torch.set_num_threads(1)
    os.environ["OMP_NUM_THREADS"] = "1"
    yield
    torch.set_num_threads(before)
    if env is None:
        os.environ.pop("OMP_NUM_THREADS", None)
    else:
        os.environ["OMP_NUM_THREADS"] = env


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory, minilm_path) -> str:
    """A tiny random BERT without dropout, with the MiniLM tokenizer."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=3,
                        num_attention_heads=2, intermediate_size=32, max_position_embeddings=64,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    path = tmp_path_factory.mktemp("tiny-bert-no-dropout")
    BertModel(config).save_pretrained(path)
    AutoTokenizer.from_pretrained(str(minilm_path)).save_pretrained(path)
    return str(path)


def train_rte(model: str, data_dir: str, out: str, settings: dict, stop_at: int | None = None,
              log: str | None = None) -> str | None:
    """PABEE on a slice of RTE, in this process or in a launched one (then as its part of the
    job). `stop_at`: Ctrl-C after that step (None returned); `log`: a file that gets the rank of
    the process for every checkpoint written."""
    if log is not None:
        real = ckpt.save_checkpoint

        def logged(*args, **kwargs):
            with open(log, "a", encoding="utf-8") as f:
                f.write(os.environ.get("RANK", "0") + "\n")
            return real(*args, **kwargs)

        ckpt.save_checkpoint = logged

    def stop(step: int) -> None:
        if step == stop_at:
            raise KeyboardInterrupt

    spec = get_task("rte")
    tr, dev = load_split(spec, "train", data_dir), load_split(spec, "dev", data_dir).take(16, 0)
    try:
        return str(train(get_method("pabee"), spec, model, tr, dev, TrainConfig.parse(settings),
                         Path(out), on_step=stop if stop_at else None))
    except KeyboardInterrupt:
        return None


def _losses(path: Path) -> list[float]:
    """The training loss curve: the epoch's mean loss so far, after every step."""
    state = json.loads((path / ckpt.STATE_FILE).read_text())
    return [h["train_loss"] for h in state["history"]]


def _max_weight_diff(a: Path, b: Path) -> float:
    wa, wb = load_file(str(a / ckpt.MODEL_FILE)), load_file(str(b / ckpt.MODEL_FILE))
    assert wa.keys() == wb.keys()
    return max((wa[k] - wb[k]).abs().max().item() for k in wa)


def _max_loss_diff(a: Path, b: Path, steps: range = range(1, 7)) -> float:
    """The largest difference of the two loss curves at global steps `steps`."""
    la, lb = _losses(a), _losses(b)
    assert len(la) == len(lb) == 6
    return max(abs(la[k - 1] - lb[k - 1]) for k in steps)


@pytest.fixture(scope="module")
def one_process(tiny_model, data_dir, tmp_path_factory) -> dict[str, Path]:
    """The single-process runs the others are compared with."""
    out = tmp_path_factory.mktemp("one")
    return {name: Path(train_rte(tiny_model, str(data_dir), str(out / name), settings))
            for name, settings in (("small", SMALL), ("odd", ODD))}


@pytest.mark.slow  # processes launched over torch.distributed
def test_two_processes_train_as_one_and_only_the_main_one_writes(one_process, tiny_model,
                                                                   data_dir, tmp_path):
    log = tmp_path / "writes.log"
    path = Path(launch(2, train_rte, tiny_model, str(data_dir), str(tmp_path / "two"), SMALL,
                       None, str(log)))
    one = one_process["small"]
    # the same configuration, the same name: the number of processes is not part of it
    assert path.relative_to(tmp_path / "two") == one.relative_to(one.parents[3])
    assert json.loads((path / ckpt.STATE_FILE).read_text())["finished"]
    loss_diff, weight_diff = _max_loss_diff(path, one), _max_weight_diff(path, one)
    print(f"two processes vs one: max loss difference {loss_diff:.3g}, "
          f"max weight difference {weight_diff:.3g}")
    assert loss_diff < TOL and weight_diff < TOL
    assert max(_losses(one)) - min(_losses(one)) > 10 * TOL  # the curve moves far more than TOL
    # a save at every epoch end and at the stage end, each by the main process alone
    assert log.read_text().split() == ["0", "0"]
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no stray directory


@pytest.mark.slow
def test_checkpoints_resume_with_another_number_of_processes(one_process, tiny_model, data_dir,
                                                             tmp_path):
    """Each ends with the weights of an uninterrupted run. The loss curve is compared over the
    epoch that the interruption did not cut: an epoch's mean loss restarts with a resumed run."""
    whole = one_process["odd"]
    # two processes stop after step 2 (of 3 in the first epoch); one process finishes
    out = str(tmp_path / "two-then-one")
    assert launch(2, train_rte, tiny_model, str(data_dir), out, ODD, 2) is None
    [state] = Path(out).rglob(ckpt.STATE_FILE)
    assert json.loads(state.read_text())["global_step"] == 2
    path = Path(train_rte(tiny_model, str(data_dir), out, ODD))
    assert _max_weight_diff(path, whole) < TOL
    assert _max_loss_diff(path, whole, range(4, 7)) < TOL
    # one process stops after step 4 (the first of the second epoch); two processes finish
    out = str(tmp_path / "one-then-two")
    assert train_rte(tiny_model, str(data_dir), out, ODD, 4) is None
    path = Path(launch(2, train_rte, tiny_model, str(data_dir), out, ODD))
    assert _max_weight_diff(path, whole) < TOL
    assert _max_loss_diff(path, whole, range(1, 4)) < TOL


# ---------------------------------------------------------------------------------------- CLI
STATIC = ("--method", "static", "--layers", "2")


def _args(tiny_model: str, data_dir: Path, out: Path, *extra: str,
          method: tuple[str, ...] = STATIC) -> list[str]:
    return ["train", *method, "--task", "rte", "--model", tiny_model, "--data-dir", str(data_dir),
            "--max-train-samples", "16", "--epochs", "1", "--batch-size", "8",
            "--max-seq-length", "32", "--out", str(out), *extra]


@pytest.mark.slow
def test_cli_trains_over_processes_and_one_process_finds_the_checkpoint(tiny_model, data_dir,
                                                                         tmp_path):
    """DeeBERT: two stages, the second on a frozen backbone with the heads alone."""
    args = _args(tiny_model, data_dir, tmp_path, "--json", method=("--method", "deebert"))
    result = CliRunner().invoke(app, [*args, "--processes", "2"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["finished"] and report["processes"] == 2 and report["global_step"] == 4
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0 and "already trained" in again.stderr
    assert json.loads(again.stdout)["checkpoint"] == report["checkpoint"]


@pytest.mark.parametrize(("extra", "says"), [
    (["--processes", "3"], "the batch size 8 does not split over 3 processes"),
    (["--processes", "2", "--device", "mps"], "--device mps cannot run several processes"),
    (["--processes", "2", "--device", "cuda:0"], "--device cuda:0 is one GPU"),
    (["--processes", "0"], "--processes must be at least 1"),
    (["--device", "nope"], "--device 'nope' is not a device"),
])
def test_launches_that_cannot_work_are_refused_in_one_line(extra, says, tiny_model, data_dir,
                                                           tmp_path):
    result = CliRunner().invoke(app, _args(tiny_model, data_dir, tmp_path / "out", *extra))
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and says in result.stderr, result.stderr
    assert not (tmp_path / "out").exists()


def _eebench(args: list[str], **env: str) -> subprocess.Popen:
    """`python -m eebench ARGS` as a process of its own, with `env` added to its environment."""
    environ = {k: v for k, v in os.environ.items()
               if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    return subprocess.Popen([sys.executable, "-m", "eebench", *args], env={**environ, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # processes launched over torch.distributed
def test_processes_that_would_all_act_as_the_main_one_are_refused(tiny_model, data_dir,
                                                                   tmp_path):
    out = tmp_path / "out"
    args = _args(tiny_model, data_dir, out)
    # a launcher's world size, but no rank: every process would think it is the main one
    mains = [_eebench(args, WORLD_SIZE="2") for _ in range(2)]
    # a world size that does not divide the batch size; --processes inside a launched job
    odd = _eebench(args, WORLD_SIZE="3", RANK="0", LOCAL_RANK="0")
    nested = _eebench([*args, "--processes", "2"], WORLD_SIZE="2", RANK="0")
    # `eebench run` measures in one process
    run = _eebench(["run", "--method", "static", "--task", "rte", "--data-dir", str(data_dir),
                    "--out", str(out)], WORLD_SIZE="2", RANK="0")
    for proc, says in [*((m, "each would act as the main process") for m in mains),
                       (odd, "the batch size 8 does not split over 3 processes"),
                       (nested, "--processes 2 inside a job of 2 processes"),
                       (run, "`eebench run` measures in one process")]:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 2, err
        assert err.strip().splitlines()[-1].startswith("error: ") and says in err, err
    assert not out.exists()


@pytest.mark.slow  # processes launched over torch.distributed
def test_two_processes_that_both_say_rank_0_do_not_both_train(tiny_model, data_dir, tmp_path):
    """Both claim rank 0 of a job of two at one address: the later one cannot serve the job's
    rendezvous and stops in one line; the other would wait for its missing peer (stopped here)."""
    env = dict(WORLD_SIZE="2", RANK="0", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(_free_port()))
    args = _args(tiny_model, data_dir, tmp_path / "out")
    procs = [_eebench(args, **env) for _ in range(2)]
    try:
        deadline = time.monotonic() + 120
        while all(p.poll() is None for p in procs) and time.monotonic() < deadline:
            time.sleep(0.2)
        [stopped] = [p for p in procs if p.poll() is not None]
        _, err = stopped.communicate()
        assert stopped.returncode == 2, err
        assert "cannot serve the job's rendezvous" in err.strip().splitlines()[-1], err
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.communicate()
    assert not list((tmp_path / "out").rglob(ckpt.STATE_FILE))


def test_the_help_does_not_load_accelerate():
    code = ("import sys; from eebench.cli import app; from typer.testing import CliRunner; "
            "assert CliRunner().invoke(app, ['train', '--help']).exit_code == 0; "
            "print(sorted(m for m in ('accelerate', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
