"""The submission format: JSON Schema and pydantic agree, hostile files are refused in one line,
the committed schema is the generated one, and a tiny submission matches its golden file.

Runs here are written directly as run directories (no trained model), so every number is known:
the same files `eebench run` writes, with metrics, FLOPs and histograms computed from per-sample
arrays. The model is a BERT config without weights (what a submission records of it: its sizes);
FLOPs and parameters are its closed forms (docs/flops.md), which is what validation bounds.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import time
import tracemalloc
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from safetensors.numpy import save_file

from eebench.errors import DataError
from eebench.io import atomic_write_text, write_json
from eebench.run import artifacts as R
from eebench.run.upgrade import exit_paths
from eebench.submit.build import build_submission, write_submission
from eebench.submit.rescore import References
from eebench.submit.schema import (
    SUBMISSION_SCHEMA_VERSION,
    Submission,
    json_schema,
    json_schema_text,
)
from eebench.submit.validate import (
    MAX_BYTES,
    parse_json,
    validate_data,
    validate_file,
)

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "golden" / "submission_tiny.json"
LAYERS = 3
HIDDEN, FFN, POSITIONS, TYPES, VOCAB = 32, 64, 512, 2, 30522
NUM_LABELS = 2  # rte
LENGTHS = np.array([12, 20, 9, 31, 15, 18, 25, 11, 40, 16], dtype=np.int32)
LABELS = np.array([0, 1, 1, 0, 1, 0, 0, 1, 1, 0], dtype=np.int64)
ENV = {"schema_version": 1, "cpu": "Test CPU", "cpu_cores": 2, "cpu_cores_usable": 2,
       "torch_threads": 1, "gpu": None, "python": "3.11.7",
       "packages": {"eebench": "0.1.0", "torch": "2.13.0"}, "os": "Linux",
       "git": {"commit": "0" * 40, "dirty": False}}


def _flops(layers: np.ndarray, exits_per_layer: bool) -> np.ndarray:
    """Each sample's FLOPs under mac2-matmul: its layers at its length, and every exit head
    evaluated on the way (a pooler and a classifier each)."""
    d, n = float(HIDDEN), LENGTHS.astype(float)
    layer = 2 * (4 * n * d * d + 2 * n * d * FFN + 2 * n * n * d)
    heads = layers if exits_per_layer else np.ones_like(layers)
    return layer * layers + 2 * (d * d + d * NUM_LABELS) * heads


def model_params(vocab: int = VOCAB) -> int:
    """The full model with a shared pooler and a classifier per layer (PABEE's heads)."""
    d = HIDDEN
    embeddings = (vocab + POSITIONS + TYPES) * d + 2 * d
    layer = 4 * d * d + 2 * d * FFN + 9 * d + FFN
    return embeddings + LAYERS * layer + d * d + d + LAYERS * (d * NUM_LABELS + NUM_LABELS)


def write_model(root: Path, params: int | None = None) -> Path:
    """A BERT config (no weights) of LAYERS layers; its vocabulary chosen so that the model
    holds about `params` parameters (default: MiniLM's vocabulary)."""
    vocab = VOCAB if params is None else max(1, round((params - model_params(0)) / HIDDEN))
    path = root / f"tiny-bert-{vocab}"
    path.mkdir(parents=True, exist_ok=True)
    write_json(path / "config.json", {
        "model_type": "bert", "hidden_size": HIDDEN, "num_hidden_layers": LAYERS,
        "num_attention_heads": 4, "intermediate_size": FFN, "vocab_size": vocab,
        "max_position_embeddings": POSITIONS, "type_vocab_size": TYPES})
    return path


def write_run(root: Path, method: str, seed: int, exit_layers: list[list[int]],
              sweep: list[float], sweep_param: str, model: str | None = None,
              task: str = "rte", params: int | None = None, shift: int = 0) -> Path:
    """A complete run directory whose points follow from its per-sample arrays, of a model
    written under `root` (write_model) unless `model` is given."""
    if model is None:
        model = str(write_model(root, params))
    params = model_params(json.loads((Path(model) / "config.json").read_text())["vocab_size"])
    run_dir = root / f"{method}-{task}-{seed}-{shift}"
    cfg = R.RunConfig(model=model, method=method, task=task, split="dev", seed=seed,
                      sweep=sweep, max_seq_length=64, flops_convention="mac2-matmul",
                      method_settings={"layers": None} if method == "static" else {})
    layers = np.array(exit_layers, dtype=np.int16)
    # the first shift + p predictions wrong: every shift scores differently
    preds = np.stack([np.where(np.arange(len(LABELS)) < shift + p, 1 - LABELS, LABELS)
                      for p in range(len(sweep))])
    points = []
    for p, value in enumerate(sweep):
        flops = _flops(layers[p].astype(float), method != "static")
        acc = float((preds[p] == LABELS).mean() * 100)
        timing = R.Timing(device="cpu (1 threads)", batch_size=1, mode="dynamic",
                          latency_ms={"p50": 1.5, "mean": 1.6}, throughput=600.0,
                          peak_memory_mb=100.0, raw_ms=[1.5, 1.7])
        points.append(R.OperatingPoint(
            method=method, variant=_variant(method, value), task=task, split="dev", seed=seed,
            sweep={sweep_param: value}, n_samples=len(LABELS), num_layers=LAYERS,
            metrics={"accuracy": acc}, main_metric="accuracy", main=acc,
            avg_exit_layer=float(layers[p].mean()),
            exit_histogram=np.bincount(layers[p], minlength=LAYERS + 1)[1:].tolist(),
            flops_convention="mac2-matmul", mean_flops=float(flops.mean()),
            mean_mflops=float(flops.mean()) / 1e6, speedup=LAYERS / layers[p].mean(),
            layer_saving=1 - layers[p].mean() / LAYERS, params_total=params,
            params_mean_used=float(params) * 0.9, timings=[timing],
        ))
    static = method == "static"
    n_variants = len(sweep) if static else 1
    write_json(run_dir / R.CONFIG_FILE, cfg)
    write_json(run_dir / R.ENV_FILE, ENV)
    R.write_points(run_dir / R.POINTS_FILE, points)
    save_file({"exit_layer": layers, "prediction": preds, "labels": LABELS, "lengths": LENGTHS},
              str(run_dir / R.PREDICTIONS_FILE))
    atomic_write_text(run_dir / R.IDS_FILE, "".join(f"{i}\n" for i in range(len(LABELS))))
    write_json(run_dir / R.SUMMARY_FILE, R.RunSummary(
        model=model, method=method, task=task, split="dev", seed=seed,
        config_hash=cfg.key(), n_samples=len(LABELS), num_points=len(points),
        variants=[R.VariantRecord(name=_variant(method, v),
                                  sweep_values=[{sweep_param: x}
                                                for x in ([v] if static else sweep)],
                                  exit_layers=[int(v)] if static else list(range(1, LAYERS + 1)),
                                  exit_paths=exit_paths([int(v)] if static else list(
                                      range(1, LAYERS + 1)), False),
                                  hidden_size=HIDDEN, pooling="cls",
                                  logits_key=R.logits_key(_variant(method, v), n_variants))
                  for v in (sweep if static else sweep[:1])]))
    return run_dir


def _variant(method: str, value: float) -> str:
    return f"k{int(value)}" if method == "static" else "all"


PABEE_LAYERS = [[1, 1, 2, 1, 1, 2, 1, 1, 3, 1], [2, 2, 2, 1, 2, 3, 2, 2, 3, 2],
                [3, 3, 3, 2, 3, 3, 3, 3, 3, 3]]


def write_method_runs(root: Path, seeds=(1, 2), **kw) -> list[Path]:
    return [write_run(root, "pabee", s, PABEE_LAYERS, [1.0, 2.0, 3.0], "patience",
                      shift=s, **kw) for s in seeds]


def write_reference(root: Path) -> Path:
    """Reference curves from static runs k = 1..3 (eebench.score.build_reference), written
    alone in `root/references/` (the folder validation looks them up in)."""
    from eebench import score as sc

    static = [[[k] * len(LABELS) for k in (1, 2, 3)]]
    run = write_run(root / "static", "static", 1, static[0], [1.0, 2.0, 3.0], "layers",
                    shift=5)
    ref = sc.build_reference(sc.load_runs([run]), name="tiny-static")
    path = root / "references" / "ref.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    sc.save_reference(ref, path)
    return path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, data_dir):
    """A two-seed pabee submission with an ELUE score, written to disk."""
    root = tmp_path_factory.mktemp("tiny-submission")
    runs = write_method_runs(root / "runs")
    ref = write_reference(root)
    sub = build_submission(runs, data_dir=data_dir, reference=ref, name="tiny pabee")
    path = root / "submissions" / "submission.json"  # next to references/
    path.parent.mkdir()
    write_submission(sub, path)
    return {"root": root, "runs": runs, "ref": ref, "sub": sub, "path": path,
            "data": json.loads(path.read_text()),
            "references": References.from_dir(ref.parent)}


# ------------------------------------------------------------------------------------ the schema
def test_committed_schema_is_the_generated_one():
    committed = (REPO / "leaderboard" / "schema.json").read_text(encoding="utf-8")
    assert committed == json_schema_text(), "run: eebench leaderboard schema --out " \
                                            "leaderboard/schema.json"
    schema = json.loads(committed)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["schema_version"]["const"] == SUBMISSION_SCHEMA_VERSION
    assert schema["additionalProperties"] is False


def test_json_schema_and_pydantic_accept_a_good_submission(tiny):
    jsonschema.Draft202012Validator(json_schema()).validate(tiny["data"])
    verdict = validate_file(tiny["path"])
    assert verdict.ok, verdict.reason
    assert verdict.submission == tiny["sub"]
    assert Submission.model_validate(tiny["data"]).model_dump(mode="json") == tiny["data"]


def test_submission_content_follows_the_runs(tiny, data_dir):
    sub = tiny["sub"]
    assert sub.seeds == [1, 2] and list(sub.tasks) == ["rte"]
    task = sub.tasks["rte"]
    assert [r.seed for r in task.runs] == [1, 2]
    for run_dir, entry in zip(tiny["runs"], task.runs):
        cfg = R.RunConfig.model_validate_json((run_dir / R.CONFIG_FILE).read_text())
        assert entry.config_hash == cfg.key()
        pred = (run_dir / R.PREDICTIONS_FILE).read_bytes()
        assert entry.predictions_sha256 == hashlib.sha256(pred).hexdigest()
        points = R.read_run(run_dir).points
        assert [p.mean_flops for p in entry.points] == [p.mean_flops for p in points]
        assert [p.exit_histogram for p in entry.points] == [p.exit_histogram for p in points]
        assert entry.points[0].timings[0].latency_ms == {"p50": 1.5, "mean": 1.6}
    files = {f.split: f for f in task.data_files}
    assert set(files) == {"train", "dev"}
    for f in files.values():
        assert f.source == "local"
        assert f.sha256 == hashlib.sha256((data_dir / f.path).read_bytes()).hexdigest()
    assert sub.model.source == "local" and sub.model.local_sha256 is None  # no weights
    assert (sub.model.hidden_size, sub.model.intermediate_size, sub.model.vocab_size,
            sub.model.max_position_embeddings, sub.model.type_vocab_size) == (
        HIDDEN, FFN, VOCAB, POSITIONS, TYPES)
    assert sub.model.params == model_params()
    for entry in task.runs:
        assert entry.mean_length == pytest.approx(LENGTHS.mean()) and entry.max_length == 64
    assert sub.elue is not None and sub.elue.reference == "tiny-static"
    assert sub.elue.reference_sha256 == hashlib.sha256(tiny["ref"].read_bytes()).hexdigest()
    assert sub.elue.overall == pytest.approx(sub.elue.tasks["rte"])


def _normalised(data: dict) -> dict:
    """The submission without what changes from build to build: time, versions, hashes."""
    out = copy.deepcopy(data)
    out["created"] = "<created>"
    out["eebench"] = {"version": "<version>", "git_commit": "<commit>", "git_dirty": "<dirty>"}
    out["model"]["name"] = "<model directory>"
    if out["elue"]:
        out["elue"]["reference_model"] = "<model directory>"
        out["elue"]["reference_sha256"] = "<sha256>"  # the reference records when it was built
    for task in out["tasks"].values():
        for f in task["data_files"]:
            f["sha256"] = f["sha256"] and "<sha256>"
        for run in task["runs"]:
            run["predictions_sha256"] = "<sha256>"
            run["config_hash"] = "<config hash>"  # follows RunConfig's fields
    return out


def test_tiny_submission_matches_the_golden_file(tiny):
    got = _normalised(tiny["data"])
    if os.environ.get("EEBENCH_UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(json.dumps(got, indent=2) + "\n", encoding="utf-8")
    expected = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert got == expected, "if the change is intended: EEBENCH_UPDATE_GOLDEN=1 pytest ..."


# ------------------------------------------------------------------------------- hostile files
def _set(path: str, value):
    def edit(d: dict) -> None:
        keys = path.split(".")
        node = d
        for k in keys[:-1]:
            node = node[int(k)] if isinstance(node, list) else node[k]
        last = keys[-1]
        if value is _DELETE:
            del node[last]
        elif isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
    return edit


def _both(*edits):
    def edit(d: dict) -> None:
        for e in edits:
            e(d)
    return edit


_DELETE = object()
POINT = "tasks.rte.runs.0.points.0"

# (edit, expected words in the reason, does JSON Schema see it too)
SCHEMA_CASES = {
    "wrong type": (_set("model.params", "1000000"), "model.params: Input should be", True),
    "bool for int": (_set("seeds", [True]), "seeds.0", True),
    "float for int": (_set(f"{POINT}.exit_histogram", [0.5, 3, 6.5]), "exit_histogram", True),
    "missing field": (_set("model", _DELETE), "model: required field missing", True),
    "missing nested": (_set(f"{POINT}.mean_flops", _DELETE), "mean_flops: required", True),
    "extra field": (_set("evil", {"$ref": "x"}), "evil: unknown field", True),
    "extra nested": (_set(f"{POINT}.exec", "import os"), "exec: unknown field", True),
    "negative FLOPs": (_set(f"{POINT}.mean_flops", -5.0), "mean_flops: Input should be greater",
                       True),
    "zero params": (_set("model.params", 0), "model.params", True),
    "metric above 100": (_set(f"{POINT}.metrics.accuracy", 120.0), "metrics.accuracy", True),
    "unknown version": (_set("schema_version", 4), "schema_version 4 is not supported", True),
    "version 1": (_set("schema_version", 1), "schema_version 1 is not supported", True),
    "version as bool": (_set("schema_version", True), "schema_version True", True),
    "bad hash": (_set("tasks.rte.runs.0.predictions_sha256", "abc"), "predictions_sha256", True),
}
CONSISTENCY_CASES = {
    "histogram does not add up": (_set(f"{POINT}.exit_histogram", [5, 2, 1]), "adds up to 8"),
    "histogram length": (_set(f"{POINT}.exit_histogram", [7, 3]), "2 entries for a 3-layer"),
    "avg exit layer off": (_set(f"{POINT}.avg_exit_layer", 1.9), "not the histogram's mean"),
    "avg above depth": (_set(f"{POINT}.avg_exit_layer", 4.0), "outside 1..3"),
    "negative accuracy": (_set(f"{POINT}.metrics.accuracy", -5.0), "outside [0, 100]"),
    "main is not the metric": (_set(f"{POINT}.main", 12.5), "is not its accuracy"),
    "FLOPs fall with depth": (_both(_set("tasks.rte.runs.0.points.2.mean_flops", 1.0),
                                    _set("tasks.rte.runs.0.points.2.mean_mflops", 1e-6)),
                              "FLOPs fall as samples run deeper"),
    "mflops unit": (_set(f"{POINT}.mean_mflops", 123.0), "not mean_flops / 1e6"),
    "seeds mismatch": (_set("seeds", [1, 2, 3]), "not the seeds of the runs"),
    "environment index": (_set("tasks.rte.runs.0.environment", 7), "environment 7"),
    "elue overall": (_set("elue.overall", 99.0), "not the mean of its tasks"),
    "model deeper than L": (_set("tasks.rte.runs.0.exit_paths.2",
                                 [{"layers": 4, "heads": [4]}]), "a model of 4 layers"),
    "heads not ascending": (_set("tasks.rte.runs.0.exit_paths.1",
                                 [{"layers": 2, "heads": [2, 1]}]), "heads after layers [2, 1]"),
    "exits out of order": (_set("tasks.rte.runs.0.exit_paths.1",
                                [{"layers": 1, "heads": [1]}]), "not after the exits before it"),
    "exit where no model answers": (_set("tasks.rte.runs.0.exit_paths",
                                         [[{"layers": 1, "heads": [1]}],
                                          [{"layers": 1, "heads": [1]}, {"layers": 2,
                                                                         "heads": [2]}]]),
                                    "where no exit of the run answers"),
    "sweep names": (_set(f"{POINT}.sweep", {"speed": 0.5}), "not the method's"),
}


@pytest.mark.parametrize("case", list(SCHEMA_CASES))
def test_schema_violations_are_refused_by_both(tiny, tmp_path, case):
    edit, words, _ = SCHEMA_CASES[case]
    data = copy.deepcopy(tiny["data"])
    edit(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    verdict = validate_file(path, references=tiny["references"])
    assert not verdict.ok and words in verdict.reason, verdict.reason
    assert "\n" not in verdict.reason
    assert list(jsonschema.Draft202012Validator(json_schema()).iter_errors(data)), case


@pytest.mark.parametrize("case", list(CONSISTENCY_CASES))
def test_inconsistent_files_are_refused(tiny, tmp_path, case):
    edit, words = CONSISTENCY_CASES[case]
    data = copy.deepcopy(tiny["data"])
    edit(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    verdict = validate_file(path, references=tiny["references"])
    assert not verdict.ok and words in verdict.reason, verdict.reason
    assert "\n" not in verdict.reason


def test_a_grid_of_pairs_may_cost_less_deeper_one_line_of_it_may_not(tiny):
    """Along one threshold every sample exits no earlier as it gets stricter, so FLOPs never fall
    with depth; a grid of (patience, threshold) pairs is not nested: a point may run deeper on
    average on shorter samples and cost less, but not along one line of the grid (one patience,
    or one threshold)."""
    from eebench.submit.schema import Submission
    from eebench.submit.validate import _check_flops_grow

    run = Submission.model_validate(tiny["data"]).tasks["rte"].runs[0]
    points = [p.model_copy(update={"mean_flops": 1.0, "mean_mflops": 1e-6}) if i == 2 else p
              for i, p in enumerate(run.points)]
    with pytest.raises(DataError, match="FLOPs fall as samples run deeper"):
        _check_flops_grow(points, "run")

    def grid(*cells):  # ((patience, threshold), avg exit layer, FLOPs)
        return [run.points[0].model_copy(update={
            "sweep": {"patience": v[0], "threshold": v[1]}, "avg_exit_layer": d,
            "mean_flops": f, "mean_mflops": f / 1e6}) for v, d, f in cells]

    # patience 1 and 2 cross over: deeper on average, fewer FLOPs, on different lines: allowed
    _check_flops_grow(grid(((1, 0.5), 2.0, 200.0), ((1, 0.3), 2.5, 250.0),
                           ((2, 0.1), 3.0, 240.0), ((2, 0.3), 2.2, 210.0)), "run")
    for bad in ((((1, 0.5), 2.0, 200.0), ((1, 0.3), 2.5, 190.0)),   # one patience
                (((1, 0.5), 2.0, 200.0), ((2, 0.5), 2.5, 190.0))):  # one threshold
        with pytest.raises(DataError, match="FLOPs fall as samples run deeper"):
            _check_flops_grow(grid(*bad), "run")


@pytest.mark.parametrize("literal,words", [
    ("NaN", "NaN is not a JSON number"), ("Infinity", "Infinity is not a JSON number"),
    ("-Infinity", "-Infinity is not a JSON number"), ("1e999", "out of range"),
])
def test_nan_and_infinity_are_refused(tiny, tmp_path, literal, words):
    text = tiny["path"].read_text()
    needle = '"mean_flops": '
    at = text.index(needle) + len(needle)
    end = text.index(",", at)
    path = tmp_path / "nan.json"
    path.write_text(text[:at] + literal + text[end:])
    verdict = validate_file(path, references=tiny["references"])
    assert not verdict.ok and words in verdict.reason, verdict.reason


MALFORMED = {
    "duplicate key": (b'{"a": 1, "a": 2}', "duplicate key 'a'"),
    "array": (b"[1, 2]", "top level is a JSON list"),
    "not utf-8": (b"\xff\xfe{}", "not UTF-8"),
    "truncated": (b'{"schema_version": 1', "not valid JSON"),
    "deep nesting": (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    "empty": (b"", "not valid JSON"),
    "huge integer": (b'{"schema_version": 1, "x": ' + b"9" * 5000 + b"}", "not valid JSON"),
}


@pytest.mark.parametrize("raw,words", list(MALFORMED.values()), ids=list(MALFORMED))
def test_malformed_json_is_refused_in_one_line(tmp_path, raw, words):
    path = tmp_path / "bad.json"
    path.write_bytes(raw)
    verdict = validate_file(path)
    assert not verdict.ok and words in verdict.reason, verdict.reason
    assert "\n" not in verdict.reason


def test_a_200_mb_file_is_refused_without_reading_it(tmp_path):
    path = tmp_path / "huge.json"
    with open(path, "wb") as f:  # sparse: instant to write, 200 MB to anyone who reads it
        f.write(b'{"schema_version": 1, "name": "')
        f.truncate(200 * 2**20)
    tracemalloc.start()
    start = time.perf_counter()
    verdict = validate_file(path)
    elapsed = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert not verdict.ok and "over the" in verdict.reason and f"{MAX_BYTES:,}" in verdict.reason
    assert peak < 1 * 2**20, f"validation allocated {peak} bytes"
    assert elapsed < 1.0


def test_only_regular_files_are_read(tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)  # reading it would block forever
    verdict = validate_file(fifo)
    assert not verdict.ok and verdict.reason == "is a FIFO (named pipe), not a regular file"
    missing = validate_file(tmp_path / "nope.json")
    assert not missing.ok and "cannot read the file" in missing.reason


def test_parse_and_validate_never_coerce(tiny):
    data = copy.deepcopy(tiny["data"])
    data["schema_version"] = 3.0  # equal to 3, but not an integer
    with pytest.raises(Exception, match="schema_version"):
        validate_data(data)
    assert parse_json(b'{"x": 1.5}') == {"x": 1.5}


def test_a_version_2_file_reads_as_the_version_3_file_of_the_same_runs(tiny):
    """Version 2 wrote one number per point and declared only a cascade's depths: read through
    eebench.submit.upgrade, the tiny golden file of version 2 is the version-3 golden file, and
    a declared cascade becomes its exit paths."""
    from eebench.submit.upgrade import upgrade
    from eebench.submit.validate import parse_submission

    old = json.loads((GOLDEN.parent / "submission_tiny_v2.json").read_text(encoding="utf-8"))
    new = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert old["schema_version"] == 2 and upgrade(old) == new
    written = copy.deepcopy(tiny["data"])  # the tiny submission as version 2 wrote it
    written["schema_version"] = 2
    for run in written["tasks"]["rte"]["runs"]:
        del run["exit_paths"]
        for p in run["points"]:
            p["sweep_value"] = float(p.pop("sweep")["patience"])
    assert parse_submission(written) == parse_submission(tiny["data"])
    cascade = copy.deepcopy(old)
    cascade["tasks"]["rte"]["runs"][0]["chained_models"] = [1, 3]
    paths = upgrade(cascade)["tasks"]["rte"]["runs"][0]["exit_paths"]
    assert paths == [[{"layers": 1, "heads": [1]}],
                     [{"layers": 1, "heads": [1]}, {"layers": 3, "heads": [3]}]]
    pair = copy.deepcopy(old)
    pair["method"]["sweep_param"] = "patience+threshold"
    pair["tasks"]["rte"]["runs"][0]["points"][0]["sweep_value"] = 2.3
    point = upgrade(pair)["tasks"]["rte"]["runs"][0]["points"][0]
    assert point["sweep"] == {"patience": 2, "threshold": 0.3} and "sweep_value" not in point
    broken = copy.deepcopy(old)
    broken["tasks"]["rte"]["runs"] = "not a list"
    assert upgrade(broken) == broken  # left for the schema to refuse in one line
