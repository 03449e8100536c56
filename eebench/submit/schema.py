"""The leaderboard submission, defined once: pydantic models, the JSON Schema exported from them.

A submission is one model with one early-exit method, on one or more tasks and seeds: every
operating point of every run, with enough provenance (model hash, data file hashes, per-sample
prediction hashes, hardware, versions) for someone else to check where each number came from.

Why so strict: a leaderboard reads files from anyone. Unknown fields are refused (`extra="forbid"`),
types are not coerced (`strict`: "3" is not a number, true is not an integer), and floats must be
finite (NaN and infinity would poison every mean computed over them). Field constraints that JSON
Schema can express (FLOPs > 0, metrics within [-100, 100]) live here, so the exported schema carries
them; checks across fields (a histogram that adds up, FLOPs that grow with depth) are in
eebench.submit.validate.

`SUBMISSION_SCHEMA_VERSION` is this file's own constant, never the package version: it changes
only when the format does.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    field_validator,
)

SUBMISSION_SCHEMA_VERSION = 1
SCHEMA_ID = "https://eebench.dev/leaderboard/schema.json"
FLOPS_UNIT = "FLOPs per sample"

Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$", description="hex sha256 digest")]
Name = Annotated[str, Field(min_length=1, max_length=200)]
Text = Annotated[str, Field(max_length=2000)]
Percent = Annotated[float, Field(ge=-100, le=100, description="percent")]
Count = Annotated[int, Field(ge=0)]
Scalar = StrictStr | StrictInt | StrictFloat | StrictBool | None


class _Strict(BaseModel):
    model_config = ConfigDict(
        extra="forbid", strict=True, allow_inf_nan=False, protected_namespaces=()
    )


class ModelInfo(_Strict):
    """The backbone: its name as given to `eebench run --model`, and what identifies the weights."""

    name: Name
    source: Literal["local", "hub"]  # a local directory, or a Hugging Face hub id
    revision: Text | None = None  # hub revision (commit), when known
    local_sha256: Sha256 | None = Field(
        default=None,
        description="sha256 over config.json and the *.safetensors files of a local model "
        "directory (each file's name and bytes, in name order); null for a hub model",
    )
    num_layers: int = Field(ge=1)
    params: int = Field(gt=0, description="parameters of the largest model in the submission")
    pooling: Literal["cls", "mean"] = Field(
        description="what the exit heads read: the [CLS] state, or the mean over real tokens")


class MethodInfo(_Strict):
    name: Name
    sweep_param: Name  # e.g. "threshold", "patience", "layers"
    settings: dict[str, Scalar | list[Scalar]] = Field(default_factory=dict)


class FlopsInfo(_Strict):
    convention: Name  # e.g. "mac2-matmul": see docs/flops.md
    counter: Text  # how FLOPs were counted
    unit: Literal["FLOPs per sample"] = FLOPS_UNIT


class Timing(_Strict):
    """Wall time of real inference at one batch size (summary statistics, no raw values)."""

    mode: Literal["dynamic", "full"]  # exits taken, or the full model without exits
    batch_size: int = Field(ge=1)
    device: Text
    latency_ms: dict[str, Annotated[float, Field(ge=0)]]  # p50/p90/p99/mean/std/min/max
    throughput: Annotated[float, Field(gt=0)] | None = None  # samples per second
    peak_memory_mb: Annotated[float, Field(ge=0)] | None = None


class OperatingPoint(_Strict):
    """One sweep value of one run: its metrics, its cost and where its samples exited."""

    sweep_value: float
    metrics: dict[str, Percent]
    main: Percent  # metrics[main_metric]
    mean_flops: float = Field(gt=0)
    mean_mflops: float = Field(gt=0)
    params_total: int = Field(gt=0)
    params_mean_used: float = Field(gt=0)
    avg_exit_layer: float = Field(ge=1)
    exit_histogram: list[Count] = Field(min_length=1)  # samples exiting at layer 1..num_layers
    timings: list[Timing] = Field(default_factory=list)


class RunEntry(_Strict):
    """One run directory (one seed) of one task."""

    seed: int
    config_hash: Annotated[str, Field(pattern=r"^[0-9a-f]{6,64}$")]
    n_samples: int = Field(ge=1)
    predictions_sha256: Sha256  # of its predictions.safetensors
    environment: int = Field(ge=0)  # index into Submission.environments
    points: list[OperatingPoint] = Field(min_length=1)


class DataFile(_Strict):
    split: Name
    source: Literal["local", "hub"]
    path: Text  # relative to the data directory, or "<hub path>/<config>:<split>"
    sha256: Sha256 | None = None  # null when loaded from the hub (or the data dir was not given)


class TaskEntry(_Strict):
    split: Name
    main_metric: Name
    metrics: list[Name] = Field(min_length=1)
    num_layers: int = Field(ge=1)
    data_files: list[DataFile] = Field(default_factory=list)
    runs: list[RunEntry] = Field(min_length=1)


class Gpu(_Strict):
    name: Text
    count: int = Field(ge=1)
    memory_gb: Annotated[float, Field(ge=0)] | None = None
    driver: Text | None = None
    cuda: Text | None = None


class Environment(_Strict):
    """Where runs were measured (from their env.json)."""

    cpu: Text | None = None
    cpu_cores: Annotated[int, Field(ge=1)] | None = None
    torch_threads: Annotated[int, Field(ge=1)] | None = None
    gpu: Gpu | None = None
    os: Text | None = None
    python: Text | None = None
    packages: dict[str, Text | None] = Field(default_factory=dict)
    git_commit: Text | None = None  # of the eebench source the runs used
    git_dirty: bool | None = None


class EebenchInfo(_Strict):
    """The eebench that built this file."""

    version: Name
    git_commit: Text | None = None
    git_dirty: bool | None = None


class EluScore(_Strict):
    """Mean metric above the reference curve at equal FLOPs (docs/scoring.md), per task."""

    reference: Name
    reference_model: Text
    extrapolate: Literal["clamp", "linear"]
    tasks: dict[str, float] = Field(min_length=1)
    overall: float


class Submission(_Strict):
    schema_version: int = Field(
        default=SUBMISSION_SCHEMA_VERSION, json_schema_extra={"const": SUBMISSION_SCHEMA_VERSION}
    )
    name: Name
    created: Annotated[str, Field(max_length=40)]  # UTC, ISO 8601
    model: ModelInfo
    method: MethodInfo
    flops: FlopsInfo
    seeds: list[int] = Field(min_length=1)
    tasks: dict[str, TaskEntry] = Field(min_length=1)
    environments: list[Environment] = Field(min_length=1)
    eebench: EebenchInfo
    elue: EluScore | None = None

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, v: int) -> int:
        if v != SUBMISSION_SCHEMA_VERSION:
            raise ValueError(f"schema_version {v} is not supported (this eebench reads "
                             f"{SUBMISSION_SCHEMA_VERSION})")
        return v


def json_schema() -> dict:
    """The JSON Schema of a submission file (what `eebench leaderboard schema` writes)."""
    schema = Submission.model_json_schema()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "eebench leaderboard submission",
        "description": f"schema_version {SUBMISSION_SCHEMA_VERSION}; generated from "
                       "eebench/submit/schema.py by `eebench leaderboard schema`",
        **{k: v for k, v in schema.items() if k not in ("title", "description")},
    }


def json_schema_text() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
