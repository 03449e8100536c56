"""`eebench export-model RUN --out DIR`: a finished run's model as a self-describing folder.

The folder (eebench.models.convert.export) holds model.safetensors (the backbone under its
family's own keys, the exit heads under `exit_heads.`), config.json (the backbone's config and
the `early_exit` block: exits, heads, pooling, rule and the chosen operating point), the
tokenizer and README.md, a model card in the hub's format with the run's table. `eebench run
--from-checkpoint DIR` evaluates it again, bit-identically; `AutoModel.from_pretrained(DIR)` loads
the backbone without custom code.

`export_run` is the library function the command calls.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from eebench.cli.app import app
from eebench.cli.common import JsonOption, err_console, out_dir, print_json
from eebench.errors import DataError, UsageError

if TYPE_CHECKING:
    from eebench.models.convert.card import Card
    from eebench.run.artifacts import OperatingPoint, RunFiles

DEFAULT_TOLERANCE = 1.0  # points of the main metric the default operating point may give up


def choose_point(points: list[OperatingPoint], value: float | None = None,
                 tolerance: float = DEFAULT_TOLERANCE) -> OperatingPoint:
    """The point of sweep value `value`; by default the one of fewest FLOPs whose main metric is
    within `tolerance` of the best point's (an unlabelled split has no default)."""
    if value is not None:
        for p in points:
            if math.isclose(p.sweep_value, value, rel_tol=1e-9, abs_tol=1e-12):
                return p
        have = ", ".join(f"{p.sweep_value:g}" for p in points)
        raise UsageError(f"--point {value:g}: the run has no such sweep value",
                         hint=f"its sweep values: {have}")
    if any(p.main is None for p in points):
        raise UsageError("the run's split is unlabelled: there is no best point to start from",
                         hint="choose one with --point VALUE")
    best = max(p.main for p in points)
    near = [p for p in points if p.main >= best - tolerance]
    return min(near, key=lambda p: (p.mean_flops, -p.main))


def _checkpoint(run: RunFiles, given: Path | None) -> Path:
    """The run's one model's checkpoint directory (`--checkpoint` overrides the recorded path)."""
    variants = run.summary.variants
    if len(variants) != 1:
        raise UsageError(f"{run.path}: method {run.config.method} trained {len(variants)} models "
                         "in this run; export-model exports one",
                         hint="export a run of a method with exits on one model")
    recorded = variants[0].checkpoint
    if recorded is not None and ";" in recorded:
        raise UsageError(f"{run.path}: its model chains {recorded.count(';') + 1} complete "
                         "models run in turn; export-model exports one multi-exit model")
    path = given if given is not None else (Path(recorded) if recorded else None)
    if path is None or not path.is_dir():
        where = "was not recorded" if path is None else f"{path} is not there"
        raise DataError(f"{run.path}: its checkpoint {where}",
                        hint="give its folder with --checkpoint DIR (under the run's "
                             "--checkpoints, default checkpoints/)")
    return path


def _measured(point: OperatingPoint) -> float | None:
    """Real dynamic inference's speed-up over the full model at batch size 1 (mean latency)."""
    mean = {t.mode: t.latency_ms.get("mean") for t in point.timings if t.batch_size == 1}
    if not mean.get("full") or not mean.get("dynamic"):
        return None
    return mean["full"] / mean["dynamic"]


def _hardware(run: RunFiles, point: OperatingPoint) -> str:
    from eebench.io import read_json
    from eebench.run.artifacts import ENV_FILE

    env = read_json(run.path / ENV_FILE) if (run.path / ENV_FILE).is_file() else {}
    env = env if isinstance(env, dict) else {}
    gpu = env.get("gpu") or {}
    parts = [gpu.get("name") if isinstance(gpu, dict) else None, env.get("cpu"),
             point.timings[0].device if point.timings else None]
    packages = env.get("packages") or {}
    versions = ", ".join(f"{k} {v}" for k, v in packages.items() if k in ("torch", "transformers")
                         and v)
    text = "; ".join(str(p) for p in parts if p) or "not recorded"
    return text + (f" ({versions})" if versions else "")


def card_for(run: RunFiles, model: Any, chosen: OperatingPoint, out: Path) -> Card:
    from eebench.methods.base import get_method
    from eebench.models.convert.card import Card, Row
    from eebench.tasks.catalog import get_task

    cfg, points = run.config, sorted(run.points, key=lambda p: p.sweep_value)
    full = run.summary.full_model.get("mean_mflops") or max(p.mean_mflops for p in points)
    spec = get_task(cfg.task)
    method = get_method(cfg.method)
    rule = cfg.rule or (run.summary.rule.name if run.summary.rule and run.summary.rule.name
                        else method.rule)
    rows = [Row(sweep=dict(p.sweep), main=p.main, avg_exit_layer=p.avg_exit_layer,
                mflops=p.mean_mflops, flops_speedup=full / p.mean_mflops,
                layer_speedup=p.speedup, measured_speedup=_measured(p), chosen=p is chosen)
            for p in points]
    command = (f"eebench run --from-checkpoint {out} --method {cfg.method}"
               + (f" --rule {cfg.rule}" if cfg.rule else "") + f" --task {cfg.task}")
    backbone = cfg.weights.source if cfg.weights is not None else cfg.model
    return Card(name=f"{Path(backbone).name}-{cfg.label}-{cfg.task}", method=cfg.method,
                paper=method.paper, rule=rule, task=cfg.task, task_title=spec.title,
                split=cfg.split, n_samples=chosen.n_samples, main_metric=chosen.main_metric,
                backbone=backbone, family=model.config.model_type,
                num_layers=model.num_layers, exit_layers=list(model.exit_layers),
                pooling=model.pooling, hardware=_hardware(run, chosen), load_command=command,
                rows=rows, flops_convention=chosen.flops_convention)


def export_run(run_dir: Path, out: Path, point: float | None = None,
               tolerance: float = DEFAULT_TOLERANCE, checkpoint: Path | None = None,
               overwrite: bool = False) -> dict[str, Any]:
    """Export the model of the finished run `run_dir` to the folder `out`; what was written."""
    from eebench.methods.base import get_method
    from eebench.models.convert.card import render
    from eebench.models.convert.export import check_out_folder, write_folder
    from eebench.run.artifacts import verify_run
    from eebench.train.checkpoint import load_trained

    check_out_folder(out, overwrite)  # before the model loads
    run = verify_run(Path(run_dir))  # finished, its files as its summary vouched
    if run.summary is None:
        raise UsageError(f"{run_dir}: the run has not finished",
                         hint="rerun its `eebench run` command to finish it")
    path = _checkpoint(run, checkpoint)
    chosen = choose_point(run.points, point, tolerance)
    model, tokenizer, _ = load_trained(path)
    variant = run.summary.variants[0]
    if list(model.exit_layers) != list(variant.exit_layers) or model.method_name != \
            run.config.method:
        raise DataError(f"{path}: a {model.method_name} model with exits after layers "
                        f"{list(model.exit_layers)}, not the run's ({run.config.method}, "
                        f"{variant.exit_layers})", hint="give the run's own --checkpoint")
    rule = run.summary.rule.model_dump(mode="json") if run.summary.rule is not None else \
        {"name": run.config.rule or get_method(run.config.method).rule}
    extra = {
        "rule": rule,  # the rule the run's points were decided by, as it used it
        "operating_point": {
            "sweep": dict(chosen.sweep), "main_metric": chosen.main_metric, "main": chosen.main,
            "avg_exit_layer": chosen.avg_exit_layer, "mean_mflops": chosen.mean_mflops,
            "speedup": chosen.speedup, "flops_convention": chosen.flops_convention},
        "task": run.config.task,
        "run": {"config_hash": run.config.key(), "model": run.config.model,
                **({"weights": run.config.weights.model_dump(mode="json")}
                   if run.config.weights is not None else {})},
    }
    card = card_for(run, model, chosen, out)
    write_folder(out, model, tokenizer, extra, render(card), overwrite)
    return {"out": str(out), "checkpoint": str(path), "method": run.config.method,
            "exit_layers": list(model.exit_layers), "operating_point": dict(chosen.sweep)}


@app.command("export-model", rich_help_panel="Benchmark")
def export_model_command(
    run: Annotated[Path, typer.Argument(help="A finished run directory (from `eebench run`).",
                                        show_default=False)],
    out: Annotated[Path, typer.Option(
        "--out", help="The folder to write (new, or empty; --overwrite replaces it).",
        show_default=False)],
    point: Annotated[float | None, typer.Option(
        "--point", help="The operating point (sweep value) recorded as chosen (default: the "
        "fewest FLOPs within --tolerance of the best main metric).", show_default=False)] = None,
    tolerance: Annotated[float, typer.Option(
        "--tolerance", min=0, help="Points of the main metric the default operating point may "
        "give up.")] = DEFAULT_TOLERANCE,
    checkpoint: Annotated[Path | None, typer.Option(
        "--checkpoint", help="The run's checkpoint folder, where it is no longer where the run "
        "recorded it.", show_default=False)] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace --out.")] = False,
    as_json: bool = JsonOption,
) -> None:
    """Write a run's model as a folder others load: safetensors, config.json with the exit
    layout, the tokenizer and a model card (docs/models.md)."""
    out_dir(out, "the exported model")
    done = export_run(run, out, point, tolerance, checkpoint, overwrite)
    if as_json:
        print_json(done)
        return
    err_console.print(f"exported {done['method']} (exits after layers "
                      f"{', '.join(map(str, done['exit_layers']))}) to {done['out']}")
