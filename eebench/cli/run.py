"""`eebench run`: the benchmark itself, for one method × task × seed or a whole config grid."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from eebench.cli.app import app
from eebench.cli.common import DataDirOption, JsonOption, err_console, print_json, resolve_data_dir
from eebench.errors import UsageError


def parse_sweep(raw: str | None) -> list[float] | None:
    if raw is None:
        return None
    try:
        values = [float(v) for v in raw.split(",") if v.strip()]
    except ValueError:
        raise UsageError(f"--sweep {raw!r} is not a comma-separated list of numbers") from None
    if not values:
        raise UsageError("--sweep is empty")
    return values


@app.command("run", rich_help_panel="Benchmark")
def run_command(
    method: Annotated[list[str] | None, typer.Option(
        "--method", "-m", help="Early-exit method (see `eebench methods`; repeatable); default: "
        "the config's.", show_default=False)] = None,
    task: Annotated[list[str] | None, typer.Option(
        "--task", "-t", help="Task (see `eebench tasks`; repeatable); default: the config's.",
        show_default=False)] = None,
    model: Annotated[str | None, typer.Option(
        "--model", help="Backbone: minilm-l6 (default), bert-base, a local directory or a hub id.",
        show_default=False)] = None,
    data_dir: Path | None = DataDirOption,
    pooling: Annotated[str | None, typer.Option(
        "--pooling", help="How the exit heads pool the tokens: cls or mean (default: the config's, "
        "else the way the backbone was pretrained to pool).", show_default=False)] = None,
    split: Annotated[str | None, typer.Option(
        "--split", help="Split to evaluate: dev (default) or test (labels withheld).",
        show_default=False)] = None,
    seed: Annotated[list[int] | None, typer.Option(
        "--seed", help="Seed (repeatable); default: the config's seeds, else 42.",
        show_default=False)] = None,
    config: Annotated[Path | None, typer.Option(
        "--config", help="A TOML benchmark config (see docs/running.md).", show_default=False)
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Runs root directory [runs].",
                                             show_default=False)] = None,
    checkpoints: Annotated[Path | None, typer.Option(
        "--checkpoints", help="Checkpoint root directory [checkpoints].", show_default=False)
    ] = None,
    sweep: Annotated[str | None, typer.Option(
        "--sweep", help="Sweep values, comma-separated (default: the method's grid).",
        show_default=False)] = None,
    setting: Annotated[list[str] | None, typer.Option(
        "--setting", "-s", help="A method setting key=value (repeatable).", show_default=False)
    ] = None,
    max_train_samples: Annotated[int | None, typer.Option(
        "--max-train-samples", help="Train on a seeded subset of N examples.", show_default=False)
    ] = None,
    epochs: Annotated[int | None, typer.Option("--epochs", show_default=False)] = None,
    max_seq_length: Annotated[int | None, typer.Option("--max-seq-length", show_default=False)
                              ] = None,
    lr: Annotated[float | None, typer.Option(
        "--lr", help="Peak learning rate (default: the config's, else the backbone's, see "
        "`eebench backbones`; else 2e-5).", show_default=False)
    ] = None,
    batch_size: Annotated[int | None, typer.Option("--batch-size", show_default=False)] = None,
    group_by_length: Annotated[bool | None, typer.Option(
        "--group-by-length/--no-group-by-length", help="Batch training rows of similar length "
        "(less padding; default: the config's, else off).", show_default=False)] = None,
    precision: Annotated[str | None, typer.Option(
        "--precision", help="Training precision: fp32 (default) or bf16 (autocast; about twice as "
        "fast on CPUs with AMX and on recent GPUs).", show_default=False)] = None,
    max_eval_samples: Annotated[int | None, typer.Option(
        "--max-eval-samples", help="Evaluate on a seeded subset of N examples.",
        show_default=False)] = None,
    time_samples: Annotated[int | None, typer.Option(
        "--time-samples", help="Samples timed and checked with real dynamic inference [200].",
        show_default=False)] = None,
    no_timing: Annotated[bool, typer.Option("--no-timing", help="Skip wall-time measurement.")
                         ] = False,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Redo a finished run.")] = False,
    json_out: bool = JsonOption,
) -> None:
    """Benchmark a method: train or reuse a checkpoint, sweep exits in one pass, count FLOPs, time.

    Writes runs/<model>/<method>/<task>/<config-hash>/ (config, env, points, per-sample
    predictions, sample ids, summary). Rerunning the same command resumes or returns the
    finished run.
    """
    from eebench.cli.train import parse_settings
    from eebench.run.config import load_config

    cfg = load_config(config)
    methods = method or cfg.methods
    tasks = task or cfg.tasks
    if not methods or not tasks:
        raise UsageError("say what to run: --method and --task, or a --config with methods "
                         "and tasks")
    train = {}  # command-line training settings, over the config's (and its tasks')
    for key, value in (("max_train_samples", max_train_samples), ("epochs", epochs),
                       ("lr", lr), ("batch_size", batch_size),
                       ("group_by_length", group_by_length), ("precision", precision)):
        if value is not None:
            train[key] = value
    timing = cfg.timing.model_dump()
    if time_samples is not None:
        timing["samples"] = time_samples
    if no_timing:
        timing["enabled"] = False
    settings = parse_settings(setting or [])
    # Seed by seed, task by task: a benchmark stopped half-way has whole seeds to show.
    jobs = [(m, t, s) for s in (seed or cfg.seeds) for t in tasks for m in methods]
    _run_jobs(jobs, cfg, model or cfg.model, pooling or cfg.pooling, split or cfg.split, settings,
              parse_sweep(sweep), train, max_seq_length, max_eval_samples, timing,
              resolve_data_dir(data_dir or (Path(cfg.data_dir) if cfg.data_dir else None)),
              out or Path(cfg.out), checkpoints or Path(cfg.checkpoints), overwrite, json_out,
              grid=len(methods) * len(tasks) > 1 or not (method and task))


def _run_jobs(jobs, cfg, model, pooling, split, settings, sweep, train, max_seq_length,
              max_eval_samples, timing, data_dir, out, checkpoints, overwrite, json_out,
              grid: bool = False) -> None:
    from eebench.cli.common import progress
    from eebench.methods.base import get_method
    from eebench.run.execute import RunOptions, execute, make_run_config
    from eebench.tasks.spec import get_task

    if grid:  # a config's grid skips the pairs a method cannot run (entropy on regression)
        runnable = [(m, t, s) for m, t, s in jobs
                    if get_method(m).supports_regression or not get_task(t).is_regression]
        for m, t in sorted({(m, t) for m, t, _ in jobs} - {(m, t) for m, t, _ in runnable}):
            err_console.print(f"[yellow]skipped[/] {m} on {t}: {m} cannot do regression")
        jobs = runnable
        if not jobs:
            raise UsageError("nothing to run: the config's methods cannot do any of its tasks")
    budgets = {get_task(name).name: name for name in cfg.tasks_settings}  # also checks names

    def budget(task: str):
        return cfg.for_task(budgets.get(get_task(task).name, task))

    # Validate every job before any work: a typo in the last task should not wait for hours.
    configs = []
    for m, t, s in jobs:
        b = budget(t)
        configs.append(make_run_config(
            m, t, model, split, s, {**cfg.methods_settings.get(m, {}), **settings},
            sweep if sweep is not None else cfg.sweeps.get(m), {**b.train, **train},
            max_seq_length or b.max_seq_length,
            # A config's evaluation budget is for dev; test predictions cover every row.
            max_eval_samples or (b.max_eval_samples if split == "dev" else None),
            cfg.flops_convention, timing, pooling))
    summaries = []
    with progress(transient=True) as bar:
        opts = RunOptions(data_dir=data_dir, out=out, checkpoints=checkpoints,
                          overwrite=overwrite, eval_batch_size=cfg.eval_batch_size,
                          console=err_console, progress=bar)
        for rc in configs:
            err_console.print(f"[bold]run[/] {rc.method} on {rc.task} (seed {rc.seed}, "
                              f"{rc.pooling} pooling)")
            run_dir = execute(rc, opts)
            if run_dir is None:
                err_console.print("  [yellow]skipped[/]: another process is running it")
                continue
            summaries.append(_report(run_dir, json_out))
    if json_out:
        print_json(summaries[0] if len(summaries) == 1 and len(configs) == 1 else summaries)


def _report(run_dir: Path, json_out: bool) -> dict:
    from rich.table import Table

    from eebench.run import artifacts as R

    points = R.read_points(run_dir / R.POINTS_FILE)
    summary = R.RunSummary.model_validate_json((run_dir / R.SUMMARY_FILE).read_text())
    if not json_out:
        t = Table(title=f"{summary.method} · {summary.task} · {summary.split} · seed "
                        f"{summary.seed}  ({run_dir})")
        for col in ("sweep", "main", "avg layer", "MFLOPs", "speed-up", "bs=1 p50 ms",
                    "disagree"):
            t.add_column(col, justify="right")
        for p in points:
            bs1 = next((x for x in p.timings if x.mode == "dynamic" and x.batch_size == 1), None)
            t.add_row(
                f"{p.sweep_param}={p.sweep_value:g}",
                "-" if p.main is None else f"{p.main:.2f}",
                f"{p.avg_exit_layer:.2f}", f"{p.mean_mflops:.1f}", f"{p.speedup:.2f}x",
                "-" if bs1 is None else f"{bs1.latency_ms.get('p50', float('nan')):.2f}",
                "-" if p.disagreements is None
                else f"{p.disagreements} ({p.disagreements_near_threshold} near)",
            )
        err_console.print(t)
    return {"run_dir": str(run_dir), "summary": summary.model_dump(mode="json"),
            "points": [p.model_dump(mode="json", exclude={"timings"}) for p in points]}
