"""How an encoder backbone pools a text into one vector for the exits' heads: "cls" (the [CLS]
hidden state, BERT's pooler) or "mean" (the mean over real tokens, sentence-transformers'), the
backbone's own unless a run says otherwise (eebench.models.backbones registers backbones)."""

from __future__ import annotations

import json
from pathlib import Path

from eebench.errors import DataError, UsageError
from eebench.models.backbones import BACKBONES, check_encoder, resolve_backbone
from eebench.models.model_dir import check_model_dir

POOLINGS = ("cls", "mean")  # the [CLS] hidden state, or the mean over real (unpadded) tokens
ST_POOLING_CONFIG = Path("1_Pooling") / "config.json"  # sentence-transformers' pooling module


def check_pooling(pooling: str) -> str:
    if pooling not in POOLINGS:
        raise UsageError(f"unknown pooling {pooling!r}", hint=f"choose from: {', '.join(POOLINGS)}")
    return pooling


def default_pooling(name: str) -> str:
    """How backbone `name` was pretrained to pool: a registered backbone says so itself (nothing
    is loaded or extracted to find out); a model directory pools "mean" when its
    sentence-transformers pooling config says mean tokens, else "cls" (BERT's pooler; hub ids are
    not downloaded to find out)."""
    if name in BACKBONES:
        return BACKBONES.get(name).pooling
    where = Path(resolve_backbone(name))
    if where.is_dir():
        check_model_dir(where)  # the first look at a model directory: refused before any work
    file = where / ST_POOLING_CONFIG
    if not (where.is_dir() and file.is_file()):
        return "cls"
    try:
        config = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise DataError(f"{file}: not a readable pooling config ({e})") from None
    return "mean" if isinstance(config, dict) and config.get("pooling_mode_mean_tokens") else "cls"


def resolve_pooling(name: str, pooling: str | None) -> str:
    """The pooling to build with: the user's choice, or None for the backbone's own (an
    encoder's: a registered decoder is refused here, the first look of `run` and `train`)."""
    check_encoder(name)
    return default_pooling(name) if pooling is None else check_pooling(pooling)
