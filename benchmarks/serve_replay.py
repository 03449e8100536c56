"""The tables of benchmarks/serve_replay.sh (markdown, one per method) from its replays'
serving.json files, printed and written to table.md.

    python benchmarks/serve_replay.py [benchmarks/results/serve-minilm]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

METHODS = ("deebert", "pabee")


def table(report: dict) -> str:
    pt = report["point"]
    lines = [
        f"**{report['method']} {report['sweep_param']}={report['sweep_value']:g}** (offline: "
        f"{pt['main_metric']} {pt['main']:.1f}, mean exit layer {pt['avg_exit_layer']:.2f} of "
        f"{pt['num_layers']}); {report['requests']} requests a replay, {report['arrivals']} "
        f"arrivals, max batch {report['max_batch']}, {report['device']}; the full model on full "
        f"batches, measured first: {report['capacity_rps']:.0f} requests/s",
        "",
        "| rate/s | scheduler | p50 ms | p95 ms | p99 ms | throughput/s | "
        f"within {report['target_ms']:g} ms | mean batch | decisions differ |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in report["results"]:
        lat = r["latency"]
        lines.append(
            f"| {r['rate_rps']:g} | {r['scheduler']} | {lat['p50_ms']:.0f} | {lat['p95_ms']:.0f} | "
            f"{lat['p99_ms']:.0f} | {lat['throughput_rps']:.1f} | {lat['within_target']:.0%} | "
            f"{lat['mean_batch']:.1f} | {r['disagreements']} of {r['checked']} |")
    return "\n".join(lines) + "\n"


def main(out: Path) -> None:
    parts = [table(json.loads((out / f"replay-{m}" / "serving.json").read_text()))
             for m in METHODS if (out / f"replay-{m}" / "serving.json").is_file()]
    if not parts:
        sys.exit(f"{out}: no replay-<method>/serving.json yet (bash benchmarks/serve_replay.sh)")
    text = "\n".join(parts)
    (out / "table.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results/serve-minilm"))
