"""`eebench serve-replay`: early exit under load, on one operating point of a finished run.

The replay itself is eebench.serve (arrivals, the three schedulers, the report); here are the
options, the rates and target chosen from the measured capacity where none are given, the
figure and serving.json (written together), and the table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from eebench.cli.app import app
from eebench.cli.common import DataDirOption, JsonOption, err_console, out_dir, print_json
from eebench.errors import UsageError
from eebench.serve import limits
from eebench.train.config import SEED_MAX

DEFAULT_LOADS = "0.5,0.8,1.0,1.2"


def _numbers(text: str, option: str, most: float) -> list[float]:
    """A comma-separated list of at most MAX_RATES numbers in (0, most]."""
    import math

    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UsageError(f"{option} {text!r}: not a comma-separated list of numbers") from None
    if not values or any(not math.isfinite(v) or v <= 0 for v in values):
        raise UsageError(f"{option} {text!r}: give positive numbers, e.g. {option} 0.5,1")
    if len(values) > limits.MAX_RATES or max(values) > most:
        raise UsageError(f"{option} {text[:40]!r}: at most {limits.MAX_RATES} numbers, each at "
                         f"most {most:g}")
    return values


@app.command("serve-replay", rich_help_panel="Benchmark")
def serve_replay_command(
    run: Annotated[Path, typer.Argument(help="A finished run directory (from `eebench run`).",
                                        show_default=False)],
    point: Annotated[float | None, typer.Option(
        "--point", help="The sweep value to serve (default: the point whose FLOPs are nearest "
        "half the full model's).", show_default=False)] = None,
    arrivals: Annotated[str, typer.Option(
        "--arrivals", help="poisson, bursty (bursts of --burst requests on average arriving at "
        "once, at the same mean rate) or trace (--trace FILE: one arrival time in seconds a "
        "line).")] = "poisson",
    burst: Annotated[float, typer.Option(
        "--burst", help="Mean burst size of --arrivals bursty.")] = 8.0,
    trace: Annotated[Path | None, typer.Option(
        "--trace", help="The trace file of --arrivals trace.", show_default=False)] = None,
    rates: Annotated[str | None, typer.Option(
        "--rates", help="Offered rates, requests per second, comma-separated (a trace is "
        "rescaled to each; default: --load times the full model's measured capacity; a trace "
        "alone: its own timing).", show_default=False)] = None,
    load: Annotated[str, typer.Option(
        "--load", help="Rates as fractions of the full model's capacity on full batches, "
        "measured first (without --rates).")] = DEFAULT_LOADS,
    requests: Annotated[int, typer.Option(
        "--requests", min=1, max=limits.MAX_REQUESTS, help="Requests per replay (samples drawn in "
        "a seeded order, cycling; a trace: one per timestamp).")] = 500,
    max_batch: Annotated[int, typer.Option(
        "--max-batch", min=1, max=limits.MAX_BATCH,
        help="Most samples in flight (and per batch).")] = 32,
    target_ms: Annotated[float | None, typer.Option(
        "--target-ms", help="Latency target in ms (default: twice the full model's time for "
        "one full batch).", show_default=False)] = None,
    device: Annotated[str, typer.Option("--device", help="cpu, cuda or cuda:N.")] = "cpu",
    threads: Annotated[int | None, typer.Option(
        "--threads", min=1, max=limits.MAX_THREADS, help="torch CPU threads (default: torch's).",
        show_default=False)] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, max=SEED_MAX,
                                      help="Seed of the arrivals and the order.")] = 0,
    data_dir: Path | None = DataDirOption,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Directory for serving.json and latency-vs-load.png.",
        show_default=False)] = None,
    json_out: bool = JsonOption,
) -> None:
    """Replay an arrival process over the run's samples with three schedulers (the full model,
    batch shrinking, continuous rebatching) in real time: p50/p95/p99 latency, throughput, the
    share within the target, and every answer checked against the offline simulation."""
    import math

    from eebench.serve.arrivals import ARRIVALS, mean_rate, read_trace

    if arrivals not in ARRIVALS:
        raise UsageError(f"--arrivals {arrivals!r}: one of {', '.join(ARRIVALS)}")
    if (arrivals == "trace") != (trace is not None):
        raise UsageError("--trace FILE goes with --arrivals trace, and only with it")
    if not (math.isfinite(burst) and burst >= 1):
        raise UsageError(f"--burst {burst:g}: a mean burst size is at least 1")
    if burst > limits.MAX_BURST:
        raise UsageError(f"--burst {burst:g}: a mean burst size is at most {limits.MAX_BURST:g}")
    chosen_rates = None if rates is None else _numbers(rates, "--rates", limits.MAX_RATE)
    loads = _numbers(load, "--load", limits.MAX_LOAD)
    if target_ms is not None and not (math.isfinite(target_ms)
                                      and 0 < target_ms <= limits.MAX_TARGET_MS):
        raise UsageError(f"--target-ms {target_ms:g}: give a positive number of milliseconds, "
                         f"at most {limits.MAX_TARGET_MS:g}")
    out_dir(out, "the replay's figure and serving.json")
    times = read_trace(trace) if trace is not None else None
    if times is not None:
        requests = len(times)
        if chosen_rates is None:  # its own timing
            if not math.isfinite(mean_rate(times)):
                raise UsageError(f"{trace}: every arrival of the trace is at one instant, so it "
                                 "has no rate of its own",
                                 hint="give the rates to rescale it to: --rates R")
            chosen_rates = [mean_rate(times)]
    if chosen_rates is not None:  # its length known before any work
        _check_duration(chosen_rates, requests, None, trace, rates)
    _check_device(device)

    import torch

    from eebench.cli.common import resolve_data_dir
    from eebench.run.artifacts import verify_run
    from eebench.score.difficulty import point_index
    from eebench.serve.replay import load_target, measure_capacity, replay

    if threads:
        torch.set_num_threads(threads)
    row = point_index(verify_run(run).points, point)
    target = load_target(run, row, resolve_data_dir(data_dir), device)
    capacity, batch_s = measure_capacity(target, max_batch)
    if chosen_rates is None:
        chosen_rates = [float(f"{f * capacity:.4g}") for f in loads]
    _check_duration(chosen_rates, requests, capacity, trace, rates)
    from eebench.measure.timing import device_description

    report = replay(target, arrivals, chosen_rates, requests, max_batch,
                    target_ms if target_ms is not None else 2000.0 * batch_s, capacity,
                    device_description(device), seed, times, burst,
                    progress=lambda s: err_console.print(f"[dim]replaying: {s}[/]"))
    if out is not None:
        _write(report, out)
    if json_out:
        print_json(report.model_dump(mode="json"))
    else:
        _print(report)
    bad = sum(r.disagreements - r.near_threshold for r in report.results)
    if bad:
        from eebench.errors import EebenchError

        raise EebenchError(f"{bad} answers differ from the offline simulation beyond float "
                           "tolerance of the rule's boundary")


def _check_duration(rates: list[float], n: int, capacity: float | None, trace: Path | None,
                    rates_given: str | None) -> None:
    """Refuse a replay that would run for more than MAX_REPLAY_S in real time, naming the
    option to change; say how long an accepted one takes once the capacity is measured."""
    from eebench.serve.replay import SCHEDULERS, replay_seconds

    seconds = replay_seconds(rates, n, capacity)
    what = (f"{len(SCHEDULERS)} schedulers x {len(rates)} rate{'s' if len(rates) > 1 else ''} x "
            f"{n:,} requests")
    if seconds > limits.MAX_REPLAY_S:
        if trace is not None and rates_given is None:
            hint = (f"its timestamps are read as seconds; replay it faster with --rates R "
                    f"(its own rate is {rates[0]:.3g}/s)")
        elif trace is not None:
            hint = "raise --rates (a trace sets the number of requests)"
        elif rates_given is None:
            hint = "raise --load, or lower --requests"
        else:
            hint = "raise --rates, or lower --requests"
        raise UsageError(f"the replay would take about {_duration(seconds)} in real time "
                         f"({what}), over the {_duration(limits.MAX_REPLAY_S)} limit", hint=hint)
    if capacity is not None:
        err_console.print(f"[dim]replay: {what}, about {_duration(seconds)}[/]")


def _duration(seconds: float) -> str:
    """'40 s', '12 min', '3.5 h', '1,000 days', '31,710 years': the largest unit that fits."""
    for unit, size in (("years", 365.25 * 86400), ("days", 86400.0), ("h", 3600.0),
                       ("min", 60.0)):
        if seconds >= 2 * size:
            return f"{seconds / size:,.3g} {unit}" if seconds < 1000 * size \
                else f"{seconds / size:,.0f} {unit}"
    return f"{seconds:.0f} s" if seconds >= 1 else f"{seconds:.1g} s"


def _check_device(device: str) -> None:
    import re

    if not re.fullmatch(r"cpu|cuda(:\d+)?", device):
        raise UsageError(f"--device {device!r}: cpu, cuda or cuda:N")
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise UsageError(f"--device {device}: no CUDA GPU here", hint="use --device cpu")


def _write(report, out: Path) -> None:
    from eebench.io import atomic_files
    from eebench.plot.serving import latency_figure

    fig = latency_figure(report)
    with atomic_files() as staged:  # the figure and serving.json, together or neither
        with staged.path(out / "latency-vs-load.png") as tmp:
            fig.savefig(tmp, format="png")
        staged.write_text(out / "serving.json", report.model_dump_json(indent=2) + "\n")


def _print(report) -> None:
    from rich.table import Table

    pt = report.point
    offline = (f" ({pt['main_metric']} {pt['main']:.1f}, mean exit layer "
               f"{pt['avg_exit_layer']:.2f} of {pt['num_layers']})"
               if pt.get("main") is not None else "")
    t = Table(title=f"{report.method} · {report.task} · {report.sweep_param}="
                    f"{report.sweep_value:g}{offline} · {report.arrivals} arrivals · "
                    f"{report.requests} requests · max batch {report.max_batch} · "
                    f"{report.device} · full-model capacity {report.capacity_rps:.0f}/s")
    for col in ("rate/s", "scheduler", "p50 ms", "p95 ms", "p99 ms", "throughput/s",
                f"≤ {report.target_ms:.0f} ms", "mean batch", "decisions differ"):
        t.add_column(col, justify="right")
    for r in report.results:
        lat = r.latency
        t.add_row(f"{r.rate_rps:.4g}", r.scheduler, f"{lat.p50_ms:.1f}", f"{lat.p95_ms:.1f}",
                  f"{lat.p99_ms:.1f}", f"{lat.throughput_rps:.1f}", f"{lat.within_target:.1%}",
                  f"{lat.mean_batch:.1f}",
                  f"{r.disagreements} of {r.checked}" + (f" ({r.near_threshold} at the "
                                                         "boundary)" if r.near_threshold else ""))
    err_console.print(t)
