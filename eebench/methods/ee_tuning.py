"""EE-Tuning (Pan et al. 2024): early exits added to a trained LLM by tuning the exit heads
alone.

    heads:   an adapter exit after each chosen layer, feeding the frozen final norm and LM head
    train:   the backbone frozen; each exit learns the full model's next-token distribution,
             KL(full || exit) (eebench.train.exit_tuning), on imdb-lm's training reviews
    points:  the model truncated at each trained exit (its first k layers and exit k)

Its heads are trained by the decoder run itself (`eebench decode --head adapter --tune-steps
N`); the other decoder methods then exit with them. A run of untrained exits (the logit lens)
has no points of it. Static truncation, as static's: a batch above 1 works for plain greedy
decoding of prompts of one length (`greedy_decode`); the run decodes one at a time.
"""

from __future__ import annotations

from eebench.methods import EarlyExitMethod, register_method
from eebench.methods.decoding import truncated_points


@register_method("ee-tuning")
class EETuning(EarlyExitMethod):
    paper = ("Pan et al., EE-Tuning: An Economical yet Scalable Solution for Tuning Early-Exit "
             "Large Language Models, 2024")
    description = ("adapter exits trained on the frozen backbone to match the full model's "
                   "next-token distribution; points: the model truncated at each trained exit "
                   "(eebench decode --head adapter --tune-steps N)")
    sweep_param = "k (trained exit)"
    trains = "exit adapters on the frozen backbone (--tune-steps)"
    encoder_tasks = False
    decodes_batches = True

    def greedy_points(self, ctx):
        return truncated_points(ctx, self.name)

    def teacher_points(self, ctx):
        return truncated_points(ctx, self.name)

    def decoder_refusal(self, cfg):
        if cfg.exits.head != "adapter" or not cfg.tuning_steps:
            return ("ee-tuning's points are those of the exits it trains: add --head adapter "
                    "--tune-steps N")
        return None
