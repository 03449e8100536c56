"""`eebench run`: train (or reuse), one full pass, every sweep point, FLOPs, params, timing, disk.

The run directory is keyed by the hash of its RunConfig. Everything in it is written atomically and
`summary.json` last, so a directory with a summary is complete; rerunning the same command returns
it at once, and an interrupted run resumes (training from its last checkpoint, evaluation anew).
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from eebench.io import atomic_path, atomic_write_text, write_json
from eebench.io.locks import take_lock
from eebench.methods.base import EarlyExitMethod, get_method
from eebench.run.artifacts import (
    CONFIG_FILE,
    ENV_FILE,
    IDS_FILE,
    POINTS_FILE,
    PREDICTIONS_FILE,
    SUMMARY_FILE,
    ModelOrigin,
    OperatingPoint,
    Provenance,
    RunConfig,
    RunSummary,
    VariantRecord,
    file_hashes,
    ids_text,
    logits_key,
    samples_hash,
    verify_run,
    write_points,
)
from eebench.run.names import backbone_layers
from eebench.tasks.catalog import get_task
from eebench.tasks.spec import TaskSpec
from eebench.train.checkpoint import read_state

EVAL_SUBSET_SEED = 0  # subsets of the evaluated split do not depend on the run's seed


@dataclass
class RunOptions:
    """What does not change the results: where things go and how they are shown."""

    data_dir: Path | None = None
    out: Path = Path("runs")
    checkpoints: Path = Path("checkpoints")
    overwrite: bool = False
    eval_batch_size: int = 64
    console: Any = None
    progress: Any = None  # a rich Progress, or None


def run_dir_for(cfg: RunConfig, out: Path) -> Path:
    from eebench.train.checkpoint import model_slug

    return Path(out) / model_slug(cfg.model) / cfg.label / cfg.task / cfg.key()


def execute(cfg: RunConfig, opts: RunOptions) -> Path | None:
    """Run one configuration; returns its run directory, or None when another process is running
    it (several `eebench run` processes on one grid share the work this way)."""
    return execute_group([cfg], opts)[0]


def same_pass(a: RunConfig, b: RunConfig) -> bool:
    """Whether two runs read the same trained model over the same split (they differ at most in
    their exit rule and its sweep): one pass serves both."""
    keep = {"rule", "sweep"}
    return a.model_dump(exclude=keep) == b.model_dump(exclude=keep)


def execute_group(cfgs: list[RunConfig], opts: RunOptions,
                  dev_twins: list[RunConfig] | None = None) -> list[Path | None]:
    """Run configurations that share one trained model and split (`same_pass`: the method's own
    rule and the other rules asked for): train once, one full pass over the split, then each
    run's sweep and its run directory. Finished runs are returned as they are; a run another
    process holds is None. `dev_twins` (test-split twins): each run's dev run, whose key and
    models the twin's summary records (`provenance`)."""
    twins = {} if dev_twins is None else {
        c.key(): d.key() for c, d in zip(cfgs, dev_twins, strict=True)}
    out: list[Path | None] = []
    todo: list[tuple[RunConfig, Path, Any]] = []
    try:
        for cfg in cfgs:
            run_dir = run_dir_for(cfg, opts.out)
            if opts.overwrite and run_dir.exists():
                shutil.rmtree(run_dir)
            if (run_dir / SUMMARY_FILE).exists():
                out.append(_done(run_dir, opts))
                continue
            lock = _claim(run_dir)
            if lock is None:
                out.append(None)
                continue
            if (run_dir / SUMMARY_FILE).exists():  # finished by another process meanwhile
                lock.close()
                out.append(_done(run_dir, opts))
                continue
            todo.append((cfg, run_dir, lock))
            out.append(run_dir)
        if todo:
            _execute([c for c, _, _ in todo], opts, [d for _, d, _ in todo], twins)
    finally:
        for _, run_dir, lock in todo:
            if (run_dir / SUMMARY_FILE).exists():  # finished, even if a later run of the
                (run_dir / LOCK_FILE).unlink(missing_ok=True)  # pass failed
            lock.close()
    return out


def _done(run_dir: Path, opts: RunOptions) -> Path:
    verify_run(run_dir)
    _say(opts, f"already done: {run_dir}")
    return run_dir


LOCK_FILE = ".lock"


def _claim(run_dir: Path) -> Any:
    """An exclusive lock on the run directory (`eebench.io.locks`: a regular `.lock` file, never
    opened through a link), or None when another process holds it. The lock is the operating
    system's (flock): it goes when its process ends, however it ends."""
    run_dir.mkdir(parents=True, exist_ok=True)
    return take_lock(run_dir / LOCK_FILE, wait=False)


def _execute(cfgs: list[RunConfig], opts: RunOptions, run_dirs: list[Path],
             twins: dict[str, str]) -> None:
    """Runs that share their model and split (see execute_group): one pass, each its sweep."""
    started = time.perf_counter()
    from eebench.measure.env import environment

    cfg = cfgs[0]
    if any(not same_pass(cfg, c) for c in cfgs):  # a caller's bug, not a user error
        raise ValueError("execute_group: the runs do not share a model and a split")
    spec = get_task(cfg.task)  # evaluated
    trained = get_task(cfg.trained_on)  # the same task, or another one's (--eval-task)
    imported = cfg.weights is not None  # weights made elsewhere: nothing trains
    env = environment(None if imported else cfg.train.precision)  # with the hardware
    for c, run_dir in zip(cfgs, run_dirs, strict=True):
        write_json(run_dir / CONFIG_FILE, c)
        write_json(run_dir / ENV_FILE, env)

    from eebench.tasks.loaders import load_split

    train_ex = None if imported else load_split(trained, "train", opts.data_dir)
    dev_ex = load_split(trained, "dev", opts.data_dir)  # training's own dev set
    train_dev = dev_ex  # what training reports its exits' dev metrics on (nothing else reads it)
    if cfg.max_eval_samples is not None and cfg.max_eval_samples < len(dev_ex):
        train_dev = dev_ex.take(cfg.max_eval_samples, EVAL_SUBSET_SEED)
    if trained.name != spec.name:
        eval_ex = load_split(spec, cfg.split, opts.data_dir)
    else:
        eval_ex = dev_ex if cfg.split == "dev" else load_split(spec, cfg.split, opts.data_dir)
    if cfg.split == "test":  # withheld: predictions only, even from a file with labels (IMDb's)
        eval_ex = replace(eval_ex, labels=None)
    if cfg.max_eval_samples is not None and cfg.max_eval_samples < len(eval_ex):
        # the same samples for every seed and method, so their points are paired
        eval_ex = eval_ex.take(cfg.max_eval_samples, EVAL_SUBSET_SEED)

    method = get_method(cfg.method, **cfg.method_settings)
    # a rule run sweeps its own values over the method's one model (`sweep_variant`)
    variants = method.variants(cfg.sweep if cfg.rule is None else [])
    full_layers = cfg.weights.num_layers if imported else backbone_layers(cfg.model)

    from eebench.run.evaluate import full_pass, rule_record, sweep_variant

    if spec.unit == "token":  # a tag per word: entity F1, a decision per sentence
        from eebench.run.evaluate_tokens import sweep_tokens as sweep_variant  # noqa: F811
        from eebench.run.evaluate_tokens import token_pass as full_pass  # noqa: F811

    # each variant's models (one, or several run in turn), all trained before any is measured
    ckpt_dirs = [[_imported(cfg, v.method, opts)] for v in variants] if imported else _train_all(
        cfg, [v.method.models(full_layers) for v in variants], trained, train_ex, train_dev, opts)
    results = [_Results() for _ in cfgs]
    for variant, ckpt_dir in zip(variants, ckpt_dirs, strict=True):
        fp = full_pass(_pass_config(cfgs, variant), spec, ckpt_dir, eval_ex, opts)
        if len(cfgs) > 1:
            _say(opts, f"one pass over {len(eval_ex)} samples: sweeping "
                       f"{', '.join(c.label for c in cfgs)}")
        for c, res in zip(cfgs, results, strict=True):
            res.add(variant, sweep_variant(c, variant, spec, fp, full_layers, opts), ckpt_dir,
                    len(variants))
    for c, run_dir, res in zip(cfgs, run_dirs, results, strict=True):
        _write_predictions(run_dir, res.arrays, res.extra)
        atomic_write_text(run_dir / IDS_FILE, ids_text(eval_ex.ids, eval_ex.source))
        write_points(run_dir / POINTS_FILE, res.points)
        summary = _summary(c, run_dir, res.points, len(eval_ex), res.records)
        summary.samples_sha256 = samples_hash(eval_ex.ids, eval_ex.texts)
        summary.rule = rule_record(c, method, spec)
        summary.files = file_hashes(run_dir)  # the summary vouches for what was written
        summary.wall_seconds = round(time.perf_counter() - started, 1)
        summary.train_seconds = res.train_seconds
        if c.key() in twins:
            summary.provenance = provenance(twins[c.key()], ckpt_dirs)
        write_json(run_dir / SUMMARY_FILE, summary)


def provenance(dev_run: str, ckpt_dirs: list[list[Path]]) -> Provenance:
    """What a test-split twin records of the models it read: each checkpoint once, in the order
    its variants run them (a cascade's models recur in its longer variants), with the seed it
    was trained with and the sha256 of its weights."""
    from eebench.io import sha256_file
    from eebench.train.checkpoint import MODEL_FILE

    dirs = list(dict.fromkeys(Path(d) for group in ckpt_dirs for d in group))
    return Provenance(dev_run=dev_run, models=[ModelOrigin(
        checkpoint=d.name, seed=_trained_seed(d),
        weights_sha256=sha256_file(d / MODEL_FILE) if (d / MODEL_FILE).is_file() else None)
        for d in dirs])


def _trained_seed(ckpt_dir: Path) -> int | None:
    """The training seed in a checkpoint's state (None: weights imported, nothing trained)."""
    state = read_state(ckpt_dir)
    seed = (state.config.get("train") or {}).get("seed") if state is not None else None
    return seed if isinstance(seed, int) else None


def _pass_config(cfgs: list[RunConfig], variant) -> RunConfig:
    """The run configuration a variant's full pass reads: the group's first, with timing off
    where no run of the group times a point of this variant (`[timing] points`), so that the
    full model is not timed once for a model none of whose points is timed."""
    def times(c: RunConfig) -> bool:
        values = variant.values if c.rule is None else c.sweep
        return any(v in c.timing.timed_values(c.sweep) for v in values)

    cfg = cfgs[0]
    if any(times(c) for c in cfgs) or not cfg.timing.enabled:
        return cfg
    return cfg.model_copy(update={"timing": cfg.timing.model_copy(update={"enabled": False})})


@dataclass
class _Results:
    """One run's points, per-sample arrays and variant records, variant by variant."""

    points: list[OperatingPoint] = field(default_factory=list)
    arrays: dict[str, list[np.ndarray]] = field(
        default_factory=lambda: {"exit_layer": [], "prediction": []})
    extra: dict[str, np.ndarray] = field(default_factory=dict)
    train_seconds: float = 0.0  # what training its models took (their checkpoints say)
    records: list[VariantRecord] = field(default_factory=list)

    def add(self, variant, measured, ckpt_dir: list[Path], n_variants: int) -> None:
        self.points += measured.points
        self.train_seconds = round(self.train_seconds + sum(
            getattr(read_state(Path(d)), "train_seconds", 0.0) for d in ckpt_dir), 1)
        for k in self.arrays:
            self.arrays[k].append(measured.arrays[k])
        key = logits_key(variant.name, n_variants)
        self.extra[key] = measured.logits
        for name, values in measured.signals.items():
            self.extra[f"{key}.{name}"] = values
        if measured.arrays.get("labels") is not None:
            self.extra["labels"] = measured.arrays["labels"]
        self.extra["lengths"] = measured.arrays["lengths"]
        for name in ("words", "counted"):  # a token task's: words per sentence, with a piece
            if name in measured.arrays:
                self.extra[name] = measured.arrays[name]
        if "token_exit_layer" in measured.arrays:  # per point, like the predictions
            self.arrays.setdefault("token_exit_layer", []).append(
                measured.arrays["token_exit_layer"])
        self.records.append(VariantRecord(
            name=variant.name, sweep_values=[p.sweep for p in measured.points],
            logits_key=key, checkpoint=";".join(map(str, ckpt_dir)), **measured.structure))


def _train_all(cfg: RunConfig, models: list[list[EarlyExitMethod]], spec: TaskSpec, train_ex,
               dev_ex, opts: RunOptions) -> list[list[Path]]:
    """Every model of a run, in order; one that another process is training (a worker helping
    with this run: `help_train`) is left to it and waited for once the rest are trained."""
    found = [[_train(cfg, m, spec, train_ex, dev_ex, opts, wait=False) for m in group]
             for group in models]
    return [[p or _train(cfg, m, spec, train_ex, dev_ex, opts)  # type: ignore[misc]
             for p, m in zip(paths, group, strict=True)]
            for paths, group in zip(found, models, strict=True)]


def help_train(cfg: RunConfig, opts: RunOptions) -> None:
    """Train the models of a run that another process holds (a run of several models, such as
    static's one per depth), from its last model back while that process trains from its first,
    so that the two meet part-way; a model either of them is training is left to it."""
    if cfg.weights is not None:
        return
    method = get_method(cfg.method, **cfg.method_settings)
    full_layers = backbone_layers(cfg.model)
    models = [m for v in method.variants(cfg.sweep if cfg.rule is None else [])
              for m in v.method.models(full_layers)]
    if len(models) < 2:  # its one model is the other process's
        return
    from eebench.tasks.loaders import load_split

    _say(opts, f"another process runs {cfg.label} on {cfg.task}: training its models from the "
               "last one back")
    trained = get_task(cfg.trained_on)
    train_ex = load_split(trained, "train", opts.data_dir)
    dev_ex = load_split(trained, "dev", opts.data_dir)
    for m in reversed(models):
        _train(cfg, m, trained, train_ex, dev_ex, opts, wait=False)


def _train(cfg: RunConfig, method: EarlyExitMethod, spec: TaskSpec, train_ex, dev_ex,
           opts: RunOptions, wait: bool = True) -> Path | None:
    from eebench.train.loop import train

    return train(method, spec, cfg.model, train_ex, dev_ex, cfg.train, opts.checkpoints,
                 opts.console, pooling=cfg.pooling, wait=wait)


def _imported(cfg: RunConfig, method: EarlyExitMethod, opts: RunOptions) -> Path:
    from eebench.train.imported import import_checkpoint

    return import_checkpoint(cfg.weights, method, opts.checkpoints, opts.console)


def _write_predictions(run_dir: Path, arrays: dict[str, list[np.ndarray]],
                       extra: dict[str, np.ndarray]) -> None:
    """predictions.safetensors, serialised in memory and written by Python: a full disk is the
    OSError every other write gives (safetensors' own writer raises an error of its own)."""
    from safetensors.numpy import save

    tensors = {k: np.ascontiguousarray(np.concatenate(v)) for k, v in arrays.items()}
    tensors.update({k: np.ascontiguousarray(v) for k, v in extra.items()})
    data = save(tensors)
    with atomic_path(run_dir / PREDICTIONS_FILE) as tmp:
        tmp.write_bytes(data)


def _summary(cfg: RunConfig, run_dir: Path, points: list[OperatingPoint], n: int,
             variants: list[VariantRecord]) -> RunSummary:
    full = max(points, key=lambda p: (p.avg_exit_layer, p.mean_flops))
    mains = [p.main for p in points if p.main is not None]
    return RunSummary(
        model=cfg.model, method=cfg.label, task=cfg.task, split=cfg.split, seed=cfg.seed,
        config_hash=run_dir.name, n_samples=n, num_points=len(points),
        full_model={"sweep_value": full.sweep_value, "main": full.main,
                    "mean_mflops": full.mean_mflops, "avg_exit_layer": full.avg_exit_layer},
        best_main=max(mains) if mains else None,
        variants=variants,
    )


def _say(opts: RunOptions, msg: str) -> None:
    if opts.console is not None:
        opts.console.print(msg)
