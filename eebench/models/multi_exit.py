"""The multi-exit model: embeddings -> layer 1 -> ... -> layer L, with exit heads after some layers.

Everything downstream uses this one small contract:

- `forward` runs every layer and every head once and returns all exits' logits [E, B, C]: the
  evaluator stores them and decides exits for a whole sweep without re-running the model;
- `embed`, `layer(i)`, `head(j, hidden, attention_mask)` are the same computation one step at a
  time, so real dynamic inference can stop a sample early and drop it from the batch;
- the FLOP counter costs `embeddings`, each of `layers` and each of `heads` on its own.

A head may read the previous exit's state (PALBERT's halting probability at exit j reads exits j
and j-1): its class sets `reads_previous = True`, and it is called `head(hidden, attention_mask,
previous)` and returns `(outputs, state)`, where `previous` is the state the previous exit's head
returned (None at exit 0, and after a head that keeps none). A state is a tensor, or a dict or
tuple of tensors, each [B, ...] with the batch first and no token dimension: real dynamic
inference drops the rows of exited samples from it as it drops them from the batch. Every other
head is called `head(hidden, attention_mask)` and returns its outputs, as before.

`embed` returns the hidden states and the per-batch `LayerInputs` every layer reads (its family
says which: eebench.models.families): the attention mask, built here (additive float [B, 1, 1, T]:
0 for tokens, the dtype's minimum for padding), which both the eager and the SDPA attention of
Hugging Face encoders accept, and for MPNet the relative position bias. A padded key gets exactly
zero attention weight, so padding never changes a sample's logits.

Every exit head pools the same way, `pooling`: the [CLS] state ("cls", BERT's pretraining) or the
mean over real tokens ("mean", sentence-transformers' pretraining; padding excluded through the
2-D 0/1 attention mask, which is why `head` takes it). It is part of the structure: recorded in
`model_config()` and chosen per backbone by default (eebench.models.pooling.default_pooling).

The model's exit unit, `unit`, is what its heads classify: "sequence" (pooled heads, logits
[B, C] per exit) or "token" (token heads, eebench.models.token_heads: logits [B, T, C] per exit,
so `forward` returns [E, B, T, C] and the walk's `step` [b, T', C], T' the columns the rows still
running need). Every head of one model has the same unit; consumers read `unit`, never a method's
name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Protocol

import torch
from torch import nn

from eebench.models.exits import LayerWalk
from eebench.models.families import MASK, Family, LayerInputs, family_of, head_dropout
from eebench.models.pooling import check_pooling
from eebench.models.token_heads import SEQUENCE, head_unit, new_classifier

MODEL_CONFIG_VERSION = 2  # 2: records the heads' pooling (version 1 pooled [CLS])

__all__ = ["ExitHead", "ExitHeads", "ExitPooler", "HeadBuilder", "LayerInputs", "MultiExitModel",
           "Route", "pool_tokens", "reads_previous", "split_outputs"]


def reads_previous(head: nn.Module) -> bool:
    """Whether `head` reads the previous exit's state (see the module docstring)."""
    return bool(getattr(head, "reads_previous", False))


def pool_tokens(hidden: torch.Tensor, attention_mask: torch.Tensor | None, pooling: str
                ) -> torch.Tensor:
    """One vector per sample [B, H] from hidden states [B, T, H]: the [CLS] state, or the mean
    over real tokens (`attention_mask` [B, T], 1 for a token, 0 for padding; None: no padding).

    The mean is a multiply and a sum, not a matmul, so under mac2-matmul it costs 0 FLOPs."""
    if pooling == "cls":
        return hidden[:, 0]
    if attention_mask is None:
        attention_mask = torch.ones(hidden.shape[:2], device=hidden.device)
    keep = attention_mask[:, :, None].to(hidden.dtype)
    return (hidden * keep).sum(1) / keep.sum(1).clamp(min=1)


class ExitPooler(nn.Module):
    """Pool the tokens ([CLS] or masked mean) -> dense -> tanh: BERT's pooler, on either pooling.

    `dense` is the pretrained pooler's dense layer (a fresh one where the checkpoint has none);
    the parameter names (`dense.weight`, `dense.bias`) are BERT's."""

    def __init__(self, hidden_size: int, pooling: str, dense: nn.Linear | None = None,
                 initializer_range: float = 0.02):
        super().__init__()
        self.pooling = check_pooling(pooling)
        if dense is None:
            dense = nn.Linear(hidden_size, hidden_size)
            nn.init.normal_(dense.weight, std=initializer_range)
            nn.init.zeros_(dense.bias)
        self.dense = dense
        self.activation = nn.Tanh()

    def forward(self, hidden: torch.Tensor, attention_mask: torch.Tensor | None = None
                ) -> torch.Tensor:
        return self.activation(self.dense(pool_tokens(hidden, attention_mask, self.pooling)))

    def extra_repr(self) -> str:
        return f"pooling={self.pooling!r}"


class ExitHead(nn.Module):
    """pooler(hidden, mask) -> dropout -> linear: the classifier a method puts after a layer.

    `own_pooler=False` keeps a reference to a pooler that another head owns (PABEE shares one
    pooler over all exits): it runs here but is registered, saved and counted only once.
    """

    def __init__(self, pooler: nn.Module, config: Any, num_labels: int, own_pooler: bool = True):
        super().__init__()
        if own_pooler:
            self.pooler = pooler
        else:
            self.__dict__["pooler"] = pooler  # not a submodule: no second copy in state_dict
        self.dropout = nn.Dropout(head_dropout(config))  # the family's hidden dropout
        self.classifier = new_classifier(config, num_labels)

    def forward(self, hidden: torch.Tensor, attention_mask: torch.Tensor | None = None
                ) -> torch.Tensor:
        return self.classifier(self.dropout(self.pooler(hidden, attention_mask)))


@dataclass(frozen=True)
class ExitHeads:
    """The heads a method puts on the backbone: `heads[j]` runs after layer `exit_layers[j]`."""

    heads: nn.ModuleList
    exit_layers: tuple[int, ...]  # 1-based layer numbers, strictly increasing
    # Each head's outputs besides its logits, by name, as columns after the num_labels logits
    # (BERxiT's learned exit score: ("exit_score",)); most methods' heads give logits alone.
    signals: tuple[str, ...] = ()


# A training scheme's hand on the gradient's way: (exit j, hidden states after its layer) ->
# (what head j reads, what the next layer reads); identity in the forward direction.
Route = Callable[[int, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


class HeadBuilder(Protocol):
    """What the model needs of a method: where its heads go (the model keeps the layers up to
    the last of them) and the heads themselves (eebench.methods.base.EarlyExitMethod is one)."""

    name: str
    settings: dict[str, Any]

    def head_layers(self, num_layers: int) -> tuple[int, ...]: ...

    def build_heads(self, config: Any, num_labels: int, num_layers: int, pooler: nn.Module
                    ) -> ExitHeads: ...


class MultiExitModel(nn.Module):
    """A backbone's embeddings and first `num_layers` layers, plus a method's exit heads."""

    def __init__(self, config: Any, embeddings: nn.Module, layers: list[nn.Module],
                 exit_heads: ExitHeads, num_labels: int, method: HeadBuilder,
                 pooling: str = "cls"):
        super().__init__()
        self.config = config
        self.family: Family = family_of(config)  # how the embeddings and layers are called
        self.pooling = check_pooling(pooling)  # how the heads pool (they hold it in their pooler)
        self.embeddings = embeddings
        self.layers = nn.ModuleList(layers)
        self.heads = exit_heads.heads
        self.exit_layers = tuple(int(x) for x in exit_heads.exit_layers)
        self.signal_names = tuple(exit_heads.signals)
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
        self._reads_previous = tuple(reads_previous(h) for h in self.heads)
        units = {head_unit(h) for h in self.heads}
        if len(units) != 1:  # a method bug
            raise ValueError(f"the exit heads mix units {sorted(units)}: one unit per model")
        self.unit: str = units.pop()  # "sequence" or "token": what each exit classifies

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def num_exits(self) -> int:
        return len(self.heads)

    @property
    def stateful(self) -> bool:
        """Whether some head reads the previous exit's state."""
        return any(self._reads_previous)

    @property
    def attn_implementation(self) -> str:
        return self.config._attn_implementation or "eager"

    @property
    def max_tokens(self) -> int:
        """The longest sequence the position embeddings hold."""
        return self.family.max_tokens(self.config)

    # -- one step at a time ------------------------------------------------------------------
    def embed(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None,
              token_type_ids: torch.Tensor | None = None) -> tuple[torch.Tensor, LayerInputs]:
        """Embeddings [B, T, H] and the inputs every layer reads, built once per batch: the
        additive attention mask [B, 1, 1, T] and whatever else the family's layers need (MPNet:
        the relative position bias). `token_type_ids` is ignored by families without them."""
        types = {"token_type_ids": token_type_ids} if self.family.token_types else {}
        hidden = self.embeddings(input_ids=input_ids, **types)
        if attention_mask is None:
            attention_mask = torch.ones(input_ids.shape, device=hidden.device)
        keep = attention_mask[:, None, None, :].to(hidden.dtype)
        inputs = {MASK: (1.0 - keep) * torch.finfo(hidden.dtype).min}
        if self.family.extra_inputs is not None:
            inputs.update(self.family.extra_inputs(self.embeddings, hidden))
        return hidden, LayerInputs(inputs, self.family.token_dims)

    def layer(self, i: int, hidden: torch.Tensor, inputs: LayerInputs) -> torch.Tensor:
        """Encoder layer i (0-based) on the hidden states and the batch's layer inputs."""
        out = self.layers[i](hidden, **inputs.tensors)
        return out[0] if isinstance(out, tuple) else out

    def run_head(self, j: int, hidden: torch.Tensor, attention_mask: torch.Tensor | None = None,
                 previous: Any = None) -> tuple[torch.Tensor, Any]:
        """Exit j's whole outputs [B, C + S] and the state it passes on (None for a head that
        does not read the previous exit's: `previous` is what exit j-1's head passed on)."""
        if self._reads_previous[j]:
            return self.heads[j](hidden, attention_mask, previous)
        return self.heads[j](hidden, attention_mask), None

    def head(self, j: int, hidden: torch.Tensor, attention_mask: torch.Tensor | None = None,
             previous: Any = None) -> torch.Tensor:
        """Exit j's logits [B, C] ([B, T, C] for a token head) from the hidden states after
        layer exit_layers[j].
        `attention_mask` is the 2-D 0/1 mask [B, T] of `hidden` (mean pooling needs it; None:
        no padding); `previous` the previous exit's state, for a head that reads it. The head
        runs whole (its signals too: they cost what they cost)."""
        out = self.run_head(j, hidden, attention_mask, previous)[0]
        return out[..., : self.num_labels] if self.signal_names else out

    def head_outputs(self, j: int, hidden: torch.Tensor,
                     attention_mask: torch.Tensor | None = None, previous: Any = None
                     ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Exit j's logits [B, C] and its signals by name ([B] each; none for most heads)."""
        return self.head_step(j, hidden, attention_mask, previous)[:2]

    def head_step(self, j: int, hidden: torch.Tensor, attention_mask: torch.Tensor | None = None,
                  previous: Any = None
                  ) -> tuple[torch.Tensor, dict[str, torch.Tensor], Any]:
        """Exit j's logits, its signals by name and the state it passes to exit j+1."""
        out, state = self.run_head(j, hidden, attention_mask, previous)
        return (*split_outputs(out, self.num_labels, self.signal_names), state)

    @torch.no_grad()
    def previous_states(self, hidden: torch.Tensor, attention_mask: torch.Tensor | None = None
                        ) -> list[Any]:
        """The state each head reads when all run in turn on `hidden` (all None where no head
        reads one): what the FLOP counter gives each head, so that it is costed as it runs."""
        states: list[Any] = [None] * self.num_exits
        if not self.stateful:
            return states
        previous = None
        for j in range(self.num_exits):
            states[j] = previous
            previous = self.run_head(j, hidden, attention_mask, previous)[1]
        return states

    # -- the exit protocol (eebench.models.exits) ----------------------------------------------
    def exit_walk(self, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor | None = None
                  ) -> LayerWalk:
        return LayerWalk(self, ids, mask, types)

    def exit_modules(self, j: int) -> list[nn.Module]:
        """Embeddings, layers 1..exit_layers[j] and heads 0..j: what exiting at exit j ran."""
        return [self.embeddings, *self.layers[: self.exit_layers[j]], *self.heads[: j + 1]]

    def chain(self) -> list[nn.Module]:
        return [self]

    def temperatures(self) -> list[float] | None:
        """Each exit's temperature where every head holds one (fit after training), else None."""
        ts = [getattr(h, "temperature", None) for h in self.heads]
        return None if any(t is None for t in ts) else [float(t) for t in ts]

    # -- all at once ---------------------------------------------------------------------------
    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None,
                token_type_ids: torch.Tensor | None = None, route: Route | None = None
                ) -> torch.Tensor:
        """Every exit's outputs, [E, B, C + S]: the logits, then the signals' columns (S = 0 for
        most methods; `split_outputs` separates them); [E, B, T, C] for token heads.
        `route(j, hidden)` -> (what head j reads, what the next layer reads) lets a training
        scheme act on the gradient's way (SWEET's detaching, ElasticBERT's gradient
        equilibrium); None: both read `hidden`."""
        hidden, inputs = self.embed(input_ids, attention_mask, token_type_ids)
        logits, state = [], None
        for i in range(self.exit_layers[-1]):  # layers after the last exit change nothing
            hidden = self.layer(i, hidden, inputs)
            j = self._exit_of.get(i + 1)
            if j is not None:
                to_head = hidden
                if route is not None:
                    to_head, hidden = route(j, hidden)
                if self._reads_previous[j]:  # it reads the previous exit's state
                    out, state = self.heads[j](to_head, attention_mask, state)
                else:
                    out, state = self.heads[j](to_head, attention_mask), None
                logits.append(out)
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
            "pooling": self.pooling,
            "attn_implementation": self.attn_implementation,
            # written only where a head has signals: earlier checkpoints keep their structure
            **({"signals": list(self.signal_names)} if self.signal_names else {}),
            **({"unit": self.unit} if self.unit != SEQUENCE else {}),  # likewise
        }


def split_outputs(out: torch.Tensor, num_labels: int, signals: tuple[str, ...]
                  ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Head outputs [..., C + S] -> (logits [..., C], {signal: [...]})."""
    return out[..., :num_labels], {name: out[..., num_labels + k]
                                   for k, name in enumerate(signals)}
