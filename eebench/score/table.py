"""The results table: one pandas DataFrame, a row per operating point per run (one seed).

Run directories (and leaderboard submissions) are the truth; this frame is their one tabular
view, from which seeds are averaged (eebench.score.stats), `eebench score --csv` is written, the
report tables of docs/results.md are grouped and pivoted, and the leaderboard page draws its
figures. `results_frame(records)` builds it; a thin adapter per source turns results into
records:

    results_frame(run_records(raw_points(runs)))      # run directories
    results_frame(submission_records(submission))     # a leaderboard submission
    results_frame(decoder_records(runs))              # decoder runs (eebench.score.decoder_table)

Columns, in this order (metrics in percent, FLOPs per sample; a decoder run's rows count FLOPs
per generated or predicted token and leave empty what a decoder does not record, see
eebench.score.decoder_table):

- model, pooling       the backbone and how its exit heads pool the tokens ("cls" or "mean")
- method               the method's registered name
- label                the method as tables show it: its name, `model/method` when several
                       models are scored together, with "(mean pooling)" when poolings differ
                       (see collect.raw_points); a submission's label is its name
- task, split, seed
- sweep_param, sweep_value   the operating point, e.g. threshold 0.3
- n_samples            samples evaluated
- num_layers           layers of the full model
- flops_convention     how FLOPs were counted (docs/flops.md)
- main_metric, main    the task's main metric: its name and value
- metric.<name>        one column per metric (e.g. `metric.accuracy`); empty where a run lacks it
- mean_flops, mflops   FLOPs per sample along each sample's executed path; the same / 1e6
- avg_exit_layer       mean exit layer (1-based)
- speedup              num_layers / avg_exit_layer
- params_total, params_mean_used   parameters of the model; touched per sample, averaged
                       (params_total is nullable, Int64, when a decoder row leaves it empty)
- latency_bs1_ms, latency_bs32_ms  real dynamic inference at batch size 1 and 32: the median
                       (p50) time per batch in ms; empty where not timed
- disagreements        samples where real dynamic inference decided otherwise than the
                       simulation; empty where not measured (always for a submission)
- run                  the run directory's path (a submission: the run's config hash, which
                       names its directory)
- row                  the point's line in the run's points.jsonl (0-based), which is its row in
                       the [P, N] prediction arrays
- ece, nll, consistency, exit_gain, exit_loss   the quality of the exited predictions
                       (eebench.measure.quality, docs/scoring.md): ECE, consistency with the
                       full-depth prediction and the shares exiting got right / wrong against it
                       in percent, NLL in nats; empty for regression and where not computed
                       (`eebench score` computes them from the arrays of runs that lack them:
                       eebench.score.quality.fill_quality)

pandas is imported inside the functions: `eebench --help` and the listings never load it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from eebench.run.records import sweep_number
from eebench.score.collect import RawPoint

if TYPE_CHECKING:
    import pandas as pd

METRIC_PREFIX = "metric."
HEAD = ("model", "pooling", "method", "label", "task", "split", "seed", "sweep_param",
        "sweep_value", "n_samples", "num_layers", "flops_convention", "main_metric", "main")
TAIL = ("mean_flops", "mflops", "avg_exit_layer", "speedup", "params_total", "params_mean_used",
        "latency_bs1_ms", "latency_bs32_ms", "disagreements", "run", "row", "ece", "nll",
        "consistency", "exit_gain", "exit_loss")
QUALITY = ("ece", "nll", "consistency", "exit_gain", "exit_loss")
TIMED_BATCH_SIZES = {"latency_bs1_ms": 1, "latency_bs32_ms": 32}
DTYPES = {"seed": "int64", "sweep_value": "float64", "n_samples": "int64",
          "num_layers": "int64", "main": "float64", "mean_flops": "float64",
          "avg_exit_layer": "float64", "speedup": "float64", "params_total": "int64",
          "params_mean_used": "float64", "latency_bs1_ms": "float64",
          "latency_bs32_ms": "float64", "disagreements": "Int64", "row": "int64",
          **dict.fromkeys(QUALITY, "float64")}


def results_frame(records: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """The results table (columns in the module docstring) from records of any source."""
    import pandas as pd

    rows = list(records)
    metrics = sorted({key for r in rows for key in r if key.startswith(METRIC_PREFIX)})
    columns = [*HEAD, *metrics, *TAIL]
    frame = pd.DataFrame.from_records(rows, columns=columns)
    dtypes = {**DTYPES, **dict.fromkeys(metrics, "float64")}
    if frame["params_total"].isna().any():  # decoder rows record no parameters
        dtypes["params_total"] = "Int64"
    frame = frame.astype(dtypes)
    frame["mflops"] = frame["mean_flops"] / 1e6
    return frame


def _point_columns(p, sweep_value: float) -> dict[str, Any]:
    """What a run's and a submission's operating points both hold (their classes differ)."""
    return {
        "sweep_value": sweep_value, "main": p.main,
        **{METRIC_PREFIX + name: value for name, value in p.metrics.items()},
        "mean_flops": p.mean_flops, "avg_exit_layer": p.avg_exit_layer,
        "params_total": p.params_total, "params_mean_used": p.params_mean_used,
        **{column: p50(p.timings, bs) for column, bs in TIMED_BATCH_SIZES.items()},
        **{q: getattr(p, q, None) for q in QUALITY},
    }


def p50(timings, batch_size: int, mode: str = "dynamic") -> float | None:
    """The median batch time at `batch_size` of real dynamic inference (or, with `mode` "full",
    of the full model timed beside it), when it was timed."""
    for t in timings:
        if t.mode == mode and t.batch_size == batch_size and "p50" in t.latency_ms:
            return t.latency_ms["p50"]
    return None


def run_records(raw: Iterable[RawPoint]) -> Iterator[dict[str, Any]]:
    """One record per point of run directories (see collect.raw_points), in the given order."""
    for rp in raw:
        p, config = rp.point, rp.run.config
        yield {
            "model": config.model, "pooling": config.pooling, "method": p.method,
            "label": rp.label, "task": p.task, "split": p.split, "seed": p.seed,
            "sweep_param": p.sweep_param, "n_samples": p.n_samples, "num_layers": p.num_layers,
            "flops_convention": p.flops_convention, "main_metric": p.main_metric,
            "speedup": p.speedup, "disagreements": p.disagreements,
            "run": str(rp.run.path), "row": rp.row, **_point_columns(p, p.sweep_value),
        }


def submission_records(submission, label: str | None = None) -> Iterator[dict[str, Any]]:
    """One record per point of a leaderboard submission (eebench.submit.schema.Submission, read
    by attribute: scoring comes before submitting and does not import it), labelled `label`
    (default: the submission's name). A submission records no speed-up: it is computed."""
    s = submission
    for task, entry in s.tasks.items():
        for run in entry.runs:
            for row, p in enumerate(run.points):
                yield {
                    "model": s.model.name, "pooling": s.model.pooling, "method": s.method.name,
                    "label": s.name if label is None else label, "task": task,
                    "split": entry.split, "seed": run.seed, "sweep_param": s.method.sweep_param,
                    "n_samples": run.n_samples, "num_layers": entry.num_layers,
                    "flops_convention": s.flops.convention, "main_metric": entry.main_metric,
                    "speedup": entry.num_layers / p.avg_exit_layer, "disagreements": None,
                    "run": run.config_hash, "row": row,
                    **_point_columns(p, sweep_number(s.method.name, p.sweep)),
                }
