"""Self-speculation with k chosen per prompt, DEL's idea (Zarch et al. 2025), simply:

    probe:   decode the first m tokens drafting with the deepest candidate exit
    choose:  the k whose drafts would have given the most tokens per sequential layer pass on
             them (acceptance is known for every exit: the verifier's states say it)
    decode:  the rest with that k (eebench.rules.decoder_sweep.adaptive_self_spec)

Simulated from the greedy traces at every draft length d; lossless like self-spec. DEL chooses
the exit layer (and the draft length) as it decodes, from the acceptance it tracks for every
layer; this is a per-prompt choice of the exit alone. Batch size 1.
"""

from __future__ import annotations

from collections import Counter

from eebench.methods import EarlyExitMethod, register_method
from eebench.methods.decoding import rate


@register_method("self-spec-adaptive")
class AdaptiveSelfSpec(EarlyExitMethod):
    paper = ("Zarch et al., DEL: Context-Aware Dynamic Exit Layer for Efficient "
             "Self-Speculative Decoding, 2025")
    description = ("self-speculation whose draft exit k is chosen per prompt from the "
                   "acceptance on its first m tokens; lossless; batch size 1")
    sweep_param = "d (k chosen per prompt)"  # DecodeConfig.draft_lengths, adaptive_probe
    trains = "nothing: drafts with the run's exits"
    encoder_tasks = False

    def greedy_points(self, ctx):
        from eebench.rules.decoder_sweep import adaptive_self_spec  # torch, when decoding

        greedy = ctx.score([t.tokens for t in ctx.traces])
        ks, m, points = ctx.cfg.candidate_ks(), ctx.cfg.adaptive_probe, []
        for d in ctx.cfg.draft_lengths:
            chosen = [adaptive_self_spec(t, ks, d, m) for t in ctx.traces]
            rounds = [r for _, r in chosen]
            counts = Counter(str(k) for k, _ in chosen)
            # with the draft's cache reused, every position passes all L layers once whatever
            # k drafted it: a decode's FLOPs depend on its rounds alone, not on k
            points.append(ctx.point(
                self.name, {"d": d, "m": m}, greedy, ctx.flops.self_spec(rounds, ks[0], d),
                **rate(rounds), chosen_k=dict(sorted(counts.items(), key=lambda c: int(c[0])))))
        return points
