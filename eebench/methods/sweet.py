"""SWEET (Rotem et al., ACL Findings 2023; schwartz-lab-NLP/SWEET): Separating Weights in Early
Exit Transformers. Each exit's loss trains only the layers since the previous exit.

    head i  = shared pooler (one module, from the pretrained pooler) -> dropout -> linear_i,
              after every layer, or after the layers of the setting exit_layers (the paper: 4)
    train:    loss = sum_i CE_i; the hidden states passed on to the layers after exit i are
              detached, so layers (exit_{i-1}, exit_i] learn only from CE_i (the shared pooler
              learns from every exit)
    infer:    exit at the first i with max softmax(logits_i) >= threshold (the last always exits)

Classification only.
"""

from __future__ import annotations

from itertools import pairwise

from pydantic import field_validator

from eebench.errors import UsageError
from eebench.methods import EarlyExitMethod, MethodSettings, register_method
from eebench.methods.pabee import PABEE


@register_method("sweet")
class SWEET(PABEE):
    paper = ("Rotem et al., Finding the SWEET Spot: Analysis and Improvement of Adaptive "
             "Inference in Low Resource Settings, ACL Findings 2023")
    description = ("a classifier per layer; each exit's loss trains only its own block of "
                   "layers (detached between exits); exit on max probability")
    rule = "maxprob"

    class Settings(MethodSettings):  # its loss is its own: of PABEE's settings, the pooler's
        shared_pooler: bool = True  # the authors' one BERT pooler for every exit
        # the layers with an exit after them (None: every layer); the paper's BERT-base runs
        # put four, after layers 1, 4, 6 and 12, so each block of layers learns from one exit
        exit_layers: list[int] | None = None
        RECORDED_WHEN_CHANGED = ("exit_layers",)  # runs before it had every layer

        @field_validator("exit_layers")
        @classmethod
        def _increasing(cls, v: list[int] | None) -> list[int] | None:
            if v is not None and (not v or v[0] < 1 or any(a >= b for a, b in pairwise(v))):
                raise ValueError("exit_layers must be layer numbers >= 1, strictly increasing")
            return v

    def head_layers(self, num_layers):
        layers = self.config.exit_layers
        if layers is None:
            return super().head_layers(num_layers)
        if layers[-1] > num_layers:
            raise UsageError(f"sweet: an exit after layer {layers[-1]} but the backbone has "
                             f"{num_layers} layers", hint="set exit_layers to layers it has")
        return tuple(layers)

    loss = EarlyExitMethod.loss  # each exit's loss, unweighted (not PABEE's weights)

    def route(self, stage, num_exits):
        return detach_after_exit


def detach_after_exit(j: int, hidden):
    """Head j reads the hidden states with their gradient; the next layer reads them detached."""
    return hidden, hidden.detach()
