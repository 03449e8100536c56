"""Files the tests write: a data directory's file under a root, its parents made."""

from __future__ import annotations

from pathlib import Path


def write_file(root: Path, rel: str, text: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path
