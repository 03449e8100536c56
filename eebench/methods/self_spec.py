"""LayerSkip's self-speculative decoding (Elhoushi et al. 2024): the first k layers draft, the
whole model verifies.

    a round:  draft d tokens, one at a time, with layers 1..k and exit k
              verify them in one pass of layers k+1..L (the draft's cache and layer-k states
              reused: eebench.rules.self_speculation)
              accept the longest prefix equal to the full model's greedy tokens, plus the
              verifier's next token
    quality:  greedy's tokens exactly (100); it saves sequential layer passes, not FLOPs

Every (k, d) is simulated from the greedy traces (`simulate_self_spec`, no model run); the
checked points (DecodeConfig.spec_checks: every k at the longest d by default) are decoded for
real and must give greedy's tokens and the simulated accepted lengths. Batch size 1: rows of a
batch accept different numbers of drafts, so their caches would part.
"""

from __future__ import annotations

from eebench.methods import EarlyExitMethod, register_method
from eebench.methods.decoding import rate


@register_method("self-spec")
class SelfSpec(EarlyExitMethod):
    paper = ("Elhoushi et al., LayerSkip: Enabling Early Exit Inference and Self-Speculative "
             "Decoding, ACL 2024")
    description = ("draft d tokens with the first k layers and exit k, verify them with the "
                   "rest of the model in one pass; lossless (greedy's tokens); batch size 1")
    sweep_param = "k x d"  # draft exit x draft length: DecodeConfig.ks, draft_lengths
    trains = "nothing: drafts with the run's exits"
    encoder_tasks = False

    def greedy_points(self, ctx):
        from eebench.rules.decoder_sweep import simulate_self_spec  # torch, when decoding

        greedy = ctx.score([t.tokens for t in ctx.traces])  # lossless by construction
        checked, points = set(ctx.cfg.checked_spec_points()), []
        for k in ctx.cfg.candidate_ks():
            for d in ctx.cfg.draft_lengths:
                rounds = [simulate_self_spec(t, k, d) for t in ctx.traces]
                extra = check(ctx, rounds, k, d) if (k, d) in checked else {}
                points.append(ctx.point(self.name, {"k": k, "d": d}, greedy,
                                        ctx.flops.self_spec(rounds, k, d), **rate(rounds),
                                        **extra))
        return points

    def timed_decodes(self, ctx, point):
        """The checked points, with transformers' `assistant_early_exit` at the same k and d."""
        from eebench.rules.self_speculation import hf_early_exit_generate, self_speculative_decode

        k, d = int(point.setting["k"]), int(point.setting["d"])
        if (k, d) not in set(ctx.cfg.checked_spec_points()):
            return {}
        n = ctx.n_new
        return {"timing": lambda p: self_speculative_decode(ctx.model, ctx.exits, p, n, k, d)
                .tokens,
                "peer_timing": lambda p: hf_early_exit_generate(ctx.model, p, n, k, d).tokens}


def check(ctx, rounds, k: int, d: int) -> dict:
    """Real self-speculative decoding of every prompt against greedy and the simulation."""
    from eebench.rules.self_speculation import self_speculative_decode

    tokens_differ = rounds_differ = 0
    for p, t, sim in zip(ctx.samples, ctx.traces, rounds):
        real = self_speculative_decode(ctx.model, ctx.exits, p, t.n_new, k, d)
        tokens_differ += real.tokens != t.tokens.tolist()
        rounds_differ += real.accepted != sim.accepted or real.drafted != sim.drafted
    ctx.tick(f"self-spec check k={k} d={d}")
    return {"agrees": tokens_differ == 0 and rounds_differ == 0,
            "check": {"prompts": len(ctx.samples), "tokens_differ": tokens_differ,
                      "rounds_differ": rounds_differ}}
