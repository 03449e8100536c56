"""What a decoder method is given, and what its methods share.

A decoder method (eebench.methods.protocols: `greedy_points(ctx)` for humaneval-gen,
`teacher_points(ctx)` for imdb-lm) turns the run's traces into operating points. It reads the
simulations and real decoders of eebench.rules; FLOPs, scores and the point record come in
through the context, which the decoder run builds (eebench.run.decoding.context):

    ctx.cfg            the run's DecodeConfig: exits, draft lengths, thresholds, measure, ...
    ctx.model, .exits  the causal LM and its exits (eebench.models.decoder_exits)
    ctx.samples        prompts (greedy) or review windows (teacher-forced): [T] tensors, in the
                       summary's sample order, decoded one at a time
    ctx.traces         one per sample: an ExitTrace of the full model's greedy tokens
                       (eebench.rules.decoder_sweep), or a TeacherForcedTrace (rules.decoder_tf)
    ctx.flops          FLOPs per generated (predicted) token of a path, a mean over samples:
                       .full, .static(k), .self_spec(rounds, k, d), .calm(exit_layers, evaluated)
                       (per sample: SpecRounds, or arrays over its tokens)
    ctx.score(preds, nll=None)   the task's metrics of per-sample predictions (and the NLL of
                       each actual next token, teacher-forced): a Scored
    ctx.point(method, setting, scored, flops, **extra)   a DecoderPoint (extra: its optional
                       fields, mean_exit_layer, acceptance_rate, check, real, ...)
    ctx.tick(what)     progress

`truncated_points` is the model truncated at each exit (static's and EE-Tuning's points).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

Tick = Callable[[str], None]


@dataclass(frozen=True)
class Scored:
    """A point's metrics (the task's, pooled over samples) and its main metric per sample."""

    metrics: dict[str, float]
    per_sample: list[float]


@dataclass
class DecodeContext:
    """What a decoder run gives each decoder method (see the module docstring)."""

    cfg: Any
    model: Any
    exits: Any
    samples: list[Any]
    traces: list[Any]
    flops: Any
    score: Callable[..., Scored]
    point: Callable[..., Any]
    tick: Tick

    @property
    def decoding(self) -> str:
        """"greedy" (humaneval-gen) or "teacher-forced" (imdb-lm): the task's."""
        from eebench.tasks.catalog import get_task

        return get_task(self.cfg.task).decoding

    @property
    def main_metric(self) -> str:
        from eebench.tasks.catalog import get_task

        return get_task(self.cfg.task).main_metric

    @property
    def n_new(self) -> int:
        return self.cfg.data.new_tokens


def mean(values: Any) -> float:
    return float(np.mean(list(values)))


def rate(rounds: Sequence[Any]) -> dict[str, float | None]:
    """Self-speculation's acceptance over every sample's SpecRounds, as a point records it."""
    accepted = sum(sum(r.accepted) for r in rounds)
    drafted = sum(sum(r.drafted) for r in rounds)
    n_rounds = sum(r.rounds for r in rounds)
    return {"acceptance_rate": 100.0 * accepted / drafted if drafted else None,
            "mean_accepted": accepted / n_rounds,
            "tokens_per_round": sum(r.emitted for r in rounds) / n_rounds}


def truncated_points(ctx: DecodeContext, method: str) -> list[Any]:
    """The model truncated at each exit k: its first k layers and exit k's head. Greedy: decoded
    for real (after its first disagreement it follows its own tokens, which a trace cannot
    say); teacher-forced: exit k's row of each trace."""
    from eebench.rules.decoder_tf import truncated_greedy

    points = []
    for row, k in enumerate(ctx.exits.layers):
        if ctx.decoding == "greedy":
            scored = ctx.score([truncated_greedy(ctx.model, ctx.exits, p, ctx.n_new, k)
                                for p in ctx.samples])
        else:
            scored = ctx.score([t.argmax[row] for t in ctx.traces],
                               [t.nll[row] for t in ctx.traces])
        ctx.tick(f"{method} k={k}")
        points.append(ctx.point(method, {"k": k}, scored, ctx.flops.static(k),
                                mean_exit_layer=float(k)))
    return points
