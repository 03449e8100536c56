"""What a model's config.json may declare, checked before anything is built from it: the one
config check of `--model DIR` (eebench.models.model_dir) and `--from-checkpoint DIR`
(eebench.models.convert.schema).

A config is trusted for nothing: transformers allocates what it declares. A string where a layer
count goes is a traceback inside transformers; a vocabulary of 2**31 tokens, or a hidden size the
weights do not have, asks for terabytes before the weights' shapes are ever compared. So

- `ModelConfig` (pydantic) bounds every count and size that sizes a tensor: an integer (a bool,
  a float, a string or a list is none) within limits far above any encoder's, so that a model
  built from a config that passes is never absurdly large;
- `check_sizes` compares the sizes with the weights' own shapes, read from the safetensors
  headers: a model is built only at the sizes its weights have.

Each failure is one line naming config.json and the field.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, PlainValidator
from pydantic_core import PydanticCustomError

from eebench.errors import DataError

# Layers, heads, layer groups; and the model's sizes, each far above any encoder's (BERT-large:
# 24 layers, hidden 1,024, intermediate 4,096, 30,522 tokens, 512 positions).
MAX_COUNT = 1024
MAX_WIDTH = 1 << 16  # hidden_size, embedding_size, DistilBERT's dim
MAX_INNER = 1 << 18  # intermediate_size, DistilBERT's hidden_dim
MAX_VOCAB = 1 << 24  # vocab_size (the largest vocabularies hold about 256k tokens; a config
# without weights may stand for a model of any size: the leaderboard tests count 6M-token ones)
MAX_POSITIONS = 1 << 20  # max_position_embeddings
MAX_TYPES = 1024  # type_vocab_size (2 for BERT, 1 for RoBERTa)
MAX_BUCKETS = 4096  # MPNet's relative_attention_num_buckets (32)
CONFIG_HINT = "use the config.json saved with these weights"


# The supported architecture families by config.model_type, with what each is, as plain data: the
# config check refuses any other, and `eebench backbones --families` lists them (importing
# nothing); the entries themselves, with torch, are eebench.models.families.FAMILIES and
# CONVERSIONS.
SUPPORTED_FAMILIES: dict[str, str] = {
    "bert": "BERT and MiniLM: embeddings, encoder.layer, pooler",
    "roberta": "RoBERTa: BERT's layout, positions counted after the padding id",
    "albert": "ALBERT: embeddings + projection E -> H, one shared layer group run L times, pooler",
    "distilbert": "DistilBERT: no token types, transformer.layer, no pooler (a fresh one)",
    "mpnet": "MPNet: relative position bias computed once per batch, read by every layer",
    "elasticbert": "ElasticBERT checkpoints: loaded into BERT by a key mapping, one pooler per "
                   "layer (the exit heads' poolers)",
}


def bounded(top: int, bottom: int = 1) -> Any:
    """An optional integer in bottom..top: a bool, a float, a string, a list is refused, the
    error naming the value and the bounds (pydantic's lax mode would read "12" as 12)."""

    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not bottom <= value <= top:
            shown = repr(value)
            shown = shown if len(shown) <= 40 else shown[:37] + "..."
            raise PydanticCustomError("bounded", "{value} is not an integer in {bounds}",
                                      {"value": shown, "bounds": f"{bottom}..{top:,}"})
        return value

    return Annotated[int | None, PlainValidator(check)]


Count = bounded(MAX_COUNT)
Width = bounded(MAX_WIDTH)
Inner = bounded(MAX_INNER)
Vocab = bounded(MAX_VOCAB)
Positions = bounded(MAX_POSITIONS)
Types = bounded(MAX_TYPES, bottom=0)
Buckets = bounded(MAX_BUCKETS)


class ModelConfig(BaseModel):
    """The fields of a config.json that size a model's tensors, each optional (a family's own
    default applies), bounded where present; every other field is the family's to read."""

    model_config = ConfigDict(extra="allow")

    model_type: str | None = None
    num_hidden_layers: Count = None
    num_attention_heads: Count = None
    num_hidden_groups: Count = None  # ALBERT
    inner_group_num: Count = None  # ALBERT
    n_layers: Count = None  # DistilBERT
    n_heads: Count = None  # DistilBERT
    hidden_size: Width = None
    embedding_size: Width = None  # ALBERT
    dim: Width = None  # DistilBERT
    intermediate_size: Inner = None
    hidden_dim: Inner = None  # DistilBERT
    vocab_size: Vocab = None
    max_position_embeddings: Positions = None
    type_vocab_size: Types = None
    relative_attention_num_buckets: Buckets = None  # MPNet


_HEADS = (("hidden_size", "num_attention_heads"), ("dim", "n_heads"))


def check_config(config: dict[str, Any], where: str) -> None:
    """Refuse a config no model can be built from, naming the field (a DataError): a family
    eebench supports, every size within its bounds, a width each attention head shares."""
    from eebench.io import validated

    family = config.get("model_type")
    if not isinstance(family, str):
        raise DataError(f"{where}: no model_type: not a Hugging Face model config")
    if family not in SUPPORTED_FAMILIES:
        raise DataError(f"{where}: model_type {family!r} is not a supported backbone family",
                        hint=f"supported families: {', '.join(SUPPORTED_FAMILIES)}")
    validated(ModelConfig, config, where, what="model config", hint=CONFIG_HINT)
    for size, heads in _HEADS:
        if size in config and heads in config and config[size] % config[heads]:
            raise DataError(f"{where}: {size} {config[size]} is not a multiple of {heads} "
                            f"{config[heads]} (each attention head gets an equal share)")


_WORDS = "embeddings.word_embeddings.weight"
# The sizes a model is built with, as its weights hold them: (config field, the end of a tensor's
# name, which dimension, families it does not hold for). The word embeddings' rows (vocab_size)
# and the layers are model_dir's (_check_layers), which says what is missing.
_SIZED: tuple[tuple[str, str, int, tuple[str, ...]], ...] = (
    ("hidden_size", _WORDS, 1, ("albert",)),  # ALBERT's embeddings are embedding_size wide
    ("embedding_size", _WORDS, 1, ()),
    ("dim", _WORDS, 1, ()),  # DistilBERT
    ("hidden_size", "encoder.embedding_hidden_mapping_in.weight", 0, ()),  # ALBERT: E -> H
    ("max_position_embeddings", "embeddings.position_embeddings.weight", 0, ()),
    ("type_vocab_size", "embeddings.token_type_embeddings.weight", 0, ()),
    ("intermediate_size", "encoder.layer.0.intermediate.dense.weight", 0, ()),
    ("intermediate_size", "albert_layer_groups.0.albert_layers.0.ffn.weight", 0, ()),
    ("hidden_dim", "transformer.layer.0.ffn.lin1.weight", 0, ()),  # DistilBERT
    ("relative_attention_num_buckets", "encoder.relative_attention_bias.weight", 0, ()),
)


def check_sizes(config: dict[str, Any], shapes: dict[str, tuple[int, ...]], where: str) -> None:
    """Every size the config declares is the one the weights have (from the file headers: no
    tensor is read), so that nothing is allocated at a size the weights do not have."""
    family = config.get("model_type")
    for field, name, dim, other in _SIZED:
        value = config.get(field)
        if family in other or not isinstance(value, int):
            continue
        for key, shape in shapes.items():
            if (key == name or key.endswith(f".{name}")) and len(shape) > dim \
                    and shape[dim] != value:
                raise DataError(f"{where}: {field} is {value}, but the weights' {key} is "
                                f"{list(shape)}", hint=CONFIG_HINT)
