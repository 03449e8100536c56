"""Check a submission file from anyone: size, JSON, schema, consistency, plausibility and the
ELUE score recomputed. One-line reasons.

The order matters. The size is checked on the file system before a byte is read (a 200 MB file is
refused without being parsed into memory); then the JSON is parsed with hooks that refuse NaN,
infinity and duplicate keys (Python's json module accepts all three); then the pydantic schema
(types, missing and unknown fields, bounded sizes); then what no schema can say: known tasks and
their metrics, metric ranges per metric, scores a whole number of samples gives
(eebench.submit.counts: the file carries its predictions' sha256, not the predictions), a
histogram that adds up to the sample count, an average exit layer that is the histogram's
mean, FLOPs that never fall as samples run deeper (along one swept parameter); then physical
plausibility (eebench.submit.plausible: FLOPs and parameters a model of the declared
size can have); last, the ELUE score (eebench.submit.rescore): the reference the file names is
looked up by name (and sha256) among known reference files, and every task's score and the
overall are recomputed from the file's own points, seed-averaged as `eebench submit` does; a
difference beyond ELUE_TOLERANCE is refused. Nothing in the file is ever executed or imported:
it is only ever data given to json.loads.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from eebench.errors import DataError, EebenchError, one_line
from eebench.io import read_bytes
from eebench.submit.counts import check_counts, check_task_metrics
from eebench.submit.plausible import check_costs
from eebench.submit.rescore import KnownReference, References, check_elue, default_references
from eebench.submit.schema import (
    SUBMISSION_SCHEMA_VERSION,
    ModelRun,
    OperatingPoint,
    RunEntry,
    Submission,
    TaskEntry,
)

if TYPE_CHECKING:
    from eebench.tasks.spec import TaskSpec

__all__ = ["MAX_BYTES", "Verdict", "check_submission", "parse_json", "parse_submission",
           "validate_data", "validate_file"]  # references and ELUE recomputation: .rescore

MAX_BYTES = 10 * 2**20  # 10 MiB: a full submission of every task and seed is well under 2 MiB
SIGNED_METRICS = frozenset({"mcc", "pearson", "spearman", "pearson_and_spearman"})
_UNION_TAGS = ("str", "int", "float", "bool", "list", "nullable", "function-after")


@dataclass(frozen=True)
class Verdict:
    """The result for one file: ok with its submission, or the one-line reason it is refused."""

    path: Path
    submission: Submission | None
    reason: str | None
    reference: KnownReference | None = None  # the file its ELUE score was recomputed against

    @property
    def ok(self) -> bool:
        return self.reason is None


def read_limited(path: Path, max_bytes: int = MAX_BYTES) -> bytes:
    """The file's bytes, refusing anything but a regular file of at most `max_bytes` (a FIFO or
    a device is never read: eebench.io.read_bytes). The reason does not name the file: the
    verdict's line does."""
    try:
        return read_bytes(path, max_bytes)
    except DataError as e:
        prefix = f"{path}: "
        reason = e.message[len(prefix):] if e.message.startswith(prefix) else e.message
        reason = {"missing": "cannot read the file (no such file)",
                  "is a directory, not a file": "is a directory, not a regular file"
                  }.get(reason, reason)
        raise DataError(reason, hint=e.hint) from None


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:30]} is out of range")
    return value


def _no_duplicate_keys(pairs: list[tuple[str, object]]) -> dict:
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key[:60]!r}")
        out[key] = value
    return out


def parse_json(data: bytes) -> object:
    """Strict JSON: UTF-8, no NaN/Infinity, no out-of-range numbers, no duplicate keys."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError(f"not UTF-8 text (byte {e.start})") from None
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float,
                          object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as e:
        raise DataError(f"not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
    except ValueError as e:  # our hooks, and integers too long to convert
        raise DataError(f"not valid JSON: {one_line(str(e), 160, cut='...')}") from None
    except RecursionError:
        raise DataError("not valid JSON: nested too deeply") from None


def _where(loc: Sequence[int | str]) -> str:
    parts = [str(x) for x in loc
             if not (isinstance(x, str) and (x in _UNION_TAGS or "[" in x))]
    return ".".join(parts) or "(top level)"


def schema_error(e: ValidationError) -> str:
    """The first schema problem as one line: where, and what."""
    err = e.errors()[0]
    where, kind = _where(err["loc"]), err["type"]
    if kind == "missing":
        return f"{where}: required field missing"
    if kind == "extra_forbidden":
        return f"{where}: unknown field"
    got = repr(err.get("input"))
    return f"{where}: {one_line(err['msg'], 120, cut='...')} (got {one_line(got, 40, cut='...')})"


def parse_submission(data: object) -> Submission:
    """The schema check: a Submission, or a DataError naming the first problem."""
    if not isinstance(data, dict):
        raise DataError(f"not a submission: the top level is a JSON {type(data).__name__}, "
                        "not an object")
    from eebench.submit.upgrade import upgrade  # the one place that knows earlier versions

    data = upgrade(data)
    version = data.get("schema_version")
    if version != SUBMISSION_SCHEMA_VERSION or isinstance(version, bool):
        raise DataError(f"schema_version {one_line(repr(version), 40, cut='...')} is not supported",
                        hint=f"this eebench reads schema_version {SUBMISSION_SCHEMA_VERSION}; "
                             "rebuild the file from its runs with `eebench submit`")
    try:
        return Submission.model_validate(data)
    except ValidationError as e:
        raise DataError(schema_error(e)) from None


# ---------------------------------------------------------------------------------- consistency
def _close(a: float, b: float, rel: float = 1e-6, abs_: float = 1e-9) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=abs_)


def _check_scores(p: OperatingPoint, where: str, t: TaskEntry) -> None:
    """A dev point's metrics are the task's, within their ranges; a test point has none."""
    if t.split == "test":
        if p.metrics or p.main is not None:
            raise DataError(f"{where}: a test split carries no scores (test labels are withheld)")
        return
    if set(p.metrics) != set(t.metrics):
        raise DataError(f"{where}: metrics {sorted(p.metrics)} differ from the task's "
                        f"{t.metrics}")
    for name, value in p.metrics.items():
        low = -100.0 if name in SIGNED_METRICS else 0.0
        if not low <= value <= 100.0:
            raise DataError(f"{where}: {name} {value} is outside [{low:g}, 100]")
    if p.main is None or p.main != p.metrics[t.main_metric]:
        raise DataError(f"{where}: main {p.main} is not its {t.main_metric} "
                        f"{p.metrics[t.main_metric]}")


def _check_point(p: OperatingPoint, where: str, t: TaskEntry, n_samples: int,
                 model_params: int) -> None:
    _check_scores(p, where, t)
    check_counts(p, where, n_samples)  # scores some predictions over its samples can give
    num_layers = t.num_layers
    hist = p.exit_histogram
    if len(hist) != num_layers:
        raise DataError(f"{where}: exit_histogram has {len(hist)} entries for a "
                        f"{num_layers}-layer model")
    if sum(hist) != n_samples:
        raise DataError(f"{where}: exit_histogram adds up to {sum(hist)}, not the "
                        f"{n_samples} samples of the run")
    if not 1 <= p.avg_exit_layer <= num_layers:
        raise DataError(f"{where}: avg_exit_layer {p.avg_exit_layer} is outside 1..{num_layers}")
    mean = sum((i + 1) * h for i, h in enumerate(hist)) / n_samples
    if not _close(p.avg_exit_layer, mean, rel=1e-6, abs_=1e-6):
        raise DataError(f"{where}: avg_exit_layer {p.avg_exit_layer} is not the histogram's "
                        f"mean {mean:.6g}")
    if not _close(p.mean_mflops, p.mean_flops / 1e6):
        raise DataError(f"{where}: mean_mflops {p.mean_mflops} is not mean_flops / 1e6")
    if p.params_total > model_params or p.params_mean_used > p.params_total * (1 + 1e-9):
        raise DataError(f"{where}: parameters exceed the model's ({p.params_mean_used:g} used, "
                        f"{p.params_total} total, model {model_params})")


def _check_paths(run: RunEntry, where: str, num_layers: int) -> dict[int, list[ModelRun]]:
    """What a run's exits ran: each complete model within the model's L layers, its heads
    ascending within its layers; each exit answering at its own layer, in order. The paths by
    the layer they answer at."""
    answers: dict[int, list[ModelRun]] = {}
    for j, path in enumerate(run.exit_paths):
        for r in path:
            if r.layers > num_layers or any(a >= b for a, b in zip(r.heads, r.heads[1:])) or \
                    r.heads[-1] > r.layers:
                raise DataError(f"{where}.exit_paths.{j}: a model of {r.layers} layers with heads "
                                f"after layers {r.heads} in a {num_layers}-layer model")
        answer = path[-1].heads[-1]
        if answers and answer <= max(answers):
            raise DataError(f"{where}.exit_paths.{j}: answers at layer {answer}, not after the "
                            f"exits before it ({sorted(answers)})")
        answers[answer] = path
    return answers


def _check_answers(p: OperatingPoint, where: str, answers: dict[int, list[ModelRun]]) -> None:
    """Samples exit only at layers where an exit answers."""
    stray = [k + 1 for k, h in enumerate(p.exit_histogram) if h and k + 1 not in answers]
    if stray:
        raise DataError(f"{where}: samples exit at layers {stray}, where no exit of the run "
                        f"answers ({sorted(answers)})")


def _check_flops_grow(points: list[OperatingPoint], where: str) -> None:
    """One model on one task, swept along one parameter: running deeper on average never costs
    fewer FLOPs. Along one threshold or patience every sample exits no earlier as the exits
    get stricter, so its FLOPs never fall. A grid of several named values (PCEE's patience and
    threshold) is not one ordered sweep (a point can run deeper on average on shorter samples,
    and cost less), but each line of the grid is: one parameter moving, the others fixed (one
    patience with its thresholds, one threshold with its patiences). The check holds along each.
    """
    names = {name for p in points for name in p.sweep}
    if len(names) < 2:
        _check_ordered(points, where)
        return
    for moving in sorted(names):
        lines: dict[tuple, list[OperatingPoint]] = {}
        for p in points:
            fixed = tuple(sorted((k, v) for k, v in p.sweep.items() if k != moving))
            lines.setdefault(fixed, []).append(p)
        for line in lines.values():
            _check_ordered(line, where)


def _check_ordered(points: list[OperatingPoint], where: str) -> None:
    ordered = sorted(points, key=lambda p: (p.avg_exit_layer, p.mean_flops))
    for a, b in zip(ordered, ordered[1:]):
        if b.mean_flops < a.mean_flops * (1 - 1e-9):
            raise DataError(
                f"{where}: FLOPs fall as samples run deeper (avg exit layer {a.avg_exit_layer:g}:"
                f" {a.mean_flops:g} FLOPs, {b.avg_exit_layer:g}: {b.mean_flops:g})"
            )


def task_spec(task: str) -> TaskSpec:
    """The spec of a task key: a task eebench knows, under its own name (not an alias)."""
    from eebench.tasks.catalog import get_task

    try:
        spec = get_task(task)
    except EebenchError as e:
        raise DataError(f"tasks.{task}: unknown task", hint=e.hint) from None
    if spec.name != task:
        raise DataError(f"tasks.{task}: not a task's own name (write {spec.name!r})")
    return spec


def _check_task(task: str, t: TaskEntry) -> None:
    """Known task, its own main metric and metrics; a test split carries none."""
    spec = task_spec(task)
    check_task_metrics(task, t.main_metric, t.metrics, spec)
    if t.split == "test":
        if t.metrics:
            raise DataError(f"tasks.{task}: a test split carries no scores (metrics {t.metrics} "
                            "given)", hint="test labels are withheld: ELUE scores test "
                                           "predictions itself (eebench export-elue)")
    elif t.main_metric not in t.metrics or len(set(t.metrics)) != len(t.metrics):
        raise DataError(f"tasks.{task}: main_metric {t.main_metric!r} must be one of its "
                        f"metrics {t.metrics}, each named once")


def check_submission(sub: Submission) -> None:
    """Everything no schema can say but the ELUE score (check_elue): consistency, known tasks,
    plausible costs; the first problem is a DataError naming where it is."""
    run_seeds: set[int] = set()
    for task, t in sub.tasks.items():
        _check_task(task, t)
        if t.num_layers != sub.model.num_layers:
            raise DataError(f"tasks.{task}: num_layers {t.num_layers} differs from the model's "
                            f"{sub.model.num_layers}")
        seeds = [r.seed for r in t.runs]
        if len(set(seeds)) != len(seeds):
            raise DataError(f"tasks.{task}: a seed appears in two runs ({sorted(seeds)})")
        run_seeds.update(seeds)
        for i, run in enumerate(t.runs):
            where = f"tasks.{task}.runs.{i}"
            if run.environment >= len(sub.environments):
                raise DataError(f"{where}: environment {run.environment} does not exist "
                                f"({len(sub.environments)} given)")
            answers = _check_paths(run, where, t.num_layers)
            for j, p in enumerate(run.points):
                _check_point(p, f"{where}.points.{j}", t, run.n_samples, sub.model.params)
                _check_answers(p, f"{where}.points.{j}", answers)
                if "+".join(p.sweep) != sub.method.sweep_param:
                    raise DataError(f"{where}.points.{j}: sweep names {', '.join(p.sweep)}, not "
                                    f"the method's {sub.method.sweep_param!r}")
            _check_flops_grow(run.points, where)
    if sorted(set(sub.seeds)) != sorted(run_seeds) or len(set(sub.seeds)) != len(sub.seeds):
        raise DataError(f"seeds {sub.seeds} are not the seeds of the runs {sorted(run_seeds)}")
    largest = max(p.params_total for t in sub.tasks.values() for r in t.runs for p in r.points)
    if sub.model.params != largest:
        raise DataError(f"model.params {sub.model.params} is not the largest params_total of "
                        f"its points ({largest})")
    check_costs(sub)
    if sub.elue is not None:
        extra = set(sub.elue.tasks) - {k for k, t in sub.tasks.items() if t.split == "dev"}
        if extra:
            raise DataError(f"elue.tasks: score for a task without dev-split runs "
                            f"({sorted(extra)[0]})")
        mean = sum(sub.elue.tasks.values()) / len(sub.elue.tasks)
        if not _close(sub.elue.overall, mean, rel=1e-6, abs_=1e-6):
            raise DataError(f"elue.overall {sub.elue.overall} is not the mean of its tasks "
                            f"({mean:.6g})")


# ---------------------------------------------------------------------------------- entry points
def validate_data(data: object, references: References | None = None) -> Submission:
    """Everything of already parsed JSON, the ELUE score recomputed against `references` (none:
    the leaderboard's curves shipped with eebench); DataError with the first problem. A decoder
    submission (`"kind": "decoder"`) is checked by eebench.submit.decoder instead."""
    if isinstance(data, dict) and "kind" in data:
        if data["kind"] != "decoder":
            raise DataError(f"kind {one_line(repr(data['kind']), 40, cut='...')} is not a "
                            "submission kind", hint="\"decoder\", or no kind (an encoder file)")
        from eebench.submit.decoder_check import check_decoder_submission
        from eebench.submit.decoder_schema import DecoderSubmission

        try:
            decoder = DecoderSubmission.model_validate(data)
        except ValidationError as e:
            raise DataError(schema_error(e)) from None
        check_decoder_submission(decoder)
        return decoder  # type: ignore[return-value]
    sub = parse_submission(data)
    check_submission(sub)
    check_elue(sub, references if references is not None else default_references(None))
    return sub


def validate_file(path: Path, max_bytes: int = MAX_BYTES,
                  references: References | None = None) -> Verdict:
    """Check one file; never raises for a bad file (the reason is in the verdict). Without
    `references`, those next to the file's folder and those shipped with eebench are used
    (default_references)."""
    path = Path(path)
    try:
        data = parse_json(read_limited(path, max_bytes))
        if references is None:
            references = default_references(path.parent)
        sub = validate_data(data, references)
    except DataError as e:
        return Verdict(path, None, one_line(str(e), 300, cut="...", escaped=True))
    elue = getattr(sub, "elue", None)  # a decoder submission has none
    used = None if elue is None else references.find(elue.reference, elue.reference_sha256)
    return Verdict(path, sub, None, used)
