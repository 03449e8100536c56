"""The leaderboard submission, defined once: pydantic models, the JSON Schema exported from them.

A submission is one model with one early-exit method, on one or more tasks and seeds: every
operating point of every run, with enough provenance (model hash, data file hashes, per-sample
prediction hashes, hardware, versions) for someone else to check where each number came from.

Why so strict: a leaderboard reads files from anyone. Unknown fields are refused (`extra="forbid"`),
types are not coerced (`strict`: "3" is not a number, true is not an integer), and floats must be
finite (NaN and infinity would poison every mean computed over them). Field constraints that JSON
Schema can express (FLOPs > 0, metrics within [-100, 100]) live here, so the exported schema carries
them; checks across fields (a histogram that adds up, FLOPs that grow with depth, scores that are
what the points give) are in eebench.submit.validate. Every list, dict and string is bounded
(MAX_*), and every integer, so that no file makes the checks or the page do unbounded work.

`SUBMISSION_SCHEMA_VERSION` is this file's own constant, never the package version: it changes
only when the format does. Version 2 added the model's sizes (hidden_size, intermediate_size,
vocab_size, max_position_embeddings, type_vocab_size), each run's token lengths (mean_length,
max_length), the reference's sha256, and made `split` a Literal, `created` a checked ISO 8601
time and `main` null for an unlabelled (test) split; version-1 files are refused (rebuild them
with `eebench submit`). Version 3 names each point's sweep values (`sweep`: {"threshold": 0.3},
PCEE's {"patience": 2, "threshold": 0.3}) where version 2 wrote one number (`sweep_value`, PCEE's
pair packed as 2.3), and records for each run what a sample answered at each exit ran
(`exit_paths`: the complete models in turn, their layers and heads) where version 2 declared only
a cascade's model depths (`chained_models`); version-2 files are read through
eebench.submit.upgrade.

A decoder submission (`"kind": "decoder"`, `DecoderSubmission` in eebench.submit.decoder_schema) is
a kind of its own with its
own `DECODER_SCHEMA_VERSION`, so every encoder file stays valid as it is: one causal LM with its
exits on one or more decoder tasks (eebench.run.decoding), every point of every method of its
runs (the static truncation and the full model included: they are its reference curve), FLOPs
per generated or predicted token, and what `eebench validate` recomputes them from: the model's
shapes (layers, hidden size, heads, key/value heads, head size, intermediate size, vocabulary),
its exit layers and head, each run's sample token lengths and generated tokens per sample.

Every string (names, keys, free text) holds only characters a page or a terminal shows as they
are: a control character (newline, NUL, ESC), a bidirectional override or isolate (U+202E, which
shows a name reversed), another invisible format character (U+200B) or a line separator is
refused, so a name on the leaderboard reads as what it is. No valid file held one, so the version
stays 2.
"""

from __future__ import annotations

import json
import unicodedata
from datetime import datetime
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    field_validator,
)

from eebench.score.policy import EXTRAPOLATE

SUBMISSION_SCHEMA_VERSION = 3
SCHEMA_ID = "https://eebench.dev/leaderboard/schema.json"
FLOPS_UNIT = "FLOPs per sample"

# Size limits: far above any real submission (8 tasks, 3 seeds, 21 points per run), far below
# what would make validating or rendering a file slow.
MAX_TASKS = 64
MAX_RUNS = 64  # per task
MAX_POINTS = 1000  # per run
MAX_LAYERS = 256
MAX_METRICS = 16
MAX_TIMINGS = 16  # per point
MAX_PARAMS_PER_POINT = 8  # named sweep values of one point
MAX_FILES = 16  # data files per task
MAX_ITEMS = 256  # seeds, environments, packages, settings, data files, latency statistics
MAX_SAMPLES = 10**9
MAX_PARAMS = 10**13
MAX_LENGTH = 2**20  # tokens
SEED_MAX = 2**32 - 1  # as eebench.train.config.SEED_MAX

# Characters refused in every string: controls (Cc), invisible format characters (Cf: the
# bidirectional overrides and isolates, zero-width spaces), line and paragraph separators, and
# lone surrogates (which no UTF-8 page can hold).
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def _shown_as_is(text: str) -> str:
    for c in text:
        if unicodedata.category(c) in HIDDEN_CATEGORIES:
            raise ValueError(f"holds the character U+{ord(c):04X} "
                             f"({unicodedata.name(c, 'a control character').lower()}), which "
                             "does not show as it is")
    return text


Shown = AfterValidator(_shown_as_is)
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$", description="hex sha256 digest")]
Name = Annotated[str, Field(min_length=1, max_length=200), Shown]
Text = Annotated[str, Field(max_length=2000), Shown]
Key = Annotated[str, Field(min_length=1, max_length=100), Shown]  # a dict key
Percent = Annotated[float, Field(ge=-100, le=100, description="percent")]
Share = Annotated[float, Field(ge=0, le=100)]  # a share of the samples, in percent
Count = Annotated[int, Field(ge=0, le=MAX_SAMPLES)]
Seed = Annotated[int, Field(ge=0, le=SEED_MAX)]
Size = Annotated[int, Field(ge=1, le=MAX_LENGTH)]  # a model dimension
Scalar = Text | StrictInt | StrictFloat | StrictBool | None


def iso_8601(v: str) -> str:
    """An ISO 8601 date and time with its UTC offset (e.g. 2026-11-24T00:55:42+00:00); the text is
    kept as written."""
    try:
        when = datetime.fromisoformat(v[:-1] + "+00:00" if v.endswith("Z") else v)
    except ValueError:
        raise ValueError("not an ISO 8601 date and time") from None
    if when.tzinfo is None or when.utcoffset() is None:
        raise ValueError("an ISO 8601 time without its UTC offset") from None
    return v


# when a submission was built (every kind's `created`)
Created = Annotated[str, Field(max_length=40, json_schema_extra={"format": "date-time"}),
                    AfterValidator(iso_8601)]


class StrictModel(BaseModel):
    model_config = ConfigDict(
        extra="forbid", strict=True, allow_inf_nan=False, protected_namespaces=()
    )


class ModelInfo(StrictModel):
    """The backbone: its name as given to `eebench run --model`, and what identifies the weights."""

    name: Name
    source: Literal["local", "hub"]  # a local directory, or a Hugging Face hub id
    revision: Text | None = None  # hub revision (commit), when known
    local_sha256: Sha256 | None = Field(
        default=None,
        description="sha256 over config.json and the *.safetensors files of a local model "
        "directory (each file's name and bytes, in name order); null for a hub model",
    )
    num_layers: int = Field(ge=1, le=MAX_LAYERS)
    params: int = Field(gt=0, le=MAX_PARAMS,
                        description="parameters of the largest model in the submission")
    pooling: Literal["cls", "mean"] = Field(
        description="what the exit heads read: the [CLS] state, or the mean over real tokens")
    # The backbone's sizes (its config), from which FLOPs and parameters are bounded.
    hidden_size: Size
    intermediate_size: Size
    vocab_size: Annotated[int, Field(ge=1, le=10**8)]
    max_position_embeddings: Size
    type_vocab_size: Annotated[int, Field(ge=0, le=1024)]  # 0: no token types (DistilBERT, MPNet)
    embedding_size: Size = Field(description="width of the token embeddings: hidden_size, or "
                                             "less where they are projected (ALBERT)")
    distinct_layers: int = Field(ge=1, le=MAX_LAYERS, description=(
        "layers with weights of their own: num_layers, or fewer where layers share their "
        "weights (ALBERT: num_hidden_groups x inner_group_num)"))


class MethodInfo(StrictModel):
    name: Name
    sweep_param: Name  # e.g. "threshold", "patience", "layers"
    settings: dict[Key, Scalar | Annotated[list[Scalar], Field(max_length=MAX_ITEMS)]] = Field(
        default_factory=dict, max_length=MAX_ITEMS)


class FlopsInfo(StrictModel):
    convention: Name  # e.g. "mac2-matmul": see docs/flops.md
    counter: Text  # how FLOPs were counted
    unit: Literal["FLOPs per sample"] = FLOPS_UNIT


class Timing(StrictModel):
    """Wall time of real inference at one batch size (summary statistics, no raw values)."""

    mode: Literal["dynamic", "full"]  # exits taken, or the full model without exits
    batch_size: int = Field(ge=1, le=MAX_SAMPLES)
    device: Text
    latency_ms: dict[Key, Annotated[float, Field(ge=0)]] = Field(  # p50/p90/p99/mean/std/...
        max_length=MAX_METRICS)
    throughput: Annotated[float, Field(gt=0)] | None = None  # samples per second
    peak_memory_mb: Annotated[float, Field(ge=0)] | None = None


class OperatingPoint(StrictModel):
    """One sweep value of one run: its metrics, its cost and where its samples exited."""

    sweep: dict[Key, StrictInt | StrictFloat] = Field(
        min_length=1, max_length=MAX_PARAMS_PER_POINT, description=(
            "its sweep values by name, in the rule's order, e.g. {\"threshold\": 0.3} or "
            "{\"patience\": 2, \"threshold\": 0.3}"))
    metrics: dict[Key, Percent] = Field(max_length=MAX_METRICS)  # empty for a test split
    main: Percent | None  # metrics[main_metric]; null for a test split (no labels)
    mean_flops: float = Field(gt=0)
    mean_mflops: float = Field(gt=0)
    params_total: int = Field(gt=0, le=MAX_PARAMS)
    params_mean_used: float = Field(gt=0)
    avg_exit_layer: float = Field(ge=1, le=MAX_LAYERS)
    exit_histogram: list[Count] = Field(  # samples exiting at layer 1..num_layers
        min_length=1, max_length=MAX_LAYERS)
    timings: list[Timing] = Field(default_factory=list, max_length=MAX_TIMINGS)
    # The quality of the exited predictions (docs/scoring.md): optional, absent in submissions
    # made before they were measured and for regression tasks
    ece: Share | None = Field(default=None, description="expected calibration error, percent "
                              "(15 equal-width bins of max softmax probability, weighted by size)")
    nll: Annotated[float, Field(ge=0, le=1000)] | None = Field(
        default=None, description="negative log-likelihood of the exited predictions, nats")
    consistency: Share | None = Field(default=None, description="percent of samples whose "
                                      "exited prediction equals the full-depth prediction")
    exit_gain: Share | None = Field(default=None, description="percent of samples the exited "
                                    "prediction gets right where the full-depth one is wrong")
    exit_loss: Share | None = Field(default=None, description="percent of samples the exited "
                                    "prediction gets wrong where the full-depth one is right")


class ModelRun(StrictModel):
    """One complete model run on a sample's way to its answer."""

    layers: Size
    heads: list[Size] = Field(min_length=1, max_length=MAX_LAYERS)


class RunEntry(StrictModel):
    """One run directory (one seed) of one task."""

    seed: Seed
    config_hash: Annotated[str, Field(pattern=r"^[0-9a-f]{6,64}$")]
    n_samples: int = Field(ge=1, le=MAX_SAMPLES)
    predictions_sha256: Sha256  # of its predictions.safetensors
    environment: int = Field(ge=0, lt=MAX_ITEMS)  # index into Submission.environments
    mean_length: float = Field(ge=1, le=MAX_LENGTH, description=(
        "mean token length of the evaluated samples (special tokens included), as FLOPs count"))
    max_length: Size = Field(description="the longest token sequence the run allowed "
                                         "(its max_seq_length)")
    points: list[OperatingPoint] = Field(min_length=1, max_length=MAX_POINTS)
    exit_paths: list[Annotated[list[ModelRun], Field(min_length=1, max_length=MAX_LAYERS)]] = (
        Field(min_length=1, max_length=MAX_LAYERS, description=(
            "per exit, in order, what a sample answered there ran: the complete models run in "
            "turn (one for a multi-exit model; models 1..j for exit j of models run in turn), "
            "each its "
            "layers 1..layers and the exit heads after the layers heads, the last head of the "
            "last model answering; the union over a run's models (static: one exit each)")))


class DataFile(StrictModel):
    split: Name
    source: Literal["local", "hub"]
    path: Text  # relative to the data directory, or "<hub path>/<config>:<split>"
    sha256: Sha256 | None = None  # null when loaded from the hub (or the data dir was not given)


class TaskEntry(StrictModel):
    split: Literal["dev", "test"]  # a test split has no labels here: no metrics, no ELUE score
    main_metric: Name
    metrics: list[Name] = Field(max_length=MAX_METRICS)  # empty for a test split
    num_layers: int = Field(ge=1, le=MAX_LAYERS)
    data_files: list[DataFile] = Field(default_factory=list, max_length=MAX_FILES)
    runs: list[RunEntry] = Field(min_length=1, max_length=MAX_RUNS)


class Gpu(StrictModel):
    name: Text
    count: int = Field(ge=1, le=MAX_ITEMS)
    memory_gb: Annotated[float, Field(ge=0)] | None = None
    driver: Text | None = None
    cuda: Text | None = None


class Environment(StrictModel):
    """Where runs were measured (from their env.json)."""

    cpu: Text | None = None
    cpu_cores: Annotated[int, Field(ge=1, le=MAX_SAMPLES)] | None = None
    torch_threads: Annotated[int, Field(ge=1, le=MAX_SAMPLES)] | None = None
    gpu: Gpu | None = None
    os: Text | None = None
    python: Text | None = None
    packages: dict[Key, Text | None] = Field(default_factory=dict, max_length=MAX_ITEMS)
    git_commit: Text | None = None  # of the eebench source the runs used
    git_dirty: bool | None = None


class EebenchInfo(StrictModel):
    """The eebench that built this file."""

    version: Name
    git_commit: Text | None = None
    git_dirty: bool | None = None


class EluScore(StrictModel):
    """Mean metric above the reference curve at equal FLOPs (docs/scoring.md), per task."""

    reference: Name
    reference_sha256: Sha256 | None = Field(default=None, description=(
        "sha256 of the reference file's bytes: `eebench validate` finds the reference by name "
        "and refuses another content"))
    reference_model: Text
    extrapolate: Literal[EXTRAPOLATE]  # eebench.score.policy.Extrapolate's values
    tasks: dict[Key, float] = Field(min_length=1, max_length=MAX_TASKS)
    overall: float


class Submission(StrictModel):
    schema_version: int = Field(
        default=SUBMISSION_SCHEMA_VERSION, json_schema_extra={"const": SUBMISSION_SCHEMA_VERSION}
    )
    name: Name
    created: Created
    model: ModelInfo
    method: MethodInfo
    flops: FlopsInfo
    seeds: list[Seed] = Field(min_length=1, max_length=MAX_ITEMS)
    tasks: dict[Key, TaskEntry] = Field(min_length=1, max_length=MAX_TASKS)
    environments: list[Environment] = Field(min_length=1, max_length=MAX_ITEMS)
    eebench: EebenchInfo
    elue: EluScore | None = None

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, v: int) -> int:
        if v != SUBMISSION_SCHEMA_VERSION:
            raise ValueError(f"schema_version {v} is not supported (this eebench reads "
                             f"{SUBMISSION_SCHEMA_VERSION})")
        return v



def json_schema(model: type[BaseModel] | None = None, *, schema_id: str = SCHEMA_ID,
                title: str = "eebench leaderboard submission",
                version: int = SUBMISSION_SCHEMA_VERSION,
                source: str = "eebench/submit/schema.py", command: str = "") -> dict:
    """The JSON Schema of a submission file (what `eebench leaderboard schema` writes): the
    encoder kind's by default, or that of another kind's model (the decoder kind:
    eebench.submit.decoder_schema.json_schema_text)."""
    schema = (model or Submission).model_json_schema()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": schema_id,
        "title": title,
        "description": f"schema_version {version}; generated from {source} by "
                       f"`eebench leaderboard schema{command}`",
        **{k: v for k, v in schema.items() if k not in ("title", "description")},
    }


def json_schema_text() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
