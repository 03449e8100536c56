"""Latency against load for the schedulers of a serving replay (eebench serve-replay).

One colour and marker per scheduler; the 99th percentile solid, the median dashed, the latency
target a grey line. The x axis is the offered rate in requests per second, with the full model's
throughput on full batches (measured before the replay) marked.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from eebench.plot.style import MARKERS, OKABE_ITO, REFERENCE_COLOR, new_figure, task_title

NAMES = {"full": "full model, dynamic batching", "shrink": "early exit, batch shrinking",
         "continuous": "early exit, continuous rebatching"}
GID_SCHEDULER = "scheduler:"


def latency_figure(report) -> Figure:
    """p50 and p99 latency (ms, log scale) against the offered rate, one line per scheduler of
    a ServeReport (eebench.serve.report)."""
    fig, ax = new_figure()
    names = list(dict.fromkeys(r.scheduler for r in report.results))
    for k, name in enumerate(names):
        rows = sorted((r for r in report.results if r.scheduler == name), key=lambda r: r.rate_rps)
        rates = [r.rate_rps for r in rows]
        color, marker = OKABE_ITO[k % len(OKABE_ITO)], MARKERS[k % len(MARKERS)]
        (line,) = ax.plot(rates, [r.latency.p99_ms for r in rows], color=color, marker=marker,
                          linewidth=1.4, markersize=5, label=f"{NAMES.get(name, name)}: p99")
        line.set_gid(GID_SCHEDULER + name)
        ax.plot(rates, [r.latency.p50_ms for r in rows], color=color, marker=marker,
                linewidth=1.0, markersize=3, linestyle="--", label=f"{NAMES.get(name, name)}: p50")
    ax.axhline(report.target_ms, color=REFERENCE_COLOR, linewidth=1, linestyle=":",
               label=f"target {report.target_ms:.0f} ms")
    ax.axvline(report.capacity_rps, color=REFERENCE_COLOR, linewidth=0.8, linestyle="-.",
               label=f"full model on full batches: {report.capacity_rps:.0f}/s")
    ax.set_yscale("log")
    ax.set_xlabel(f"offered load (requests per second, {report.arrivals} arrivals)")
    ax.set_ylabel("latency (ms, log scale)")
    ax.set_title(f"{task_title(report.task)}, {report.method} {report.sweep_param}="
                 f"{report.sweep_value:g}: latency under load (max batch {report.max_batch}, "
                 f"{report.device})", fontsize="small")
    ax.legend(fontsize="x-small", frameon=False, loc="best")
    return fig
