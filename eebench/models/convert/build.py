"""An early-exit checkpoint as eebench's multi-exit model: its backbone loaded by the family's
own Hugging Face class, then the method's exit heads built and filled with the checkpoint's.

Nothing is filled in at random: the backbone loads strictly (buffers aside) and so do the heads,
so a checkpoint whose heads are not the method's (PABEE's one shared pooler under DeeBERT's
pooler-per-exit method, a head BERxiT scores with) is refused in one line, before any tensor is
read (`check_fits`, on the shapes in the file header), and again when the tensors load.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from eebench.errors import DataError, UsageError, one_line
from eebench.models.convert.formats import EXPORT_KEY, FORMATS
from eebench.models.convert.source import Checkpoint

if TYPE_CHECKING:
    from eebench.models.multi_exit import HeadBuilder, MultiExitModel

# Buffers an older transformers saved with the weights, which today's computes (or keeps
# unsaved): left out of the strict comparison.
BUFFERS = ("position_ids", "token_type_ids")


def backbone_config(checkpoint: Checkpoint, family: str) -> Any:
    """The transformers config of the checkpoint's backbone. A config.json written by an older
    transformers may lack its model_type: the weights' family says it."""
    from transformers import AutoConfig

    from eebench.models.families import CONVERSIONS

    raw = {k: v for k, v in checkpoint.config.items() if k != EXPORT_KEY}
    declared = raw.pop("model_type", None)
    if declared in CONVERSIONS:  # ElasticBERT's config, loaded as BERT's
        return CONVERSIONS[declared].config({**raw, "model_type": declared})
    if declared is not None and declared != family:
        raise DataError(f"{checkpoint.source}: config.json says model_type {declared!r}, but "
                        f"the weights are a {family} model's")
    try:
        return AutoConfig.for_model(family, **raw)
    except (ValueError, TypeError) as e:
        raise DataError(f"{checkpoint.source}: config.json is not a {family} config: "
                        f"{' '.join(str(e).split())[:160]}") from None


def _exit_layers(checkpoint: Checkpoint, num_exits: int) -> tuple[int, ...]:
    return tuple(checkpoint.exported.get("exit_layers") or range(1, num_exits + 1))


def check_fits(checkpoint: Checkpoint, method: HeadBuilder) -> None:
    """Refuse, in one line, a method whose exits or heads are not the checkpoint's: its exit
    layers, and every head tensor's name and shape (from the file header; nothing is loaded)."""
    import torch

    from eebench.models.multi_exit import ExitPooler

    converted = checkpoint.convert(checkpoint.shapes)
    record = checkpoint.record()
    config = backbone_config(checkpoint, converted.family)
    exits = _exit_layers(checkpoint, converted.num_exits)
    layers = config.num_hidden_layers
    if tuple(method.head_layers(layers)) != exits:
        own = _span(tuple(method.head_layers(layers)))
        raise UsageError(f"{checkpoint.source}: its exits sit after layers {_span(exits)}; "
                         f"method {method.name!r} puts them after {own}", hint=_use(checkpoint))
    with torch.device("meta"):  # shapes only: nothing is allocated
        pooler = ExitPooler(config.hidden_size, record.pooling)
        heads = method.build_heads(config, record.num_labels, layers, pooler).heads
    wanted = {k: tuple(v.shape) for k, v in heads.state_dict().items()}
    given = {k: tuple(v) for k, v in converted.heads.items()}
    _refuse_mismatch(checkpoint, method, wanted, given)


def _refuse_mismatch(checkpoint: Checkpoint, method: HeadBuilder, wanted: dict[str, tuple],
                     given: dict[str, tuple]) -> None:
    missing = sorted(set(wanted) - set(given))
    extra = sorted(set(given) - set(wanted))
    other = sorted(k for k in set(wanted) & set(given) if wanted[k] != given[k])
    if missing or extra or other:
        what = (f"method {method.name!r} needs heads.{missing[0]}, which it lacks" if missing
                else f"it has heads.{extra[0]}, which method {method.name!r} has no place for"
                if extra else f"heads.{other[0]} is {list(given[other[0]])} there, "
                              f"{list(wanted[other[0]])} in method {method.name!r}")
        raise UsageError(f"{checkpoint.source} ({checkpoint.format.name} format): its exit "
                         f"heads do not fit: {what}", hint=_use(checkpoint))


def _use(checkpoint: Checkpoint) -> str:
    name = checkpoint.exported.get("method") or FORMATS[checkpoint.format.name].method
    settings = checkpoint.exported.get("method_settings") or {}
    extra = "".join(f" -s {k}={v}" for k, v in settings.items())
    return f"its heads are those of method {name!r}: --method {name}{extra}"


def _span(layers: tuple[int, ...]) -> str:
    return ", ".join(map(str, layers)) if len(layers) <= 4 else \
        f"{layers[0]}, {layers[1]}, ..., {layers[-1]}"


def load_model(checkpoint: Checkpoint, method: HeadBuilder,
               attn_implementation: str = "eager") -> MultiExitModel:
    """The checkpoint as a MultiExitModel of `method` (eval mode), every tensor its own."""
    from transformers import AutoModel

    from eebench.models.build import assemble, check_attn

    check_attn(attn_implementation)
    check_fits(checkpoint, method)
    record = checkpoint.record()
    converted = checkpoint.convert(checkpoint.tensors())
    config = backbone_config(checkpoint, converted.family)
    hf = AutoModel.from_config(config, attn_implementation=attn_implementation)
    _load_strict(hf, converted.backbone, f"{checkpoint.source}: its backbone")
    model = assemble(hf, method, record.num_labels, None, record.pooling)
    _load_strict(model.heads, converted.heads, f"{checkpoint.source}: its exit heads")
    model.source = checkpoint.source
    return model.eval()


def _load_strict(module: Any, state: dict[str, Any], what: str) -> None:
    """Load every tensor of `state` into `module`, and nothing left over on either side."""
    own = module.state_dict()
    state = {k: v for k, v in state.items() if k in own or not k.endswith(BUFFERS)}
    try:
        missing, unexpected = module.load_state_dict(state, strict=False)
    except RuntimeError as e:  # a shape that does not fit
        first = one_line(str(e).split("\n\t")[-1])  # torch's last line: the shape that differs
        raise DataError(f"{what} does not fit its config: {first}") from None
    missing = [k for k in missing if not k.endswith(BUFFERS)]
    if missing or unexpected:
        name = (f"lacks {missing[0]}" if missing else f"has {unexpected[0]}, which the model "
                "has no place for")
        n = len(missing or unexpected)
        raise DataError(f"{what} {name}" + (f" (and {n - 1} more)" if n > 1 else ""),
                        hint="eebench does not fill weights in at random")


def load_tokenizer(checkpoint: Checkpoint, config: Any) -> Any:
    """The checkpoint's fast tokenizer (its family from `config`: an old tokenizer_config.json
    may not say). Its files were checked when the checkpoint was opened, as a `--model DIR`'s
    are (model_dir.check_contents: present, regular files, fitting the word embeddings)."""
    from transformers import AutoTokenizer
    from transformers.utils import logging

    verbosity = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        tok = AutoTokenizer.from_pretrained(str(checkpoint.folder), config=config, use_fast=True)
    except (OSError, ValueError, TypeError, KeyError) as e:
        first = one_line(e, limit=160)
        raise DataError(f"{checkpoint.source}: cannot load its tokenizer: {first}",
                        hint="the checkpoint's folder needs the tokenizer files it was "
                             "trained with") from None
    finally:
        logging.set_verbosity(verbosity)
    if not getattr(tok, "is_fast", False):
        raise DataError(f"{checkpoint.source}: no fast tokenizer for its files")
    return tok
