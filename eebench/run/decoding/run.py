"""A decoder run: one backbone, one decoder task, one set of exits; every operating point.

The run directory `<out>/<model>/decode/<task>/<config-hash>/` holds

- `config.json`    DecodeConfig (its hash names the directory)
- `env.json`       hardware and versions (eebench.measure.env)
- `exits.safetensors`  the trained exit heads, when EE-Tuning ran
- `points.jsonl`   one DecoderPoint per line
- `summary.json`   DecodeSummary, written last: a directory with one is finished, and a rerun
                   with the same config returns it as it is (`skipped`)

Every file is written atomically (eebench.io). The model runs on `device` (default: CUDA when
present); prompts and reviews one at a time, unpadded.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eebench.errors import DataError, UsageError
from eebench.io import (
    atomic_write_text,
    config_hash,
    read_json,
    read_model,
    sha256_file,
    validated,
    write_json,
)
from eebench.run.decoding.records import (
    DecodeConfig,
    DecoderPoint,
    DecodeSummary,
    Tuning,
)

CONFIG_FILE, ENV_FILE, POINTS_FILE, SUMMARY_FILE = (
    "config.json", "env.json", "points.jsonl", "summary.json")
EXITS_FILE = "exits.safetensors"
LOCK_FILE = ".lock"  # held while a process works on the run (git ignores it)
TUNING_FILE = "tuning.json"  # beside a tuning folder's exits: their key, losses, wall time
TUNING_TASK = "imdb-lm"  # the decoder task with training texts


@dataclass
class DecodeOptions:
    """What does not change the results: where things go, the device, progress."""

    out: Path = Path("runs/decoder")
    data_dir: Path | None = None
    overwrite: bool = False
    device: str | None = None
    progress: Callable[[str, int], None] | None = None  # (what, total steps) then per step


@dataclass
class DecodeRun:
    path: Path
    config: DecodeConfig
    points: list[DecoderPoint]
    summary: DecodeSummary
    skipped: bool = False
    env: dict = field(default_factory=dict, repr=False)


def decoder_run_dir(cfg: DecodeConfig, out: Path) -> Path:
    from eebench.train.checkpoint import model_slug

    return Path(out) / model_slug(cfg.model) / "decode" / cfg.task / cfg.key()


def read_decoder_run(path: Path) -> DecodeRun:
    """A finished decoder run read back (one line for a missing or damaged file)."""
    path = Path(path)
    if not (path / SUMMARY_FILE).is_file():
        raise DataError(f"{path / SUMMARY_FILE}: missing: not a finished decoder run")
    config = read_model(path / CONFIG_FILE, DecodeConfig)
    summary = read_model(path / SUMMARY_FILE, DecodeSummary)
    for name, digest in summary.files.items():
        if sha256_file(path / name) != digest:
            raise DataError(f"{path / name}: does not match the sha256 its summary recorded",
                            hint="rerun with --overwrite to redo it")
    lines = (path / POINTS_FILE).read_text(encoding="utf-8").splitlines()
    points = [validated(DecoderPoint, json.loads(line), f"{path / POINTS_FILE}:{n}")
              for n, line in enumerate(lines, 1) if line.strip()]
    return DecodeRun(path, config, points, summary, env=read_json(path / ENV_FILE))


def check_config(cfg: DecodeConfig) -> None:
    """What a config cannot mean, refused before the model loads (exit 2): a split the task
    lacks, exit layers out of order or beyond a known model's depth (a local model's is checked
    once it loads: DecoderExits), points not among the run's exits, drafts and thresholds."""
    from eebench.models.backbones import known_depth
    from eebench.tasks.catalog import get_task

    splits = get_task(cfg.task).splits
    if cfg.split not in splits:
        raise UsageError(f"{cfg.task} has no split {cfg.split!r}",
                         hint=f"its splits: {', '.join(splits)}")
    given, depth = list(cfg.exits.layers), known_depth(cfg.model)
    if given != sorted(set(given)) or given[0] < 1 or (depth is not None and given[-1] >= depth):
        within = f"1..{depth - 1} ({cfg.model} has {depth} layers)" if depth else "from 1"
        raise UsageError(f"exit layers must be increasing, within {within}: {given}",
                         hint="after the last layer the model's own head speaks")
    layers = set(cfg.exits.layers)
    bad = [k for k in cfg.candidate_ks() if k not in layers]
    if bad:
        raise UsageError(f"self-speculation exits {bad} are not exit layers {sorted(layers)}")
    if any(d < 0 for d in cfg.draft_lengths) or not cfg.draft_lengths:
        raise UsageError(f"draft lengths must be >= 0: {list(cfg.draft_lengths)}")
    if not cfg.thresholds or any(not 0 <= t <= 1 for t in cfg.thresholds):
        raise UsageError(f"CALM thresholds must be within [0, 1]: {list(cfg.thresholds)}")
    if any(t not in cfg.thresholds for t in cfg.real_thresholds()):
        raise UsageError("CALM thresholds decoded for real must be among the thresholds")
    if any(k not in cfg.candidate_ks() or d not in cfg.draft_lengths
           for k, d in cfg.checked_spec_points()):
        raise UsageError("checked self-spec points (k, d) must be among the candidate exits "
                         "and draft lengths")
    if cfg.timing_batch and not (cfg.timing and cfg.task == "humaneval-gen"):
        raise UsageError("a timing batch times humaneval-gen's decoding: it needs --timing",
                         hint="add --timing, or leave --timing-batch out")
    if cfg.timing_batch and cfg.timing_batch > cfg.data.samples:
        raise UsageError(f"timing at batch size {cfg.timing_batch} needs as many prompts, the "
                         f"run has {cfg.data.samples}", hint="raise --samples")
    if cfg.tuning_steps and cfg.exits.head != "adapter":
        raise UsageError("EE-Tuning trains adapter exits: the logit lens has no parameters",
                         hint="add --head adapter, or leave --tune-steps at 0")
    decoder_methods(cfg)


def decoder_methods(cfg: DecodeConfig) -> list[Any]:
    """The decoder methods whose points run `cfg` makes, in registry order: those it names
    (each refused in one line where it is not a decoder method, does not do the task or does
    not fit the exits), else every registered one that does the task and fits."""
    from eebench.methods import decoder_derived as derived
    from eebench.methods.base import METHODS, get_method

    found = [get_method(n) for n in derived.decoder_methods(cfg.task)]
    fit = [m for m in found if derived.decoder_refusal(m, cfg) is None]
    if cfg.methods is None:
        return fit
    if not cfg.methods:
        raise UsageError("methods: an empty list", hint="name decoder methods, or leave it "
                         "unset for every one that fits")
    named = {METHODS.canonical(n) for n in cfg.methods}
    chosen = [get_method(n) for n in METHODS.names() if n in named]
    for m in chosen:
        if not derived.decodings(m):
            raise UsageError(f"--method {m.name}: not a decoder method (`eebench run` runs it "
                             "on the encoder tasks)",
                             hint=f"decoder methods: {', '.join(derived.decoder_methods())}")
        why = derived.decoder_refusal(m, cfg)
        if why is not None:
            raise UsageError(f"--method {m.name}: {why}", hint=f"methods for {cfg.task} with these "
                             f"exits: {', '.join(x.name for x in fit)}")
    return chosen


def run_decoder(cfg: DecodeConfig, opts: DecodeOptions | None = None) -> DecodeRun:
    """Run `cfg` (or return its finished directory as it is: `skipped`). The run holds its
    directory's lock (`.lock`, eebench.io.locks) while it works: a second process on the same
    run is refused in one line, and one that crashed leaves no lock behind."""
    from eebench.io.locks import take_lock

    opts = opts or DecodeOptions()
    check_config(cfg)
    run_dir = decoder_run_dir(cfg, opts.out)
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = take_lock(run_dir / LOCK_FILE, wait=False)
    if lock is None:
        raise DataError(f"{run_dir}: another process is running it",
                        hint="wait for it to finish; a rerun then returns its results")
    try:
        if opts.overwrite:
            for entry in run_dir.iterdir():
                if entry.name != LOCK_FILE:
                    shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        return _run_decoder(cfg, opts, run_dir)
    finally:
        lock.close()


def _run_decoder(cfg: DecodeConfig, opts: DecodeOptions, run_dir: Path) -> DecodeRun:
    import torch

    from eebench.measure.decoder_flops import exit_head_flops
    from eebench.measure.env import environment
    from eebench.methods import decoder_derived as derived
    from eebench.models.decoder_exits import DecoderExits, num_layers, save_exits
    from eebench.models.decoders import load_causal_lm, load_decoder_tokenizer
    from eebench.run.decoding.context import context
    from eebench.tasks.catalog import get_task
    from eebench.tasks.lm import load_texts, prompt_ids, token_windows

    if (run_dir / SUMMARY_FILE).is_file():
        done = read_decoder_run(run_dir)
        done.skipped = True
        return done
    started = time.perf_counter()
    texts, ids = load_texts(cfg.task, cfg.split, opts.data_dir, cfg.data)
    model = load_causal_lm(cfg.model)
    tokenizer = load_decoder_tokenizer(cfg.model)
    device = torch.device(opts.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    model.to(device)
    exits = DecoderExits(model, cfg.exits).to(device)
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json(run_dir / CONFIG_FILE, cfg)
    env = environment()
    write_json(run_dir / ENV_FILE, env)
    head_cost = exit_head_flops(model.config, cfg.exits.rank if cfg.exits.head == "adapter"
                                else None)
    total_layers = num_layers(model)

    methods = decoder_methods(cfg)
    if cfg.task == "humaneval-gen":
        inputs = [torch.tensor(p, device=device) for p in prompt_ids(tokenizer, texts)]
        if any(len(p) == 0 for p in inputs):
            raise DataError(f"{cfg.task}: a prompt tokenised to nothing")
    else:
        inputs = [torch.tensor(w, device=device)
                  for w in token_windows(tokenizer, texts, cfg.data.max_tokens)]
    timed = cfg.timing and get_task(cfg.task).decoding == "greedy"
    # a step per sample traced, per method's points, for EE-Tuning and for timing
    tick = _ticker(opts, len(inputs) + len(methods) + bool(cfg.tuning_steps) + timed
                   + bool(timed and cfg.timing_batch))

    losses: list[float] = []
    exits_file = tuning = None
    if cfg.tuning_steps:
        tuning = _tuned(model, exits, tokenizer, cfg, opts, device)
        losses = tuning.losses
        exits.eval()
        exits_file = EXITS_FILE
        save_exits(exits, run_dir / EXITS_FILE)
        tick("EE-Tuning")

    if get_task(cfg.task).decoding == "greedy":
        from eebench.run.decoding.greedy import trace_prompts

        traces = trace_prompts(model, exits, inputs, cfg.data.new_tokens, tick)
    else:
        from eebench.run.decoding.teacher import trace_reviews

        traces = trace_reviews(model, exits, inputs, tick)
    ctx = context(cfg, model, exits, inputs, traces, head_cost, _noting(opts))
    points = [ctx.point("full", {"k": total_layers}, ctx.score(*_full(ctx)), ctx.flops.full,
                        mean_exit_layer=float(total_layers))]
    for method in methods:
        points += derived.decoder_points(method, ctx)
        tick(method.name)
    if timed:
        from eebench.models.decoders import quiet
        from eebench.run.decoding.timing import time_points

        with quiet():  # transformers' generate warnings (the peer) are not the run's
            points = time_points(ctx, {m.name: m for m in methods}, points, tick)

    atomic_write_text(run_dir / POINTS_FILE, "".join(p.model_dump_json() + "\n" for p in points))
    full = points[0]
    checks = [p.agrees for p in points if p.agrees is not None]
    vouched = [CONFIG_FILE, ENV_FILE, POINTS_FILE] + ([EXITS_FILE] if exits_file else [])
    summary = DecodeSummary(
        model=cfg.model, task=cfg.task, split=cfg.split, config_hash=cfg.key(),
        num_layers=total_layers, exit_layers=list(cfg.exits.layers), head=cfg.exits.head,
        n_samples=len(inputs), sample_ids=[str(i) for i in ids],
        sample_tokens=[len(x) for x in inputs], num_points=len(points),
        full_model={"metrics": full.metrics, "flops_per_token": full.flops_per_token},
        tuning_losses=losses, exits_file=exits_file,
        tuning_key=tuning and tuning.key, tuning_seconds=tuning and tuning.wall_seconds,
        all_checks_agree=all(checks) if checks else None,
        files={name: sha256_file(run_dir / name) for name in vouched},
        wall_seconds=time.perf_counter() - started)
    write_json(run_dir / SUMMARY_FILE, summary)
    return DecodeRun(run_dir, cfg, points, summary, env=env)


def _full(ctx) -> tuple:  # noqa: ANN001 - a DecodeContext
    """The full model's own predictions: its greedy tokens, or its argmax and NLL."""
    if ctx.decoding == "greedy":
        return ([t.tokens for t in ctx.traces],)
    return [t.argmax[-1] for t in ctx.traces], [t.nll[-1] for t in ctx.traces]


def _noting(opts: DecodeOptions) -> Callable[[str], None]:
    """A method's progress: what it does now, the bar not advanced."""
    if opts.progress is None:
        return lambda what: None
    return lambda what: opts.progress(what, 0)  # type: ignore[misc]


def _ticker(opts: DecodeOptions, total: int) -> Callable[[str], None]:
    if opts.progress is None:
        return lambda what: None
    opts.progress("start", total)
    return lambda what: opts.progress(what, 1)  # type: ignore[misc]


def tuning_key(cfg: DecodeConfig) -> str:
    """What EE-Tuning's result depends on, hashed: the model, the exits, the tuning settings and
    its texts (imdb-lm's training reviews: how many, their seed and window)."""
    return config_hash({"model": cfg.model, "exits": cfg.exits.model_dump(mode="json"),
                        "steps": cfg.tuning_steps, "lr": cfg.tuning_lr,
                        "samples": cfg.tuning_samples, "seed": cfg.data.seed,
                        "max_tokens": cfg.data.max_tokens})


def tuning_dir(cfg: DecodeConfig, out: Path) -> Path:
    """Where trained exits are kept for every run of `out` that tunes them alike (a humaneval-gen
    and an imdb-lm run share one training): `<out>/<model>/exits/<tuning key>/`."""
    from eebench.train.checkpoint import model_slug

    return Path(out) / model_slug(cfg.model) / "exits" / tuning_key(cfg)


def _tuned(model, exits, tokenizer, cfg: DecodeConfig, opts: DecodeOptions, device) -> Tuning:
    """The run's exits EE-Tuned: read from the tuning folder where an earlier run of the same
    tuning left them (its losses and wall time with them), else trained and left there."""
    from eebench.io.locks import locked

    folder = tuning_dir(cfg, opts.out)
    folder.mkdir(parents=True, exist_ok=True)
    with locked(folder / LOCK_FILE):  # a second run tuning alike waits, then reads them
        return _tuned_here(model, exits, tokenizer, cfg, opts, device, folder)


def _tuned_here(model, exits, tokenizer, cfg: DecodeConfig, opts: DecodeOptions, device,
                folder: Path) -> Tuning:
    from safetensors.torch import load_file

    from eebench.models.decoder_exits import save_exits

    record = folder / TUNING_FILE
    if record.is_file() and (folder / EXITS_FILE).is_file():
        done = read_model(record, Tuning)
        if sha256_file(folder / EXITS_FILE) != done.exits_sha256:
            raise DataError(f"{folder / EXITS_FILE}: does not match the sha256 {record} recorded",
                            hint=f"delete {folder} to train the exits again")
        exits.load_state_dict(load_file(str(folder / EXITS_FILE), device=str(device)))
        return done
    started = time.perf_counter()
    losses = _tune(model, exits, tokenizer, cfg, opts, device)
    save_exits(exits, folder / EXITS_FILE)
    done = Tuning(key=tuning_key(cfg), losses=losses,
                  wall_seconds=time.perf_counter() - started,
                  exits_sha256=sha256_file(folder / EXITS_FILE))
    write_json(record, done)  # written last: a folder with one is complete
    return done


def _tune(model, exits, tokenizer, cfg: DecodeConfig, opts: DecodeOptions, device) -> list[float]:
    """EE-Tuning on imdb-lm's training reviews, one window a batch (no padding)."""
    import torch

    from eebench.tasks.lm import LMSettings, load_texts, token_windows
    from eebench.train.exit_tuning import train_exits

    settings = LMSettings(samples=cfg.tuning_samples, seed=cfg.data.seed,
                          max_tokens=cfg.data.max_tokens)
    texts, _ = load_texts(TUNING_TASK, "train", opts.data_dir, settings)
    batches = [torch.tensor([w], device=device)
               for w in token_windows(tokenizer, texts, cfg.data.max_tokens)]
    torch.manual_seed(cfg.data.seed)
    return train_exits(model, exits, batches, cfg.tuning_steps, lr=cfg.tuning_lr)
