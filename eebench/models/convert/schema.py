"""What an imported checkpoint's folder must hold before anything is built from it (`eebench run
--from-checkpoint DIR`): the checks of a `--model DIR`, and the `early_exit` block of an exported
eebench model, all on config.json and the weights' headers (no tensor is read, nothing is
allocated).

- `check_declared(config, where)`, before the weights are opened: the config's sizes
  (eebench.models.model_config: types and bounds) and the `early_exit` block (`ExportBlock`:
  types, bounds), each by its schema;
- `check_checkpoint(folder, config, converted)`, once its format is found (`converted`: the
  weights' shapes under eebench's names): the config of a supported family,
  its sizes those of the weights, every layer there, the tokenizer there and fitting the word
  embeddings (eebench.models.model_dir.check_contents, on the backbone under its family's own
  keys); and the block's depth, exits and labels those of the config and the exit heads.

A config is trusted for nothing: a layer count given as a string is a traceback inside
transformers, a depth of a billion a sweep of a billion values, a size the weights do not have a
model allocated at that size before the shapes are compared. Each is one line naming config.json
and the field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from eebench.errors import DataError
from eebench.models.convert.export import EXPORT_VERSION
from eebench.models.convert.formats import EXPORT_KEY, HEADS_PREFIX
from eebench.models.model_config import (
    CONFIG_HINT,
    MAX_COUNT,
    MAX_VOCAB,
    ModelConfig,
    bounded,
    check_config,
)
from eebench.models.model_dir import check_contents

if TYPE_CHECKING:
    from pathlib import Path

    from eebench.models.convert.formats import Converted

BLOCK_HINT = "the early_exit block is what `eebench export-model` writes: export the model again"
Layer = bounded(MAX_COUNT)
Version = bounded(EXPORT_VERSION)
Labels = bounded(MAX_VOCAB)  # a classifier's outputs: at most a vocabulary's


class ExportBlock(BaseModel):
    """config.json's `early_exit` block as eebench reads it back (export.exit_layout writes it).
    The rest of the block (heads, rule, operating point, the run) is the card's: not read."""

    model_config = ConfigDict(extra="allow", strict=True)

    format_version: Version = None
    method: str | None = Field(None, min_length=1, max_length=100)
    method_settings: dict[str, Any] = {}
    num_layers: Layer = None
    num_labels: Labels = None
    exit_layers: list[Layer] | None = Field(None, min_length=1, max_length=MAX_COUNT)
    pooling: Literal["cls", "mean"] = "cls"


def check_declared(config: dict[str, Any], where: str) -> None:
    """The config's sizes and its early_exit block, by their schemas, before anything else."""
    from eebench.io import validated

    validated(ModelConfig, config, where, what="model config", hint=CONFIG_HINT)
    if EXPORT_KEY in config:
        validated(ExportBlock, config[EXPORT_KEY], where, what=f"{EXPORT_KEY} block",
                  hint=BLOCK_HINT)


def check_checkpoint(folder: Path, declared: dict[str, Any], converted: Converted) -> None:
    """The folder's config against its weights and tokenizer (the module docstring), from the
    file headers alone. An old config without model_type is read as the weights' family. It
    takes the checkpoint's parts, not the Checkpoint, which is built on this module."""
    where = str(folder / "config.json")
    config = {**declared, "model_type": declared.get("model_type") or converted.family}
    check_config(config, where)
    check_contents(folder, config, converted.backbone)
    if EXPORT_KEY in config:
        _check_block(ExportBlock.model_validate(config[EXPORT_KEY]), config, converted.heads,
                     where)


def _check_block(block: ExportBlock, config: dict[str, Any], heads: dict[str, tuple[int, ...]],
                 where: str) -> None:
    """The block's depth is the config's, its exits lie within it in order, one per exit head
    of the weights, and its label count is the first classifier's."""
    field = "n_layers" if config.get("model_type") == "distilbert" else "num_hidden_layers"
    depth = config.get(field)
    if block.num_layers is not None and depth is not None and block.num_layers != depth:
        raise DataError(f"{where}: {EXPORT_KEY}.num_layers is {block.num_layers}, but {field} "
                        f"is {depth}", hint=BLOCK_HINT)
    layers = block.num_layers or depth
    exits = block.exit_layers
    if exits is not None:
        if any(b <= a for a, b in zip(exits, exits[1:])) or \
                (layers is not None and exits[-1] > layers):
            within = f" within 1..{layers}" if layers is not None else ""
            raise DataError(f"{where}: {EXPORT_KEY}.exit_layers {_shown(exits)} are not "
                            f"layers in increasing order{within}", hint=BLOCK_HINT)
        held = len({key.split(".", 1)[0] for key in heads})
        if len(exits) != held:
            raise DataError(f"{where}: {EXPORT_KEY}.exit_layers lists {len(exits)} exits, but "
                            f"the weights hold {held} exit heads ({HEADS_PREFIX}*)",
                            hint=BLOCK_HINT)
    first = heads.get("0.classifier.weight")
    if block.num_labels is not None and first is not None and first[0] != block.num_labels:
        raise DataError(f"{where}: {EXPORT_KEY}.num_labels is {block.num_labels}, but the "
                        f"weights' {HEADS_PREFIX}0.classifier.weight is {list(first)}",
                        hint=BLOCK_HINT)


def _shown(exits: list[int]) -> str:
    return str(exits) if len(exits) <= 8 else f"[{exits[0]}, {exits[1]}, ..., {exits[-1]}]"
