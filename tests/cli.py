"""The one way tests call the command line: `invoke` runs `eebench ARGS` in process (arguments
as strings, stdout and stderr apart), `tiny_run` a small `eebench run` that must succeed."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from eebench.cli import app

runner = CliRunner()


def invoke(*args: object, env: dict[str, str] | None = None, catch_exceptions: bool = True):
    return runner.invoke(app, [str(a) for a in args], env=env, catch_exceptions=catch_exceptions)


def tiny_run(root: Path, backbone: Path, data_dir: Path, *extra: object, task: str = "rte",
             train_samples: int = 32, max_seq_length: int = 48, eval_samples: int | None = 20,
             time_samples: int | None = 6) -> dict:
    """`eebench run` on a tiny budget, runs and checkpoints under `root`; its --json output.
    `eval_samples` None: the whole split; `time_samples` None: no timing."""
    args: list[object] = [
        "run", "--task", task, "--model", backbone, "--data-dir", data_dir,
        "--max-train-samples", train_samples, "--epochs", 1, "--max-seq-length", max_seq_length,
        "--out", root / "runs", "--checkpoints", root / "ckpt", "--json"]
    if eval_samples is not None:
        args += ["--max-eval-samples", eval_samples]
    args += ["--no-timing"] if time_samples is None else ["--time-samples", time_samples]
    result = invoke(*args, *extra)
    assert result.exit_code == 0, result.output + str(result.exception)
    return json.loads(result.stdout)
