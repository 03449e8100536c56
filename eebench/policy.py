"""Named policies that several stages share, defined once (the CLI's options, the scoring, the
submission schema): how the ELUE score reads the reference curve outside its FLOPs range
(eebench.score.elue explains each)."""

from __future__ import annotations

from enum import Enum


class Extrapolate(str, Enum):
    """Outside the reference curve's FLOPs range: hold its end value, or extend its end segments."""

    clamp = "clamp"
    linear = "linear"


EXTRAPOLATE = tuple(e.value for e in Extrapolate)
DEFAULT_EXTRAPOLATE = Extrapolate.clamp.value
