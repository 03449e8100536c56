"""The authors' released early-exit checkpoints, key by key: which tensors are the backbone and
which are the exit heads, renamed onto eebench's multi-exit model.

A format renames; it never computes. `convert(weights, config)` takes a checkpoint's tensors (or
only their shapes: the mapping is the same, so a checkpoint is checked against a method's heads
from its file header alone) and returns

- `backbone`: the Hugging Face base model's own keys (a BertModel's `embeddings.*`,
  `encoder.layer.{i}.*`, `pooler.dense.*`), loaded by the family's model class;
- `heads`: the keys of `MultiExitModel.heads` (`{j}.pooler.dense.*`, `{j}.classifier.*`), exit j
  after layer j + 1. A pooler several exits share is held by exit 0 alone, as eebench holds it.

The formats, with the authors' modeling file each is read from:

- `deebert`: castorini/DeeBERT transformers/modeling_highway_{bert,roberta}.py (as in
  transformers' examples/research_projects/deebert/src). Exit j < L: the off-ramp
  `{bert,roberta}.encoder.highway.{j}` (`pooler.dense`, `classifier`); exit L: the model's own
  `{p}.pooler.dense` and the top `classifier`.
- `pabee`: JetRunner/PABEE modeling_pabee_{bert,albert}.py (research_projects/
  bert-loses-patience): one pooler, `{bert,albert}.pooler`, shared by every exit, and one
  classifier per layer, `classifiers.{j}`.
- `elasticbert`: fastnlp/ElasticBERT finetune-dynamic/models/modeling_elasticbert_entropy.py
  (and `_patience.py`): a pooler per layer, `elasticbert.encoder.pooler.{j}.dense`, and
  `classifiers.{j}`; the backbone renamed as for the pretrained ElasticBERT (families.py).
- `eebench`: what `eebench export-model` writes (config.json's `early_exit` block): the backbone
  under its family's own keys, the heads under `exit_heads.` as eebench holds them.

DeeBERT's encoder holds an off-ramp after every layer, the last layer's included, but its second
training stage leaves that one out of the loss (`highway_losses[:-1]`: "exclude the final
highway"): it keeps its initial weights. Its last exit is the final classifier on the model's own
pooler, which is what eebench's last exit is; the unused off-ramp is listed in `dropped`. (At
inference the authors' loop still tests that off-ramp's entropy after the last layer and, below
the threshold, answers with its logits; the exit layer is the last either way.)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from eebench.errors import DataError

HEADS_PREFIX = "exit_heads."  # where `eebench export-model` writes the exit heads
EXPORT_KEY = "early_exit"  # config.json's block that makes a folder an exported eebench model


@dataclass(frozen=True)
class Converted:
    """A checkpoint's tensors (or shapes), renamed: see the module docstring."""

    format: str
    family: str  # the backbone's model_type (an ElasticBERT backbone loads as "bert")
    backbone: dict[str, Any]
    heads: dict[str, Any]
    num_exits: int
    dropped: tuple[str, ...] = ()  # tensors of the checkpoint eebench does not use, and why


@dataclass(frozen=True)
class Format:
    """One authors' layout: how to recognise it and how to rename it."""

    name: str
    method: str  # the eebench method whose heads it has
    code: str  # where the key names come from
    detect: Callable[[set[str], dict[str, Any]], bool]
    convert: Callable[[dict[str, Any], dict[str, Any]], Converted]


def _prefix(keys: set[str], allowed: tuple[str, ...], what: str) -> str:
    """The base model's attribute name the keys sit under (`bert`, `roberta`, ...)."""
    found = [p for p in allowed if any(k.startswith(f"{p}.embeddings.") for k in keys)]
    if len(found) != 1:
        raise DataError(f"a {what} checkpoint, but its embeddings are under none (or several) "
                        f"of {', '.join(p + '.' for p in allowed)}")
    return found[0]


def _under(weights: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {k[len(prefix):]: v for k, v in weights.items() if k.startswith(prefix)}


def _indices(keys: set[str], pattern: str) -> list[int]:
    rx = re.compile(pattern)
    return sorted({int(m[1]) for k in keys if (m := rx.fullmatch(k))})


def _linear(weights: dict[str, Any], src: str, dst: str) -> dict[str, Any]:
    """`src.weight`/`src.bias` renamed to `dst.weight`/`dst.bias` (a missing one is an error)."""
    out = {}
    for part in ("weight", "bias"):
        if f"{src}.{part}" not in weights:
            raise DataError(f"the checkpoint lacks {src}.{part}")
        out[f"{dst}.{part}"] = weights[f"{src}.{part}"]
    return out


def _consecutive(indices: list[int], what: str) -> int:
    if not indices or indices != list(range(len(indices))):
        raise DataError(f"the checkpoint's {what} are not numbered 0..n-1: {indices[:6]}")
    return len(indices)


# --------------------------------------------------------------------------------- DeeBERT
_HIGHWAY = r"(?:bert|roberta)\.encoder\.highway\.(\d+)\.classifier\.weight"


def _deebert(weights: dict[str, Any], config: dict[str, Any]) -> Converted:
    keys = set(weights)
    p = _prefix(keys, ("bert", "roberta"), "DeeBERT")
    n = _consecutive(_indices(keys, _HIGHWAY), "off-ramps (encoder.highway)")
    highway = f"{p}.encoder.highway."
    backbone = {k: v for k, v in _under(weights, f"{p}.").items()
                if not k.startswith("encoder.highway.")}
    heads: dict[str, Any] = {}
    for j in range(n - 1):
        heads.update(_linear(weights, f"{highway}{j}.pooler.dense", f"{j}.pooler.dense"))
        heads.update(_linear(weights, f"{highway}{j}.classifier", f"{j}.classifier"))
    heads.update(_linear(weights, f"{p}.pooler.dense", f"{n - 1}.pooler.dense"))
    heads.update(_linear(weights, "classifier", f"{n - 1}.classifier"))
    dropped = tuple(sorted(k for k in keys if k.startswith(f"{highway}{n - 1}.")))
    return Converted("deebert", p, backbone, heads, n, dropped)


# ----------------------------------------------------------------------------------- PABEE
_CLASSIFIERS = r"classifiers\.(\d+)\.weight"


def _pabee(weights: dict[str, Any], config: dict[str, Any]) -> Converted:
    keys = set(weights)
    p = _prefix(keys, ("bert", "albert"), "PABEE")
    n = _consecutive(_indices(keys, _CLASSIFIERS), "classifiers")
    # BertModel's pooler is BertPooler (`pooler.dense`); AlbertModel's a bare Linear (`pooler`)
    pooler = f"{p}.pooler.dense" if p == "bert" else f"{p}.pooler"
    heads = _linear(weights, pooler, "0.pooler.dense")  # one pooler, shared by every exit
    for j in range(n):
        heads.update(_linear(weights, f"classifiers.{j}", f"{j}.classifier"))
    return Converted("pabee", p, _under(weights, f"{p}."), heads, n)


# ----------------------------------------------------------------------------- ElasticBERT
def _elasticbert(weights: dict[str, Any], config: dict[str, Any]) -> Converted:
    from eebench.models.families import elasticbert_state_dict

    keys = set(weights)
    n = _consecutive(_indices(keys, _CLASSIFIERS), "classifiers")
    layers = config.get("num_hidden_layers")
    if n != layers or config.get("num_output_layers", n) != n:
        raise DataError(f"an ElasticBERT checkpoint with {n} classifiers on {layers} layers: "
                        "eebench's elasticbert has an exit after every layer",
                        hint="use a checkpoint fine-tuned with num_output_layers = "
                             "num_hidden_layers (the authors' finetune-dynamic scripts)")
    backbone, poolers = elasticbert_state_dict(
        {k: v for k, v in weights.items() if not k.startswith("classifiers.")})
    heads: dict[str, Any] = {}
    for j in range(n):
        if j + 1 not in poolers:
            raise DataError(f"the checkpoint lacks elasticbert.encoder.pooler.{j}.dense")
        heads.update({f"{j}.pooler.dense.{k}": v for k, v in poolers[j + 1].items()})
        heads.update(_linear(weights, f"classifiers.{j}", f"{j}.classifier"))
    return Converted("elasticbert", "bert", backbone, heads, n)


# -------------------------------------------------------------------------- eebench's own
def _eebench(weights: dict[str, Any], config: dict[str, Any]) -> Converted:
    heads = _under(weights, HEADS_PREFIX)
    backbone = {k: v for k, v in weights.items() if not k.startswith(HEADS_PREFIX)}
    exits = config[EXPORT_KEY].get("exit_layers") or []
    return Converted("eebench", str(config.get("model_type")), backbone, heads, len(exits))


def _has(pattern: str) -> Callable[[set[str], dict[str, Any]], bool]:
    rx = re.compile(pattern)
    return lambda keys, config: any(rx.fullmatch(k) for k in keys)


FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("eebench", "", "eebench export-model",
           lambda keys, config: isinstance(config.get(EXPORT_KEY), dict), _eebench),
    Format("deebert", "deebert", "castorini/DeeBERT modeling_highway_bert.py / _roberta.py",
           _has(_HIGHWAY), _deebert),
    Format("elasticbert", "elasticbert",
           "fastnlp/ElasticBERT finetune-dynamic/models/modeling_elasticbert_entropy.py",
           lambda keys, config: (any(k.startswith("elasticbert.") for k in keys)
                                 and _has(_CLASSIFIERS)(keys, config)), _elasticbert),
    Format("pabee", "pabee", "JetRunner/PABEE modeling_pabee_bert.py / _albert.py",
           lambda keys, config: (any(k.startswith(("bert.", "albert.")) for k in keys)
                                 and _has(_CLASSIFIERS)(keys, config)), _pabee),
)}


def detect(keys: set[str], config: dict[str, Any], where: str) -> Format:
    """The format of a checkpoint from its tensor names (and config.json), or a DataError."""
    for fmt in FORMATS.values():
        if fmt.detect(keys, config):
            return fmt
    raise DataError(f"{where}: not an early-exit checkpoint eebench knows (none of "
                    f"{', '.join(FORMATS)}: no off-ramps, per-layer classifiers or exported "
                    "exit heads)", hint="a plain encoder is a backbone: pass it to --model and "
                                        "train a method on it")
