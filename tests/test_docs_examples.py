"""Every ```python block in docs/*.md runs as written, each in a fresh interpreter (so that what
one registers does not reach another), in an empty directory. A block that cannot run here (it
needs real runs, a download or a plugin installed) is marked by the line before it:
`<!-- not run: why -->`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _blocks() -> list:
    out = []
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
            marks = [pytest.mark.skip(reason=before.strip())] \
                if before.startswith("<!-- not run") else []
            out.append(pytest.param(m.group(1), id=f"{page.name}:{line}", marks=marks))
    return out


BLOCKS = _blocks()


def test_the_docs_have_examples_and_few_are_not_run():
    run = [b for b in BLOCKS if not b.marks]
    assert len(BLOCKS) >= 8 and len(run) >= 4


@pytest.mark.slow  # each in a fresh interpreter: torch and eebench imported anew
@pytest.mark.parametrize("code", BLOCKS)
def test_a_docs_example_runs(code, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(DOCS.parent)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
