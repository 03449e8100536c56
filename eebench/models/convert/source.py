"""Where an early-exit checkpoint's files are, and what they are: a local folder or a Hugging
Face hub id, its config.json, its safetensors weights (never a pickle) and their sha256.

`open_checkpoint(source)` reads the config and the weights' headers only (a few kilobytes), finds
the format (eebench.models.convert.formats), checks the folder as a `--model DIR` is checked
(eebench.models.convert.schema: the config's types and bounds, its sizes against the weights'
shapes, the tokenizer) and hashes the weights; the tensors are read when a model is built from
them (eebench.models.convert.build). A hub id is fetched into the hub's local
cache (config, weights, tokenizer files, the authors' eval_results.txt; never a pickled file);
offline and not cached, it fails at once in one line. Weights that exist only pickled
(`pytorch_model.bin`) are refused in one line that gives the command converting them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from eebench.errors import DataError, EebenchError, UsageError, one_line
from eebench.io import hub_offline_mode, hub_unreachable, read_json, sha256_file
from eebench.models.convert.formats import EXPORT_KEY, Converted, Format, detect
from eebench.models.convert.schema import check_checkpoint, check_declared
from eebench.models.model_dir import PICKLED_WEIGHTS, weight_files

# The one-line conversion of a folder's pickled weights (run it only on a file you trust:
# weights_only=True keeps torch.load from running code, but a pickle is still a pickle).
CONVERT_COMMAND = (
    "python -c \"import sys, torch; from safetensors.torch import save_file; d = sys.argv[1]; "
    "save_file({k: v.clone().contiguous() for k, v in torch.load(d + '/pytorch_model.bin', "
    "map_location='cpu', weights_only=True).items()}, d + '/model.safetensors', "
    "metadata={'format': 'pt'})\" DIR")
# What is fetched of a hub repository: never a pickle, never a TensorFlow or Flax file.
HUB_FILES = ("config.json", "*.safetensors", "model.safetensors.index.json", "tokenizer*",
             "vocab*", "merges.txt", "special_tokens_map.json", "added_tokens.json",
             "spiece.model", "sentencepiece.bpe.model", "eval_results.txt", "README.md")


class CheckpointSource(BaseModel):
    """Where a run's weights came from when it trained none (`eebench run --from-checkpoint`):
    recorded in the run's config.json, so part of its name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str  # the hub id or folder, as given
    format: str  # a key of eebench.models.convert.formats.FORMATS
    sha256: str  # of model.safetensors (sharded: of its shards' names and hashes)
    num_layers: int
    num_labels: int
    pooling: str  # how its exit heads pool ([CLS] for every authors' format)


@dataclass
class Checkpoint:
    """A located checkpoint: its folder, config.json, weight files and format."""

    source: str
    folder: Path
    config: dict[str, Any]
    files: list[Path]
    format: Format

    @cached_property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Every tensor's shape, from the files' headers."""
        from safetensors import safe_open

        shapes: dict[str, tuple[int, ...]] = {}
        for file in self.files:
            with safe_open(str(file), framework="pt") as f:
                shapes.update({k: tuple(f.get_slice(k).get_shape()) for k in f.keys()})
        return shapes

    def tensors(self) -> dict[str, Any]:
        from safetensors.torch import load_file

        out: dict[str, Any] = {}
        for file in self.files:
            out.update(load_file(str(file)))
        return out

    def convert(self, weights: dict[str, Any]) -> Converted:
        """The tensors (or shapes) renamed onto eebench's model, errors naming the source."""
        try:
            return self.format.convert(weights, self.config)
        except DataError as e:
            raise DataError(f"{self.source}: {e.message}", hint=e.hint) from None

    @cached_property
    def sha256(self) -> str:
        if len(self.files) == 1:
            return sha256_file(self.files[0])
        lines = "".join(f"{f.name} {sha256_file(f)}\n" for f in self.files)
        return hashlib.sha256(lines.encode()).hexdigest()

    @property
    def exported(self) -> dict[str, Any]:
        """config.json's `early_exit` block ({} for an authors' checkpoint)."""
        block = self.config.get(EXPORT_KEY)
        return block if isinstance(block, dict) else {}

    def record(self) -> CheckpointSource:
        converted = self.convert(self.shapes)
        labels = self.exported.get("num_labels")  # an exported model says; else its classifier
        if labels is None and "0.classifier.weight" in converted.heads:
            labels = converted.heads["0.classifier.weight"][0]
        if not isinstance(labels, int) or labels < 1:
            raise DataError(f"{self.source}: no classifier at the first exit")
        layers = self.exported.get("num_layers", self.config.get("num_hidden_layers"))
        if not isinstance(layers, int) or layers < converted.num_exits:
            raise DataError(f"{self.source}: config.json says {layers!r} layers for "
                            f"{converted.num_exits} exits")
        return CheckpointSource(
            source=self.source, format=self.format.name, sha256=self.sha256, num_layers=layers,
            num_labels=labels, pooling=str(self.exported.get("pooling", "cls")))


def open_checkpoint(source: str) -> Checkpoint:
    """The checkpoint at `source` (a folder, else a hub id), its format found and its folder
    checked as a `--model DIR` is (eebench.models.convert.schema: the config by its schema, then
    against the weights' headers, and the tokenizer) before anything is built; one-line
    errors."""
    folder = locate(source)
    config = read_json(folder / "config.json") if (folder / "config.json").is_file() else None
    if not isinstance(config, dict):
        raise DataError(f"{source}: no config.json object: not a Hugging Face checkpoint")
    check_declared(config, str(folder / "config.json"))
    files = safetensors_files(folder, source)
    checkpoint = Checkpoint(source, folder, config, files, _format(config, files, source))
    check_checkpoint(folder, config, checkpoint.convert(checkpoint.shapes))
    return checkpoint


def _format(config: dict[str, Any], files: list[Path], source: str) -> Format:
    from safetensors import safe_open

    keys: set[str] = set()
    for file in files:
        try:
            with safe_open(str(file), framework="pt") as f:
                keys.update(f.keys())
        except Exception as e:  # noqa: BLE001 - SafetensorError, OSError
            raise DataError(f"{file}: not a readable safetensors file "
                            f"({' '.join(str(e).split())[:120]})") from None
    return detect(keys, config, source)


def safetensors_files(folder: Path, source: str) -> list[Path]:
    """The folder's safetensors weights; pickled ones alone are refused with the command that
    converts them."""
    pickled = [name for name in PICKLED_WEIGHTS if (folder / name).exists()]
    has_safetensors = (folder / "model.safetensors").exists() or \
        (folder / "model.safetensors.index.json").exists()
    if not has_safetensors and _in_hub_cache(folder):  # a hub id: download, convert, then a folder
        raise DataError(f"{source}: no model.safetensors on the hub (weights that exist only "
                        "pickled are not read: eebench never unpickles a file)",
                        hint=f"hf download {source} --local-dir DIR, then (a file you trust) "
                             f"{CONVERT_COMMAND}, then --from-checkpoint DIR")
    if pickled and not has_safetensors:
        raise DataError(f"{folder / pickled[0]}: pickled weights; eebench never unpickles a file",
                        hint=f"convert them once (a file you trust): "
                             f"{CONVERT_COMMAND.replace('DIR', str(folder))}")
    files = _hub_weight_files(folder) if _in_hub_cache(folder) else weight_files(folder)
    if not files:
        raise DataError(f"{source}: no model.safetensors in {folder}",
                        hint="the folder needs the checkpoint's config.json and safetensors "
                             "weights")
    return files


def _hub_weight_files(snapshot: Path) -> list[Path]:
    """A hub snapshot's safetensors files. The hub's cache keeps a repository's files once,
    under `blobs/`, and links them into each `snapshots/<revision>/`: a link is followed only
    into its own repository's blobs, and each shard is a plain file name."""
    blobs = snapshot.parent.parent / "blobs"
    index = snapshot / "model.safetensors.index.json"
    if index.exists():
        data = read_json(index)
        weight_map = data.get("weight_map") if isinstance(data, dict) else None
        if not isinstance(weight_map, dict) or not weight_map:
            raise DataError(f"{index}: no weight_map: not a safetensors shard index")
        names = list(dict.fromkeys(weight_map.values()))
    else:
        names = ["model.safetensors"]
    files = []
    for name in names:
        if not isinstance(name, str) or Path(name).name != name or name in (".", ".."):
            raise DataError(f"{index}: shard {name!r} is not a file name")
        file = snapshot / name
        try:
            real = file.resolve(strict=True)
        except (OSError, RuntimeError):
            raise DataError(f"{snapshot}: {name} is not in the hub's cache") from None
        if not (real.parent in (snapshot.resolve(), blobs.resolve()) and real.is_file()):
            raise DataError(f"{file}: links out of its repository in the hub's cache")
        files.append(file)
    return files


def _in_hub_cache(folder: Path) -> bool:
    try:
        return folder.resolve().is_relative_to(_hub_cache())
    except ImportError:  # pragma: no cover - huggingface_hub comes with transformers
        return False


def locate(source: str) -> Path:
    """A folder as it is; a hub id fetched into (or found in, offline) the hub's cache."""
    path = Path(source).expanduser()
    if path.exists():
        if not path.is_dir():
            raise UsageError(f"--from-checkpoint {source}: not a folder",
                             hint="give the folder holding config.json and model.safetensors")
        return path.resolve()
    if source.startswith((".", "/", "~")) or source.count("/") != 1:
        raise UsageError(f"--from-checkpoint {source}: no such folder, and not a hub id "
                         "(owner/name)")
    return _fetch(source)


def _hub_cache() -> Path:
    from huggingface_hub.constants import HF_HUB_CACHE

    return Path(HF_HUB_CACHE).resolve()


def _fetch(repo: str) -> Path:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError

    offline = hub_offline_mode() or hub_unreachable() is not None
    try:
        folder = snapshot_download(repo, allow_patterns=list(HUB_FILES),
                                   local_files_only=offline)
    except HFValidationError:
        raise UsageError(f"--from-checkpoint {repo}: no such folder, and not a hub id") from None
    except Exception as e:  # noqa: BLE001 - the hub client's many errors: one line each
        if offline:
            raise EebenchError(f"cannot fetch {repo!r} from the Hugging Face hub: offline and "
                               "not in the local cache",
                               hint=f"on a machine with a network: hf download {repo} "
                                    "--local-dir DIR; then --from-checkpoint DIR") from None
        first = one_line(e)
        raise EebenchError(f"cannot fetch {repo!r} from the Hugging Face hub: {first}") from None
    return Path(folder).resolve()
