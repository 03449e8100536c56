"""`eebench train`: fine-tune one method on one task and write a resumable checkpoint.

The checkpoint lands in `<out>/<model>/<method>/<task>/<config-hash>/`. Rerunning the same
command resumes an interrupted run, or returns at once when it has finished. `--processes N`
trains as one job over N local processes (eebench.train.distributed); so does the command under
`accelerate launch`, where only the main process prints.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from eebench.cli import options
from eebench.cli.app import app
from eebench.cli.common import (
    DataDirOption,
    JsonOption,
    err_console,
    out_dir,
    print_json,
    resolve_data_dir,
)
from eebench.errors import UsageError
from eebench.train.config import STAGE_FIELDS, TrainConfig

D = TrainConfig()  # the defaults shown in --help


def parse_value(raw: str) -> Any:
    """A setting's value: a JSON literal (number, true/false, null) where it parses, else text."""
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def parse_settings(items: list[str]) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--setting {item!r} is not key=value", hint="e.g. --setting a=1")
        settings[key.strip()] = parse_value(value.strip())
    return settings


def parse_stage_overrides(items: list[str]) -> dict[str, dict[str, Any]]:
    """`--stage NAME.FIELD=VALUE` items -> {NAME: {FIELD: VALUE}} (TrainConfig checks them)."""
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        target, sep, value = item.partition("=")
        name, _, fieldname = target.rpartition(".")
        if not sep or not name or not fieldname:
            raise UsageError(f"--stage {item!r} is not STAGE.FIELD=VALUE",
                             hint=f"FIELD is one of: {', '.join(STAGE_FIELDS)}")
        out.setdefault(name, {})[fieldname] = parse_value(value.strip())
    return out


@app.command("train", rich_help_panel="Benchmark")
def train_command(
    method: Annotated[str, typer.Option("--method", "-m", help="Early-exit method (see "
                                        "`eebench methods`).", show_default=False)],
    task: Annotated[str, typer.Option("--task", "-t", help="Task name (see `eebench tasks`).",
                                      show_default=False)],
    model: Annotated[str, typer.Option(
        "--model", help="Backbone: minilm-l6, bert-base, a local model directory or a hub id.",
    )] = "minilm-l6",
    data_dir: Path | None = DataDirOption,
    pooling: options.Pooling = None,
    max_train_samples: options.MaxTrainSamples = None,
    epochs: options.Epochs = D.epochs,
    batch_size: options.BatchSize = D.batch_size,
    lr: options.LearningRate = None,
    heads_lr: Annotated[float | None, typer.Option(
        "--heads-lr", help="Learning rate of a stage that trains exit heads alone on a frozen "
        "backbone (DeeBERT's second stage).")] = D.heads_lr,
    warmup_ratio: Annotated[float, typer.Option("--warmup-ratio")] = D.warmup_ratio,
    weight_decay: Annotated[float, typer.Option("--weight-decay")] = D.weight_decay,
    max_seq_length: options.MaxSeqLength = D.max_seq_length,
    seed: Annotated[int, typer.Option("--seed")] = D.seed,
    precision: options.Precision = "auto",
    group_by_length: Annotated[bool, typer.Option(
        "--group-by-length", help="Batch training rows of similar length (less padding).")
    ] = D.group_by_length,
    layers: Annotated[int | None, typer.Option(
        "--layers", help="static: keep the first K layers (same as --setting layers=K).",
        show_default=False)] = None,
    setting: options.Setting = None,
    stage: Annotated[list[str] | None, typer.Option(
        "--stage", help=f"A per-stage override STAGE.FIELD=VALUE, FIELD one of "
        f"{', '.join(STAGE_FIELDS)} (repeatable).", show_default=False)] = None,
    eval_every: Annotated[int, typer.Option(
        "--eval-every", help="Dev evaluation every N steps (0: at each epoch end).")
    ] = D.eval_every,
    save_every: Annotated[int, typer.Option(
        "--save-every", help="Checkpoint every N steps (and at each epoch end).")
    ] = D.save_every,
    out: Annotated[Path, typer.Option("--out", help="Checkpoint root directory.")
                   ] = Path("checkpoints"),
    device: Annotated[str | None, typer.Option(
        "--device", help="cpu, cuda, cuda:N or mps (default: cuda when there is one, else cpu).",
        show_default=False)] = None,
    processes: Annotated[int, typer.Option(
        "--processes", help="Train as one job over N local processes (one GPU each on CUDA, "
        "gloo on CPU); --batch-size stays the global batch and must split over them.")] = 1,
    overwrite: Annotated[bool, typer.Option(
        "--overwrite", help="Delete an existing checkpoint of this configuration first.")
    ] = False,
    json_out: bool = JsonOption,
) -> None:
    """Fine-tune an early-exit method on a task; rerun the same command to resume."""
    from eebench.methods.base import get_method
    from eebench.methods.derived import check_task
    from eebench.models.pooling import resolve_pooling
    from eebench.run.config import BenchConfig, merge
    from eebench.tasks.catalog import get_task
    from eebench.train import distributed

    settings = parse_settings(setting or [])
    if layers is not None:
        settings["layers"] = layers
    config = merge(BenchConfig(), {  # validated before any data or model is loaded
        "model": model, "pooling": pooling, "max_seq_length": max_seq_length,
        "methods_settings": {method: settings},
        "train": {"seed": seed, "epochs": epochs, "batch_size": batch_size, "lr": lr,
                  "heads_lr": heads_lr, "warmup_ratio": warmup_ratio,
                  "weight_decay": weight_decay, "max_train_samples": max_train_samples,
                  "precision": precision, "group_by_length": group_by_length,
                  "eval_every": eval_every, "save_every": save_every,
                  "stage_overrides": parse_stage_overrides(stage or []),
                  **({"device": device} if device is not None else {})},
    })
    spec = get_task(task)
    m = get_method(method, **config.methods_settings.get(method, {}))
    check_task(m, spec)
    cfg = config.training(spec, config.train.seed)
    _check_processes(processes, cfg)
    out_dir(out, "checkpoints")
    pooling = resolve_pooling(model, config.pooling)
    data = resolve_data_dir(data_dir)
    from eebench.run.names import backbone_layers

    parts = m.models(backbone_layers(model))
    if len(parts) == 1:
        result = _run(m, spec, model, pooling, data, cfg, out, overwrite, processes)
    else:  # several models trained one by one, each its own checkpoint
        if distributed.is_main_process():
            err_console.print(f"[bold]{m.name}[/]: {len(parts)} models, trained one by one")
        result = {"method": m.name, "method_settings": m.settings,
                  "parts": [_run(p, spec, model, pooling, data, cfg, out, overwrite, processes)
                            for p in parts]}
    if json_out and distributed.is_main_process():
        print_json(result)


def _check_processes(processes: int, cfg: TrainConfig) -> None:
    """`--processes N`: refused in one line where the batch size or the device cannot run it,
    and inside a job that a launcher started already."""
    from eebench.train import distributed

    distributed.check_launch(processes, cfg.batch_size, cfg.device)
    launched = distributed.launched_processes()
    if processes > 1 and launched > 1:
        raise UsageError(f"--processes {processes} inside a job of {launched} processes that a "
                         f"launcher started", hint="give the number to one of them, not both")


def train_process(method: str, settings: dict[str, Any], task: str, model: str, pooling: str,
                  data_dir: Path | None, cfg: TrainConfig, out: Path, overwrite: bool) -> str:
    """One process of `eebench train --processes N`: it loads the splits and trains its part of
    each batch (the main process prints the progress); returns the checkpoint directory."""
    from eebench.methods.base import get_method
    from eebench.tasks.catalog import get_task
    from eebench.tasks.loaders import load_split
    from eebench.train.distributed import is_main_process
    from eebench.train.loop import train

    spec = get_task(task)
    path = train(get_method(method, **settings), spec, model, load_split(spec, "train", data_dir),
                 load_split(spec, "dev", data_dir), cfg, out,
                 console=err_console if is_main_process() else None, overwrite=overwrite,
                 pooling=pooling)
    return str(path)


def _run(method, spec, model: str, pooling: str, data_dir: Path | None, cfg: TrainConfig,
         out: Path, overwrite: bool, processes: int = 1) -> dict[str, Any]:
    """Train one model; print its summary and return what `--json` shows of it."""
    from eebench.measure.env import cpu_features
    from eebench.tasks.loaders import load_split
    from eebench.train import distributed
    from eebench.train.checkpoint import read_state
    from eebench.train.loop import train

    main = distributed.is_main_process()  # under a launcher, only the main process prints
    train_examples = load_split(spec, "train", data_dir)
    dev_examples = load_split(spec, "dev", data_dir)
    n_train = min(len(train_examples), cfg.max_train_samples or len(train_examples))
    if main:
        err_console.print(f"[bold]{method.name}[/] on [bold]{spec.title}[/]: {n_train} train / "
                          f"{len(dev_examples)} dev examples, model {model} ({pooling} pooling), "
                          f"{cfg.precision} (CPU {cpu_features()})"
                          + (f", {processes} processes" if processes > 1 else ""))
    start = time.perf_counter()
    if processes > 1:
        path = Path(distributed.launch(processes, train_process, method.name, method.settings,
                                       spec.name, model, pooling, data_dir, cfg, out, overwrite))
    else:
        path = train(method, spec, model, train_examples, dev_examples, cfg, out,
                     console=err_console if main else None, overwrite=overwrite, pooling=pooling)
    seconds = time.perf_counter() - start
    if not main:
        return {}
    state = read_state(path)
    last = state.history[-1] if state and state.history else None
    exits = last["exits"] if last else []
    _print_summary(spec, path, exits, seconds)
    return {
        "checkpoint": str(path),
        "config_hash": state.config_hash if state else None,
        "model": model, "pooling": pooling, "method": method.name,
        "method_settings": method.settings,
        "task": spec.name, "finished": bool(state and state.finished),
        "global_step": state.global_step if state else 0,
        "processes": max(processes, distributed.launched_processes()),
        "precision": cfg.precision, "cpu_capability": cpu_features(),
        "seconds": round(seconds, 3),
        "main_metric": spec.main_metric,
        "dev": [{"exit": e["exit"], "layer": e["layer"], **e["metrics"]} for e in exits],
    }


def _print_summary(spec, path: Path, exits: list[dict], seconds: float) -> None:
    from rich.table import Table

    if exits:
        table = Table(title=f"dev {spec.title} (%), last evaluation", title_justify="left")
        table.add_column("exit", justify="right")
        table.add_column("layer", justify="right")
        for name in spec.metrics:
            table.add_column(name + (" *" if name == spec.main_metric else ""), justify="right")
        for e in exits:
            table.add_row(str(e["exit"] + 1), str(e["layer"]),
                          *(f"{e['metrics'].get(n, float('nan')):.2f}" for n in spec.metrics))
        err_console.print(table)
    err_console.print(f"checkpoint: {path}  ({seconds:.1f} s)")
