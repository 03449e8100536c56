"""The files report blocks write beside the documents: submissions (kept byte for byte when only
their making changed) and the ELUE test files of test-split runs."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from eebench.errors import DataError
from eebench.io import sha256_file
from eebench.run.artifacts import SUMMARY_FILE, verify_run
from eebench.submit.build import write_submission
from eebench.submit.export_elue import export_elue

# What says when and by which eebench a submission was made, not what it measured.
MAKING = ("created", "eebench")


def same_numbers(a: Any, b: Any, rel: float = 1e-9) -> bool:
    """Equal JSON values, floats equal up to `rel` (the last bits of a sum in another order)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_numbers(a[k], b[k], rel) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(same_numbers, a, b))
    if type(a) is float or type(b) is float:
        return {type(a), type(b)} <= {int, float} and math.isclose(a, b, rel_tol=rel)
    return a == b


def write_submission_if_changed(sub, path: Path) -> bool:
    """Write `sub` to `path` unless the file there says the same but for when and by which eebench
    it was made, and floats' last bits; True when written."""
    def measured(data):
        return {k: v for k, v in data.items() if k not in MAKING}

    old = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    if isinstance(old, dict) and same_numbers(measured(old),
                                              measured(json.loads(sub.model_dump_json()))):
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    write_submission(sub, path)
    return True


MANIFEST_FILE = "export-manifest.json"
# 1: a list of the exported files; 2: every test-split run, what made it, and its files
MANIFEST_SCHEMA_VERSION = 2


def export_tests(ctx, runs, out: str) -> None:
    """Every finished test-split run under `runs.folder` exported as ELUE test files into
    `out/<method>/`, and a manifest written as `export-manifest.json` in the runs' folder: every
    run, with what made it (`manifest_entry`) and its files. A run whose rows do not cover its
    test split stops it."""
    entries, folder = [], ctx.path(runs.folder)
    for summary in sorted(folder.rglob(SUMMARY_FILE)) if folder.is_dir() else []:
        run = verify_run(summary.parent)  # unlabelled: verified, not loaded for scoring
        exp = export_elue(run.path, ctx.path(out) / run.config.method)
        if not exp.complete:
            raise DataError(f"{run.path}: {exp.rows} test rows, expected {exp.expected_rows}")
        entries.append(manifest_entry(ctx.root, run, exp))
    manifest = {"schema_version": MANIFEST_SCHEMA_VERSION, "runs": entries}
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest, indent=1) + "\n")
    n = sum(len(e["files"]) for e in entries)
    ctx.say(f"exported {n} ELUE test files of {len(entries)} test-split runs to {out}")


def manifest_entry(root: Path, run, exp) -> dict[str, Any]:
    """One test-split run of the manifest: its method (and rule), task, seed and key; for a
    twin made beside its dev run (`--test-out`), the dev run's key and the checkpoints both read,
    so that a test score can be traced to the dev run and models it belongs to; and each file
    written (rows, sweep value, sha256)."""
    cfg, made = run.config, run.summary.provenance
    entry: dict[str, Any] = {"run": str(run.path.relative_to(root)), "method": cfg.method}
    if cfg.rule is not None:
        entry["rule"] = cfg.rule
    entry |= {"task": cfg.task, "seed": cfg.seed, "key": run.path.name}
    if made is not None:
        entry["provenance"] = made.model_dump(mode="json")
    entry["files"] = [{"file": str(Path(f.path).relative_to(root)), "rows": f.rows,
                       "sweep": f"{f.sweep_param}={f.sweep_value:g}",
                       "avg_exit_layer": round(f.avg_exit_layer, 4),
                       "mean_mflops": round(f.mean_mflops, 3), "sha256": sha256_file(f.path)}
                      for f in exp.files]
    return entry
