"""What a replay reports: latency percentiles, throughput, the share within a latency target,
and the check of every request's decision against the offline one-pass simulation.

`ServeReport` (pydantic) is what `eebench serve-replay --json` prints and `serving.json` holds:
one `SchedulerResult` per scheduler and rate.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from eebench.rules.engine import Decisions, compare
from eebench.serve.scheduler import Served

SERVE_SCHEMA_VERSION = 1


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Latency(_Data):
    """One replay's service figures (milliseconds; requests per second)."""

    requests: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    mean_ms: float
    max_ms: float
    throughput_rps: float  # requests answered / (last answer - first arrival)
    within_target: float  # share of requests answered within the latency target
    mean_queue_ms: float  # arrival to admission, on average
    mean_batch: float  # samples per model step, on average


class SchedulerResult(_Data):
    scheduler: str
    rate_rps: float  # offered: requests per second of the arrival process
    latency: Latency
    checked: int  # requests compared with the offline simulation
    disagreements: int  # exit or prediction differ
    near_threshold: int  # of those, within float tolerance of the rule's boundary


class ServeReport(_Data):
    schema_version: int = SERVE_SCHEMA_VERSION
    source: str  # the run directory (or what the model came from)
    task: str
    method: str
    sweep_param: str
    sweep_value: float
    # the point as the run measured it offline: main_metric, main, avg_exit_layer, num_layers,
    # mean_mflops
    point: dict[str, str | float | int | None] = Field(default_factory=dict)
    device: str
    arrivals: str  # poisson, bursty or trace
    burst: float | None = None  # bursty: requests per burst, on average
    requests: int
    max_batch: int
    target_ms: float
    capacity_rps: float  # the full model's throughput on full batches, measured first
    results: list[SchedulerResult] = Field(default_factory=list)

    def result(self, scheduler: str, rate: float) -> SchedulerResult:
        return next(r for r in self.results if r.scheduler == scheduler and r.rate_rps == rate)


def latency_of(served: Served, target_ms: float) -> Latency:
    lat = served.latency * 1000.0
    p50, p95, p99 = np.percentile(lat, [50, 95, 99])
    span = float(served.finish.max() - served.arrival.min())
    return Latency(
        requests=len(lat), p50_ms=float(p50), p95_ms=float(p95), p99_ms=float(p99),
        mean_ms=float(lat.mean()), max_ms=float(lat.max()),
        throughput_rps=len(lat) / span if span > 0 else float("inf"),
        within_target=float((lat <= target_ms).mean()),
        mean_queue_ms=float(((served.start - served.arrival) * 1000.0).mean()),
        mean_batch=float(np.mean(served.step_rows)) if served.step_rows else 0.0)


def check(served: Served, simulated: Decisions, is_regression: bool) -> tuple[int, int, int]:
    """(checked, disagreements, near the boundary): every request's exit and prediction against
    the simulation's for its sample (eebench.rules.engine.compare)."""
    s = served.sample
    offline = Decisions(simulated.exit_index[s], simulated.prediction[s], simulated.margin[s])
    prediction = served.prediction if is_regression else served.prediction.astype(np.int64)
    agreement = compare(offline, Decisions(served.exit_index, prediction, np.full(len(s), np.inf)),
                        is_regression=is_regression)
    return agreement.compared, agreement.disagreements, agreement.near_threshold


def result_of(served: Served, rate: float, simulated: Decisions, is_regression: bool,
              target_ms: float) -> SchedulerResult:
    checked, bad, near = check(served, simulated, is_regression)
    return SchedulerResult(scheduler=served.scheduler, rate_rps=rate,
                           latency=latency_of(served, target_ms), checked=checked,
                           disagreements=bad, near_threshold=near)
