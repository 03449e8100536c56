"""Results are data: the files of a run directory, each with its own schema_version.

A run directory `runs/<model>/<method>/<task>/<config-hash>/` holds

- `config.json`        RunConfig: everything that determines the results (its hash names the dir)
- `env.json`           hardware and software versions (written by eebench.measure.env)
- `points.jsonl`       one OperatingPoint per line, one per sweep value
- `predictions.safetensors`  per-sample arrays (no pickle): `labels` [N] (absent for unlabelled
                       test splits), `exit_layer` [P, N] (1-based), `prediction` [P, N] (label id,
                       or the score for regression), `exit_logits` [E, N, C]; row p of the
                       [P, N] arrays belongs to line p of points.jsonl
- `ids.txt`            the sample ids in array order, one per line (a test file's index column,
                       else the row number in the split)
- `summary.json`       RunSummary: the run at a glance

Metrics are in percent (ELUE's unit), FLOPs are per sample with the convention recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from eebench.io import atomic_write_text, config_hash

SCHEMA_VERSION = 1

CONFIG_FILE = "config.json"
ENV_FILE = "env.json"
POINTS_FILE = "points.jsonl"
PREDICTIONS_FILE = "predictions.safetensors"
IDS_FILE = "ids.txt"
SUMMARY_FILE = "summary.json"


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())


class Timing(_Data):
    """Measured wall time of real dynamic inference at one batch size (raw values kept)."""

    device: str  # e.g. "cpu (8 threads)" or "cuda: NVIDIA H100"
    batch_size: int
    mode: str  # "dynamic" (exits taken) or "full" (no exit, the baseline)
    latency_ms: dict[str, float] = Field(default_factory=dict)  # p50/p90/p99/mean/std per batch
    throughput: float | None = None  # samples per second
    peak_memory_mb: float | None = None
    raw_ms: list[float] = Field(default_factory=list)


class OperatingPoint(_Data):
    schema_version: int = SCHEMA_VERSION
    method: str
    task: str
    split: str
    seed: int
    sweep_param: str  # e.g. "threshold", "patience", "layers"
    sweep_value: float
    n_samples: int
    num_layers: int  # layers of the full model
    metrics: dict[str, float] = Field(default_factory=dict)  # percent; empty for unlabelled splits
    main_metric: str
    main: float | None  # metrics[main_metric]
    avg_exit_layer: float
    exit_histogram: list[int]  # samples exiting at layer 1..num_layers
    flops_convention: str
    mean_flops: float  # FLOPs per sample, summed along each sample's executed path
    mean_mflops: float
    speedup: float  # num_layers / avg_exit_layer
    layer_saving: float  # 1 - avg_exit_layer / num_layers
    params_total: int
    params_mean_used: float  # parameters touched, averaged over samples
    timings: list[Timing] = Field(default_factory=list)
    disagreements: int | None = None  # samples where real dynamic inference decided otherwise
    disagreements_near_threshold: int | None = None


class RunConfig(_Data):
    schema_version: int = SCHEMA_VERSION
    model: str
    # How the exit heads pool the tokens, "cls" or "mean": resolved (the backbone's own pooling
    # unless the user chose), never None. Runs written before it was recorded pooled [CLS].
    pooling: str = "cls"
    method: str
    method_settings: dict[str, Any] = Field(default_factory=dict)
    task: str
    split: str
    seed: int
    sweep: list[float]
    train: dict[str, Any] = Field(default_factory=dict)
    max_seq_length: int
    max_eval_samples: int | None = None
    flops_convention: str
    timing: dict[str, Any] = Field(default_factory=dict)

    def key(self) -> str:
        """Hash of everything that determines the results: names the run directory."""
        return config_hash(self.model_dump(mode="json"))


class RunSummary(_Data):
    schema_version: int = SCHEMA_VERSION
    model: str
    method: str
    task: str
    split: str
    seed: int
    config_hash: str
    n_samples: int
    num_points: int
    full_model: dict[str, Any] = Field(default_factory=dict)  # the last layer's metrics and FLOPs
    best_main: float | None = None
    checkpoints: list[str] = Field(default_factory=list)
    finished: bool = True


def write_points(path: Path, points: list[OperatingPoint]) -> None:
    atomic_write_text(path, "".join(p.model_dump_json() + "\n" for p in points))


def read_points(path: Path) -> list[OperatingPoint]:
    from eebench.errors import DataError

    points = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                points.append(OperatingPoint.model_validate_json(line))
            except ValueError as e:
                first = str(e).splitlines()
                raise DataError(
                    f"{path}:{n}: not a valid operating point: {' '.join(first[:3])}"
                ) from None
    return points
