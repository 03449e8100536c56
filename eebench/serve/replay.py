"""A serving replay of one operating point of a finished run: its trained model, its samples,
and what the offline one-pass simulation decided for each of them.

`load_target` rebuilds everything from the run directory: the model from the checkpoint its
variant records, the samples from the task's data (checked against the run's ids and the hash of
its texts), the point's exit rule as the run built it (eebench.run.rederive) and the offline
decisions, replayed over the exit logits the run stored. `measure_capacity` times the full model
on full batches; `replay` runs every scheduler at every rate and checks every answer;
`replay_seconds` says beforehand about how long that takes in real time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from eebench.data.batching import Encoded, collate
from eebench.errors import DataError
from eebench.io import read_text
from eebench.rules.base import ExitRule, FixedRule
from eebench.rules.engine import Decisions, dynamic_batch, simulate
from eebench.run.artifacts import (
    IDS_FILE,
    PREDICTIONS_FILE,
    RunFiles,
    samples_hash,
    verify_run,
)
from eebench.serve.arrivals import DEFAULT_BURST, bursty, poisson, rescale, span
from eebench.serve.report import ServeReport, result_of
from eebench.serve.scheduler import SCHEDULERS, Clock, serve


@dataclass
class Target:
    """A trained model ready to serve, and the decisions its answers must equal."""

    model: Any
    data: Encoded
    make_rule: Callable[[], ExitRule]
    offline: Decisions  # the point's rule, simulated over the stored exit outputs
    offline_full: Decisions  # the full model's answers (last exit), from the same outputs
    is_regression: bool
    source: str
    task: str
    method: str
    sweep_param: str
    sweep_value: float
    point: dict[str, Any]  # the point's accuracy (or main metric), mean exit layer and FLOPs


def offline_decisions(make_rule: Callable[[], ExitRule], logits: torch.Tensor,
                      is_regression: bool, signals: dict[str, torch.Tensor] | None = None
                      ) -> tuple[Decisions, Decisions]:
    """(the rule's decisions, the full model's) from every exit's stored outputs [E, N, C]."""
    return (simulate(make_rule(), logits, is_regression, signals),
            simulate(FixedRule(exit=False), logits, is_regression, signals))


def load_target(run_dir: Path, point: int, data_dir: Path | None, device: str = "cpu"
                ) -> Target:
    """Point `point` (a row of points.jsonl) of a finished run, ready to replay."""
    from safetensors.numpy import load_file

    from eebench.data.batching import encode
    from eebench.methods.base import get_method
    from eebench.models.units import unit_of
    from eebench.run.rederive import facts_for, rule_at
    from eebench.tasks.catalog import get_task
    from eebench.tasks.loaders import load_split
    from eebench.train.checkpoint import load_trained

    run = verify_run(Path(run_dir))  # finished, its files as its summary recorded them
    cfg, p = run.config, run.points[point]
    unit = unit_of(get_task(cfg.task).unit)
    if unit.per_token or unit.generates:  # a request is a text, answered by one exit
        what = "a token task (sequence labelling)" if unit.per_token else f"its task {unit.does}"
        raise DataError(f"{run_dir}: a run of {cfg.task}, {what}; serve-replay serves "
                        "sequence-level runs (a label per text)")
    variant = run.summary.variant(p.variant)
    arrays = load_file(str(run.path / PREDICTIONS_FILE))
    facts = facts_for(run, variant, arrays)
    logits = torch.from_numpy(arrays[variant.logits_key].copy())
    signals = {s: torch.from_numpy(arrays[f"{variant.logits_key}.{s}"].copy())
               for s in facts.signals}
    offline, offline_full = offline_decisions(lambda: rule_at(run, p.sweep_value, facts), logits,
                                              facts.is_regression, signals)
    if not variant.checkpoint:
        raise DataError(f"{run_dir}: its variant {variant.name!r} records no checkpoint")
    paths = [Path(c) for c in variant.checkpoint.split(";")]
    for c in paths:
        if not c.is_dir():
            raise DataError(f"{c}: the checkpoint of run {run_dir} is not there",
                            hint="run the command from where `eebench run` ran, or keep its "
                                 "checkpoints")
    loaded = [load_trained(c) for c in paths]
    model = get_method(cfg.method, **cfg.method_settings).combine([m for m, _, _ in loaded])
    model.to(device).eval()
    examples = _run_samples(run, load_split(cfg.task, cfg.split, data_dir))
    data = encode(examples, loaded[0][1], cfg.max_seq_length, facts.is_regression)
    point_facts = {"main_metric": p.main_metric, "main": p.main,
                   "avg_exit_layer": p.avg_exit_layer, "num_layers": p.num_layers,
                   "mean_mflops": p.mean_mflops}
    return Target(model, data, lambda: rule_at(run, p.sweep_value, facts), offline, offline_full,
                  facts.is_regression, str(run.path), cfg.task, cfg.label, p.sweep_param,
                  p.sweep_value, point_facts)


def _run_samples(run: RunFiles, examples):
    """The run's own samples, in its order (ids.txt), checked against the hash of their texts."""
    ids = read_text(run.path / IDS_FILE).splitlines()
    row = {i: k for k, i in enumerate(examples.ids)}
    missing = [i for i in ids if i not in row]
    if missing:
        raise DataError(f"{examples.source}: {len(missing)} of the run's {len(ids)} sample ids "
                        "are not in it", hint="point --data-dir at the data the run evaluated")
    chosen = examples.select([row[i] for i in ids])
    recorded = run.summary.samples_sha256 if run.summary is not None else None
    if recorded is not None and samples_hash(chosen.ids, chosen.texts) != recorded:
        raise DataError(f"{examples.source}: its texts of the run's samples are not the ones "
                        f"run {run.path} evaluated",
                        hint="point --data-dir at the data the run evaluated")
    return chosen


def measure_capacity(target: Target, max_batch: int, batches: int = 4) -> tuple[float, float]:
    """(requests per second, seconds per batch) of the full model on full batches of the
    split's first rows, after one untimed batch: what the default rates and target scale by."""
    model, data = target.model, target.data
    device = next(model.parameters()).device
    rows = np.arange(len(data))
    rng = np.random.default_rng(1)
    per_batch = []
    for k in range(batches + 1):
        idx = rng.choice(rows, size=min(max_batch, len(rows)), replace=False).tolist()
        batch = collate(data, idx, device)
        t0 = time.perf_counter()
        dynamic_batch(model, FixedRule(exit=False), batch, target.is_regression, full=True)
        if k:
            per_batch.append(time.perf_counter() - t0)
    seconds = float(np.median(per_batch))
    return min(max_batch, len(rows)) / seconds, seconds


def replay_seconds(rates: Sequence[float], n: int, capacity_rps: float | None = None,
                   schedulers: int = len(SCHEDULERS)) -> float:
    """About how long a replay of `n` requests takes in real time: each scheduler at each rate
    waits for the arrivals' span, and takes at least n / capacity to serve them where the full
    model's capacity is known (a rate above it is served at about the capacity)."""
    serving = n / capacity_rps if capacity_rps else 0.0
    return schedulers * sum(max(span(n, rate), serving) for rate in rates)


def replay(target: Target, kind: str, rates: Sequence[float], requests: int, max_batch: int,
           target_ms: float, capacity_rps: float, device: str, seed: int = 0,
           trace: np.ndarray | None = None, burst: float = DEFAULT_BURST,
           schedulers: Sequence[str] = SCHEDULERS,
           clock: Callable[[], Clock] | None = None,
           progress: Callable[[str], None] | None = None) -> ServeReport:
    """Every scheduler at every rate on one arrival list per rate (a trace: rescaled to each
    rate, its own length); request i asks for sample `order[i mod N]`, a seeded permutation."""
    n = len(trace) if trace is not None else requests
    order = np.random.default_rng(seed).permutation(len(target.data))
    samples = order[np.arange(n) % len(order)]
    report = ServeReport(source=target.source, task=target.task, method=target.method,
                         sweep_param=target.sweep_param, sweep_value=target.sweep_value,
                         point=target.point, device=device, arrivals=kind,
                         burst=burst if kind == "bursty" else None, requests=n, max_batch=max_batch,
                         target_ms=target_ms, capacity_rps=capacity_rps)
    for rate in rates:
        times = arrivals_at(kind, rate, n, seed, trace, burst)
        for name in schedulers:
            if progress is not None:
                progress(f"{name} at {rate:.4g} requests/s")
            served = serve(target.model, target.make_rule, target.data, samples, times, name,
                           max_batch, target.is_regression, clock() if clock else None)
            offline = target.offline_full if name == "full" else target.offline
            report.results.append(result_of(served, float(rate), offline, target.is_regression,
                                            target_ms))
    return report


def arrivals_at(kind: str, rate: float, n: int, seed: int, trace: np.ndarray | None,
                burst: float = DEFAULT_BURST) -> np.ndarray:
    """The arrival times of one rate: `kind`'s process, or the trace rescaled to `rate`."""
    if kind == "poisson":
        return poisson(rate, n, seed)
    if kind == "bursty":
        return bursty(rate, n, burst, seed)
    if trace is None:
        raise ValueError("a trace replay needs its timestamps")  # a caller's bug
    return rescale(trace, rate)
