"""The multi-exit model: embeddings -> layer 1 -> ... -> layer L, with exit heads after some layers.

Everything downstream uses this one small contract:

- `forward` runs every layer and every head once and returns all exits' logits [E, B, C]: the
  evaluator stores them and decides exits for a whole sweep without re-running the model;
- `embed`, `layer(i)`, `head(j)` are the same computation one step at a time, so real dynamic
  inference can stop a sample early and drop it from the batch;
- the FLOP counter costs `embeddings`, each of `layers` and each of `heads` on its own.

The attention mask is built here (additive float [B, 1, 1, T]: 0 for tokens, the dtype's minimum
for padding), which both the eager and the SDPA attention of Hugging Face encoders accept. A padded
key then gets exactly zero attention weight, so padding never changes a sample's logits.
"""

from __future__ import annotations

import copy
from itertools import pairwise
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from eebench.errors import DataError, UsageError
from eebench.models.backbones import encoder_parts, load_hf_model, load_tokenizer

if TYPE_CHECKING:
    from eebench.methods.base import EarlyExitMethod, ExitHeads

ATTN_IMPLEMENTATIONS = ("eager", "sdpa")  # eager: what the FLOP counter traces; sdpa: faster
MODEL_CONFIG_VERSION = 1

__all__ = ["ClsPooler", "ExitHead", "MultiExitModel", "assemble", "build_model", "load_tokenizer"]


class ClsPooler(nn.Module):
    """Dense + tanh on the [CLS] hidden state: BERT's pooler, for backbones that lack one."""

    def __init__(self, hidden_size: int, initializer_range: float = 0.02):
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.activation = nn.Tanh()
        nn.init.normal_(self.dense.weight, std=initializer_range)
        nn.init.zeros_(self.dense.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.activation(self.dense(hidden[:, 0]))


class ExitHead(nn.Module):
    """pooler([CLS]) -> dropout -> linear: the classifier a method puts after a layer.

    `own_pooler=False` keeps a reference to a pooler that another head owns (PABEE shares one
    pooler over all exits): it runs here but is registered, saved and counted only once.
    """

    def __init__(self, pooler: nn.Module, config: Any, num_labels: int, own_pooler: bool = True):
        super().__init__()
        if own_pooler:
            self.pooler = pooler
        else:
            self.__dict__["pooler"] = pooler  # not a submodule: no second copy in state_dict
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.classifier = nn.Linear(config.hidden_size, num_labels)
        nn.init.normal_(self.classifier.weight, std=config.initializer_range)
        nn.init.zeros_(self.classifier.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.dropout(self.pooler(hidden)))


class MultiExitModel(nn.Module):
    """A backbone's embeddings and first `num_layers` layers, plus a method's exit heads."""

    def __init__(self, config: Any, embeddings: nn.Module, layers: list[nn.Module],
                 exit_heads: ExitHeads, num_labels: int, method: EarlyExitMethod):
        super().__init__()
        self.config = config
        self.embeddings = embeddings
        self.layers = nn.ModuleList(layers)
        self.heads = exit_heads.heads
        self.exit_layers = tuple(int(x) for x in exit_heads.exit_layers)
        self.num_labels = num_labels
        self.method_name = method.name
        self.method_settings = dict(method.settings)
        self.source: str | None = None  # the --model value it was built from, if any
        ok = (len(self.exit_layers) == len(self.heads) > 0
              and all(a < b for a, b in pairwise(self.exit_layers))
              and 1 <= self.exit_layers[0] and self.exit_layers[-1] <= len(self.layers))
        if not ok:  # a method bug, not a user error
            raise ValueError(f"bad exit layers {self.exit_layers} for {len(self.heads)} heads "
                             f"on {len(self.layers)} layers")
        self._exit_of = {layer: j for j, layer in enumerate(self.exit_layers)}

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def num_exits(self) -> int:
        return len(self.heads)

    @property
    def attn_implementation(self) -> str:
        return self.config._attn_implementation or "eager"

    # -- one step at a time ------------------------------------------------------------------
    def embed(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None,
              token_type_ids: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Embeddings [B, T, H] and the additive attention mask [B, 1, 1, T] every layer uses."""
        hidden = self.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
        if attention_mask is None:
            attention_mask = torch.ones(input_ids.shape, device=hidden.device)
        keep = attention_mask[:, None, None, :].to(hidden.dtype)
        return hidden, (1.0 - keep) * torch.finfo(hidden.dtype).min

    def layer(self, i: int, hidden: torch.Tensor, ext_mask: torch.Tensor) -> torch.Tensor:
        """Encoder layer i (0-based)."""
        out = self.layers[i](hidden, attention_mask=ext_mask)
        return out[0] if isinstance(out, tuple) else out

    def head(self, j: int, hidden: torch.Tensor) -> torch.Tensor:
        """Exit j's logits [B, C] from the hidden states after layer exit_layers[j]."""
        return self.heads[j](hidden)

    # -- all at once ---------------------------------------------------------------------------
    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None,
                token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Every exit's logits, [E, B, C]."""
        hidden, mask = self.embed(input_ids, attention_mask, token_type_ids)
        logits = []
        for i in range(self.exit_layers[-1]):  # layers after the last exit change nothing
            hidden = self.layer(i, hidden, mask)
            if i + 1 in self._exit_of:
                logits.append(self.head(self._exit_of[i + 1], hidden))
        return torch.stack(logits)

    def backbone_parameters(self) -> list[nn.Parameter]:
        """Embeddings and layers (each shared parameter once): what a method may freeze."""
        seen: dict[int, nn.Parameter] = {}
        for p in [*self.embeddings.parameters(), *self.layers.parameters()]:
            seen.setdefault(id(p), p)
        return list(seen.values())

    # -- structure as data ---------------------------------------------------------------------
    def model_config(self) -> dict[str, Any]:
        """JSON-able description that rebuilds this structure (weights not included)."""
        backbone = self.config.to_dict()
        backbone.pop("_attn_implementation_autoset", None)
        return {
            "schema_version": MODEL_CONFIG_VERSION,
            "source": self.source,
            "family": self.config.model_type,
            "backbone_config": backbone,
            "method": self.method_name,
            "method_settings": self.method_settings,
            "num_labels": self.num_labels,
            "num_layers": self.num_layers,
            "exit_layers": list(self.exit_layers),
            "attn_implementation": self.attn_implementation,
        }

    @classmethod
    def from_model_config(cls, cfg: dict[str, Any]) -> MultiExitModel:
        """The same structure with random weights (the caller then loads the safetensors)."""
        from transformers import AutoConfig, AutoModel

        from eebench.methods.base import get_method

        try:
            backbone = dict(cfg["backbone_config"])
            config = AutoConfig.for_model(backbone.pop("model_type"), **backbone)
            config.num_hidden_layers = int(cfg["num_layers"])
            attn = cfg.get("attn_implementation", "eager")
            method = get_method(cfg["method"], **cfg.get("method_settings", {}))
            num_labels, exit_layers = int(cfg["num_labels"]), tuple(cfg["exit_layers"])
        except (KeyError, TypeError, ValueError) as e:
            raise DataError(f"model config is incomplete or malformed: {e!r}") from None
        _check_attn(attn)
        hf = AutoModel.from_config(config, attn_implementation=attn)
        model = assemble(hf, method, num_labels, config.num_hidden_layers)
        if model.exit_layers != exit_layers:
            raise DataError(f"model config exit layers {list(exit_layers)} do not match what "
                            f"method {method.name!r} builds: {list(model.exit_layers)}")
        model.source = cfg.get("source")
        return model


def _check_attn(attn: str) -> None:
    if attn not in ATTN_IMPLEMENTATIONS:
        raise UsageError(f"unknown attention implementation {attn!r}",
                         hint=f"choose from: {', '.join(ATTN_IMPLEMENTATIONS)}")


def assemble(hf_model: nn.Module, method: EarlyExitMethod, num_labels: int,
             num_layers: int | None = None) -> MultiExitModel:
    """A MultiExitModel from a Hugging Face encoder: its parts, cut to `num_layers`, plus the
    method's heads (initialised from the encoder's pooler). Returned in eval mode."""
    parts = encoder_parts(hf_model)
    available = len(parts.layers)
    n = method.layers_to_use(available) if num_layers is None else int(num_layers)
    if not 1 <= n <= available:
        raise UsageError(f"cannot use {n} layers of a {available}-layer backbone",
                         hint=f"choose between 1 and {available}")
    if num_labels < 1:
        raise UsageError(f"num_labels must be at least 1, got {num_labels}")
    config = hf_model.config  # the object the layers read: truncation and attention stay in sync
    config.num_hidden_layers = n
    pooler = parts.pooler
    if pooler is None:
        pooler = ClsPooler(config.hidden_size, config.initializer_range)
    heads = method.build_heads(config, num_labels, n, copy.deepcopy(pooler))
    model = MultiExitModel(config, parts.embeddings, parts.layers[:n], heads, num_labels, method)
    return model.eval()


def build_model(backbone: str, method: EarlyExitMethod, num_labels: int,
                num_layers: int | None = None, attn_implementation: str = "eager"
                ) -> MultiExitModel:
    """Pretrained backbone weights (first `num_layers` layers) plus the method's exit heads."""
    _check_attn(attn_implementation)
    model = assemble(load_hf_model(backbone, attn_implementation), method, num_labels, num_layers)
    model.source = backbone
    return model
