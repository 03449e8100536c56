"""The scoring's named policies, defined once and read by the later stages too (the CLI's
options, the submission schema): how the ELUE score reads the reference curve outside its FLOPs
range (eebench.score.elue explains each). Plain data, no numpy: the command line's options read
it without loading the scoring."""

from __future__ import annotations

from enum import Enum


class Extrapolate(str, Enum):
    """Outside the reference curve's FLOPs range: hold its end value, or extend its end segments."""

    clamp = "clamp"
    linear = "linear"


EXTRAPOLATE = tuple(e.value for e in Extrapolate)
DEFAULT_EXTRAPOLATE = Extrapolate.clamp.value
