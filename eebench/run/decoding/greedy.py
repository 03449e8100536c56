"""humaneval-gen's traces: greedy decoding, each prompt traced once.

`record_exits` gives, per prompt, the full model's greedy tokens and every exit's argmax and
confidence along them. The decoder methods (eebench.methods: static, self-spec,
self-spec-adaptive, calm, ee-tuning, plugins) read their points off the traces, and decode for
real where a trace cannot say (static's truncated model follows its own tokens) or to check the
simulation (self-spec's checked points, CALM at a few thresholds).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from eebench.models.decoder_exits import DecoderExits
from eebench.rules.decoder_sweep import ExitTrace, record_exits


def trace_prompts(model: nn.Module, exits: DecoderExits, prompts: list[torch.Tensor], n_new: int,
                  tick: Callable[[str], None]) -> list[ExitTrace]:
    out = []
    for p in prompts:
        out.append(record_exits(model, exits, p, n_new))
        tick("trace")
    return out
