"""CALM, Confident Adaptive Language Modeling (Schuster et al. 2022): each generated token exits
at its first confident exit.

    per token:  walk up the exits; stop at the first whose confidence (max softmax probability,
                or the top-2 margin p1 - p2: `measure`) >= threshold, else the last layer
    predict:    that exit's argmax
    state:      the halted hidden state is copied into the skipped layers' key/value caches
                (eebench.rules.calm_decoding), so later tokens attend to every layer

Every threshold under an ORACLE cache (earlier tokens' states are the full model's: the traces,
`simulate_calm`); greedy decoding also for real at a few thresholds (DecodeConfig.calm_real:
the lowest, middle and highest by default), reported as `real` and `oracle_gap` (real minus
oracle agreement: a figure, not an error). Teacher-forced (imdb-lm): the oracle is exact.
Batch size 1: tokens of one batch would exit at different layers.
"""

from __future__ import annotations

import numpy as np

from eebench.methods import EarlyExitMethod, register_method
from eebench.methods.decoding import mean


@register_method("calm")
class CALM(EarlyExitMethod):
    paper = "Schuster et al., Confident Adaptive Language Modeling, NeurIPS 2022"
    description = ("each token exits at its first exit whose confidence (maxprob or margin) "
                   "reaches the threshold, its state copied into the skipped layers; batch "
                   "size 1")
    sweep_param = "threshold (maxprob or margin)"  # DecodeConfig.thresholds, measure
    trains = "nothing: reads the run's exits"
    encoder_tasks = False

    def greedy_points(self, ctx):
        return self._points(ctx, real=set(ctx.cfg.real_thresholds()))

    def teacher_points(self, ctx):
        return self._points(ctx, real=set())

    def _points(self, ctx, real):
        from eebench.rules.decoder_sweep import simulate_calm  # torch, when decoding

        points, measure = [], ctx.cfg.measure
        for threshold in ctx.cfg.thresholds:
            sims = [simulate_calm(t, threshold, measure) for t in ctx.traces]
            nll = None if ctx.decoding == "greedy" else [  # the exited row's NLL, per position
                t.nll[np.searchsorted(t.layers, s.exit_layers), np.arange(t.n_new)]
                for t, s in zip(ctx.traces, sims)]
            oracle = ctx.score([s.predictions for s in sims], nll)
            extra = decoded(ctx, threshold, oracle) if threshold in real else {}
            points.append(ctx.point(
                self.name, {"threshold": threshold, "measure": measure}, oracle,
                ctx.flops.calm([s.exit_layers for s in sims], [s.exits_evaluated for s in sims]),
                mean_exit_layer=mean(np.concatenate([s.exit_layers for s in sims])), **extra))
        return points

    def timed_decodes(self, ctx, point):
        from eebench.rules.calm_decoding import calm_decode

        t = float(point.setting["threshold"])
        if t not in set(ctx.cfg.real_thresholds()):
            return {}
        return {"timing": lambda p: calm_decode(ctx.model, ctx.exits, p, ctx.n_new, t,
                                                ctx.cfg.measure).tokens}


def decoded(ctx, threshold: float, oracle) -> dict:
    """CALM decoded for real (halted states copied upward) at one threshold."""
    from eebench.rules.calm_decoding import calm_decode

    runs = [calm_decode(ctx.model, ctx.exits, p, ctx.n_new, threshold, ctx.cfg.measure)
            for p in ctx.samples]
    ctx.tick(f"calm decode {threshold}")
    scored = ctx.score([r.tokens for r in runs])
    main = ctx.main_metric
    real = {**scored.metrics,
            "flops_per_token": ctx.flops.calm([r.exit_layers for r in runs],
                                              [r.exits_evaluated for r in runs]),
            "mean_exit_layer": mean(np.concatenate([r.exit_layers for r in runs]))}
    return {"real": real, "oracle_gap": scored.metrics[main] - oracle.metrics[main]}
