"""The decoder kind of leaderboard submission (`"kind": "decoder"`, its own schema_version):
the model's shapes, its exits, and every point of every decoder run per task
(eebench.submit.decoder builds one, eebench.submit.decoder_check checks what the schema cannot)."""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import Field, StrictFloat, StrictInt, field_validator

from eebench.submit.schema import (
    MAX_ITEMS,
    MAX_LAYERS,
    MAX_METRICS,
    MAX_PARAMS_PER_POINT,
    MAX_POINTS,
    MAX_RUNS,
    MAX_SAMPLES,
    MAX_TASKS,
    Created,
    EebenchInfo,
    Environment,
    Key,
    Name,
    Seed,
    Sha256,
    Share,
    Size,
    StrictModel,
    Text,
    json_schema,
)

DECODER_SCHEMA_VERSION = 1
DECODER_FLOPS_UNIT = "FLOPs per token"
# a percent, or a perplexity: the exp of a mean NLL, which a logit-lens exit in the first layers
# puts in the billions or far beyond (SmolLM2's layer 6 on IMDb: 3.0e9), so only finite is asked
DecoderMetric = Annotated[float, Field(ge=0, le=1e300)]


class DecoderShapeInfo(StrictModel):
    """The causal LM's config numbers its FLOPs are counted from (eebench.measure.decoder_flops)."""

    layers: int = Field(ge=1, le=MAX_LAYERS)
    hidden: Size
    heads: Size
    kv_heads: Size
    head_dim: Size
    intermediate: Size
    vocab: Annotated[int, Field(ge=1, le=10**8)]


class DecoderModelInfo(StrictModel):
    name: Name
    source: Literal["local", "hub"]
    local_sha256: Sha256 | None = None
    shape: DecoderShapeInfo
    exit_layers: list[Annotated[int, Field(ge=1, le=MAX_LAYERS)]] = Field(
        min_length=1, max_length=MAX_LAYERS)
    head: Literal["lens", "adapter"]  # the logit lens, or trained adapter exits
    rank: Size | None = None  # an adapter's bottleneck (null for the lens)


class DecoderPointEntry(StrictModel):
    """One operating point of one method (eebench.run.decoding.DecoderPoint's numbers)."""

    method: Name
    setting: dict[Key, StrictInt | StrictFloat | Text] = Field(max_length=MAX_PARAMS_PER_POINT)
    metrics: dict[Key, DecoderMetric] = Field(min_length=1, max_length=MAX_METRICS)
    main: DecoderMetric
    flops_per_token: float = Field(gt=0, le=1e18)
    mflops_per_token: float = Field(gt=0)
    flops_speedup: float = Field(gt=0)  # the full model's FLOPs per token over this point's
    n_samples: int = Field(ge=1, le=MAX_SAMPLES)
    n_tokens: int = Field(ge=1, le=MAX_SAMPLES)
    mean_exit_layer: Annotated[float, Field(ge=1, le=MAX_LAYERS)] | None = None
    acceptance_rate: Share | None = None


class DecoderRunEntry(StrictModel):
    """One decoder run directory (one data seed) of one task."""

    seed: Seed
    config_hash: Annotated[str, Field(pattern=r"^[0-9a-f]{6,64}$")]
    decoding: Literal["greedy", "teacher-forced"]
    new_tokens: Size | None = Field(default=None, description="tokens generated per sample "
                                    "(greedy); null for teacher-forced runs")
    sample_ids: list[Name] = Field(min_length=1, max_length=MAX_POINTS * 100)
    sample_tokens: list[Size] = Field(min_length=1, max_length=MAX_POINTS * 100, description=(
        "tokens of each sample in sample_ids' order: a prompt, or a teacher-forced text"))
    points_sha256: Sha256  # of its points.jsonl
    environment: int = Field(ge=0, lt=MAX_ITEMS)
    points: list[DecoderPointEntry] = Field(min_length=1, max_length=MAX_POINTS)


class DecoderTaskEntry(StrictModel):
    split: Name
    main_metric: Name
    metrics: list[Name] = Field(min_length=1, max_length=MAX_METRICS)
    runs: list[DecoderRunEntry] = Field(min_length=1, max_length=MAX_RUNS)


class DecoderSubmission(StrictModel):
    """A decoder submission: one causal LM's exits, every method of its runs."""

    kind: Literal["decoder"]
    schema_version: int = Field(default=DECODER_SCHEMA_VERSION,
                                json_schema_extra={"const": DECODER_SCHEMA_VERSION})
    name: Name
    created: Created
    model: DecoderModelInfo
    flops_convention: Name
    flops_unit: Literal["FLOPs per token"] = DECODER_FLOPS_UNIT
    seeds: list[Seed] = Field(min_length=1, max_length=MAX_ITEMS)
    tasks: dict[Key, DecoderTaskEntry] = Field(min_length=1, max_length=MAX_TASKS)
    environments: list[Environment] = Field(min_length=1, max_length=MAX_ITEMS)
    eebench: EebenchInfo

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, v: int) -> int:
        if v != DECODER_SCHEMA_VERSION:
            raise ValueError(f"decoder schema_version {v} is not supported (this eebench reads "
                             f"{DECODER_SCHEMA_VERSION})")
        return v


DECODER_SCHEMA_ID = "https://eebench.dev/leaderboard/decoder-schema.json"


def json_schema_text() -> str:
    """The JSON Schema of a decoder submission (`eebench leaderboard schema --kind decoder`)."""
    schema = json_schema(DecoderSubmission, schema_id=DECODER_SCHEMA_ID,
                         title="eebench leaderboard decoder submission",
                         version=DECODER_SCHEMA_VERSION,
                         source="eebench/submit/decoder_schema.py", command=" --kind decoder")
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"
