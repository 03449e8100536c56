"""humaneval-gen's operating points: greedy decoding, each prompt traced once.

`record_exits` gives, per prompt, the full model's greedy tokens and every exit's argmax and
confidence along them. From the traces, with no model run: self-speculation at every (k, d)
(lossless: the full model's tokens, acceptance from the trace), its per-prompt adaptive choice of
k, and CALM under an oracle cache at every threshold. Decoded for real: the static baseline (the
model truncated at exit k follows its own tokens after its first disagreement, which a trace
cannot say), the checked self-spec points (tokens and accepted lengths against the simulation)
and CALM at a few thresholds (its real cache differs from the oracle's: the difference in token
agreement is reported, a figure, not an error).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from eebench.measure.decoder_flops import (
    calm_flops,
    greedy_flops,
    self_spec_flops,
    static_flops,
)
from eebench.models.decoder_exits import DecoderExits, num_layers
from eebench.rules.calm_decoding import calm_decode
from eebench.rules.decoder_sweep import (
    ExitTrace,
    adaptive_self_spec,
    record_exits,
    simulate_calm,
    simulate_self_spec,
)
from eebench.rules.decoder_tf import truncated_greedy
from eebench.rules.self_speculation import SpecRounds, self_speculative_decode
from eebench.run.decoding.records import DecodeConfig, DecoderPoint, decoder_point
from eebench.tasks.catalog import get_task
from eebench.tasks.lm_metrics import compute_lm_metrics

Tick = Callable[[str], None]


def _mean(values) -> float:
    return float(np.mean(list(values)))


def _rate(rounds: list[SpecRounds]) -> dict[str, float | None]:
    accepted = sum(sum(r.accepted) for r in rounds)
    drafted = sum(sum(r.drafted) for r in rounds)
    n_rounds = sum(r.rounds for r in rounds)
    emitted = sum(r.emitted for r in rounds)
    return {"acceptance_rate": 100.0 * accepted / drafted if drafted else None,
            "mean_accepted": accepted / n_rounds, "tokens_per_round": emitted / n_rounds}


def trace_prompts(model: nn.Module, exits: DecoderExits, prompts: list[torch.Tensor], n_new: int,
                  tick: Tick) -> list[ExitTrace]:
    out = []
    for p in prompts:
        out.append(record_exits(model, exits, p, n_new))
        tick("trace")
    return out


def greedy_points(model: nn.Module, exits: DecoderExits, prompts: list[torch.Tensor],
                  traces: list[ExitTrace], cfg: DecodeConfig, head_cost: int, tick: Tick
                  ) -> list[DecoderPoint]:
    spec = get_task(cfg.task)
    config, total, n_new = model.config, num_layers(model), cfg.data.new_tokens
    reference = np.stack([t.tokens for t in traces])
    lengths = [t.prompt_len for t in traces]
    n, n_tokens = len(traces), reference.size

    def metrics(generated) -> dict[str, float]:
        return compute_lm_metrics(spec, generated=np.asarray(generated), reference=reference)

    full = _mean(greedy_flops(config, p, n_new).per_token for p in lengths)

    def point(method: str, setting: dict, m: dict, flops: float, **extra) -> DecoderPoint:
        return decoder_point(cfg, spec.main_metric, method, setting, m, flops, full, n,
                             n_tokens, total, **extra)

    points = [point("full", {"k": total}, metrics(reference), full, mean_exit_layer=total)]
    for k in exits.layers:  # static: the truncated model decoded for real
        generated = [truncated_greedy(model, exits, p, n_new, k) for p in prompts]
        tick("static")
        flops = _mean(static_flops(config, p, n_new, k, head_cost).per_token for p in lengths)
        points.append(point("static", {"k": k}, metrics(generated), flops,
                            mean_exit_layer=float(k)))
    checked = set(cfg.checked_spec_points())
    for k in cfg.candidate_ks():
        for d in cfg.draft_lengths:
            rounds = [simulate_self_spec(t, k, d) for t in traces]
            flops = _mean(self_spec_flops(config, p, r.accepted, k, d, head_cost).per_token
                          for p, r in zip(lengths, rounds))
            extra: dict = {}
            if (k, d) in checked:
                extra = check_self_spec(model, exits, prompts, traces, rounds, k, d)
                tick("self-spec check")
            points.append(point("self-spec", {"k": k, "d": d}, metrics(reference), flops,
                                **_rate(rounds), **extra))
    ks = cfg.candidate_ks()
    for d in cfg.draft_lengths:
        chosen = [adaptive_self_spec(t, ks, d, cfg.adaptive_probe) for t in traces]
        rounds = [r for _, r in chosen]
        flops = _mean(self_spec_flops(config, p, r.accepted, ks[0], d, head_cost).per_token
                      for p, r in zip(lengths, rounds))
        counts = Counter(str(k) for k, _ in chosen)
        points.append(point("self-spec-adaptive", {"d": d, "m": cfg.adaptive_probe},
                            metrics(reference), flops, **_rate(rounds),
                            chosen_k=dict(sorted(counts.items(), key=lambda kv: int(kv[0])))))
    real = set(cfg.real_thresholds())
    for threshold in cfg.thresholds:
        sims = [simulate_calm(t, threshold, cfg.measure) for t in traces]
        flops = _mean(calm_flops(config, p, s.exit_layers, s.exits_evaluated, head_cost).per_token
                      for p, s in zip(lengths, sims))
        oracle = metrics([s.predictions for s in sims])
        extra = {}
        if threshold in real:
            extra = real_calm(model, exits, prompts, lengths, threshold, cfg, reference,
                              spec, head_cost, oracle[spec.main_metric])
            tick("calm decode")
        points.append(point("calm", {"threshold": threshold, "measure": cfg.measure}, oracle,
                            flops, mean_exit_layer=_mean(np.concatenate(
                                [s.exit_layers for s in sims])), **extra))
    return points


def check_self_spec(model: nn.Module, exits: DecoderExits, prompts: list[torch.Tensor],
                    traces: list[ExitTrace], rounds: list[SpecRounds], k: int, d: int) -> dict:
    """Real self-speculative decoding of every prompt against greedy and the simulation."""
    tokens_differ = rounds_differ = 0
    for p, t, sim in zip(prompts, traces, rounds):
        real = self_speculative_decode(model, exits, p, t.n_new, k, d)
        tokens_differ += real.tokens != t.tokens.tolist()
        rounds_differ += real.accepted != sim.accepted or real.drafted != sim.drafted
    return {"agrees": tokens_differ == 0 and rounds_differ == 0,
            "check": {"prompts": len(prompts), "tokens_differ": tokens_differ,
                      "rounds_differ": rounds_differ}}


def real_calm(model: nn.Module, exits: DecoderExits, prompts: list[torch.Tensor],
              lengths: list[int], threshold: float, cfg: DecodeConfig, reference: np.ndarray,
              spec, head_cost: int, oracle_main: float) -> dict:
    """CALM decoded for real (halted states copied upward) at one threshold."""
    decodes = [calm_decode(model, exits, p, cfg.data.new_tokens, threshold, cfg.measure)
               for p in prompts]
    m = compute_lm_metrics(spec, generated=np.array([r.tokens for r in decodes]),
                           reference=reference)
    flops = _mean(calm_flops(model.config, p, r.exit_layers, r.exits_evaluated,
                             head_cost).per_token for p, r in zip(lengths, decodes))
    real = {**m, "flops_per_token": flops,
            "mean_exit_layer": _mean(np.concatenate([r.exit_layers for r in decodes]))}
    return {"real": real, "oracle_gap": m[spec.main_metric] - oracle_main}
