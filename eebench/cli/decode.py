"""`eebench decode`: early exit in a decoder LLM, every operating point of one run, as a table.

One backbone x one decoder task x one set of exits (eebench.run.decoding): each registered
decoder method (`eebench methods`; `--method` picks) reads its points off one pass per sample.
humaneval-gen traces each prompt once: static truncation, self-speculation at every (k, d) and
its adaptive choice of k, CALM at every threshold (oracle cache), with real decoding checks;
imdb-lm: the static exits and CALM from one teacher-forced pass per review. Trained exits
(--head adapter --tune-steps N) make the truncation points EE-Tuning's.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated

import typer

from eebench.cli.app import app
from eebench.cli.common import (
    DataDirOption,
    JsonOption,
    err_console,
    out_dir,
    print_json,
    progress,
    resolve_data_dir,
)
from eebench.errors import UsageError

PANEL = "Run and score"
# the method-specific options, each group in a panel of its own in --help
SELF_SPEC = functools.partial(typer.Option, rich_help_panel="Self-speculation")
CALM = functools.partial(typer.Option, rich_help_panel="CALM")
TIMING = functools.partial(typer.Option, rich_help_panel="Timing")


def _numbers(text: str | None, kind: type, option: str) -> tuple | None:
    if text is None:
        return None
    try:
        return tuple(kind(x) for x in text.replace(" ", "").split(",") if x)
    except ValueError:
        raise UsageError(f"{option} {text!r}: not a comma-separated list of numbers",
                         hint=f"e.g. {option} 1,2,4") from None


def _default_exits(model: str) -> tuple[int, ...]:
    """Every fifth of the depth (30 layers: 6, 12, 18, 24; 4 layers: 1, 2, 3)."""
    from eebench.models.backbones import from_pretrained, known_depth

    layers = known_depth(model)
    if layers is None:
        from transformers import AutoConfig

        from eebench.models.decoders import DECODER_HINT, check_decoder_dir

        layers = from_pretrained(AutoConfig.from_pretrained, model, check_dir=check_decoder_dir,
                                 hint=DECODER_HINT).num_hidden_layers
    step = max(1, layers // 5)
    return tuple(range(step, layers, step))


# the options that are the run's settings (a --config file holds them instead)
SETTINGS = ("model", "task", "split", "samples", "seed", "new_tokens", "max_tokens", "exits",
            "head", "rank", "method", "tune_steps", "drafts", "ks", "thresholds", "measure",
            "calm_real", "spec_checks", "timing", "timing_prompts", "timing_repeats",
            "timing_batch")


def _given(ctx: typer.Context, name: str) -> bool:
    """Whether option `name` was given on the command line (not its default)."""
    return getattr(ctx.get_parameter_source(name), "name", "DEFAULT") != "DEFAULT"


def _checked(make, hint: str):  # noqa: ANN001, ANN202 - a DecodeConfig from make()
    """make() with a settings error as one line (its field and pydantic's message)."""
    from pydantic import ValidationError

    try:
        return make()
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise UsageError(f"{where}: {first['msg']}", hint=hint) from None


def _spec_checks(fields: dict, checks: str | list | None):  # noqa: ANN202 - a DecodeConfig
    """A DecodeConfig of `fields` whose self-spec checks are `checks`: "longest" (every k at the
    longest d; the default), "all" (every k and d), "k:d,k:d" or a list of [k, d] pairs."""
    from eebench.run.decoding import DecodeConfig

    cfg = DecodeConfig(**fields)
    if checks is None or checks == "longest":
        return cfg
    if checks == "all":
        pairs = [(k, d) for k in cfg.candidate_ks() for d in cfg.draft_lengths]
    elif isinstance(checks, str):
        try:
            pairs = [tuple(int(x) for x in pair.split(":")) for pair in checks.split(",") if pair]
        except ValueError:
            pairs = [()]
        if not pairs or any(len(pair) != 2 for pair in pairs):
            raise UsageError(f"--spec-checks {checks!r}: not longest, all or k:d pairs",
                             hint="e.g. --spec-checks 6:4,12:2")
    else:
        pairs = [tuple(pair) for pair in checks]
    return DecodeConfig(**{**fields, "spec_checks": pairs})


def config_from_file(path: Path):  # noqa: ANN201 - a DecodeConfig
    """The run's settings from a TOML file of DecodeConfig's fields (`spec_checks` may be
    "longest", "all" or [k, d] pairs), each error in one line naming the file."""
    import tomllib

    from eebench.errors import DataError

    try:
        fields = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise DataError(f"{path}: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise DataError(f"{path}: not TOML: {e}") from None
    checks = fields.pop("spec_checks", None)
    return _checked(lambda: _spec_checks(fields, checks), f"the fields of {path}: eebench "
                    "decode's settings (docs/decoders.md)")


def show_plan(cfg, out: Path, json_out: bool) -> None:  # noqa: ANN001 - a DecodeConfig
    """What a run of `cfg` is, from its settings alone: no model, no data."""
    from eebench.run.decoding.run import (
        SUMMARY_FILE,
        check_config,
        decoder_methods,
        decoder_run_dir,
    )

    check_config(cfg)
    methods = [m.name for m in decoder_methods(cfg)]
    path = decoder_run_dir(cfg, out)
    greedy = cfg.task == "humaneval-gen"
    plan = {"path": str(path), "key": cfg.key(), "finished": (path / SUMMARY_FILE).is_file(),
            "model": cfg.model, "task": cfg.task, "split": cfg.split,
            "samples": cfg.data.samples, "exit_layers": list(cfg.exits.layers),
            "head": cfg.exits.head, "tuning_steps": cfg.tuning_steps, "methods": methods,
            "spec_checks": [list(p) for p in cfg.checked_spec_points()] if greedy else [],
            "calm_real": list(cfg.real_thresholds()) if greedy else [],
            "timing": cfg.timing and greedy, "config": cfg.model_dump(mode="json")}
    if json_out:
        print_json(plan)
        return
    state = "finished (a run returns it as it is)" if plan["finished"] else "to run"
    err_console.print(
        f"{cfg.model} on {cfg.task} ({cfg.split}, {cfg.data.samples} samples): {cfg.exits.head} "
        f"exits at {list(cfg.exits.layers)}"
        + (f", EE-Tuning {cfg.tuning_steps} steps" if cfg.tuning_steps else "")
        + f"\nmethods: {', '.join(methods)}"
        + (f"\nself-spec checked for real at (k, d): {plan['spec_checks']}; CALM decoded for "
           f"real at {plan['calm_real']}" if greedy else "")
        + ("; timed at batch size 1" if plan["timing"] else "")
        + f"\nrun key {plan['key']}: {path} ({state})")


@app.command("decode", rich_help_panel=PANEL)
def decode_command(
    ctx: typer.Context,
    model: Annotated[str, typer.Option(
        "--model", help="Decoder: smollm2-135m (bundled), a local decoder model directory or a "
        "Llama-family hub id.")] = "smollm2-135m",
    task: Annotated[str, typer.Option(
        "--task", help="humaneval-gen (greedy generation) or imdb-lm (teacher-forced).")
                    ] = "humaneval-gen",
    split: Annotated[str, typer.Option("--split", help="The split evaluated.")] = "test",
    samples: Annotated[int, typer.Option("--samples", help="Prompts or reviews (seeded).")] = 8,
    seed: Annotated[int, typer.Option("--seed", help="The subset's seed.")] = 0,
    new_tokens: Annotated[int, typer.Option(
        "--new-tokens", help="humaneval-gen: tokens generated after each prompt.")] = 32,
    max_tokens: Annotated[int, typer.Option(
        "--max-tokens", help="imdb-lm: tokens per review (and per EE-Tuning text).")] = 256,
    exits: Annotated[str | None, typer.Option(
        "--exits", help="Exit layers, comma-separated (default: every fifth of the depth).",
        show_default=False)] = None,
    head: Annotated[str, typer.Option(
        "--head", help="lens (the final norm and LM head) or adapter (trained by --tune-steps)."
    )] = "lens",
    rank: Annotated[int, typer.Option("--rank", help="Adapter exits' bottleneck.")] = 16,
    method: Annotated[list[str] | None, typer.Option(
        "--method", help="A decoder method whose points the run makes (repeatable; default: "
        "every registered one that does the task and fits the exits: eebench methods).",
        show_default=False)] = None,
    tune_steps: Annotated[int, typer.Option(
        "--tune-steps", help="EE-Tuning steps on imdb-lm's training reviews (adapter exits).")
                          ] = 0,
    drafts: Annotated[str, SELF_SPEC(
        "--drafts", help="Draft lengths d, comma-separated.")] = "1,2,4",
    ks: Annotated[str | None, SELF_SPEC(
        "--ks", help="Exits drafts are made with (default: every exit).", show_default=False)
                  ] = None,
    spec_checks: Annotated[str, SELF_SPEC(
        "--spec-checks", help="Points decoded for real and checked against the simulation: "
        "longest (every k at the longest d), all (every k and d), or k:d pairs, comma-separated."
    )] = "longest",
    thresholds: Annotated[str, CALM(
        "--thresholds", help="Confidence thresholds, comma-separated.")
                          ] = "0.5,0.7,0.8,0.9,0.95,0.99",
    measure: Annotated[str, CALM("--measure", help="Confidence: maxprob or margin.")
                       ] = "maxprob",
    calm_real: Annotated[str | None, CALM(
        "--calm-real", help="Thresholds also decoded for real, comma-separated (default: the "
        "lowest, middle and highest).", show_default=False)] = None,
    timing: Annotated[bool, TIMING(
        "--timing/--no-timing", help="humaneval-gen: time real decoding at batch size 1.")
                      ] = False,
    timing_prompts: Annotated[int, TIMING(
        "--timing-prompts", help="Prompts timed: the run's first N.")] = 2,
    timing_repeats: Annotated[int, TIMING(
        "--timing-repeats", help="Timed calls per prompt, after a first call reported apart "
        "(ms per token: their mean).")] = 3,
    timing_batch: Annotated[int | None, TIMING(
        "--timing-batch", help="Also time the full model and the truncations (the methods whose "
        "decoding batches) at this batch size, over the first prompts cut to one length.",
        show_default=False)] = None,
    out: Annotated[Path, typer.Option("--out", help="Where run directories go.")
                   ] = Path("runs/decoder"),
    device: Annotated[str | None, typer.Option(
        "--device", help="cpu or cuda (default: cuda when present).", show_default=False)
                      ] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Redo a finished run.")] = False,
    config: Annotated[Path | None, typer.Option(
        "--config", help="The run's settings from a TOML file (DecodeConfig's fields: model, "
        "task, data, exits, ...); the settings options are then not given.",
        show_default=False)] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Say what the run is (its settings, hash, directory, methods, "
        "whether it is finished) without loading a model or data.")] = False,
    data_dir: Path | None = DataDirOption,
    json_out: bool = JsonOption,
) -> None:
    """Early exit in a decoder LLM: static, self-speculation (LayerSkip), adaptive k (DEL),
    CALM, EE-Tuning: the registered decoder methods (eebench methods).

    Every operating point of one backbone on one decoder task from one pass per prompt, with
    real decoding checking the simulation, FLOPs per token, and (--timing) wall time. A rerun
    with the same settings returns the finished run.

    Example: eebench decode --model smollm2-135m --task humaneval-gen --samples 8
    --new-tokens 32 --exits 6,12,18,24
    """
    from eebench.run.decoding import DecodeOptions, run_decoder

    if device not in (None, "cpu", "cuda"):
        raise UsageError(f"--device {device!r}", hint="cpu or cuda")
    if config is not None:
        given = [f"--{name.replace('_', '-')}" for name in SETTINGS if _given(ctx, name)]
        if given:
            raise UsageError(f"{', '.join(given)}: given with --config, whose file holds the "
                             "run's settings", hint="set them in the file, or leave --config out")
        cfg = config_from_file(config)
    else:
        if task not in ("humaneval-gen", "imdb-lm"):
            raise UsageError(f"--task {task!r} is not a decoder task",
                             hint="choose humaneval-gen or imdb-lm")
        layers = _numbers(exits, int, "--exits")
        cfg = _checked(lambda: _spec_checks(dict(
            model=model, task=task, split=split,
            data={"samples": samples, "seed": seed, "new_tokens": new_tokens,
                  "max_tokens": max_tokens},
            exits={"layers": layers if layers is not None else _default_exits(model),
                   "head": head, "rank": rank},
            tuning_steps=tune_steps, ks=_numbers(ks, int, "--ks"),
            draft_lengths=_numbers(drafts, int, "--drafts"),
            thresholds=_numbers(thresholds, float, "--thresholds"), measure=measure,
            calm_real=_numbers(calm_real, float, "--calm-real"), timing=timing,
            timing_prompts=timing_prompts, timing_repeats=timing_repeats,
            timing_batch=timing_batch, methods=tuple(method) if method else None), spec_checks),
            "eebench decode --help")
    if dry_run:
        show_plan(cfg, out, json_out)
        return
    opts = DecodeOptions(out=out_dir(out, "the run directory"),
                         data_dir=resolve_data_dir(data_dir), overwrite=overwrite, device=device)
    with progress(transient=True) as bar:
        job = None

        def report(what: str, n: int) -> None:
            nonlocal job
            if job is None:
                job = bar.add_task("decode", total=n, info="")
            else:
                bar.update(job, advance=n, info=what)

        opts.progress = report
        run = run_decoder(cfg, opts)
    if json_out:
        print_json({"path": str(run.path), "skipped": run.skipped,
                    "summary": run.summary.model_dump(mode="json"),
                    "points": [p.model_dump(mode="json") for p in run.points]})
        return
    print_table(run)


def _fmt(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def print_table(run) -> None:  # noqa: ANN001 - a DecodeRun
    from rich.table import Table

    s = run.summary
    state = "finished earlier, not rerun" if run.skipped else f"{s.wall_seconds:.1f} s"
    table = Table(title=f"{s.model} on {s.task}: {s.n_samples} samples, {s.num_layers} layers, "
                  f"{s.head} exits at {s.exit_layers} ({state})", title_justify="left")
    timed = any(p.timing for p in run.points)
    columns = ["method", "setting", "main", "other metrics", "MFLOPs/tok", "FLOPs ×",
               "exit layer", "accept %", "acc. len", "check / notes"]
    columns += ["ms/tok", "wall ×", "peer ms/tok"] if timed else []
    batch = next((p.batch_timing.batch for p in run.points if p.batch_timing), None)
    columns += [f"bs {batch} ms/tok", f"bs {batch} wall ×"] if batch else []
    for col in columns:
        table.add_column(col, overflow="fold")
    for p in run.points:
        setting = " ".join(f"{k}={v}" for k, v in p.setting.items() if k != "measure")
        others = " ".join(f"{k} {_fmt(v, 2)}" for k, v in p.metrics.items() if k != p.main_metric)
        check = ""
        if p.agrees is not None:
            check = "agrees" if p.agrees else f"[red]DIFFERS {p.check}[/]"
        if p.oracle_gap is not None:
            check = f"real {_fmt(p.real[p.main_metric])} (Δ {p.oracle_gap:+.1f})"
        if p.chosen_k:
            check = "k: " + " ".join(f"{k}×{n}" for k, n in p.chosen_k.items())
        row = [p.method, setting, _fmt(p.main), others, _fmt(p.mflops_per_token, 2),
               _fmt(p.flops_speedup, 2), _fmt(p.mean_exit_layer), _fmt(p.acceptance_rate),
               _fmt(p.mean_accepted, 2), check]
        if timed:
            t = p.timing
            row += [_fmt(t and t.ms_per_token, 2), _fmt(t and t.wall_speedup, 2),
                    _fmt(p.peer_timing and p.peer_timing.ms_per_token, 2)]
        if batch:
            b = p.batch_timing
            row += [_fmt(b and b.ms_per_token, 2), _fmt(b and b.wall_speedup, 2)]
        table.add_row(*row)
    err_console.print(table)
    err_console.print(f"[dim]main: {run.points[0].main_metric} (% of the full model's output); "
                      f"FLOPs ×: the full model's FLOPs per token over the point's; "
                      + (f"bs {batch}: the batch decoded at once, per token of the batch, wall × "
                         "over the full model decoding the same prompts one at a time; "
                         if batch else "")
                      + f"run directory: {run.path}")
