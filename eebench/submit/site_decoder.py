"""The leaderboard page's decoder section: a row per decoder submission, task and method.

A decoder submission (`"kind": "decoder"`) holds every point of its runs; the page reads from
them, per method, what docs/results.md reads from run directories:

- its score against the run's own static truncation (eebench.score.decoder's ELUE-style score:
  the mean, over the method's points, of its main metric minus the curve of the run's static and
  full points at its FLOPs per token), averaged over the runs (seeds). A run of trained exits has
  no static points (its truncations are `ee-tuning`'s): as `eebench score` does, it is scored
  against the static truncation of a run of untrained exits of the same model, task, split and
  samples, here from another submission on the page; without one its cell is empty and says why;
- the most FLOPs per token it saves without losing quality: the highest FLOPs speed-up among its
  points whose main metric is at least the full model's (empty when none is).

Every string is a stranger's: each one is escaped where it is written (`esc`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from eebench.score.decoder_labels import LABEL_DEFAULTS, REFERENCE_METHODS, SWEEPS
from eebench.score.elue import elue_deltas
from eebench.score.policy import DEFAULT_EXTRAPOLATE
from eebench.submit.decoder_schema import DecoderPointEntry, DecoderRunEntry, DecoderSubmission
from eebench.submit.markup import cell, esc

TEXT_COLUMNS = ("Submission", "Model", "Exits", "Task", "Method")
NUMBER_COLUMNS = ("Points", "Full model", "Score vs static truncation", "Lossless FLOPs speed-up")
NO_TRUNCATION = ("trained exits: scored against the static truncation of a submission of the same "
                 "model's untrained exits on the same samples, and none is on the page")


@dataclass(frozen=True)
class DecoderRow:
    """One method of one decoder submission on one task."""

    submission: str
    model: str
    exits: str  # "lens 6,12,18,24" or "adapter (rank 16) 6,12,18,24"
    task: str
    method: str  # the method, and any setting off its default in parentheses
    points: int  # over every run (seed)
    full_main: float  # the full model's main metric, mean over the runs
    score: float | None  # against each run's own static truncation, mean over the runs with one
    lossless_speedup: float | None  # the highest FLOPs speed-up at the full model's quality


def _label(p: DecoderPointEntry) -> str:
    swept = set(SWEEPS.get(p.method, ()))
    notes = [str(v) if isinstance(v, str) else f"{k}={v:g}" for k, v in p.setting.items()
             if k not in swept and LABEL_DEFAULTS.get(k) != v]
    return f"{p.method} ({', '.join(notes)})" if notes else p.method


Curve = list[tuple[float, float]]  # (FLOPs per token, main metric), in FLOPs order


def _samples(sub: DecoderSubmission, task: str, run: DecoderRunEntry) -> tuple:
    """What two runs must share for one's static truncation to score the other's points."""
    return (sub.model.name, sub.model.local_sha256, task, sub.tasks[task].split,
            tuple(run.sample_ids), run.new_tokens)


def _truncation(run: DecoderRunEntry) -> Curve | None:
    """The run's own static truncation and full model (None: trained exits, no static points)."""
    if not any(p.method == "static" for p in run.points):
        return None
    return sorted((p.flops_per_token, p.main) for p in run.points if p.method in REFERENCE_METHODS)


def _scores(run: DecoderRunEntry, curve: Curve | None) -> dict[str, float]:
    """Each method's score in one run against `curve` (none without one)."""
    if curve is None:
        return {}
    by_label: dict[str, list[float]] = {}
    for p in run.points:
        delta = elue_deltas([f for f, _ in curve], [m for _, m in curve], [p.flops_per_token],
                            [p.main], DEFAULT_EXTRAPOLATE)[0]
        by_label.setdefault(_label(p), []).append(float(delta))
    return {label: float(np.mean(v)) for label, v in by_label.items()}


def _exits(sub: DecoderSubmission) -> str:
    m = sub.model
    head = m.head if m.rank is None else f"{m.head} (rank {m.rank})"
    return f"{head} {','.join(str(k) for k in m.exit_layers)}"


def decoder_rows(subs: Sequence[DecoderSubmission]) -> list[DecoderRow]:
    """The section's rows, by submission name, task and method (the full model left out)."""
    truncations: dict[tuple, Curve] = {}
    for sub in subs:
        for task, entry in sub.tasks.items():
            for run in entry.runs:
                if (curve := _truncation(run)) is not None:
                    truncations.setdefault(_samples(sub, task, run), curve)
    rows = []
    for sub in sorted(subs, key=lambda s: s.name):
        for task, entry in sorted(sub.tasks.items()):
            fulls = [next(p.main for p in r.points if p.method == "full") for r in entry.runs]
            scores = [_scores(r, _truncation(r) or truncations.get(_samples(sub, task, r)))
                      for r in entry.runs]
            labels = dict.fromkeys(_label(p) for r in entry.runs for p in r.points
                                   if p.method != "full")
            for label in labels:
                points = [(p, full) for r, full in zip(entry.runs, fulls, strict=True)
                          for p in r.points if _label(p) == label]
                per_run = [s[label] for s in scores if label in s]
                lossless = [p.flops_speedup for p, full in points if p.main >= full]
                rows.append(DecoderRow(
                    submission=sub.name, model=sub.model.name, exits=_exits(sub), task=task,
                    method=label, points=len(points), full_main=float(np.mean(fulls)),
                    score=float(np.mean(per_run)) if per_run else None,
                    lossless_speedup=max(lossless) if lossless else None))
    return rows


def decoder_table(subs: Sequence[DecoderSubmission]) -> str:
    """The section's HTML: a note when there is no decoder submission, else the table."""
    rows = decoder_rows(subs)
    if not rows:
        return '<p class="note" id="decoders">No decoder submissions.</p>'
    head = "".join(f'<th class="text">{esc(h)}</th>' for h in TEXT_COLUMNS) + "".join(
        f"<th>{esc(h)}</th>" for h in NUMBER_COLUMNS)
    body = []
    for r in rows:
        score = (cell("", "–", "text", title=NO_TRUNCATION) if r.score is None else
                 cell(f"{r.score:.4f}", f"{r.score:+.2f}"))
        speedup = (cell("", "–") if r.lossless_speedup is None else
                   cell(f"{r.lossless_speedup:.4f}", f"{r.lossless_speedup:.2f}x"))
        body.append("<tr>" + "".join([
            cell(r.submission, r.submission, "text"), cell(r.model, r.model, "text"),
            cell(r.exits, r.exits, "text"), cell(r.task, r.task, "text"),
            cell(r.method, r.method, "text"), cell(str(r.points), str(r.points)),
            cell(f"{r.full_main:.4f}", f"{r.full_main:.2f}"), score, speedup]) + "</tr>")
    return ('<table id="decoders"><thead><tr>' + head + "</tr></thead><tbody>\n"
            + "\n".join(body) + "\n</tbody></table>")
