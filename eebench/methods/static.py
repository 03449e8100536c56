"""Static early exit (the ELUE / ElasticBERT baseline): the first k layers and one classifier.

Each k is its own fine-tuned model, so the sweep runs over models, not over an exit rule:

    model_k = layers 1..k of the backbone, then pooler -> dropout -> linear after layer k
    train:   every parameter on the cross-entropy (MSE for regression) of that single exit
    infer:   every sample exits after layer k

The pooler starts from the pretrained one and, like every method's heads, pools [CLS] or the
masked mean of the tokens (the model's `pooling`). The static points of a reference model are
what the ELUE score's reference curve is built from.

On a decoder LLM (`eebench decode`) it is the same curve: the model truncated at each exit k, its
first k layers and exit k's head (greedy: decoded for real; teacher-forced: exit k's predictions),
with the run's untrained exits (logit lens); trained exits make those points EE-Tuning's.
"""

from __future__ import annotations

from pydantic import Field

from eebench.errors import UsageError
from eebench.methods import EarlyExitMethod, MethodSettings, Variant, register_method
from eebench.methods.decoding import truncated_points


@register_method("static")
class Static(EarlyExitMethod):
    paper = ("Liu et al., Towards Efficient NLP: A Standard Evaluation and A Strong Baseline, "
             "NAACL 2022")
    description = ("first k layers + one classifier after layer k; each k fine-tuned separately "
                   "(a decoder: its first k layers and exit k's head, decoded greedily)")
    sweep_param = "layers"  # no rule: every sample exits at the one exit; k = 1..L by default
    sweep_type = int
    joint_stage = "fine-tune"  # its one exit's loss, every parameter
    trains = "one model per sweep value (k = 1..L); a decoder: nothing"
    decodes_batches = True  # a truncated decoder is plain greedy decoding

    class Settings(MethodSettings):
        layers: int | None = Field(None, ge=1)  # None: every layer of the backbone

    def variants(self, sweep):
        bad = [v for v in sweep if not (v >= 1 and float(v).is_integer())]
        if bad:
            raise UsageError(f"static sweeps over layer counts k >= 1, got {bad[0]}")
        return [Variant(f"k{int(k)}", type(self)(**{**self.settings, "layers": int(k)}),
                        (float(k),)) for k in sweep]

    def head_layers(self, num_layers):
        """One classifier, after layer k (every layer when `layers` is not set)."""
        k = self.config.layers
        if k is not None and k > num_layers:
            raise UsageError(f"static: layers={k} but the backbone has {num_layers} layers")
        return (num_layers if k is None else k,)


    # -- a decoder LLM (eebench decode) --------------------------------------------------------
    def greedy_points(self, ctx):
        return truncated_points(ctx, self.name)

    def teacher_points(self, ctx):
        return truncated_points(ctx, self.name)

    def decoder_refusal(self, cfg):
        if cfg.tuning_steps:
            return ("this run's exits are trained (--tune-steps): their truncation points are "
                    "ee-tuning's")
        return None
