"""Results are data: the files of a run directory, each with its own schema_version.

A run directory `runs/<model>/<method>[+<rule>]/<task>/<config-hash>/` holds

- `config.json`        RunConfig: everything that determines the results (its hash names the dir)
- `env.json`           hardware and software versions (written by eebench.measure.env)
- `points.jsonl`       one OperatingPoint per line, one per sweep value (its named values)
- `predictions.safetensors`  per-sample arrays (no pickle): `labels` [N] (absent for unlabelled
                       test splits), `exit_layer` [P, N] (1-based), `prediction` [P, N] (label id,
                       or the score for regression), `exit_logits` [E, N, C]; row p of the
                       [P, N] arrays belongs to line p of points.jsonl
- `ids.txt`            the sample ids in array order, one per line (a test file's index column,
                       else the row number in the split)
- `summary.json`       RunSummary: the run at a glance, and its variants: the models it trained
                       (one for a joint method, one per k for static), each with its exit
                       layers, what a sample exiting at each ran (`exit_paths`: the complete
                       models run in turn, their layers and heads), hidden size, pooling and
                       the key of its logits
                       (`exit_logits` [E, N, C], or `exit_logits_<variant>` per variant),
                       the temperatures and settings its rule read; and the rule itself (its
                       name, comparison, its own settings, whether the task is a regression).
                       With each point's
                       sweep value and the stored logits and signals (`<logits key>.<signal>`
                       [E, N]), that is everything needed to rebuild every stored decision from
                       the directory alone (eebench.run.rederive); and the sha256 of its samples
                       (ids with their texts), which `eebench analyze` checks texts against;
                       a test-split twin (`--test-out`) also names its dev twin and the
                       checkpoints both read (`provenance`)

Metrics are in percent (ELUE's unit), FLOPs are per sample with the convention recorded.
Runs written by earlier versions are read through `upgrade`, the one place that knows their
formats: everything else sees today's schemas.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from eebench.errors import DataError, one_line
from eebench.io import (
    atomic_write_text,
    read_json,
    read_model,
    read_text,
    sha256_file,
    validated,
)
from eebench.methods.base import JOINT
from eebench.run.records import (
    CONFIG_SCHEMA_VERSION,
    MAX_FLOPS,
    POINTS_SCHEMA_VERSION,
    SUMMARY_SCHEMA_VERSION,
    ModelOrigin,
    ModelRun,
    OperatingPoint,
    Provenance,
    RuleRecord,
    RunConfig,
    RunSummary,
    Timing,
    VariantRecord,
    sweep_number,
)
from eebench.run.upgrade import upgrade  # the one place that knows earlier formats

# The records of config.json, points.jsonl and summary.json are in eebench.run.records (beside
# eebench.run.upgrade, which reads earlier versions of them); read and written here.
__all__ = [
    "CONFIG_FILE", "CONFIG_SCHEMA_VERSION", "ENV_FILE", "IDS_FILE", "MAX_FLOPS", "POINTS_FILE",
    "POINTS_SCHEMA_VERSION", "PREDICTIONS_FILE", "SUMMARY_FILE", "SUMMARY_SCHEMA_VERSION",
    "VOUCHED_FILES", "ModelOrigin", "ModelRun", "OperatingPoint", "Provenance", "RuleRecord",
    "RunConfig", "RunFiles", "RunSummary", "Timing", "VariantRecord", "file_hashes", "ids_text",
    "logits_key", "read_run", "samples_hash", "sweep_number", "verify_run", "write_points",
]

M = TypeVar("M", bound=BaseModel)

CONFIG_FILE = "config.json"
ENV_FILE = "env.json"
POINTS_FILE = "points.jsonl"
PREDICTIONS_FILE = "predictions.safetensors"
IDS_FILE = "ids.txt"
SUMMARY_FILE = "summary.json"


VOUCHED_FILES = (CONFIG_FILE, ENV_FILE, POINTS_FILE, PREDICTIONS_FILE, IDS_FILE)


def file_hashes(run_dir: Path) -> dict[str, str]:
    """The sha256 of every file a finished run's summary vouches for."""
    return {name: sha256_file(run_dir / name) for name in VOUCHED_FILES}


def verify_run(run_dir: Path) -> RunFiles:
    """A finished run, checked rather than trusted: the one way a run is read for a result (its
    score, figures, reference curve, submission, export). Its summary is present (a run without
    one is unfinished: its files may be from an attempt that stopped half-way) and every file
    parses and matches the sha256 the summary recorded, so a points.jsonl edited by hand is
    refused rather than scored (runs from before hashes were recorded: every file present, the
    arrays readable). A damaged or unfinished run is one line naming the file."""
    hint = "rerun with --overwrite to redo it"
    run_dir = Path(run_dir)
    require_run_dir(run_dir)  # not a run at all: not "damaged"
    if not (run_dir / SUMMARY_FILE).exists():
        raise DataError(f"{run_dir / SUMMARY_FILE}: missing: the run is unfinished",
                        hint="finish it with the same `eebench run` command")
    try:
        run = read_run(run_dir)
    except DataError as e:
        raise DataError(f"finished run damaged: {e.message}", hint=hint) from None
    recorded = run.summary.files if run.summary is not None else {}
    for name in VOUCHED_FILES:
        path = run_dir / name
        if not path.is_file():
            raise DataError(f"{path}: missing from a finished run", hint=hint)
        if name in recorded and sha256_file(path) != recorded[name]:
            raise DataError(f"{path}: does not match the sha256 its run's {SUMMARY_FILE} "
                            "recorded (changed or truncated)", hint=hint)
    if PREDICTIONS_FILE not in recorded:
        _check_arrays(run_dir / PREDICTIONS_FILE, hint)
    return run


def _check_arrays(path: Path, hint: str) -> None:
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="numpy") as f:
            for key in f.keys():
                f.get_tensor(key)
    except Exception as e:  # safetensors raises its own error types for a damaged file
        raise DataError(f"{path}: not a readable safetensors file ({_short(e)})",
                        hint=hint) from None


def _short(e: BaseException) -> str:
    return one_line(e, limit=160)


def ids_text(ids: list[str], source: str) -> str:
    """ids.txt: one sample id a line. An id with a tab or a line break would shift every row of
    the files made from it (ELUE's TSV exports): refused, naming where the ids came from."""
    for row, i in enumerate(ids):
        if "\t" in i or "\n" in i or "\r" in i:
            raise DataError(f"{source}: sample id {i!r} (row {row + 1}) holds a tab or line break",
                            hint="ids are written one a line into tab-separated files")
    return "".join(f"{i}\n" for i in ids)


def samples_hash(ids: list[str], texts: list[tuple[str, ...]]) -> str:
    """The sha256 of a run's samples: each id with its texts, one JSON line each, in array order
    (ids.txt's order). Row numbers alone would match any other file of as many rows."""
    import hashlib

    digest = hashlib.sha256()
    for i, text in zip(ids, texts, strict=True):
        digest.update(json.dumps([str(i), list(text)], ensure_ascii=False).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def logits_key(variant: str, count: int) -> str:
    """Where a variant's exit logits go: `exit_logits` for the one variant of a joint method,
    `exit_logits_<variant>` where a run trains several."""
    return "exit_logits" if count == 1 and variant == JOINT else f"exit_logits_{variant}"


def write_points(path: Path, points: list[OperatingPoint]) -> None:
    atomic_write_text(path, "".join(p.model_dump_json() + "\n" for p in points))


@dataclass
class RunFiles:
    """A run directory's config, points and summary (None while the run is unfinished), in
    today's schemas."""

    path: Path
    config: RunConfig
    points: list[OperatingPoint]
    summary: RunSummary | None


def read_run(run_dir: Path) -> RunFiles:
    """Read a run directory, upgrading what an earlier version wrote; one line per problem."""
    run_dir = Path(run_dir)
    require_run_dir(run_dir)
    config = read_model(run_dir / CONFIG_FILE, RunConfig)
    lines = _read_lines(run_dir / POINTS_FILE)
    summary_path = run_dir / SUMMARY_FILE
    summary = read_json(summary_path) if summary_path.exists() else None
    points, summary = upgrade(config, [data for _, data in lines], summary)
    parsed = [validated(OperatingPoint, data, f"{run_dir / POINTS_FILE}:{n}")
              for (n, _), data in zip(lines, points, strict=True)]
    return RunFiles(run_dir, config, parsed,
                    None if summary is None else validated(RunSummary, summary, summary_path))


def require_run_dir(path: Path) -> None:
    """One line when `path` is not a run directory at all: missing, a file, or a folder of runs
    (which names one of them)."""
    if not path.exists():
        raise DataError(f"{path}: no such run directory")
    if not path.is_dir():
        raise DataError(f"{path}: not a run directory (a file)")
    if (path / CONFIG_FILE).is_file():
        return
    inside = next(path.rglob(POINTS_FILE), None)  # the first run found below, if any
    if inside is not None:
        raise DataError(f"{path}: not a run directory but a folder of runs",
                        hint=f"pass one of them, e.g. {inside.parent}")
    raise DataError(f"{path}: not a run directory (no {CONFIG_FILE})")


def _read_lines(path: Path) -> list[tuple[int, dict]]:
    from pydantic_core import from_json  # parses a point's line about 3x faster than json

    out = []
    for n, line in enumerate(read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = from_json(line)
        except ValueError:
            try:  # json's message names what is wrong the way every other refusal does
                data = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"{path}:{n}: not JSON ({e.msg})") from None
        if not isinstance(data, dict):
            raise DataError(f"{path}:{n}: not a JSON object")
        out.append((n, data))
    return out
