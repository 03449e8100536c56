"""The files report blocks write beside the documents: submissions (kept byte for byte when only
their making changed) and the ELUE test files of test-split runs."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from eebench.errors import DataError
from eebench.run.artifacts import SUMMARY_FILE, read_run
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


def export_tests(ctx, runs, out: str) -> None:
    """Every finished test-split run under `runs.folder` exported as ELUE test files into
    `out/<method>/`, and a manifest of the files (rows, sweep value, sha256) written as
    `export-manifest.json` in the runs' folder. A run whose rows do not cover its test split
    stops it."""
    import hashlib

    manifest, folder = [], ctx.path(runs.folder)
    for summary in sorted(folder.rglob(SUMMARY_FILE)) if folder.is_dir() else []:
        run = summary.parent  # test splits are unlabelled: read, not loaded for scoring
        exp = export_elue(run, ctx.path(out) / read_run(run).config.method)
        if not exp.complete:
            raise DataError(f"{run}: {exp.rows} test rows, expected {exp.expected_rows}")
        for f in exp.files:
            digest = hashlib.sha256(Path(f.path).read_bytes()).hexdigest()
            manifest.append({"run": str(run.relative_to(ctx.root)), "file":
                             str(Path(f.path).relative_to(ctx.root)), "rows": f.rows,
                             "sweep": f"{f.sweep_param}={f.sweep_value:g}",
                             "avg_exit_layer": round(f.avg_exit_layer, 4),
                             "mean_mflops": round(f.mean_mflops, 3), "sha256": digest})
    path = folder / "export-manifest.json"
    path.write_text(json.dumps(manifest, indent=1) + "\n")
    ctx.say(f"exported {len(manifest)} ELUE test files to {out}")
