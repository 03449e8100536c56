"""Multi-exit models over Hugging Face encoders (importing this package imports torch)."""

from eebench.models.backbones import (
    BACKBONES,
    POOLINGS,
    default_pooling,
    load_tokenizer,
    recommended_lr,
    resolve_backbone,
    resolve_pooling,
)
from eebench.models.multi_exit import (
    ExitHead,
    ExitPooler,
    MultiExitModel,
    assemble,
    build_model,
    pool_tokens,
)

__all__ = [
    "BACKBONES",
    "POOLINGS",
    "ExitHead",
    "ExitPooler",
    "MultiExitModel",
    "assemble",
    "build_model",
    "default_pooling",
    "load_tokenizer",
    "pool_tokens",
    "recommended_lr",
    "resolve_backbone",
    "resolve_pooling",
]
