"""`eebench run`: the benchmark itself, for one method × task × seed or a whole config grid."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from eebench.cli import options
from eebench.cli.app import app
from eebench.cli.backends import NO_FLAGS, BackendFlags, grid_request, with_backend_flags
from eebench.cli.common import DataDirOption, JsonOption, err_console, print_json, resolve_data_dir
from eebench.errors import EebenchError, UsageError

if TYPE_CHECKING:
    from eebench.cli.backends import GridRequest
    from eebench.run.backends import Cell, CellOutcome
    from eebench.run.config import BenchConfig


def given(*names: str, help: str | None = None) -> Any:
    """An option of `run` that goes over the config's setting (`merge`); left out, it is None
    (not given) and the config's stands, so its help shows no default."""
    return typer.Option(*names, help=help, show_default=False)


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


def run_command(
    method: Annotated[list[str] | None, given(
        "--method", "-m", help="Early-exit method (see `eebench methods`; repeatable); default: "
        "the config's.")] = None,
    task: Annotated[list[str] | None, given(
        "--task", "-t", help="Task (see `eebench tasks`; repeatable); default: the config's.")
    ] = None,
    eval_task: Annotated[str | None, given(
        "--eval-task", help="Domain shift: evaluate on this task's split instead (same labels, "
        "same kind of input), next to the in-domain run of the same training.")] = None,
    model: Annotated[str | None, given(
        "--model", help="Backbone: minilm-l6 (default), a name of `eebench backbones`, a local "
        "directory or a hub id.")] = None,
    from_checkpoint: Annotated[str | None, given(
        "--from-checkpoint", help="Evaluate these early-exit weights instead of training: an "
        "authors' DeeBERT, PABEE or ElasticBERT checkpoint or an `eebench export-model` folder "
        "(a folder or a hub id; docs/models.md).")] = None,
    data_dir: Path | None = DataDirOption,
    pooling: options.Pooling = None,
    split: Annotated[str | None, given(
        "--split", help="Split to evaluate: dev (default) or test (labels withheld).")] = None,
    seed: Annotated[list[int] | None, given(
        "--seed", help="Seed (repeatable); default: the config's seeds, else 42.")] = None,
    config: Annotated[Path | None, given(
        "--config", help="A TOML benchmark config (see docs/running.md).")] = None,
    out: Annotated[Path | None, given("--out", help="Runs root directory [runs].")] = None,
    test_out: Annotated[Path | None, given(
        "--test-out", help="Also run each cell's models on the test split (labels withheld, "
        "nothing timed) into this runs directory, right after its dev runs: the runs of "
        "`--split test --no-timing --out DIR`, without training again.")] = None,
    checkpoints: Annotated[Path | None, given(
        "--checkpoints", help="Checkpoint root directory [checkpoints].")] = None,
    sweep: Annotated[str | None, given(
        "--sweep", help="Sweep values, comma-separated (default: the method's grid).")] = None,
    rule: Annotated[list[str] | None, given(
        "--rule", "-r", help="Also sweep this exit rule on each method's trained model, in the "
        "same pass (see `eebench rules`; repeatable); its points are labelled method+rule.")
    ] = None,
    setting: options.Setting = None,
    max_train_samples: options.MaxTrainSamples = None,
    epochs: options.Epochs = None,
    max_seq_length: options.MaxSeqLength = None,
    lr: options.LearningRate = None,
    batch_size: options.BatchSize = None,
    group_by_length: options.GroupByLength = None,
    precision: options.Precision = None,
    max_eval_samples: Annotated[int | None, given(
        "--max-eval-samples", help="Evaluate on a seeded subset of N examples.")] = None,
    time_samples: Annotated[int | None, given(
        "--time-samples", help="Samples timed and checked with real dynamic inference [200].")
    ] = None,
    time_points: Annotated[int | None, given(
        "--time-points", help="Time real inference at N points of each sweep only, spread evenly "
        "over it, its first and last among them (a config's [timing] points); the other points "
        "are checked against the simulation, untimed [every point timed].")] = None,
    no_timing: Annotated[bool, typer.Option(
        "--no-timing", help="Skip wall-time measurement (the --time-samples samples still check "
        "real dynamic inference against the simulation, once, at the largest batch size).")
    ] = False,
    paired_timing: Annotated[bool, typer.Option(
        "--paired-timing", help="Time the full model beside each point, batch by batch, not "
        "once per model: ratios that a change in the machine's load does not skew (a config's "
        "[timing] baseline = \"paired\").")] = False,
    # --overwrite and the Backends options, one value (eebench.cli.backends.with_backend_flags)
    backend_flags: BackendFlags = NO_FLAGS,
    json_out: bool = JsonOption,
) -> None:
    """Benchmark a method: train or reuse a checkpoint, sweep exits in one pass, count FLOPs, time.

    Writes runs/<model>/<method>/<task>/<config-hash>/ (config, env, points, per-sample
    predictions, sample ids, summary). Rerunning the same command resumes or returns the
    finished run. An option left out takes the --config file's value, where it gives one.
    """
    from eebench.cli.train import parse_settings
    from eebench.run.config import load_config, merge
    from eebench.train.distributed import launched_processes

    if launched_processes() > 1:  # every process would measure and write the same runs
        raise UsageError("`eebench run` measures in one process, not under a launcher of "
                         f"{launched_processes()} processes",
                         hint="train with `eebench train --processes N` first: the run then "
                         "finds the checkpoint")
    if model is not None and from_checkpoint is not None:
        raise UsageError("give --model or --from-checkpoint, not both",
                         hint="a checkpoint holds its own backbone")
    if no_timing and paired_timing:  # the samples still check real inference: no conflict
        raise UsageError("--paired-timing times the full model beside each point, and "
                         "--no-timing times nothing: drop one")
    if no_timing and time_points is not None:
        raise UsageError(f"--time-points {time_points} times that many points of each sweep, "
                         "and --no-timing times none: drop one")
    cfg = load_config(config)
    # a setting or a sweep for each method run: the config's, and its [[grids]] entries'
    methods = method or list(dict.fromkeys([*cfg.methods, *(m for g in cfg.grids
                                                            for m in g.methods)]))
    settings = parse_settings(setting or [])
    sweep_values = parse_sweep(sweep)
    cfg = merge(cfg, {  # the flags given (None: not given) over the config's settings
        "methods": method or None, "tasks": task or None, "seeds": seed or None,
        "eval_task": eval_task,
        "model": model, "from_checkpoint": from_checkpoint, "pooling": pooling, "split": split,
        "data_dir": data_dir and str(data_dir), "out": out and str(out),
        "test_out": test_out and str(test_out),
        "checkpoints": checkpoints and str(checkpoints),
        "max_seq_length": max_seq_length, "max_eval_samples": max_eval_samples,
        "train": {"max_train_samples": max_train_samples, "epochs": epochs, "lr": lr,
                  "batch_size": batch_size, "group_by_length": group_by_length,
                  "precision": precision},
        "timing": {"samples": time_samples, "enabled": False if no_timing else None,
                   "baseline": "paired" if paired_timing else None, "points": time_points},
        "methods_settings": {m: settings for m in methods} if settings else None,
        "sweeps": {m: sweep_values for m in methods} if sweep_values else None,
        "rules": rule or None,
        "backend": backend_flags.table(),
    })
    if not cfg.grids and (not cfg.methods or not cfg.tasks):
        raise UsageError("say what to run: --method and --task, or a --config with methods "
                         "and tasks")
    request = grid_request(cfg.backend, backend_flags.dry_run)
    # A grid skips the pairs a method cannot run; one pair named on the command line is refused.
    _run_grid(cfg, backend_flags.overwrite, json_out,
              skip_unrunnable=len(cfg.methods) * len(cfg.tasks) > 1 or not (method and task),
              request=request)


app.command("run", rich_help_panel="Benchmark")(with_backend_flags(run_command))


def _run_grid(cfg: BenchConfig, overwrite: bool, json_out: bool, skip_unrunnable: bool,
              request: GridRequest) -> None:
    """Expand the config into its runs (every one validated before any work), then run them
    through the library (`eebench.api.run`) on the requested backend, or list them."""
    from eebench import api
    from eebench.cli.common import out_dir, progress

    out_dir(Path(cfg.out), "runs")
    out_dir(Path(cfg.test_out) if cfg.test_out else None, "test-split runs", option="--test-out")
    out_dir(Path(cfg.checkpoints), "checkpoints", option="--checkpoints")
    grid = api.expand(cfg, strict=not skip_unrunnable)
    for s in grid.skipped:
        err_console.print(f"[yellow]skipped[/] {s}")
    data_dir = resolve_data_dir(Path(cfg.data_dir) if cfg.data_dir else None)
    if request.elsewhere:  # a listing, or the cells on an engine
        from eebench.cli.backends import run_elsewhere

        return run_elsewhere(grid, cfg, data_dir, overwrite, json_out, request)
    summaries: list[dict] = []

    def report(cell: Cell, outcome: CellOutcome) -> None:
        if outcome.status != "done":
            return
        from eebench.run.execute import run_dir_for

        for k, rc in enumerate(cell.runs):
            summaries.append(_report(run_dir_for(rc, Path(cfg.out)), json_out))
            if cell.in_domain:
                own = run_dir_for(cell.in_domain[k], Path(cfg.out))
                summaries[-1]["in_domain"] = _shift_report(
                    own, run_dir_for(rc, Path(cfg.out)), json_out)
        for rc in cell.test:
            test_dir = run_dir_for(rc, Path(cell.test_out or cfg.out))
            if not json_out:
                err_console.print(f"test split of {rc.label} on {rc.task}: {test_dir}")

    with progress(transient=True) as bar:
        result = api.run(cfg, backend=request.options, data_dir=data_dir, overwrite=overwrite,
                         say=lambda line: err_console.print(f"[bold]{line}[/]"),
                         console=err_console, progress=bar, on_outcome=report, grid=grid)
    if json_out:
        one = len(summaries) == 1 and len(grid.runs) == 1
        print_json(summaries[0] if one else summaries)
    busy, deferred = result.cells_with("busy"), result.cells_with("deferred")
    left, n = [], len(result.cells)
    if busy:
        cell = busy[0][0]
        left.append(f"{len(busy)} of {n} cells are being run by another process (e.g. "
                    f"{cell.label} on {cell.config.task}, seed {cell.config.seed})")
    if deferred:
        cell = deferred[0][0]
        left.append(f"{len(deferred)} of {n} cells were not started before --stop-by (e.g. "
                    f"{cell.label} on {cell.config.task}, seed {cell.config.seed})")
    if left:
        when = "when it has finished" if busy else "later"
        raise EebenchError(f"{'; '.join(left)}; the rest is done",
                           hint=f"rerun the same command {when}: done cells are not run again")


QUALITY = ("ece", "consistency")  # per-point quality fields, where a point has them


def _shift_report(own_dir: Path, shifted_dir: Path, json_out: bool) -> list[dict]:
    """Each sweep value's numbers in domain (the training's own task) and shifted, side by
    side: main metric, average exit layer, and calibration and consistency where points have
    them."""
    from rich.table import Table

    from eebench.run.artifacts import read_run

    own, shifted = read_run(own_dir), read_run(shifted_dir)
    by_value = {p.sweep_value: p for p in own.points}
    rows = []
    for p in shifted.points:
        q = by_value.get(p.sweep_value)
        row = {"sweep_param": p.sweep_param, "sweep_value": p.sweep_value}
        for side, point in (("in_domain", q), ("shifted", p)):
            row[side] = None if point is None else {
                "task": point.task, "main_metric": point.main_metric, "main": point.main,
                "avg_exit_layer": point.avg_exit_layer, "mean_mflops": point.mean_mflops,
                **{k: getattr(point, k) for k in QUALITY if getattr(point, k, None) is not None}}
        rows.append(row)
    if not json_out:
        t = Table(title=f"domain shift: {own.config.task} → {shifted.config.task} "
                        f"({shifted.config.label}, seed {shifted.config.seed})")
        quality = [k for k in QUALITY if any(k in (r["shifted"] or {}) for r in rows)]
        for col in ("sweep", "main in", "main shifted", "layer in", "layer shifted",
                    *(f"{k} {side}" for k in quality for side in ("in", "shifted"))):
            t.add_column(col, justify="right")
        for r in rows:
            a, b = r["in_domain"] or {}, r["shifted"]
            cells = [f"{r['sweep_param']}={r['sweep_value']:g}",
                     _num(a.get("main")), _num(b["main"]),
                     _num(a.get("avg_exit_layer")), _num(b["avg_exit_layer"]),
                     *(_num(side.get(k)) for k in quality for side in (a, b))]
            t.add_row(*cells)
        err_console.print(t)
    return rows


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _report(run_dir: Path, json_out: bool) -> dict:
    from rich.table import Table

    from eebench.run.artifacts import read_run

    run = read_run(run_dir)
    points, summary = run.points, run.summary
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
