"""Checkpoint directories: safetensors and JSON only, written atomically, never unpickled.

A checkpoint directory holds

- `model.safetensors`      the weights (safetensors.torch.save_model: handles shared tensors)
- `model_config.json`      MultiExitModel.model_config(): enough to rebuild the structure
- the tokenizer            tokenizer.save_pretrained
- `train_state.json`       where training stands (stage, epoch, step), the config and its hash,
                           the finished flag, the dev metrics history
- `optimizer.safetensors`  the optimizer's tensors; its param groups ride in the file's metadata
- `scheduler.json`         the learning-rate schedule and its step
- `rng.safetensors`        the torch RNG states (dropout), so resuming is bit-identical

The optimizer and scheduler files exist only while training is unfinished.

A directory is keyed by a hash of everything that determines the trained weights
(`checkpoint_path`), so rerunning a command finds its own checkpoint and nothing else.

Why a directory swap: the files only make sense together (weights of step k with the optimizer
and counters of step k). A save writes a complete new directory next to the old one and swaps
the two with renames; `recover` finishes a swap that a crash interrupted. A kill at any moment
leaves either the old or the new checkpoint, never a mix.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eebench.errors import DataError, EebenchError, one_line, raise_unwritten
from eebench.io import read_json, write_json

if TYPE_CHECKING:
    import torch

SCHEMA_VERSION = 1
MODEL_FILE = "model.safetensors"
MODEL_CONFIG_FILE = "model_config.json"
STATE_FILE = "train_state.json"
OPTIMIZER_FILE = "optimizer.safetensors"
SCHEDULER_FILE = "scheduler.json"
RNG_FILE = "rng.safetensors"
TRAINING_FILES = (OPTIMIZER_FILE, SCHEDULER_FILE, RNG_FILE)


@dataclass
class TrainState:
    """Where training stands. Counters point at the next step to run."""

    config_hash: str
    config: dict[str, Any]
    stage: int = 0  # index into method.stages()
    epoch: int = 0  # epoch within the stage
    step_in_epoch: int = 0  # batches of this epoch already done
    stage_step: int = 0  # optimizer steps done in this stage (drives the lr schedule)
    global_step: int = 0  # optimizer steps done over all stages
    finished: bool = False
    history: list[dict[str, Any]] = field(default_factory=list)  # dev evaluations
    # wall seconds the training took so far, over every process that trained it (resumes added;
    # dev evaluations included): what a run records as the cost of its model
    train_seconds: float = 0.0
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainState:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


HINT = "delete the checkpoint directory or rerun with --overwrite"


def corrupt(path: Path, e: BaseException | str) -> EebenchError:
    why = e if isinstance(e, str) else one_line(e, limit=300)
    return EebenchError(f"checkpoint file {path} is unreadable or corrupt: {why}", hint=HINT)


# ----------------------------------------------------------------------------- atomic directory
def _tmp_dir(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def _old_dir(path: Path) -> Path:
    return path.with_name(f".{path.name}.old")


def _writing(tmp: Path) -> bool:
    """Whether another process still writes the temporary directory `tmp`: the process whose
    id ends its name is alive on this machine (a dead one's, or this process's own earlier
    attempt, is stale)."""
    pid = tmp.name.rpartition("-")[2]
    if not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)  # signal 0: only asks whether the process exists
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def recover(path: Path) -> None:
    """Finish a save that a crash interrupted, and clear stale temporary directories: those of
    processes that have ended, never one that another live process is writing."""
    old = _old_dir(path)
    if old.exists():
        if path.exists():
            shutil.rmtree(old)
        else:
            os.rename(old, path)
    if path.parent.is_dir():
        for tmp in path.parent.glob(f".{path.name}.tmp-*"):
            if not _writing(tmp):
                shutil.rmtree(tmp, ignore_errors=True)


def remove(path: Path) -> None:
    """Delete a checkpoint directory and any leftovers of an interrupted save (--overwrite)."""
    recover(path)
    if path.exists():
        shutil.rmtree(path)


def _swap_in(tmp: Path, path: Path) -> None:
    old = _old_dir(path)
    if path.exists():
        if old.exists():
            shutil.rmtree(old)
        os.rename(path, old)
    os.rename(tmp, path)
    shutil.rmtree(old, ignore_errors=True)


# ----------------------------------------------------------------------------- save
def save_checkpoint(path: Path, model: Any, tokenizer: Any, state: TrainState,
                    optimizer: torch.optim.Optimizer | None = None,
                    scheduler: dict[str, Any] | None = None,
                    rng: dict[str, torch.Tensor] | None = None) -> None:
    """Write a complete checkpoint to `path`, replacing the previous one atomically."""
    from safetensors.torch import save_file, save_model

    tmp = _tmp_dir(path)
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    try:
        save_model(model, str(tmp / MODEL_FILE), metadata={"format": "pt"})
        write_json(tmp / MODEL_CONFIG_FILE, model.model_config())
        if tokenizer is not None:
            tokenizer.save_pretrained(str(tmp))
        if optimizer is not None:
            tensors, meta = optimizer_to_tensors(optimizer)
            save_file(tensors, str(tmp / OPTIMIZER_FILE), metadata=meta)
        if scheduler is not None:
            write_json(tmp / SCHEDULER_FILE, scheduler)
        if rng is not None:
            save_file({k: v.contiguous() for k, v in rng.items()}, str(tmp / RNG_FILE))
        write_json(tmp / STATE_FILE, state.to_dict())  # written last: marks the dir complete
        _swap_in(tmp, path)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise_unwritten(e, path, "the checkpoint", hint="free disk space and run the same "
                        "command again: training resumes from the last complete checkpoint")


def optimizer_to_tensors(optimizer: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor],
                                                                     dict[str, str]]:
    """Flatten an optimizer state dict: tensors by "state.<param>.<key>", the rest as JSON."""
    import torch

    sd = optimizer.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, Any] = {}
    for pid, entry in sd["state"].items():
        for key, value in entry.items():
            name = f"state.{pid}.{key}"
            if isinstance(value, torch.Tensor):
                tensors[name] = value.detach().cpu().contiguous()
            else:
                scalars[name] = value
    return tensors, {"param_groups": json.dumps(sd["param_groups"]), "scalars": json.dumps(scalars)}


# ----------------------------------------------------------------------------- load
def read_state(path: Path) -> TrainState | None:
    """The training state of checkpoint `path`, or None where there is no checkpoint yet."""
    file = path / STATE_FILE
    if not file.exists():
        return None
    try:
        return TrainState.from_dict(json.loads(file.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError, KeyError) as e:
        raise corrupt(file, e) from None


def read_model_config(path: Path) -> dict[str, Any]:
    cfg = read_json(path / MODEL_CONFIG_FILE, hint=HINT)
    if not isinstance(cfg, dict):
        raise corrupt(path / MODEL_CONFIG_FILE, "not a JSON object")
    return cfg


def load_weights(model: Any, path: Path) -> None:
    """Load `model.safetensors` into `model` (strict: every tensor present, every shape right)."""
    from safetensors.torch import load_model

    file = path / MODEL_FILE
    if not file.exists():
        raise corrupt(file, "file is missing")
    try:
        missing, unexpected = load_model(model, str(file), strict=False)
    except Exception as e:  # SafetensorError, a shape mismatch (RuntimeError), OSError
        raise corrupt(file, e) from None
    if missing or unexpected:
        names = sorted(missing) if missing else sorted(unexpected)
        what = f"{'missing' if missing else 'unexpected'} tensors {names[:3]}"
        raise EebenchError(
            f"checkpoint {file} does not fit the model: {what}",
            hint="the checkpoint was written for another model; rerun with --overwrite",
        )


def _load_tensors(file: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    from safetensors import safe_open

    if not file.exists():
        raise corrupt(file, "file is missing")
    try:
        with safe_open(str(file), framework="pt") as f:
            return {k: f.get_tensor(k) for k in f.keys()}, dict(f.metadata() or {})
    except Exception as e:  # SafetensorError or OSError
        raise corrupt(file, e) from None


def load_optimizer(optimizer: torch.optim.Optimizer, path: Path) -> None:
    """Restore the optimizer state saved by `save_checkpoint` (tensors + JSON, no pickle)."""
    file = path / OPTIMIZER_FILE
    tensors, meta = _load_tensors(file)
    try:
        groups = json.loads(meta["param_groups"])
        scalars = json.loads(meta.get("scalars", "{}"))
        state: dict[int, dict[str, Any]] = {}
        for name, value in [*tensors.items(), *scalars.items()]:
            _, pid, key = name.split(".", 2)
            state.setdefault(int(pid), {})[key] = value
        for g in groups:  # JSON turned tuples (betas) into lists
            for k, v in g.items():
                if k != "params" and isinstance(v, list):
                    g[k] = tuple(v)
        optimizer.load_state_dict({"state": state, "param_groups": groups})
    except (KeyError, ValueError, TypeError) as e:
        raise corrupt(file, e) from None


def load_rng(path: Path) -> dict[str, torch.Tensor]:
    return _load_tensors(path / RNG_FILE)[0]


def load_trained(path: Path, allow_unfinished: bool = False) -> tuple[Any, Any, dict[str, Any]]:
    """(model in eval mode, tokenizer, meta) from a checkpoint directory. Never unpickles."""
    path = Path(path)
    recover(path)
    state = read_state(path)
    if state is None:
        raise EebenchError(f"no checkpoint at {path}", hint="train one with `eebench train`")
    if not state.finished and not allow_unfinished:
        raise EebenchError(f"checkpoint {path} has not finished training",
                           hint="rerun the same `eebench train` command to resume it")
    model_config = read_model_config(path)
    try:
        model = rebuild_model(model_config)
    except EebenchError:
        raise
    except Exception as e:  # a model_config.json that does not describe a model
        raise corrupt(path / MODEL_CONFIG_FILE, e) from None
    load_weights(model, path)
    model.eval()
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(path))
    except Exception as e:
        raise corrupt(path, f"tokenizer: {' '.join(str(e).split())[:200]}") from None
    return model, tokenizer, {**state.to_dict(), "model_config": model_config, "path": str(path)}


def rebuild_model(cfg: dict[str, Any]) -> Any:
    """The structure `model_config.json` describes (MultiExitModel.model_config()), with random
    weights: the caller then loads the safetensors."""
    from transformers import AutoConfig, AutoModel

    from eebench.methods.base import get_method
    from eebench.models.build import assemble, check_attn
    from eebench.models.pooling import POOLINGS

    try:
        backbone = dict(cfg["backbone_config"])
        config = AutoConfig.for_model(backbone.pop("model_type"), **backbone)
        config.num_hidden_layers = int(cfg["num_layers"])
        attn = cfg.get("attn_implementation", "eager")
        method = get_method(cfg["method"], **cfg.get("method_settings", {}))
        num_labels, exit_layers = int(cfg["num_labels"]), tuple(cfg["exit_layers"])
        pooling = str(cfg.get("pooling", "cls"))  # version 1 configs pooled [CLS]
    except (KeyError, TypeError, ValueError) as e:
        raise DataError(f"model config is incomplete or malformed: {e!r}") from None
    check_attn(attn)
    if pooling not in POOLINGS:
        raise DataError(f"model config has an unknown pooling {pooling!r}")
    hf = AutoModel.from_config(config, attn_implementation=attn)
    model = assemble(hf, method, num_labels, config.num_hidden_layers, pooling)
    if model.exit_layers != exit_layers:
        raise DataError(f"model config exit layers {list(exit_layers)} do not match what "
                        f"method {method.name!r} builds: {list(model.exit_layers)}")
    model.source = cfg.get("source")
    return model


def model_slug(backbone: str) -> str:
    """A directory name for a backbone: a registry name as is, a local path by its folder name."""
    p = Path(backbone)
    if p.is_dir():
        return p.resolve().name
    return backbone.strip("/").replace("/", "--") or "model"


def checkpoint_path(out_dir: Path, backbone: str, method: str, task: str, key: str) -> Path:
    return Path(out_dir) / model_slug(backbone) / method / task / key


@contextmanager
def hold_interrupts() -> Iterator[None]:
    """Hold Ctrl-C, and SIGTERM where it interrupts too (`eebench.errors.Terminated`), until the
    block ends, so an optimizer step or a save is never half done; then the signal goes to the
    handler it was held from (`_deliver`)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    from eebench.errors import terminates_as_interrupt

    held = [signal.SIGINT] + ([signal.SIGTERM] if terminates_as_interrupt() else [])
    caught: list[int] = []
    previous = {s: signal.signal(s, lambda signum, frame: caught.append(signum)) for s in held}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if caught:
            _deliver(signal.SIGTERM if signal.SIGTERM in caught else signal.SIGINT, previous)


def _deliver(signum: int, previous: dict[int, Any]) -> None:
    """A held signal, given to the handler it was held from: the command line's interrupts once
    (`eebench.errors.terminate_as_interrupt`: then both signals are ignored, and a save under
    way is not cut short), Python's own raises KeyboardInterrupt, an ignored signal stays
    ignored."""
    from eebench.errors import Terminated

    handler = previous[signum]
    if callable(handler):
        handler(signum, None)
    elif handler != signal.SIG_IGN:
        raise Terminated if signum == signal.SIGTERM else KeyboardInterrupt


def rng_state(device: str) -> dict[str, torch.Tensor]:
    import torch

    state = {"torch_cpu": torch.get_rng_state()}
    if device.startswith("cuda"):
        state["torch_cuda"] = torch.cuda.get_rng_state(device)
    return state


def set_rng_state(state: dict[str, torch.Tensor], device: str) -> None:
    import torch

    torch.set_rng_state(state["torch_cpu"])
    if device.startswith("cuda") and "torch_cuda" in state:
        torch.cuda.set_rng_state(state["torch_cuda"], device)
