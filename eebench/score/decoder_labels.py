"""How a decoder point is named and what its run's reference curve is made of: plain data, read
by the results table (eebench.score.decoder_table) and by the leaderboard page, which must not
import torch to read a submission."""

from __future__ import annotations

from typing import Any

# the settings that make each method's sweep, in order (the others go into the label)
SWEEPS = {"full": ("k",), "static": ("k",), "ee-tuning": ("k",), "self-spec": ("k", "d"),
          "self-spec-adaptive": ("d",), "calm": ("threshold",)}
# settings left out of the label at these values (DecodeConfig's defaults)
LABEL_DEFAULTS: dict[str, Any] = {"measure": "maxprob", "m": 8}
PACK = 100  # a second sweep value is packed as value / PACK: "k+d" 6.04 is k = 6, d = 4
REFERENCE_METHODS = ("static", "full")  # the run's own reference curve: truncation, full model
