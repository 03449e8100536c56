"""Decoder runs (`eebench decode`) as rows of the one results table (eebench.score.table).

A decoder run directory holds every operating point of one causal LM's exits on one decoder
task (eebench.run.decoding). `decoder_records(runs)` turns its points into records of
`results_frame`, the columns filled where they mean something:

- mean_flops, mflops   FLOPs per generated (humaneval-gen) or predicted (imdb-lm) token, not per
                       sample: the decoder rows count per token (flops_convention as recorded)
- sweep_param, sweep_value   the point's setting: "k" (full, static: the exit layer), "k+d"
                       (self-spec: exit k drafting d tokens, packed as k + d/100, so 6.04 is
                       k = 6, d = 4 and points sort by k, then d), "d" (self-spec-adaptive),
                       "threshold" (calm); a method this table does not know: its numeric
                       settings in order, packed the same way
- label                the method, `model/method` when several models are scored together, and in
                       parentheses the exits' head when they were trained ("calm (adapter
                       exits)") and any other setting off its default ("calm (margin)")
- seed                 the run's data seed (which samples it drew)
- avg_exit_layer, speedup   the mean exit layer (static: k; calm: over tokens) and L over it;
                       empty for self-speculation, which runs every layer
- params_*, latency_*, disagreements, quality columns   empty
- run, row             the run directory and the point's line in its points.jsonl

`load_decoder_runs` reads run directories with eebench.run.decoding.read_decoder_run (finished,
every file as its summary recorded it).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from eebench.errors import DataError
from eebench.run.decoding import DecoderPoint, DecodeRun, read_decoder_run
from eebench.score.decoder_labels import LABEL_DEFAULTS, PACK, SWEEPS
from eebench.score.table import METRIC_PREFIX


def load_decoder_runs(paths: Iterable[Path]) -> list[DecodeRun]:
    """Each decoder run directory read and checked; a run without points is refused."""
    runs = []
    for path in paths:
        run = read_decoder_run(Path(path))
        if not run.points:
            raise DataError(f"{run.path / 'points.jsonl'}: no operating points in it")
        if not any(p.method == "full" for p in run.points):
            raise DataError(f"{run.path / 'points.jsonl'}: no point of the full model",
                            hint="a decoder run is scored against its own full model")
        runs.append(run)
    return runs


def _numeric(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def sweep_names(p: DecoderPoint) -> tuple[str, ...]:
    """The names of the settings that make the point's sweep value, in order."""
    known = SWEEPS.get(p.method)
    names = known if known is not None else tuple(
        k for k, v in p.setting.items() if _numeric(v))
    return tuple(n for n in names if _numeric(p.setting.get(n)))


def decoder_sweep(p: DecoderPoint) -> tuple[str, float]:
    """(sweep_param, sweep_value) of a decoder point: its sweep settings joined by "+", their
    values packed into one number (the first, the next / PACK, ...)."""
    names = sweep_names(p)
    if not names:
        return "-", 0.0
    value = sum(float(p.setting[n]) / PACK ** i for i, n in enumerate(names))
    return "+".join(names), value


def decoder_label(run: DecodeRun, p: DecoderPoint, several_models: bool = False) -> str:
    """The point's method as tables show it (see the module docstring)."""
    label = f"{run.config.model}/{p.method}" if several_models else p.method
    swept = set(sweep_names(p))
    notes = [str(v) if isinstance(v, str) else f"{k}={v:g}" for k, v in p.setting.items()
             if k not in swept and LABEL_DEFAULTS.get(k) != v]
    if run.summary.head == "adapter" and p.method != "full":
        notes.append("adapter exits")
    return f"{label} ({', '.join(notes)})" if notes else label


def several_models(runs: Sequence[DecodeRun]) -> bool:
    return len({r.config.model for r in runs}) > 1


def decoder_records(runs: Sequence[DecodeRun]) -> Iterator[dict[str, Any]]:
    """One record of the results table per point of decoder runs, in the given order. The full
    model's point is one per model, task, split, samples and seed: runs that differ only in
    their exits (the logit lens and trained ones) decode it alike, and it is kept once."""
    many = several_models(runs)
    fulls: set[tuple] = set()
    for run in runs:
        c = run.config
        for row, p in enumerate(run.points):
            if p.method == "full":
                same = (c.model, c.task, c.split, c.data.model_dump_json())
                if same in fulls:
                    continue
                fulls.add(same)
            param, value = decoder_sweep(p)
            layer = p.mean_exit_layer
            yield {
                "model": run.config.model, "pooling": None, "method": p.method,
                "label": decoder_label(run, p, many), "task": p.task, "split": p.split,
                "seed": run.config.data.seed, "sweep_param": param, "sweep_value": value,
                "n_samples": p.n_samples, "num_layers": p.num_layers,
                "flops_convention": p.flops_convention, "main_metric": p.main_metric,
                "main": p.main,
                **{METRIC_PREFIX + name: v for name, v in p.metrics.items()},
                "mean_flops": p.flops_per_token, "avg_exit_layer": layer,
                "speedup": p.num_layers / layer if layer else None,
                "disagreements": None, "run": str(run.path), "row": row,
            }


def decoder_frame(runs: Sequence[DecodeRun]):
    """The results table of decoder runs (eebench.score.table.results_frame)."""
    from eebench.score.table import results_frame

    return results_frame(decoder_records(runs))
