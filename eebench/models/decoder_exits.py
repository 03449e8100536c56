"""Exits at chosen layers of a causal LM, and the decoder run layer by layer so a walk can stop.

The model is any HF `LlamaForCausalLM`-like causal LM: `model.model.embed_tokens`, `.layers`,
`.norm`, `.rotary_emb` and `model.lm_head` (a head tied to the embeddings is fine). Layer k's
hidden state is the output of the k-th decoder layer (1-based: k layers have run).

An exit after layer k reads that hidden state with one of two heads, both feeding the model's own
frozen LM head:

- the logit lens (`head="lens"`): the model's final norm, then the LM head; no parameters;
- a trained exit (`head="adapter"`): a bottleneck adapter with a zero-initialised up-projection
  (h + up(silu(down(h))), so it starts as the identity), then its own RMSNorm initialised from the
  final norm, then the LM head. Untrained, it is the logit lens; `eebench.train.exit_tuning`
  trains it on a frozen backbone.

The last layer L is never an exit: after L layers the model's own norm and head speak.
`DecoderExits` holds the trained heads in an `nn.ModuleDict` keyed by layer; its state dict is
plain tensors (`save_exits`/`load_exits` write and read one safetensors file with the settings in
its metadata).

`run_layers` runs layers [start, stop) of the model's own decoder layers on hidden states at
given positions, with rotary position embeddings and a causal mask over a `DynamicCache`, so a
caller can stop after k layers, read an exit, and go on later from the same state. Every layer in
[start, stop) must hold the same number of cached positions; different ranges may differ (a draft
that ran only the first k layers), which is why the mask is built here from the cache of `start`
rather than by the model. Batches are unpadded: every row has the same length and positions.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field
from torch import nn

from eebench.errors import DataError, UsageError

_METADATA_KEY = "eebench_decoder_exits"


class ExitSettings(BaseModel):
    """Which layers have an exit and what reads them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    layers: tuple[int, ...] = Field(min_length=1)
    head: Literal["lens", "adapter"] = "lens"
    rank: int = Field(default=16, ge=1, le=4096)  # the adapter's bottleneck width


# -- the model's parts -----------------------------------------------------------------------------
def parts(model: nn.Module) -> Any:
    """The decoder body (`model.model`), checked to have what a layer-by-layer run needs."""
    body = getattr(model, "model", None)
    missing = [name for name in ("embed_tokens", "layers", "norm", "rotary_emb")
               if not hasattr(body, name)]
    if missing or not hasattr(model, "lm_head"):
        raise UsageError(f"not a Llama-like causal LM: no {(missing or ['lm_head'])[0]}",
                         hint="exits need model.model.{embed_tokens,layers,norm,rotary_emb} "
                              "and model.lm_head")
    return body


def num_layers(model: nn.Module) -> int:
    return len(parts(model).layers)


def new_cache(model: nn.Module) -> Any:
    """An empty DynamicCache with one layer per decoder layer."""
    from transformers import DynamicCache

    return DynamicCache(config=model.config)


def cached_length(cache: Any, layer: int) -> int:
    return 0 if cache is None else int(cache.get_seq_length(layer))


def crop_cache(cache: Any, length: int, layers: range | None = None) -> None:
    """Keep the first `length` positions of every cache layer (or of `layers`). transformers 5
    crops by a negative count of positions to remove (`DynamicLayer.crop`)."""
    for i in layers if layers is not None else range(len(cache.layers)):
        extra = cached_length(cache, i) - length
        if extra > 0:
            cache.layers[i].crop(-extra)


def causal_mask(past: int, n: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Additive mask [1, 1, n, past + n]: query i (at position past + i) sees keys 0..past + i."""
    keys = torch.arange(past + n, device=device)
    queries = torch.arange(past, past + n, device=device)[:, None]
    mask = torch.zeros(n, past + n, dtype=dtype, device=device)
    mask.masked_fill_(keys[None, :] > queries, torch.finfo(dtype).min)
    return mask[None, None]


def _cache_kwarg(layer: nn.Module) -> str:
    """transformers renamed a layer's `past_key_values` to `cache` (5.x); pass what it takes."""
    names = inspect.signature(layer.forward).parameters
    return "cache" if "cache" in names else "past_key_values"


def embed(model: nn.Module, input_ids: torch.Tensor) -> torch.Tensor:
    return parts(model).embed_tokens(input_ids)


def positions_after(cache: Any, layer: int, n: int, device: torch.device) -> torch.Tensor:
    """Position ids [1, n] of n new tokens after what layer `layer` has cached."""
    past = cached_length(cache, layer)
    return torch.arange(past, past + n, device=device)[None]


def rotary(model: nn.Module, hidden: torch.Tensor, position_ids: torch.Tensor) -> tuple:
    return parts(model).rotary_emb(hidden, position_ids=position_ids)


def run_layers(model: nn.Module, hidden: torch.Tensor, start: int, stop: int, cache: Any = None,
               position_ids: torch.Tensor | None = None, rope: tuple | None = None
               ) -> torch.Tensor:
    """Run decoder layers [start, stop) (0-based) on `hidden` [B, n, d], appending their keys and
    values to `cache` (None: no cache, positions from 0). Returns layer `stop`'s hidden state."""
    body = parts(model)
    if start >= stop:
        return hidden
    past = cached_length(cache, start)
    lengths = {cached_length(cache, i) for i in range(start, stop)}
    if len(lengths) > 1:
        raise UsageError(f"layers {start}..{stop - 1} hold different cached lengths {lengths}",
                         hint="run the layers whose caches agree in one call")
    n = hidden.shape[1]
    if position_ids is None:
        position_ids = torch.arange(past, past + n, device=hidden.device)[None]
    if rope is None:
        rope = rotary(model, hidden, position_ids)
    mask = causal_mask(past, n, hidden.dtype, hidden.device)
    key = _cache_kwarg(body.layers[start])
    for layer in body.layers[start:stop]:
        out = layer(hidden, attention_mask=mask, position_ids=position_ids,
                    position_embeddings=rope, use_cache=cache is not None, **{key: cache})
        hidden = out[0] if isinstance(out, tuple) else out
    return hidden


def final_logits(model: nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    """The full model's logits from the last layer's hidden state."""
    return model.lm_head(parts(model).norm(hidden))


def read_logits(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(argmax, max softmax probability, top-2 margin p1 - p2) over the last axis."""
    top = torch.softmax(logits.float(), dim=-1).topk(2, dim=-1)
    return top.indices[..., 0], top.values[..., 0], top.values[..., 0] - top.values[..., 1]


def exit_signals(logits: torch.Tensor) -> dict[str, torch.Tensor]:
    """What reading an exit gives a rule, by name (`read_logits`): `argmax`, `maxprob` and
    `margin`, [n] each. A trace keeps the same three numbers per exit and position
    (eebench.rules.decoder_sweep), so a rule reads them alike from a live exit and a stored one."""
    arg, top, gap = read_logits(logits)
    return {"argmax": arg, "maxprob": top, "margin": gap}


def full_forward(model: nn.Module, input_ids: torch.Tensor) -> torch.Tensor:
    """Logits of the whole model run layer by layer without a cache: equals model(ids).logits."""
    hidden = run_layers(model, embed(model, input_ids), 0, num_layers(model))
    return final_logits(model, hidden)


# -- exit heads ------------------------------------------------------------------------------------
class RMSNorm(nn.Module):
    """Llama's RMSNorm (computed in float32, weight applied in the input's dtype)."""

    def __init__(self, weight: torch.Tensor, eps: float):
        super().__init__()
        self.weight = nn.Parameter(weight.detach().clone())
        self.eps = eps

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        dtype = hidden.dtype
        x = hidden.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


class AdapterExit(nn.Module):
    """h + up(silu(down(h))), then its own RMSNorm; `up` starts at zero (the logit lens)."""

    def __init__(self, final_norm: nn.Module, hidden_size: int, rank: int):
        super().__init__()
        weight = final_norm.weight
        self.down = nn.Linear(hidden_size, rank, bias=False, dtype=weight.dtype,
                              device=weight.device)
        self.up = nn.Linear(rank, hidden_size, bias=False, dtype=weight.dtype,
                            device=weight.device)
        nn.init.zeros_(self.up.weight)
        eps = getattr(final_norm, "variance_epsilon", getattr(final_norm, "eps", 1e-6))
        self.norm = RMSNorm(weight, eps)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.norm(hidden + self.up(nn.functional.silu(self.down(hidden))))


class DecoderExits(nn.Module):
    """The exits of one causal LM: `logits(model, k, hidden)` reads layer k's hidden state."""

    def __init__(self, model: nn.Module, settings: ExitSettings):
        super().__init__()
        total = num_layers(model)
        bad = [k for k in settings.layers if not 1 <= k < total]
        if bad or list(settings.layers) != sorted(set(settings.layers)):
            raise UsageError(f"exit layers must be increasing, within 1..{total - 1}: "
                             f"{list(settings.layers)}",
                             hint="after the last layer the model's own head speaks")
        self.settings = settings
        self.num_layers = total
        self.heads = nn.ModuleDict()
        if settings.head == "adapter":
            hidden = model.config.hidden_size
            for k in settings.layers:
                self.heads[str(k)] = AdapterExit(parts(model).norm, hidden, settings.rank)

    @property
    def layers(self) -> tuple[int, ...]:
        return self.settings.layers

    def normed(self, model: nn.Module, k: int, hidden: torch.Tensor) -> torch.Tensor:
        """What the LM head reads at exit k (k = L: the model's final norm)."""
        if k == self.num_layers or self.settings.head == "lens":
            return parts(model).norm(hidden)
        return self.heads[str(k)](hidden)

    def logits(self, model: nn.Module, k: int, hidden: torch.Tensor) -> torch.Tensor:
        return model.lm_head(self.normed(model, k, hidden))


def save_exits(exits: DecoderExits, path: str | Path) -> Path:
    """One safetensors file: the heads' tensors, the settings as JSON metadata."""
    from safetensors.torch import save_file

    path = Path(path)
    state = {k: v.detach().contiguous().cpu() for k, v in exits.state_dict().items()}
    save_file(state, str(path), metadata={_METADATA_KEY: exits.settings.model_dump_json()})
    return path


def load_exits(model: nn.Module, path: str | Path) -> DecoderExits:
    """Exits for `model` from a file `save_exits` wrote (safetensors: nothing is unpickled)."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    path = Path(path)
    if not path.is_file():
        raise DataError(f"no exits file at {path}")
    with safe_open(str(path), framework="pt") as f:
        meta = (f.metadata() or {}).get(_METADATA_KEY)
    if meta is None:
        raise DataError(f"{path} is not an exits file (no {_METADATA_KEY} metadata)",
                        hint="write it with eebench.models.decoder_exits.save_exits")
    exits = DecoderExits(model, ExitSettings(**json.loads(meta)))
    weight = parts(model).norm.weight
    state = {k: v.to(weight.device) for k, v in load_file(str(path)).items()}
    missing, unexpected = exits.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise DataError(f"{path} does not fit these exits: missing {missing[:3]}, "
                        f"unexpected {unexpected[:3]}")
    return exits
