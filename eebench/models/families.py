"""Backbone families: where an encoder's embeddings, layers and pooler sit; how a layer is called.

One entry per architecture (the config's `model_type`), as data; `encoder_parts(model)` in
eebench.models.backbones is the one entry point. A multi-exit model is
`embed` -> `layer(0)` -> ... -> `layer(L-1)`, with exit heads after some layers:

- `parts(model)` says where the pieces sit: the embeddings part (whatever turns token ids into the
  hidden states the first layer reads), the L layer calls, and the pretrained pooler's dense layer;
- every layer is called the same way, `layer(hidden, **inputs)`, where `inputs` are the per-batch
  tensors `embed` builds once (`LayerInputs`): the additive attention mask [B, 1, 1, T] for every
  family, and whatever else a family's layers read (MPNet: its relative position bias
  [B, heads, T, T]). Each input says how many of its trailing dimensions run over tokens, so real
  dynamic inference cuts every input alike when it drops rows and padding columns.

| family     | embeddings part                              | layers                   | pooler |
|------------|----------------------------------------------|--------------------------|--------|
| bert       | `embeddings` (MiniLM, ElasticBERT too)       | `encoder.layer`          | yes    |
| roberta    | `embeddings` (positions after the pad id)    | `encoder.layer`          | yes    |
| albert     | `embeddings` + `embedding_hidden_mapping_in` | one shared group, L runs | yes    |
| distilbert | `embeddings` (no token types)                | `transformer.layer`      | none   |
| mpnet      | `embeddings` + `relative_attention_bias`     | `encoder.layer` (+ bias) | yes    |

ElasticBERT checkpoints (model_type "elasticbert", not in transformers) are BERT with one pooler
per layer: `CONVERSIONS` maps their keys onto a BertModel and hands the per-layer poolers to the
exit heads (`Parts.exit_poolers`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from eebench.errors import DataError, UsageError

MASK = "attention_mask"  # the one layer input every family has: additive, [B, 1, 1, T]


# ----------------------------------------------------------------------------------- the contract
@dataclass(frozen=True)
class Parts:
    """The pieces of an encoder a multi-exit model is built from."""

    embeddings: nn.Module  # embeddings(input_ids=, [token_type_ids=]) -> hidden [B, T, H]
    layers: list[nn.Module]  # layer(hidden, **layer inputs) -> hidden (or a tuple, hidden first)
    pooler: nn.Linear | None  # the pretrained pooler's dense layer (then tanh); None: none
    # Per-layer pretrained poolers (ElasticBERT), by 1-based layer: an exit head that owns its
    # pooler starts from the one of its layer.
    exit_poolers: dict[int, nn.Linear] = field(default_factory=dict)
    # False where cutting the layers would change which weights the rest run (ALBERT with
    # several layer groups: the group of layer i depends on the depth).
    truncatable: bool = True


def _cut(x: torch.Tensor, keep: torch.Tensor, width: int, token_dims: int) -> torch.Tensor:
    """Rows `keep`, and the first `width` positions of the last `token_dims` dimensions (a
    dimension of size 1, broadcast over tokens, stays)."""
    return x[keep][(..., *[slice(0, width)] * token_dims)]


@dataclass(frozen=True)
class LayerInputs:
    """What every layer reads besides the hidden states, built once per batch by `embed`: keyword
    arguments of the layer's forward, and how many trailing dimensions of each run over tokens."""

    tensors: dict[str, torch.Tensor]
    token_dims: dict[str, int]

    @property
    def attention_mask(self) -> torch.Tensor:
        return self.tensors[MASK]

    def cut(self, keep: torch.Tensor, width: int) -> LayerInputs:
        """The inputs of the rows `keep`, cut to the first `width` token positions."""
        return LayerInputs({k: _cut(v, keep, width, self.token_dims[k])
                            for k, v in self.tensors.items()}, self.token_dims)

    def names(self) -> tuple[str, ...]:
        return tuple(self.tensors)

    def values(self) -> tuple[torch.Tensor, ...]:
        """The tensors in a fixed order (a trace takes tensors, not this object)."""
        return tuple(self.tensors.values())

    def with_values(self, values: tuple[torch.Tensor, ...]) -> LayerInputs:
        """The same inputs holding `values` (in the order of `values()`)."""
        return LayerInputs(dict(zip(self.tensors, values, strict=True)), self.token_dims)


@dataclass(frozen=True)
class Family:
    """One architecture: where its parts sit and what its layers read."""

    name: str  # the config's model_type
    parts: Callable[[Any], Parts]
    token_types: bool = True  # the embeddings take token_type_ids
    # Per-batch layer inputs beyond the mask, from the embeddings part and the hidden states.
    extra_inputs: Callable[[nn.Module, torch.Tensor], dict[str, torch.Tensor]] | None = None
    # Trailing token dimensions of each layer input (rows always lead).
    token_dims: dict[str, int] = field(default_factory=lambda: {MASK: 1})
    dropout: str = "hidden_dropout_prob"  # the config field the exit heads' dropout reads
    # Real tokens a sequence may hold (RoBERTa and MPNet count positions after the padding id).
    max_tokens: Callable[[Any], int] = lambda config: int(config.max_position_embeddings)


# ------------------------------------------------------------------------------------- families
def _dense(pooler: Any) -> nn.Linear | None:
    return None if pooler is None else pooler.dense


def _bert_parts(model: Any) -> Parts:
    poolers = getattr(model, "eebench_exit_poolers", None) or {}  # an ElasticBERT checkpoint's
    pooler = _dense(getattr(model, "pooler", None))
    return Parts(model.embeddings, list(model.encoder.layer), pooler, dict(poolers))


class ProjectedEmbeddings(nn.Module):
    """ALBERT's embeddings (size E) and the projection to the hidden size H that its encoder
    applies first (`embedding_hidden_mapping_in`): together, what the first layer reads."""

    def __init__(self, embeddings: nn.Module, projection: nn.Linear):
        super().__init__()
        self.embeddings = embeddings
        self.projection = projection

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None
                ) -> torch.Tensor:
        return self.projection(self.embeddings(input_ids=input_ids, token_type_ids=token_type_ids))


def _albert_parts(model: Any) -> Parts:
    """ALBERT runs layer group int(i / (L / G)) at depth i (AlbertTransformer.forward): with one
    group (every released ALBERT) the same module L times, its parameters counted once."""
    config, encoder = model.config, model.encoder
    depth, groups = config.num_hidden_layers, config.num_hidden_groups
    layers = [encoder.albert_layer_groups[int(i / (depth / groups))] for i in range(depth)]
    return Parts(ProjectedEmbeddings(model.embeddings, encoder.embedding_hidden_mapping_in),
                 layers, getattr(model, "pooler", None), truncatable=groups == 1)


def _distilbert_parts(model: Any) -> Parts:
    return Parts(model.embeddings, list(model.transformer.layer), None)


class PositionBiasEmbeddings(nn.Module):
    """MPNet's embeddings and its relative position bias: the bias [B, heads, T, T] is computed
    once per batch by the encoder's own `compute_position_bias` and read by every layer."""

    def __init__(self, embeddings: nn.Module, encoder: nn.Module):
        super().__init__()
        self.embeddings = embeddings
        self.relative_attention_bias = encoder.relative_attention_bias
        # MPNetEncoder's own code, run on this module (it reads the two attributes below)
        self._compute = type(encoder).compute_position_bias
        self.relative_position_bucket = type(encoder).relative_position_bucket

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.embeddings(input_ids=input_ids)

    def position_bias(self, hidden: torch.Tensor) -> torch.Tensor:
        return self._compute(self, hidden)


def _mpnet_parts(model: Any) -> Parts:
    return Parts(PositionBiasEmbeddings(model.embeddings, model.encoder), list(model.encoder.layer),
                 _dense(getattr(model, "pooler", None)))


def _after_padding(config: Any) -> int:
    """Positions count from padding_idx + 1, so a sequence holds max_positions - padding_idx - 1
    tokens."""
    return int(config.max_position_embeddings) - int(config.pad_token_id) - 1


FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("bert", _bert_parts),
    Family("roberta", _bert_parts, max_tokens=_after_padding),
    Family("albert", _albert_parts),
    Family("distilbert", _distilbert_parts, token_types=False, dropout="dropout"),
    Family("mpnet", _mpnet_parts, token_types=False,
           extra_inputs=lambda emb, hidden: {"position_bias": emb.position_bias(hidden)},
           token_dims={MASK: 1, "position_bias": 2},
           max_tokens=lambda config: int(config.max_position_embeddings) - 2),  # padding_idx 1
)}


def family_of(config: Any) -> Family:
    """The family of a transformers config (its model_type)."""
    name = getattr(config, "model_type", None)
    if name not in FAMILIES:
        supported = ", ".join([*FAMILIES, *(f"{k} (as {c.into})" for k, c in CONVERSIONS.items())])
        raise UsageError(f"backbone family {name!r} is not supported",
                         hint=f"supported families: {supported}")
    return FAMILIES[name]


def head_dropout(config: Any) -> float:
    """The dropout probability of the exit heads: the family's hidden dropout."""
    return float(getattr(config, family_of(config).dropout))


# ------------------------------------------------------------------- conversions (ElasticBERT)
@dataclass(frozen=True)
class Conversion:
    """A checkpoint family transformers does not know, loaded into one it does: its config.json
    becomes a config of family `into`, its state dict is renamed onto that model, and per-layer
    poolers (1-based layer -> {"weight", "bias"}) go to the exit heads."""

    into: str
    config: Callable[[dict[str, Any]], Any]
    state_dict: Callable[[dict[str, torch.Tensor]],
                         tuple[dict[str, torch.Tensor], dict[int, dict[str, torch.Tensor]]]]


# ElasticBertConfig's fields that BertConfig has too (fastnlp/ElasticBERT,
# finetune-static/models/configuration_elasticbert.py); max_output_layers, num_output_layers and
# gradient_checkpointing only say how many poolers exist and how it trained.
_ELASTICBERT_CONFIG = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                       "intermediate_size", "hidden_act", "hidden_dropout_prob",
                       "attention_probs_dropout_prob", "max_position_embeddings",
                       "type_vocab_size", "initializer_range", "layer_norm_eps", "pad_token_id")


def elasticbert_config(raw: dict[str, Any]) -> Any:
    """A BertConfig from an ElasticBERT config.json (the same architecture, absolute positions)."""
    from transformers import BertConfig

    if raw.get("position_embedding_type", "absolute") != "absolute":
        raise DataError(f"ElasticBERT with {raw['position_embedding_type']!r} position embeddings "
                        "is not supported", hint="only absolute positions load into BERT")
    return BertConfig(**{k: raw[k] for k in _ELASTICBERT_CONFIG if k in raw})


_POOLER_KEY = re.compile(r"encoder\.pooler\.(\d+)\.dense\.(weight|bias)")


def elasticbert_state_dict(state: dict[str, torch.Tensor]
                           ) -> tuple[dict[str, torch.Tensor], dict[int, dict[str, torch.Tensor]]]:
    """Rename an ElasticBERT state dict onto a BertModel's.

    ElasticBertModel (fastnlp/ElasticBERT, finetune-static/models/modeling_elasticbert.py) has
    BERT's `embeddings.*` and `encoder.layer.{i}.*` under the same names (behind the prefix
    `elasticbert.` when saved from a model with heads), and instead of one pooler a ModuleList
    `encoder.pooler.{i}.dense.*`, one ElasticBertPooler (dense + tanh on [CLS]) per output layer
    i (0-based; None entries hold no keys). The last layer's pooler becomes BERT's `pooler.dense`;
    every pooler is returned by its 1-based layer. Buffers (`position_ids`) and pretraining heads
    are left out."""
    bert: dict[str, torch.Tensor] = {}
    poolers: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in state.items():
        name = key.removeprefix("elasticbert.")
        if name.startswith("embeddings.") and not name.endswith("position_ids"):
            bert[name] = value
        elif name.startswith("encoder.layer."):
            bert[name] = value
        elif match := _POOLER_KEY.fullmatch(name):
            poolers.setdefault(int(match[1]) + 1, {})[match[2]] = value
    if poolers:
        last = poolers[max(poolers)]
        bert.update({f"pooler.dense.{k}": v for k, v in last.items()})
    return bert, poolers


CONVERSIONS: dict[str, Conversion] = {
    "elasticbert": Conversion("bert", elasticbert_config, elasticbert_state_dict),
}


# ------------------------------------------------------------------------------- named shapes
# Config-only base-size shapes (`eebench flops --model-config NAME`): what the released base
# checkpoints say, built without a download. (family, config fields over its defaults)
SHAPES: dict[str, tuple[str, dict[str, Any]]] = {
    "bert-base": ("bert", {}),  # BertConfig's defaults: bert-base-uncased
    "elasticbert-base": ("bert", {}),  # fnlp/elasticbert-base: BERT-base with 12 poolers
    "roberta-base": ("roberta", {"vocab_size": 50265, "max_position_embeddings": 514,
                                 "type_vocab_size": 1, "layer_norm_eps": 1e-5}),
    "albert-base": ("albert", {"vocab_size": 30000, "embedding_size": 128, "hidden_size": 768,
                               "num_attention_heads": 12, "intermediate_size": 3072,
                               "hidden_act": "gelu_new", "num_hidden_groups": 1}),
    "distilbert-base": ("distilbert", {}),  # DistilBertConfig's defaults: 6 layers, dim 768
    "mpnet-base": ("mpnet", {"max_position_embeddings": 514, "layer_norm_eps": 1e-5}),
}


def shape_config(name: str) -> Any:
    """The transformers config of a named base shape (`SHAPES`)."""
    from transformers import AutoConfig

    family, fields = SHAPES[name]
    return AutoConfig.for_model(family, **fields)
