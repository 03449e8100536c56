"""The committed benchmark results that the audit tier (`python -m pytest -m audit`) checks.

Every run directory under benchmarks/results by default. `--audit-since REV` (or the variable
EEBENCH_AUDIT_SINCE=REV) narrows the per-run audits to the run directories with a file changed
since git revision REV: committed since, changed in the working tree, or new and not yet
committed. Committing a few finished runs then audits those runs, not the four hundred before
them; CI audits everything.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SINCE = "EEBENCH_AUDIT_SINCE"


def since() -> str | None:
    """The revision the audits are narrowed to, or None: every committed run."""
    return os.environ.get(SINCE) or None


def _git(*args: str) -> list[str]:
    out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        raise ValueError(out.stderr.strip() or f"git {' '.join(args)} found none")
    return [line for line in out.stdout.splitlines() if line]


def check_revision(rev: str) -> None:
    """Raises ValueError (with git's reason) unless `rev` names a commit of this repository."""
    _git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")


@cache
def changed_since(rev: str) -> frozenset[Path]:
    """The directories under benchmarks/results holding a file changed or added since `rev`."""
    where = str(RESULTS.relative_to(ROOT))
    files = _git("diff", "--name-only", rev, "--", where) + _git(
        "ls-files", "--others", "--exclude-standard", "--", where)
    return frozenset((ROOT / f).parent for f in files)


def audited(run_dirs: Iterable[Path]) -> list[Path]:
    """Of `run_dirs`, those the audit covers: all of them, or those changed since `since()`."""
    rev = since()
    dirs = sorted(run_dirs)
    return dirs if rev is None else [d for d in dirs if d in changed_since(rev)]


def is_decoder(run_dir: Path) -> bool:
    """Whether a committed run directory is a decoder run (`eebench decode`, its config says
    `"kind": "decoder"`): tests/test_decoder_audit.py audits those, the encoder audits pass over
    them."""
    from eebench.score.collect import is_decoder_run

    return is_decoder_run(run_dir)


def decoder_runs(narrowed: bool = True) -> list[Path]:
    """Every committed decoder run directory (narrowed as `audited` narrows, unless not
    `narrowed`: a check that the benchmark is whole reads them all)."""
    dirs = sorted(p.parent for p in RESULTS.rglob("config.json") if is_decoder(p.parent))
    return audited(dirs) if narrowed else dirs

