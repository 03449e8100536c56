"""An eebench multi-exit model in a form others read: the backbone under its family's own
Hugging Face keys, so that `transformers.AutoModel.from_pretrained(DIR)` loads it without custom
code, and the exit heads under `exit_heads.` as eebench holds them (what transformers does not
know it leaves aside, with a note in its load report).

The backbone's pooler (a family with one) is the last exit's pooler: AutoModel's pooler output is
then what the last exit's classifier reads (with [CLS] pooling). `eebench run --from-checkpoint`
reads the folder back (the `eebench` format of formats.py), tensor for tensor.

`write_folder` writes the folder: model.safetensors, config.json (the backbone's config with the
`early_exit` block: exits, heads, pooling, rule and operating point), the tokenizer and the
model card (README.md, eebench.models.convert.card). What goes in the block and the card comes
from the caller (`eebench export-model` reads it from a run).
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eebench.errors import UsageError, raise_unwritten
from eebench.models.convert.formats import EXPORT_KEY, HEADS_PREFIX

if TYPE_CHECKING:
    import torch
    from torch import nn

    from eebench.models.multi_exit import MultiExitModel

EXPORT_VERSION = 1  # the `early_exit` block's own version
WEIGHTS_FILE = "model.safetensors"
CARD_FILE = "README.md"


def hf_backbone(model: MultiExitModel) -> nn.Module:
    """The family's Hugging Face base model holding `model`'s embeddings and layers (as many as
    the model keeps) and, as its pooler, the last exit's."""
    from transformers import AutoModel

    from eebench.models.backbones import encoder_parts

    hf = AutoModel.from_config(copy.deepcopy(model.config),
                               attn_implementation=model.attn_implementation)
    parts = encoder_parts(hf)
    parts.embeddings.load_state_dict(model.embeddings.state_dict())
    for mine, theirs in zip(model.layers, parts.layers, strict=True):
        theirs.load_state_dict(mine.state_dict())  # ALBERT: one shared group, the same each time
    pooler = getattr(getattr(model.heads[-1], "pooler", None), "dense", None)
    if parts.pooler is not None and pooler is not None:
        parts.pooler.load_state_dict(pooler.state_dict())
    return hf.eval()


def exported_tensors(model: MultiExitModel, backbone: nn.Module) -> dict[str, torch.Tensor]:
    """What model.safetensors holds: the backbone's own keys, then `exit_heads.<key>`; each
    tensor a contiguous copy (safetensors stores no tensor twice)."""
    tensors = dict(backbone.state_dict())
    tensors.update({f"{HEADS_PREFIX}{k}": v for k, v in model.heads.state_dict().items()})
    return {k: v.detach().cpu().contiguous().clone() for k, v in tensors.items()}


def backbone_config(backbone: nn.Module) -> dict[str, Any]:
    """The backbone's config.json as save_pretrained writes it, naming its class."""
    data = backbone.config.to_diff_dict()
    data["architectures"] = [type(backbone).__name__]
    data.pop("_attn_implementation_autoset", None)
    return {k: v for k, v in data.items() if not k.startswith("_")}


def exit_layout(model: MultiExitModel) -> dict[str, Any]:
    """The structure part of the `early_exit` block: what rebuilds the heads (with the method)."""
    heads = list(model.heads)
    owners = [h for h in heads if "pooler" in h._modules]
    return {
        "format_version": EXPORT_VERSION,
        "method": model.method_name,
        "method_settings": dict(model.method_settings),
        "num_layers": model.num_layers,
        "num_labels": model.num_labels,
        "exit_layers": list(model.exit_layers),
        "pooling": model.pooling,
        "heads": {
            "prefix": HEADS_PREFIX,
            "count": len(heads),
            "kind": type(heads[0]).__name__,  # ExitHead: pooler -> dropout -> linear
            "shared_pooler": len(owners) == 1 and len(heads) > 1,
            "signals": list(model.signal_names),
        },
        **({"temperatures": model.temperatures()} if model.temperatures() is not None else {}),
    }


def check_out_folder(out: Path, overwrite: bool = False) -> None:
    """Refuse `out` unless it is new or an empty folder, or `overwrite` says to replace it: said
    before any work (eebench.cli.export_model) and again by write_folder."""
    out = Path(out)
    if out.exists() and not (overwrite or (out.is_dir() and not any(out.iterdir()))):
        raise UsageError(f"--out {out}: exists and is not empty",
                         hint="choose a new folder, or add --overwrite")


def write_folder(out: Path, model: MultiExitModel, tokenizer: Any, extra: dict[str, Any],
                 card: str, overwrite: bool = False) -> Path:
    """Write the exported folder `out` (a new directory: written next to it, then renamed in):
    model.safetensors, config.json (the backbone's config and the `early_exit` block: the model's
    layout, then `extra`), the tokenizer and README.md."""
    from safetensors.torch import save_file

    out = Path(out)
    check_out_folder(out, overwrite)
    backbone = hf_backbone(model)
    config = backbone_config(backbone)
    config[EXPORT_KEY] = {**exit_layout(model), **extra}
    tmp = out.with_name(f".{out.name}.export-tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(parents=True)
        save_file(exported_tensors(model, backbone), str(tmp / WEIGHTS_FILE),
                  metadata={"format": "pt"})
        (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        tokenizer.save_pretrained(str(tmp))
        (tmp / CARD_FILE).write_text(card, encoding="utf-8")
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    except BaseException as e:  # a full disk: no folder left half written, one line naming it
        shutil.rmtree(tmp, ignore_errors=True)
        raise_unwritten(e, out, "the exported model", hint="free some disk space and rerun "
                        "the same command")
    return out
