"""Evaluate one trained model for a run: its sweep points, their FLOPs, the check against real
dynamic inference and the wall-time measurements. eebench.runner calls it once per model (once, or
once per k for static).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from eebench import results as R
from eebench.evaluate import (
    ExitOutputs,
    NeverExit,
    collect_exit_logits,
    compare,
    dynamic_batch,
    dynamic_inference,
    simulate,
)
from eebench.methods.base import EarlyExitMethod, ExitRule
from eebench.tasks.spec import TaskSpec


def evaluate_variant(cfg: R.RunConfig, method: EarlyExitMethod, spec: TaskSpec, ckpt_dir: Path,
                     eval_ex, values: list[float], full_layers: int, opts
                     ) -> tuple[list[R.OperatingPoint], dict[str, np.ndarray], np.ndarray]:
    from eebench.batching import encode, eval_batches
    from eebench.measure.flops import build_cost_table
    from eebench.measure.params import params_per_exit
    from eebench.tasks.metrics import compute_metrics
    from eebench.train import load_trained

    model, tokenizer, _ = load_trained(ckpt_dir)
    enc = encode(eval_ex, tokenizer, cfg.max_seq_length, spec.is_regression)
    task = _progress_task(opts, f"{cfg.method} {cfg.task}: full pass", len(enc))
    out = collect_exit_logits(model, eval_batches(enc, opts.eval_batch_size, sort_by_length=True),
                              progress=lambda k: _advance(opts, task, k))
    table = build_cost_table(model, max_len=int(out.lengths.max()),
                             convention=cfg.flops_convention)
    params = params_per_exit(model)
    timing = {**cfg.timing}
    subset = _timing_subset(len(enc), int(timing.get("samples", 200)), seed=0)
    baseline = _time_full(model, enc, subset, timing, spec) if timing.get("enabled", True) else []

    points, exit_layers, preds = [], [], []
    exit_layer_of = np.asarray(model.exit_layers)
    for value in values:
        rule = method.exit_rule(value, spec.is_regression)
        dec = simulate(rule, out.logits, spec.is_regression)
        layers = exit_layer_of[dec.exit_index]
        flops = table.per_sample_flops(dec.exit_index, out.lengths)
        labelled = out.labels is not None
        metrics = compute_metrics(spec, dec.prediction, out.labels) if labelled else {}
        agreement = _check_real(model, rule, enc, subset, dec, spec, opts)
        timings = (_time_dynamic(model, rule, enc, subset, timing, spec)
                   if timing.get("enabled", True) else [])
        avg = float(layers.mean())
        points.append(R.OperatingPoint(
            method=cfg.method, task=cfg.task, split=cfg.split, seed=cfg.seed,
            sweep_param=method.sweep_param, sweep_value=float(value), n_samples=len(layers),
            num_layers=full_layers, metrics=metrics, main_metric=spec.main_metric,
            main=metrics.get(spec.main_metric), avg_exit_layer=avg,
            exit_histogram=np.bincount(layers, minlength=full_layers + 1)[1:].tolist(),
            flops_convention=cfg.flops_convention, mean_flops=float(flops.mean()),
            mean_mflops=float(flops.mean()) / 1e6, speedup=full_layers / avg,
            layer_saving=1 - avg / full_layers, params_total=params.total,
            params_mean_used=float(params.mean_used(dec.exit_index)),
            timings=timings + baseline, disagreements=agreement.disagreements,
            disagreements_near_threshold=agreement.near_threshold,
        ))
        exit_layers.append(layers.astype(np.int16))
        preds.append(dec.prediction.astype(np.float32 if spec.is_regression else np.int64))
        _advance(opts, None, 0)
    arrays = {"exit_layer": np.stack(exit_layers), "prediction": np.stack(preds),
              "lengths": out.lengths.astype(np.int32)}
    if out.labels is not None:
        arrays["labels"] = np.asarray(out.labels)
    # one row per point; the caller concatenates variants along the point axis
    return points, arrays, out.logits.numpy()


def _timing_subset(n: int, k: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n, size=min(k, n), replace=False))


def _check_real(model, rule: ExitRule, enc, subset: np.ndarray, simulated, spec: TaskSpec, opts):
    """Real dynamic inference on the subset, at batch size 1 and batched, against the simulation."""
    from eebench.batching import collate

    worst = None
    for bs in (1, opts.eval_batch_size):
        batches = (collate(enc, subset[i:i + bs].tolist()) for i in range(0, len(subset), bs))
        real = dynamic_inference(model, rule, batches, len(enc), spec.is_regression)
        got = compare(simulated, real, subset, spec.is_regression)
        if worst is None or got.disagreements > worst.disagreements:
            worst = got
    return worst


def _batches(enc, subset: np.ndarray, bs: int) -> list[dict]:
    from eebench.batching import collate

    return [collate(enc, subset[i:i + bs].tolist()) for i in range(0, len(subset), bs)]


def _time(model, rule, enc, subset, timing: dict, spec: TaskSpec, full: bool) -> list[R.Timing]:
    """Wall time of real inference over the timing subset, per batch size (raw values kept)."""
    from eebench.measure.timing import (
        Stopwatch,
        device_description,
        peak_memory_mb,
        reset_peak_memory,
    )

    device = next(model.parameters()).device
    out = []
    for bs in timing.get("batch_sizes", [1, 32]):
        batches = [{k: v.to(device) for k, v in b.items()} for b in _batches(enc, subset, bs)]
        for b in batches[: int(timing.get("warmup", 5))]:
            dynamic_batch(model, rule, b, spec.is_regression, full=full)
        reset_peak_memory(device)
        watch = Stopwatch(device)
        repeats = int(timing.get("repeats", 1))
        for _ in range(repeats):
            for b in batches:
                with watch.time():
                    dynamic_batch(model, rule, b, spec.is_regression, full=full)
        total_s = sum(watch.raw_ms) / 1e3 / repeats
        out.append(R.Timing(
            device=device_description(device), batch_size=bs,
            mode="full" if full else "dynamic", latency_ms=watch.summary(),
            throughput=len(subset) / total_s if total_s > 0 else None,
            peak_memory_mb=peak_memory_mb(device), raw_ms=[round(x, 4) for x in watch.raw_ms],
        ))
    return out


def _time_dynamic(model, rule, enc, subset, timing, spec):
    return _time(model, rule, enc, subset, timing, spec, full=False)


def _time_full(model, enc, subset, timing, spec):
    return _time(model, NeverExit(), enc, subset, timing, spec, full=True)


def _progress_task(opts, description: str, total: int) -> Any:
    if opts.progress is None:
        return None
    return opts.progress.add_task(description, total=total, info="")


def _advance(opts, task, k: int) -> None:
    if opts.progress is not None and task is not None:
        opts.progress.advance(task, k)


__all__ = ["evaluate_variant", "ExitOutputs"]
