"""Multi-exit models over Hugging Face encoders (importing this package imports torch)."""

from eebench.models.backbones import BACKBONES, load_tokenizer, resolve_backbone
from eebench.models.multi_exit import ExitHead, MultiExitModel, assemble, build_model

__all__ = [
    "BACKBONES",
    "ExitHead",
    "MultiExitModel",
    "assemble",
    "build_model",
    "load_tokenizer",
    "resolve_backbone",
]
