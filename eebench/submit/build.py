"""Build a leaderboard submission from run directories (what `eebench submit` writes).

Runs are read with eebench.score (the same loader and checks `eebench score` uses: finished,
every file as its summary recorded it), so a submission holds exactly what a score would be
computed from; each point is recomputed from the run's predictions (eebench.score.recompute)
before it is copied. One submission is one model with one method, settings and FLOPs
convention: several tasks and seeds are welcome, a mix of models or methods is refused with one
line, because a leaderboard row must describe one thing.

Provenance is recorded as hashes, never as copies: sha256 of every data file the runs read (found
through the task specs' local file paths under the data directory; null when the data came from
the hub), of each run's per-sample predictions, of a local model's weights and of the reference
file. What `eebench validate` bounds FLOPs and parameters with is recorded too: the backbone's
sizes (from its config; a hidden size the runs recorded must agree) and each run's mean token
length (from its predictions' `lengths`) and longest allowed length (its max_seq_length).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

from eebench.errors import DataError
from eebench.io import read_json, sha256_file
from eebench.run.artifacts import ENV_FILE, PREDICTIONS_FILE
from eebench.submit.schema import (
    DataFile,
    EebenchInfo,
    EluScore,
    Environment,
    FlopsInfo,
    Gpu,
    MethodInfo,
    ModelInfo,
    ModelRun,
    OperatingPoint,
    RunEntry,
    Submission,
    TaskEntry,
    Timing,
)

FLOPS_COUNTER = ("eebench per-module cost table: fvcore, cross-checked with torch "
                 "FlopCounterMode, summed along each sample's executed path at its token length")
# ModelInfo's sizes, read from the backbone's config: (field, the config's names for it in
# order, the value where a family has none).
MODEL_SIZES = (
    ("hidden_size", ("hidden_size",), None),
    ("intermediate_size", ("intermediate_size", "hidden_dim"), None),  # DistilBERT: hidden_dim
    ("vocab_size", ("vocab_size",), None),
    ("max_position_embeddings", ("max_position_embeddings",), None),
    ("type_vocab_size", ("type_vocab_size",), 0),  # DistilBERT and MPNet have no token types
    ("embedding_size", ("embedding_size",), "hidden_size"),  # ALBERT projects E -> H
)


def model_dir_sha256(directory: Path) -> str | None:
    """sha256 over config.json and *.safetensors of a model directory: each file's name and
    bytes, in name order (None when it has no weights in safetensors)."""
    files = sorted(p for p in directory.iterdir()
                   if p.is_file() and (p.name == "config.json" or p.suffix == ".safetensors"))
    if not any(p.suffix == ".safetensors" for p in files):
        return None
    h = hashlib.sha256()
    for p in files:
        h.update(p.name.encode() + b"\0" + bytes.fromhex(sha256_file(p)))
    return h.hexdigest()


def single_value(runs, what: str, value,
                 holds: str = "one model and method") -> str:
    """The single value of `what` over the runs, or a one-line refusal saying what a submission
    `holds`."""
    seen = {value(r) for r in runs}
    if len(seen) > 1:
        raise DataError(f"runs of mixed {what}: {', '.join(sorted(seen))}",
                        hint=f"a submission holds {holds}; submit each separately")
    return seen.pop()


def _model_info(name: str, num_layers: int, params: int, pooling: str,
                sizes: dict[str, int]) -> ModelInfo:
    from eebench.errors import EebenchError
    from eebench.models.backbones import resolve_backbone

    try:
        where = resolve_backbone(name)
    except EebenchError:  # a local directory that is gone since the runs: no hash to record
        where = name
    local = Path(where).is_dir() or name.startswith((".", "/", "~"))
    return ModelInfo(
        name=name, source="local" if local else "hub", revision=None,
        local_sha256=model_dir_sha256(Path(where)) if Path(where).is_dir() else None,
        num_layers=num_layers, params=params, pooling=pooling, **sizes,
    )


def _model_sizes(name: str, runs, num_layers: int) -> dict[str, int]:
    """The backbone's sizes (MODEL_SIZES, distinct_layers) from its config (of any family eebench
    builds, ElasticBERT's converted); the runs' recorded hidden sizes must be the config's."""
    from eebench.models.backbones import load_config

    config = load_config(name)
    sizes: dict[str, int] = {}
    for key, names, default in MODEL_SIZES:
        value = next((getattr(config, n) for n in names if getattr(config, n, None) is not None),
                     None)
        if value is None:  # the family has none: another size's value, or a constant
            value = sizes.get(default) if isinstance(default, str) else default
        if not isinstance(value, int) or isinstance(value, bool):
            raise DataError(f"{name}: its config has no {key}",
                            hint="a submission records the backbone's sizes")
        sizes[key] = value
    groups = getattr(config, "num_hidden_groups", None)  # ALBERT: layers share group weights
    distinct = groups * getattr(config, "inner_group_num", 1) if groups else num_layers
    sizes["distinct_layers"] = max(1, min(int(distinct), num_layers))
    for run in runs:
        for v in run.variants:
            if v.hidden_size is not None and v.hidden_size != sizes["hidden_size"]:
                raise DataError(f"{run.path}: variant {v.name} has hidden size {v.hidden_size}, "
                                f"the config of {name} {sizes['hidden_size']}")
    return sizes


def _mean_length(run) -> float:
    """The mean real token length of the run's evaluated samples (its predictions' `lengths`)."""
    from safetensors import safe_open

    path = run.path / PREDICTIONS_FILE
    try:
        with safe_open(str(path), framework="numpy") as f:
            lengths = f.get_tensor("lengths") if "lengths" in f.keys() else None
    except Exception as e:  # safetensors raises its own error types
        raise DataError(f"{path}: not a readable safetensors file ({e})") from None
    n = run.points[0].n_samples
    if lengths is None or lengths.shape != (n,) or not len(lengths) or lengths.min() < 1:
        raise DataError(f"{path}: no token lengths of its {n} samples (a `lengths` array)",
                        hint="rerun the run with this eebench")
    return float(lengths.mean())


def _data_files(task: str, split: str, data_dir: Path | None) -> list[DataFile]:
    """The files a run of `task` read: train and dev (training), and the evaluated split."""
    from eebench.tasks.catalog import get_task

    spec = get_task(task)
    out = []
    for s in dict.fromkeys(("train", "dev", split)):
        if data_dir is not None and s in spec.local:
            path = Path(data_dir) / spec.local[s].path
            if not path.is_file():
                raise DataError(f"{path}: missing (the runs of {task} read it)",
                                hint="pass the --data-dir the runs used")
            out.append(DataFile(split=s, source="local", path=spec.local[s].path,
                                  sha256=sha256_file(path)))
        elif data_dir is None and spec.hub is not None and s in spec.hub.splits:
            hub = f"{spec.hub.path}/{spec.hub.name}" if spec.hub.name else spec.hub.path
            out.append(DataFile(split=s, source="hub", path=f"{hub}:{spec.hub.splits[s]}"))
        elif data_dir is None and s in spec.local:  # not on the hub: a local file, unhashed
            out.append(DataFile(split=s, source="local", path=spec.local[s].path))
    return out


def run_environment(run_dir: Path) -> Environment:
    env = read_json(run_dir / ENV_FILE)
    if not isinstance(env, dict):
        raise DataError(f"{run_dir / ENV_FILE}: not a JSON object")
    gpu = env.get("gpu") or None
    git = env.get("git") or {}
    return Environment(
        cpu=env.get("cpu"), cpu_cores=env.get("cpu_cores_usable") or env.get("cpu_cores"),
        torch_threads=env.get("torch_threads"),
        gpu=None if gpu is None else Gpu(
            name=gpu["name"], count=gpu["count"], memory_gb=gpu.get("memory_gb"),
            driver=gpu.get("driver"), cuda=gpu.get("cuda")),
        os=env.get("os"), python=env.get("python"), packages=env.get("packages") or {},
        git_commit=git.get("commit"), git_dirty=git.get("dirty"),
    )


def _point(p) -> OperatingPoint:
    """A run's point in the submission format: its fields the format has, timings without their
    raw values."""
    data = p.model_dump(include=set(OperatingPoint.model_fields) - {"timings"})
    data["timings"] = [t.model_dump(include=set(Timing.model_fields)) for t in p.timings]
    return OperatingPoint.model_validate(data)


def _elue(points, reference: Path, extrapolate: str, label: str) -> EluScore:
    from eebench.score import load_reference, score
    from eebench.score.elue import overall

    ref = load_reference(reference)
    per_task = score(points, ref, extrapolate).elue.get(label, {})
    return EluScore(reference=ref.name, reference_sha256=sha256_file(Path(reference)),
                      reference_model=ref.model, extrapolate=extrapolate,
                      tasks=dict(sorted(per_task.items())), overall=overall(per_task))


def eebench_info() -> EebenchInfo:
    from eebench import __version__
    from eebench.measure.env import git_state

    git = git_state() or {}
    return EebenchInfo(version=__version__, git_commit=git.get("commit"),
                         git_dirty=git.get("dirty"))


def build_submission(
    inputs: Sequence[str | Path],
    data_dir: Path | None = None,
    reference: Path | None = None,
    name: str | None = None,
    extrapolate: str = "clamp",
) -> Submission:
    """A Submission from run directories (or parents, or globs), validated before it is returned:
    everything `eebench validate` checks, its ELUE score recomputed against `reference`."""
    from pydantic import ValidationError

    from eebench.submit.rescore import References, check_elue
    from eebench.submit.validate import check_submission, schema_error

    try:
        sub = _build(inputs, data_dir, reference, name, extrapolate)
    except ValidationError as e:  # a run holds a value the leaderboard format cannot carry
        raise DataError(f"the runs do not make a valid submission: {schema_error(e)}") from None
    try:
        check_submission(sub)
        if reference is not None:
            check_elue(sub, References.from_files([Path(reference)]))
    except DataError as e:
        raise DataError(f"the runs do not make a valid submission: {e.message}",
                        hint=e.hint) from None
    return sub


def _build(inputs: Sequence[str | Path], data_dir: Path | None, reference: Path | None,
           name: str | None, extrapolate: str) -> Submission:
    from eebench.score import aggregate_seeds, check_consistent, load_runs, raw_points

    runs = load_runs(inputs)  # finished, their files as their summaries recorded them
    from eebench.score.quality import fill_quality
    from eebench.score.recompute import check_points

    for run in runs:  # the points it copies are what the predictions it hashes give
        check_points(run)

    fill_quality(runs)  # the quality fields of runs written without them, from their arrays
    model = single_value(runs, "models", lambda r: r.config.model)
    method = single_value(runs, "methods", lambda r: r.config.label)
    single_value(runs, "method settings",
                 lambda r: json.dumps(r.config.method_settings, sort_keys=True))
    convention = single_value(runs, "FLOPs conventions", lambda r: r.config.flops_convention)
    pooling = single_value(runs, "exit-head poolings", lambda r: r.config.pooling)
    raw = raw_points(runs)
    check_consistent(raw)
    points = aggregate_seeds(raw)  # refuses a seed given twice for one task
    num_layers = int(single_value(runs, "model depths", lambda r: str(r.points[0].num_layers)))

    envs: list[Environment] = []
    entries: dict[str, list[RunEntry]] = {}
    for run in sorted(runs, key=lambda r: (r.config.task, r.config.seed)):
        env = run_environment(run.path)
        if env not in envs:
            envs.append(env)
        predictions = run.path / PREDICTIONS_FILE
        if not predictions.is_file():
            raise DataError(f"{predictions}: missing (a submission records its sha256)")
        entries.setdefault(run.config.task, []).append(RunEntry(
            seed=run.config.seed, config_hash=run.config.key(),
            n_samples=run.points[0].n_samples, predictions_sha256=sha256_file(predictions),
            environment=envs.index(env), mean_length=_mean_length(run),
            max_length=run.config.max_seq_length, points=[_point(p) for p in run.points],
            exit_paths=_exit_paths(run),
        ))
    first = {rp.point.task: rp.point for rp in reversed(raw)}  # each task's first point
    tasks = {
        task: TaskEntry(
            split=first[task].split, main_metric=first[task].main_metric,
            metrics=list(first[task].metrics), num_layers=num_layers,
            data_files=_data_files(task, first[task].split, data_dir), runs=runs_of_task,
        )
        for task, runs_of_task in entries.items()
    }

    params = max(p.params_total for r in runs for p in r.points)
    label = raw[0].label
    return Submission(
        name=name or f"{model.rstrip('/').split('/')[-1]}-{method}",
        created=datetime.now(timezone.utc).replace(microsecond=0).isoformat(),
        model=_model_info(model, num_layers, params, pooling,
                          _model_sizes(model, runs, num_layers)),
        method=MethodInfo(name=method, sweep_param=runs[0].points[0].sweep_param,
                            settings=dict(runs[0].config.method_settings)),
        flops=FlopsInfo(convention=convention, counter=FLOPS_COUNTER),
        seeds=sorted({r.config.seed for r in runs}),
        tasks=tasks, environments=envs, eebench=eebench_info(),
        elue=_elue(points, reference, extrapolate, label) if reference is not None else None,
    )


def write_submission(sub: Submission, out: Path) -> None:
    from eebench.io import atomic_write_text

    atomic_write_text(Path(out), sub.model_dump_json(indent=2) + "\n")
    Path(out).chmod(0o644)  # a file to share: readable by others, like any file a user writes


def _exit_paths(run) -> list[list[ModelRun]]:
    """What a sample answered at each exit of the run ran (its variants' exit paths), ordered by
    the layer it answers at; two models answering at one layer are refused."""
    paths: dict[int, list] = {}
    for v in run.variants:
        for path in v.exit_paths:
            answer = path[-1].heads[-1]
            if paths.get(answer, path) != path:
                raise DataError(f"{run.path}: two of its models answer after layer {answer} "
                                "along different paths")
            paths[answer] = path
    return [[ModelRun(layers=r.layers, heads=list(r.heads)) for r in paths[k]]
            for k in sorted(paths)]
