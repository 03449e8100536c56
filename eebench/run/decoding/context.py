"""The context a decoder run gives its decoder methods (eebench.methods.decoding.DecodeContext):
the FLOPs of each path (eebench.measure.decoder_flops), the task's metrics with each sample's
main metric, and the point record, for one decoding.

Greedy (humaneval-gen): FLOPs per token are a mean over prompts of each decode's per-token
FLOPs; a prediction is a prompt's N generated tokens, scored against the full model's greedy
tokens. Teacher-forced (imdb-lm): FLOPs per token are pooled over every predicted position of
every review; a prediction is a review's next-token argmax at each position, with the NLL of its
actual next token.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from eebench.measure.decoder_flops import (
    calm_flops,
    copy_flops,
    greedy_flops,
    layer_flops,
    lm_head_flops,
    self_spec_flops,
    static_flops,
    teacher_forced_flops,
)
from eebench.methods.decoding import DecodeContext, Scored
from eebench.models.decoder_exits import num_layers
from eebench.run.decoding.records import DecodeConfig, DecoderPoint, decoder_point
from eebench.tasks.catalog import get_task
from eebench.tasks.lm_metrics import compute_lm_metrics


class GreedyFlops:
    """FLOPs per generated token of each greedy path, a mean over the prompts."""

    def __init__(self, config: Any, prompt_lengths: Sequence[int], n_new: int, head: int):
        self.config, self.lengths, self.n_new, self.head = config, list(prompt_lengths), n_new, head
        self.full = self._mean(greedy_flops(config, p, n_new) for p in self.lengths)

    @staticmethod
    def _mean(decodes) -> float:
        return float(np.mean([f.per_token for f in decodes]))

    def static(self, k: int) -> float:
        return self._mean(static_flops(self.config, p, self.n_new, k, self.head)
                          for p in self.lengths)

    def self_spec(self, rounds: Sequence[Any], k: int, d: int) -> float:
        return self._mean(self_spec_flops(self.config, p, r.accepted, k, d, self.head)
                          for p, r in zip(self.lengths, rounds))

    def calm(self, exit_layers: Sequence[Any], evaluated: Sequence[Any]) -> float:
        return self._mean(calm_flops(self.config, p, e, v, self.head)
                          for p, e, v in zip(self.lengths, exit_layers, evaluated))


class TeacherFlops:
    """FLOPs per predicted token of each teacher-forced path, pooled over every position."""

    def __init__(self, config: Any, lengths: Sequence[int], total: int, head: int):
        self.config, self.lengths, self.total, self.head = config, list(lengths), total, head
        self.count = sum(t - 1 for t in self.lengths)
        self.per_layer = np.array([layer_flops(config, p) for p in range(max(self.lengths))],
                                  dtype=np.float64)
        self.full = self.static(total)

    def static(self, k: int) -> float:
        head = None if k == self.total else self.head
        return sum(teacher_forced_flops(self.config, t, k, head) for t in self.lengths) / \
            self.count

    def calm(self, exit_layers: Sequence[Any], evaluated: Sequence[Any]) -> float:
        """Each position: layers to its exit, the exit heads read, the LM head at the last
        layer, its copy into the skipped layers (calm_step_flops, vectorised)."""
        exit_layer = np.concatenate([np.asarray(e) for e in exit_layers])
        read = np.concatenate([np.asarray(v) for v in evaluated])
        positions = np.concatenate([np.arange(len(e)) for e in exit_layers])
        flops = (exit_layer * self.per_layer[positions] + read * self.head
                 + (exit_layer == self.total) * lm_head_flops(self.config)
                 + (self.total - exit_layer) * copy_flops(self.config))
        return float(flops.mean())


def greedy_scorer(task: str, traces: Sequence[Any]) -> Callable[..., Scored]:
    """Generated tokens per prompt against the full model's: metrics, per-prompt agreement."""
    spec, reference = get_task(task), np.stack([t.tokens for t in traces])

    def score(predictions: Sequence[Any], nll: Any = None) -> Scored:
        generated = np.asarray([np.asarray(p) for p in predictions])
        metrics = compute_lm_metrics(spec, generated=generated, reference=reference)
        per = [compute_lm_metrics(spec, generated=g[None], reference=r[None])[spec.main_metric]
               for g, r in zip(generated, reference)]
        return Scored(metrics, per)

    return score


def teacher_scorer(task: str, traces: Sequence[Any]) -> Callable[..., Scored]:
    """Per-review next-token predictions and NLLs: pooled metrics, per-review main metric."""
    spec = get_task(task)

    def metrics(preds, nll, trace_list) -> dict[str, float]:
        return compute_lm_metrics(
            spec, preds=np.concatenate(preds), full_preds=np.concatenate(
                [t.tokens for t in trace_list]),
            targets=np.concatenate([t.targets for t in trace_list]),
            nll_sum=float(sum(np.sum(v) for v in nll)), count=sum(len(p) for p in preds))

    def score(predictions: Sequence[Any], nll: Sequence[Any]) -> Scored:
        per = [metrics([p], [v], [t])[spec.main_metric]
               for p, v, t in zip(predictions, nll, traces)]
        return Scored(metrics(list(predictions), list(nll), traces), per)

    return score


def context(cfg: DecodeConfig, model: Any, exits: Any, samples: list[Any], traces: list[Any],
            head_cost: int, tick: Callable[[str], None]) -> DecodeContext:
    """The context of one decoder run (its traces made) for its methods' points."""
    spec, total = get_task(cfg.task), num_layers(model)
    if spec.decoding == "greedy":
        flops: Any = GreedyFlops(model.config, [t.prompt_len for t in traces],
                                 cfg.data.new_tokens, head_cost)
        score, n_tokens = greedy_scorer(cfg.task, traces), sum(t.n_new for t in traces)
    else:
        flops = TeacherFlops(model.config, [t.n_new + 1 for t in traces], total, head_cost)
        score, n_tokens = teacher_scorer(cfg.task, traces), flops.count

    def point(method: str, setting: dict, scored: Scored, flops_per_token: float,
              **extra: Any) -> DecoderPoint:
        return decoder_point(cfg, spec.main_metric, method, setting, scored.metrics,
                             flops_per_token, flops.full, len(traces), n_tokens, total,
                             sample_main=scored.per_sample, **extra)

    return DecodeContext(cfg=cfg, model=model, exits=exits, samples=samples, traces=traces,
                         flops=flops, score=score, point=point, tick=tick)
