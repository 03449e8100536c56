"""imdb-lm's traces: one teacher-forced pass over each review.

`record_teacher_forced` keeps per exit (and the last layer) and per position the argmax, the
confidence and the NLL of the review's actual next token: [exits + 1, positions] numbers, never
the vocabulary. The decoder methods read their points off the traces: each exit k alone (the
model truncated at k: its perplexity, its top-1 agreement with the full model, k layers and a
head per position: static, ee-tuning), CALM under an oracle cache at each threshold (exact when
teacher-forced: every position exits at its first confident exit, the exit heads read and the
copy into skipped layers counted).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from eebench.models.decoder_exits import DecoderExits
from eebench.rules.decoder_tf import TeacherForcedTrace, record_teacher_forced


def trace_reviews(model: nn.Module, exits: DecoderExits, windows: list[torch.Tensor],
                  tick: Callable[[str], None]) -> list[TeacherForcedTrace]:
    out = []
    for ids in windows:
        out.append(record_teacher_forced(model, exits, ids))
        tick("teacher-forced pass")
    return out
