"""Evaluate one trained model for a run: its sweep points, their FLOPs, the check against real
dynamic inference and the wall-time measurements. eebench.run.execute calls it once per variant
(the one model of a joint method, or one per k for static): one full pass over the split
(`full_pass`), then each run's sweep over it (`sweep_variant`), for the method's own rule and
every other rule the user asked for on the same model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from eebench.measure.quality import exited_logits, point_quality
from eebench.methods import derived
from eebench.methods.base import JOINT, Variant, get_method
from eebench.models.exits import exit_paths
from eebench.models.units import model_unit
from eebench.rules.base import ExitRule, FixedRule
from eebench.rules.catalog import ModelFacts, get_rule
from eebench.rules.engine import (
    Decisions,
    compare,
    dynamic_batch,
    dynamic_inference,
    simulate_pass,
)
from eebench.run.artifacts import OperatingPoint, RuleRecord, RunConfig, Timing
from eebench.run.config import TimingConfig
from eebench.tasks.spec import TaskSpec


@dataclass
class Measured:
    """One variant measured: its points, per-sample arrays (one row per point) and exit logits."""

    points: list[OperatingPoint]
    arrays: dict[str, np.ndarray]  # exit_layer and prediction [P, N], lengths and labels [N]
    logits: np.ndarray  # [E, N, C]
    structure: dict[str, Any]  # exit_layers, hidden_size, pooling (of eebench.run.artifacts)
    signals: dict[str, np.ndarray] = field(default_factory=dict)  # [E, N] each, by name


@dataclass
class FullPass:
    """One trained model run once over the evaluated split: every exit's outputs, the FLOP and
    parameter tables, the timing subset and the full model's timings. Every rule swept on the
    model (`eebench run --rule`) reads this one pass."""

    model: Any
    enc: Any
    out: Any  # ExitOutputs
    table: Any  # the FLOP cost table
    params: Any
    subset: np.ndarray
    baseline: list[Timing]
    facts: ModelFacts
    live_costs: Any = None  # a token model whose words halt: per-layer live FLOPs (token_flops)


def full_pass(cfg: RunConfig, spec: TaskSpec, ckpt_dirs: list[Path], eval_ex, opts
              ) -> FullPass:
    """Load the checkpoints of a variant's models (one, or several run in turn), combine them
    into the one model the method measures, and run it once over the split (see FullPass): its
    unit (eebench.models.units) says how the split is encoded and what the pass keeps."""
    from eebench.data.batching import eval_batches
    from eebench.data.tokens import encode_for
    from eebench.measure.cost_table import build_cost_table
    from eebench.measure.params import params_per_exit
    from eebench.train.checkpoint import load_trained

    loaded = [load_trained(d) for d in ckpt_dirs]  # one backbone: one tokenizer
    model = get_method(cfg.method, **cfg.method_settings).combine([m for m, _, _ in loaded])
    unit = model_unit(model)
    tokenizer = loaded[0][1]
    enc = encode_for(spec, eval_ex, tokenizer, cfg.max_seq_length)
    task = _progress_task(opts, f"{cfg.method} {cfg.task}: full pass", len(enc))
    out = unit.collect(model, enc, eval_batches(enc, opts.eval_batch_size, sort_by_length=True),
                       progress=lambda k: _advance(opts, task, k))
    table = build_cost_table(model, max_len=int(out.lengths.max()),
                             convention=cfg.flops_convention)
    subset = _timing_subset(len(enc), cfg.timing.samples, seed=0)
    baseline = _real_inference(model, FixedRule(exit=False), enc, subset, cfg.timing, spec,
                               full=True)[0] if cfg.timing.full_once else []
    facts = ModelFacts(spec.is_regression, model.num_labels, model.temperatures(),
                       model.signal_names, dict(model.method_settings),
                       num_exits=model.num_exits)
    return FullPass(model, enc, out, table, params_per_exit(model), subset, baseline, facts)


def rule_for(cfg: RunConfig, variant: Variant, facts: ModelFacts
             ) -> tuple[Callable[[float], dict], Callable[[float], ExitRule]]:
    """The run's sweep values as its points name them, and its rule at a sweep value: the
    method's own rule, or the rule the run names (`cfg.rule`), refused in one line where the
    model lacks what it needs."""
    method = variant.method
    if cfg.rule is None:
        values = partial(derived.sweep_values, method)
        return values, lambda v: method.exit_rule(v, facts.is_regression, facts)
    kind = get_rule(cfg.rule)
    kind.refuse_unless(facts.provides(), f"this {cfg.method} model")
    facts = replace(facts, rule_settings=rule_settings(cfg, method))

    def build(value: float) -> ExitRule:
        kind.check(value)
        return kind.build(value, facts)

    return kind.values, build


def rule_settings(cfg: RunConfig, method: Any) -> dict[str, Any]:
    """The settings of the run's rule, as it read them: what the method gives its own rule (a
    rule the run names takes its defaults), over the rule's defaults; none without a rule."""
    name = cfg.rule or method.rule
    if not name:
        return {}
    return get_rule(name).settings(derived.rule_settings(method) if cfg.rule is None else {})


def rule_record(cfg: RunConfig, method: Any, spec: TaskSpec) -> RuleRecord:
    """The rule a run's points are decided by, as the run directory records it: its name (None
    for single-exit models), how it meets its threshold, its own settings, and whether the task
    is a regression."""
    name = cfg.rule or method.rule or None
    comparison = None
    if name is not None:  # the method's own rule as its authors test it, another rule its own way
        comparison = (derived.rule_comparison(method) if cfg.rule is None
                      else get_rule(name).comparison)
    return RuleRecord(name=name, comparison=comparison, is_regression=spec.is_regression,
                        settings=rule_settings(cfg, method) or None)


def _halts(cfg: RunConfig, method: Any) -> bool:
    """Whether the run's rule (its own, or the one it names) halts tokens on their own (TOKEE):
    a halted token's state is copied upward, so the outputs above depend on the decisions below
    and the rule is not replayed over the pass: each sweep value runs the model (with the copies,
    eebench.rules.token_halting) and its FLOPs are counted per token."""
    name = cfg.rule or method.rule
    return bool(name) and getattr(get_rule(name), "halts_tokens", False)


def _live_costs(fp: FullPass, convention: str) -> Any:
    """The per-token layer costs of the pass's model, counted once per pass."""
    if fp.live_costs is None:
        from eebench.measure.token_flops import build_live_costs, check_full

        fp.live_costs = build_live_costs(fp.model, convention)
        check_full(fp.live_costs, fp.table)
    return fp.live_costs


def _decide(rule: ExitRule, fp: FullPass, spec: TaskSpec, halts: bool, batch_size: int
            ) -> tuple[Any, np.ndarray | None]:
    """A point's decisions over the split, and the pieces each layer computed where tokens
    halt on their own (None: replayed over the pass)."""
    if not halts:
        return simulate_pass(rule, fp.out, spec.is_regression, model_unit(fp.model)), None
    from eebench.data.batching import eval_batches
    from eebench.rules.token_halting import halting_inference

    def counting(batch: dict):
        rows, width = batch["index"].tolist(), batch["input_ids"].shape[1]
        return fp.enc.counting_mask(rows, width), fp.enc.piece_owner(rows, width)

    run = halting_inference(fp.model, rule, eval_batches(fp.enc, batch_size, sort_by_length=True),
                            len(fp.enc), max(fp.enc.lengths), counting, live=False)
    return run.decisions, run.live_pieces


def sweep_variant(cfg: RunConfig, variant: Variant, spec: TaskSpec, fp: FullPass,
                  full_layers: int, opts) -> Measured:
    """Every sweep value of the run's rule over one full pass: the simulated decisions and their
    metrics, FLOPs and quality, each checked against real dynamic inference and timed with it
    (at every point, or at those `[timing] points` picks: the others have no timings). What is
    scored, stored and counted is the model's unit's (eebench.models.units): a label per text,
    or a tag per word (entity F1 over every word, a cut word predicted O)."""
    model, out, table, params, subset = fp.model, fp.out, fp.table, fp.params, fp.subset
    unit = model_unit(model)
    named, make_rule = rule_for(cfg, variant, fp.facts)
    halts = _halts(cfg, variant.method)
    values = variant.values if cfg.rule is None else tuple(cfg.sweep)
    sweep_task = _progress_task(opts, f"{cfg.label} {cfg.task}: sweep, check, time", len(values))
    points, exit_layers, stored = [], [], []
    exit_layer_of = np.asarray(model.exit_layers)
    logits_np = out.logits.numpy()
    # The full-depth prediction of a joint model is its last exit's; a method that trains one model
    # per depth has it in another variant, so `eebench score` fills those fields in.
    full_pred = logits_np[-1].argmax(-1) if variant.name == JOINT and unit.scores_quality else None
    # calibration and NLL of the probabilities the rule reads: z / T_j where it reads temperatures
    quality_logits = logits_np
    rule_name = cfg.rule or variant.method.rule  # static has none: one exit per model
    if rule_name and "temperatures" in get_rule(rule_name).needs:
        temps = np.asarray(fp.facts.temperatures, dtype=logits_np.dtype)
        quality_logits = logits_np / temps[:, None, None]
    walk = None
    if halts:  # real inference computes the live tokens only and drops finished sentences
        from eebench.rules.token_halting import halting_walks

        walk = halting_walks(model, fp.enc, live=True)
    for value in values:
        rule = make_rule(value)
        dec, live_pieces = _decide(rule, fp, spec, halts, opts.eval_batch_size)
        exit_index = np.asarray(dec.exit_index)
        layers = exit_layer_of[exit_index]
        flops = unit.flops_along(table, exit_index, out.lengths, live_pieces,
                                 _live_costs(fp, cfg.flops_convention) if halts else None)
        answers = unit.answers(fp.enc, dec.prediction)
        labelled = out.labels is not None
        metrics = unit.score(spec, answers, out.labels) if labelled else {}
        # real dynamic inference on the subset: checked against the simulation, and timed at
        # the points `[timing] points` picks (every point by default)
        timing = cfg.timing.at(value, cfg.sweep)
        timings, real = _real_inference(model, rule, fp.enc, subset, timing, spec, full=False,
                                        walk=walk)
        checks = [compare(dec, r, subset, spec.is_regression, unit=unit) for r in real]
        agreement = max(checks, key=lambda c: c.disagreements)
        avg = float(layers.mean())
        quality = _quality(quality_logits, dec, full_pred, out.labels,
                           spec.is_regression) if unit.scores_quality else {}
        points.append(OperatingPoint(
            method=cfg.label, variant=variant.name, task=cfg.task, split=cfg.split, seed=cfg.seed,
            sweep=named(value), n_samples=len(layers),
            num_layers=full_layers, metrics=metrics, main_metric=spec.main_metric,
            main=metrics.get(spec.main_metric), avg_exit_layer=avg,
            exit_histogram=np.bincount(layers, minlength=full_layers + 1)[1:].tolist(),
            flops_convention=cfg.flops_convention, mean_flops=float(flops.mean()),
            mean_mflops=float(flops.mean()) / 1e6, speedup=full_layers / avg,
            layer_saving=1 - avg / full_layers, params_total=params.total,
            params_mean_used=float(params.mean_used(exit_index)),
            timings=timings + fp.baseline if timing.enabled else [],
            disagreements=agreement.disagreements,
            disagreements_near_threshold=agreement.near_threshold,
            **quality,
        ))
        exit_layers.append(layers.astype(np.int16))
        stored.append(unit.stored_point(fp.enc, answers, getattr(dec, "token_exit", None),
                                        exit_layer_of, spec.is_regression))
        _advance(opts, sweep_task, 1)
    # one row per point; the caller concatenates variants along the point axis
    arrays = {"exit_layer": np.stack(exit_layers),
              **{k: np.stack([s[k] for s in stored]) for k in stored[0]},
              **unit.stored_split(fp.enc, out, spec.is_regression)}
    # and what the rule read of the model, so that every decision re-derives from the run alone
    temperatures = fp.facts.temperatures
    structure = {"exit_layers": list(model.exit_layers),
                 "hidden_size": int(model.config.hidden_size), "pooling": model.pooling,
                 # what a sample exiting at each exit ran: complete models in turn, their layers
                 # and heads (eebench.models.exits)
                 "exit_paths": [[{"layers": r.layers, "heads": list(r.heads)} for r in path]
                                for path in exit_paths(model)],
                 "temperatures": None if temperatures is None else [float(t) for t in temperatures],
                 "settings": dict(fp.facts.settings)}
    return Measured(points, arrays, unit.stored_logits(out), structure,
                    {k: v.numpy() for k, v in getattr(out, "signals", {}).items()})


def _quality(logits: np.ndarray, dec: Decisions, full_pred: np.ndarray | None, labels,
             regression: bool) -> dict[str, float | None]:
    """A point's quality fields (eebench.measure.quality): none for regression or without labels;
    without the full-depth prediction, calibration only."""
    if regression or labels is None:
        return {}
    pred = np.asarray(dec.prediction)
    q = point_quality(exited_logits(logits, np.asarray(dec.exit_index)), pred,
                      pred if full_pred is None else full_pred, np.asarray(labels))
    fields = {"ece": q.ece, "nll": q.nll}
    if full_pred is not None:
        fields.update(consistency=q.consistency, exit_gain=q.exit_gain, exit_loss=q.exit_loss)
    return fields


def _timing_subset(n: int, k: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n, size=min(k, n), replace=False))


def _batches(enc, subset: np.ndarray, bs: int) -> list[dict]:
    from eebench.data.batching import collate

    return [collate(enc, subset[i:i + bs].tolist()) for i in range(0, len(subset), bs)]


def _real_inference(model, rule: ExitRule, enc, subset: np.ndarray, timing: TimingConfig,
                    spec: TaskSpec, full: bool, walk: Any = None
                    ) -> tuple[list[Timing], list[Any]]:
    """Real inference over the subset at each timing batch size: wall time per batch (raw values
    kept) and the decisions it took, in split positions (rows outside the subset stay 0). With
    `timing.baseline` "paired", a point's timings hold the full model's too, timed beside it.
    `walk(batch)`: a walk other than the model's own (token halting's)."""
    unit = model_unit(model)
    beside = None
    if timing.full_beside and not full:
        no_exit = FixedRule(exit=False)

        def beside(b: dict) -> None:
            dynamic_batch(model, no_exit, b, spec.is_regression, full=True,
                          counting=unit.counting(b, enc))

    return timed_inference(
        model, enc, subset, timing, full,
        warm=lambda b: dynamic_batch(model, rule, b, spec.is_regression, full=full,
                                     counting=unit.counting(b, enc), walk=walk),
        infer=lambda batches, timer: dynamic_inference(model, rule, batches, len(enc),
                                                       spec.is_regression, full, timer=timer,
                                                       enc=enc, walk=walk),
        beside=beside)


def timed_inference(model, enc, subset: np.ndarray, timing: TimingConfig, full: bool,
                    warm: Callable[[dict], Any], infer: Callable[[list[dict], Any], Any],
                    beside: Callable[[dict], Any] | None = None,
                    ) -> tuple[list[Timing], list[Any]]:
    """At each timing batch size, `infer(batches, timer)` over the subset's batches (after
    `warm` on the first few), timed batch by batch: the timings and what each `infer` gave.

    With `beside` (the full model on one batch), the full model is timed on each batch just
    before `infer` times it, so the two alternate batch by batch and share the machine's load;
    its timings (mode "full") follow the others. Peak memory is then of the two together.

    With timing off, `infer` runs once, unwarmed, at the largest batch size only: the check
    against the simulation, whose batched exit (samples of one batch leaving at different
    layers) that batch size exercises; a run's batch sizes are for its timings."""
    from eebench.measure.timing import (
        Stopwatch,
        device_description,
        peak_memory_mb,
        reset_peak_memory,
    )

    device = next(model.parameters()).device
    timings, decisions, paired = [], [], []
    repeats = timing.repeats if timing.enabled else 1

    def record(watch: Stopwatch, bs: int, mode: str, peak: float | None) -> Timing:
        total_s = sum(watch.raw_ms) / 1e3 / repeats
        return Timing(
            device=device_description(device), batch_size=bs, mode=mode,
            latency_ms=watch.summary(), throughput=len(subset) / total_s if total_s > 0 else None,
            peak_memory_mb=peak, raw_ms=[round(x, 4) for x in watch.raw_ms])

    batch_sizes = timing.batch_sizes if timing.enabled else [max(timing.batch_sizes)]
    for bs in batch_sizes:
        batches = [{k: v.to(device) for k, v in b.items()} for b in _batches(enc, subset, bs)]
        for b in batches[: timing.warmup if timing.enabled else 0]:
            if beside is not None:
                beside(b)
            warm(b)
        reset_peak_memory(device)
        watch, full_watch = Stopwatch(device), Stopwatch(device)
        for _ in range(repeats):
            feed = batches if beside is None else _timed_beside(batches, beside, full_watch)
            dec = infer(feed, watch.time)
        decisions.append(dec)
        peak = peak_memory_mb(device)
        timings.append(record(watch, bs, "full" if full else "dynamic", peak))
        if beside is not None:
            paired.append(record(full_watch, bs, "full", peak))
    return timings + paired, decisions


def _timed_beside(batches: list[dict], beside: Callable[[dict], Any], watch) -> Any:
    """The batches in order, each after `beside` has run on it under `watch`."""
    for b in batches:
        with watch.time():
            beside(b)
        yield b


def _progress_task(opts, description: str, total: int) -> Any:
    if opts.progress is None:
        return None
    return opts.progress.add_task(description, total=total, info="")


def _advance(opts, task, k: int) -> None:
    if opts.progress is not None and task is not None:
        opts.progress.advance(task, k)


