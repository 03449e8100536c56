"""`eebench score` and `eebench reference build` on small synthetic run directories.

The runs are made with eebench.run.artifacts exactly as `eebench run` writes them. The reference
curve and the points are chosen so that every ELUE score has a known answer worked out by hand.
"""

from __future__ import annotations

import csv
import errno
import json
import os
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

import eebench.cli.score  # noqa: F401  (registers the commands)
from eebench.io import write_json
from eebench.run.artifacts import (
    CONFIG_FILE,
    ENV_FILE,
    IDS_FILE,
    POINTS_FILE,
    PREDICTIONS_FILE,
    SUMMARY_FILE,
    OperatingPoint,
    RunConfig,
    RunSummary,
    write_points,
)
from tests.cli import invoke
from tests.tiny import variant_records

N = 200  # samples per run; every main metric below is a multiple of 0.5% of N
CONVENTION = "2-flops-per-mac"


def write_run(
    root: Path,
    method: str,
    points: list[tuple[float, float, float]],  # (sweep value, MFLOPs, accuracy in percent)
    *,
    task: str = "rte",
    seed: int = 0,
    split: str = "dev",
    convention: str = CONVENTION,
    model: str = "minilm-l6",
    sweep_param: str | None = None,
    num_layers: int = 6,
) -> Path:
    """A run directory whose per-sample predictions reproduce each point's accuracy exactly:
    every file a run has; its summary records no sha256 (as runs written before hashes were),
    so that a test may change the arrays it wrote."""
    sweep_param = sweep_param or ("layers" if method == "static" else "threshold")
    config = RunConfig(model=model, method=method, task=task, split=split, seed=seed,
                       sweep=[v for v, _, _ in points], max_seq_length=128,
                       flops_convention=convention)
    run = root / model / method / task / config.key()
    labels = np.arange(N) % 2
    preds, layers, ops = [], [], []
    for row, (value, mflops, acc) in enumerate(points):
        layer = int(value) if method == "static" else 2  # every sample exits at this layer
        layers.append(layer)
        correct = np.zeros(N, dtype=bool)
        rng = np.random.default_rng(1000 * seed + row)
        correct[rng.permutation(N)[: int(round(acc / 100 * N))]] = True
        preds.append(np.where(correct, labels, 1 - labels))
        ops.append(OperatingPoint(
            method=method, variant=f"k{int(value)}" if method == "static" else "all", task=task,
            split=split, seed=seed, sweep={sweep_param: value}, n_samples=N, num_layers=num_layers,
            metrics={"accuracy": acc}, main_metric="accuracy", main=acc, avg_exit_layer=layer,
            exit_histogram=[N if i == layer else 0 for i in range(1, num_layers + 1)],
            flops_convention=convention,
            mean_flops=mflops * 1e6, mean_mflops=mflops, speedup=1.0, layer_saving=0.0,
            params_total=1, params_mean_used=1.0,
        ))
    write_json(run / CONFIG_FILE, config)
    write_json(run / ENV_FILE, {})
    write_points(run / POINTS_FILE, ops)
    save_file({"labels": labels.astype(np.int64), "prediction": np.stack(preds).astype(np.int64),
               "exit_layer": np.repeat(np.array(layers)[:, None], N, axis=1)},
              str(run / PREDICTIONS_FILE))
    (run / IDS_FILE).write_text("".join(f"{i}\n" for i in range(N)))
    write_json(run / SUMMARY_FILE, RunSummary(
        model=model, method=method, task=task, split=split, seed=seed, config_hash=config.key(),
        n_samples=N, num_points=len(points),
        variants=variant_records(method, config.sweep, num_layers),
    ))
    return run


def static_points(offset: float) -> list[tuple[float, float, float]]:
    """k = 1..6 layers at 10k MFLOPs; seeds at offset -/+0.5 average to 60 + 3k."""
    return [(k, 10.0 * k, 60.0 + 3 * k + offset) for k in range(1, 7)]


PABEE = [(0.1, 15.0, 70.0), (0.2, 35.0, 70.0), (0.3, 5.0, 62.0)]
# curve at 15 = 64.5 (+5.5); at 35 = 70.5 (-0.5); at 5: clamp 63 (-1), linear 61.5 (+0.5)
PABEE_CLAMP = (5.5 - 0.5 - 1.0) / 3
PABEE_LINEAR = (5.5 - 0.5 + 0.5) / 3


def write_runs(root: Path) -> Path:
    """Two seeds of static k = 1..6 and of pabee's three thresholds."""
    for seed, offset in ((0, -0.5), (1, 0.5)):
        write_run(root, "static", static_points(offset), seed=seed)
        write_run(root, "pabee", PABEE, seed=seed)
    return root


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    return write_runs(tmp_path / "runs")


def build_ref(runs: Path, out: Path, *extra: str) -> Path:
    result = invoke("reference", "build", runs / "minilm-l6" / "static", "--out", out, *extra)
    assert result.exit_code == 0, result.output
    return out


def test_reference_build_averages_seeds(runs: Path, tmp_path: Path):
    ref = json.loads(build_ref(runs, tmp_path / "ref.json", "--name", "mini").read_text())
    assert ref["schema_version"] == 1 and ref["name"] == "mini"
    assert ref["flops_convention"] == CONVENTION and ref["split"] == "dev"
    curve = ref["tasks"]["rte"]
    assert [p["layers"] for p in curve["points"]] == [1, 2, 3, 4, 5, 6]
    assert [p["main"] for p in curve["points"]] == [60.0 + 3 * k for k in range(1, 7)]
    assert [p["mflops"] for p in curve["points"]] == [10.0 * k for k in range(1, 7)]
    assert curve["points"][0]["seeds"] == [0, 1]
    assert curve["points"][0]["main_std"] == pytest.approx(np.std([62.5, 63.5], ddof=1))
    assert ref["provenance"]["seeds"] == [0, 1] and len(ref["provenance"]["runs"]) == 2


def test_reference_build_one_run_per_k_equals_one_run_with_every_k(tmp_path: Path):
    together, apart = tmp_path / "together", tmp_path / "apart"
    write_run(together, "static", static_points(0.0))
    for point in static_points(0.0):
        write_run(apart, "static", [point])
    a = json.loads(build_ref(together, tmp_path / "a.json").read_text())
    b = json.loads(build_ref(apart, tmp_path / "b.json").read_text())
    assert a["tasks"] == b["tasks"]


@pytest.mark.parametrize(("policy", "expected"), [("clamp", PABEE_CLAMP), ("linear", PABEE_LINEAR)])
def test_score_json_has_known_elue_scores(runs: Path, tmp_path: Path, policy, expected):
    ref = build_ref(runs, tmp_path / "ref.json")
    result = invoke("score", runs, "--reference", ref, "--extrapolate", policy, "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)  # stdout holds the JSON alone
    assert data["extrapolate"] == policy
    rte = data["tasks"]["rte"]
    assert rte["methods"]["static"]["elue"] == 0.0  # scored against itself: exactly zero
    assert data["overall"]["static"] == 0.0
    assert rte["methods"]["pabee"]["elue"] == pytest.approx(expected, abs=1e-6)
    assert data["overall"]["pabee"] == pytest.approx(expected, abs=1e-6)
    # each seed alone: static at -0.5 / +0.5 around its own seed-averaged curve, pabee the same
    assert data["elue_by_seed"]["static"]["rte"] == {"0": -0.5, "1": 0.5}
    assert data["elue_by_seed"]["pabee"]["rte"] == pytest.approx({"0": expected, "1": expected})
    assert "+0.00 ± 0.71" in result.stderr  # the table shows that spread
    assert [r["method"] for r in data["ranking"]] == ["pabee", "static"]
    by_value = {(p["method"], p["sweep_value"]): p for p in rte["points"]}
    assert by_value[("pabee", 0.1)]["elue_delta"] == pytest.approx(5.5)
    assert by_value[("pabee", 0.1)]["seeds"] == [0, 1]
    # Pareto: pabee at 15 MFLOPs (70%) dominates static k=2..3 (20-30 MFLOPs, below 70%).
    assert by_value[("pabee", 0.1)]["pareto"] and by_value[("pabee", 0.3)]["pareto"]
    assert not by_value[("static", 2.0)]["pareto"] and not by_value[("static", 3.0)]["pareto"]
    assert by_value[("static", 4.0)]["pareto"]  # 72% beats everything cheaper
    assert not by_value[("pabee", 0.2)]["pareto"]  # 70% at 35 MFLOPs: pabee 0.1 is cheaper
    hv = rte["hv_reference"]
    assert hv["mflops"] == 60.0 and hv["mflops_source"] == "full model"  # static k = 6
    # labels alternate 0/1: always predicting the majority (ties: the lower id) is 50% right
    assert hv["metric"] == 50.0 and hv["metric_source"] == "majority-class baseline"
    assert 0 < rte["hypervolume"] <= rte["auc"] <= 1


def test_score_without_reference_prints_fronts(runs: Path, tmp_path: Path):
    out_csv = tmp_path / "points.csv"
    result = invoke("score", runs, "--csv", out_csv)
    assert result.exit_code == 0, result.stderr
    assert "Pareto front: rte" in result.stdout  # tables go to stdout (`| less` shows them)
    assert result.stderr == f"wrote {out_csv}\n"  # notes to stderr
    rows = list(csv.DictReader(out_csv.open()))
    assert len(rows) == 6 + 3  # seeds averaged: 6 static k, 3 pabee thresholds
    assert {r["method"] for r in rows} == {"static", "pabee"}
    assert all(r["elue_delta"] == "" for r in rows)


def test_tables_go_to_stdout_and_json_alone_with_json(runs: Path, tmp_path: Path):
    ref = build_ref(runs, tmp_path / "ref.json")
    tables = invoke("score", runs, "--reference", ref)
    assert tables.exit_code == 0, tables.stderr
    assert tables.stderr == ""
    assert "ELUE score (points above" in tables.stdout
    assert "\n4 run directories, 9 operating points, 1 tasks\n" in tables.stdout
    as_json = invoke("score", runs, "--reference", ref, "--json")
    assert as_json.exit_code == 0, as_json.stderr
    assert json.loads(as_json.stdout)["overall"]["static"] == 0.0  # the JSON alone
    assert as_json.stderr == tables.stdout  # the same tables, out of the JSON's way


def test_reference_build_tables_go_to_stdout(runs: Path, tmp_path: Path):
    out = tmp_path / "ref.json"
    result = invoke("reference", "build", runs / "minilm-l6" / "static", "--out", out)
    assert result.exit_code == 0, result.stderr
    assert "minilm-l6-static: rte (accuracy, dev)" in result.stdout
    assert result.stderr == f"wrote {out} (1 tasks, 2 runs)\n"
    as_json = invoke("reference", "build", runs / "minilm-l6" / "static", "--out", out, "--json")
    assert json.loads(as_json.stdout) == json.loads(out.read_text())
    assert "minilm-l6-static: rte" in as_json.stderr


def test_score_csv_keeps_its_columns(runs: Path, tmp_path: Path):
    out = tmp_path / "points.csv"
    assert invoke("score", runs, "--csv", out).exit_code == 0
    rows = list(csv.DictReader(out.open(newline="")))
    assert list(rows[0])[:12] == ["task", "method", "sweep_param", "sweep_value", "n_seeds",
                                  "mflops", "mflops_std", "main_metric", "main", "main_std",
                                  "pareto", "elue_delta"]  # new columns come after these
    pabee = next(r for r in rows if r["method"] == "pabee" and r["sweep_value"] == "0.1")
    assert [pabee[k] for k in ("n_seeds", "mflops", "main", "pareto", "split", "num_layers")] \
        == ["2", "15.0", "70.0", "1", "dev", "6"]


@pytest.mark.parametrize("failure", ["parent is a file", "disk full"])
def test_score_csv_is_written_whole_or_not_at_all(runs: Path, tmp_path: Path, monkeypatch,
                                                   failure: str):
    out = tmp_path / "out" / "points.csv"
    out.parent.mkdir()
    out.write_text("the previous file\n")
    if failure == "parent is a file":
        out = tmp_path / "out" / "points.csv" / "points.csv"
    else:  # the first half is written, then the disk is full
        def write_half(self, text, *args, **kwargs):
            Path.write_bytes(self, text[: len(text) // 2].encode())
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(Path, "write_text", write_half)
    line = one_line_error(invoke("score", runs, "--csv", out))
    assert line.startswith(f"error: {out}: cannot write the CSV file (")
    assert (tmp_path / "out" / "points.csv").read_text() == "the previous file\n"
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["points.csv"]  # no temporary


def test_score_accepts_globs_and_single_dirs(runs: Path):
    pattern = str(runs / "*" / "pabee" / "*" / "*")
    result = invoke("score", pattern, "--json")
    assert result.exit_code == 0, result.stderr
    assert set(json.loads(result.stdout)["tasks"]["rte"]["methods"]) == {"pabee"}


def test_compare_is_reproducible_and_brackets_the_difference(runs: Path):
    args = ("score", runs, "--compare", "pabee", "static", "--bootstrap", "300", "--json")
    first, second = invoke(*args), invoke(*args)
    assert first.exit_code == 0, first.stderr
    rows = json.loads(first.stdout)["compare"]
    assert rows == json.loads(second.stdout)["compare"]
    assert len(rows) == len(PABEE) + 1  # one per matched pair, then all pairs pooled
    # pabee 0.1 (15 MFLOPs) lies 5 MFLOPs from static k=1 and k=2: the tie goes to the cheaper.
    pair = next(r for r in rows if r["a"] and r["a"]["sweep_value"] == 0.1)
    assert pair["b"]["sweep_value"] == 1.0
    assert pair["pairing"] == "same samples, seeds averaged"  # both seeds saw the whole split
    assert pair["difference"] == pytest.approx(70.0 - 63.0)  # per-sample accuracies reproduce
    assert pair["ci_low"] <= pair["difference"] <= pair["ci_high"]
    assert 0 < pair["p_value"] <= 1 and rows[-1]["a"] is None


def one_line_error(result) -> str:
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_the_api_report_holds_everything_score_json_prints(runs: Path, tmp_path: Path):
    """`eebench score --json` is the library's report serialised, sections included."""
    from eebench import api

    ref = build_ref(runs, tmp_path / "ref.json")
    cli = invoke("score", runs, "--reference", ref, "--compare", "pabee", "static",
                 "--bootstrap", "50", "--budget", "40", "--json")
    assert cli.exit_code == 0, cli.stderr
    report = api.score(runs, ref, compare=("pabee", "static"), n_resamples=50, budgets=[40])
    data = json.loads(json.dumps(report.to_dict()))
    assert data == json.loads(cli.stdout)
    assert {"elue_by_seed", "compare", "quality", "budgets", "param_buckets"} <= set(data)
    assert {b["percent"] for b in data["budgets"]} == {40}


def test_empty_directory(tmp_path: Path):
    (tmp_path / "empty").mkdir()
    assert "no run directories" in one_line_error(invoke("score", tmp_path / "empty"))


def test_missing_path_and_empty_glob(tmp_path: Path):
    assert "no such file" in one_line_error(invoke("score", tmp_path / "nope"))
    assert "matches nothing" in one_line_error(invoke("score", str(tmp_path / "x*")))


def test_mixed_flops_conventions(runs: Path):
    write_run(runs, "deebert", PABEE, convention="1-flop-per-mac")
    assert "mixed FLOPs conventions" in one_line_error(invoke("score", runs))


def test_mismatched_splits(runs: Path):
    write_run(runs, "deebert", PABEE, split="test")
    assert "mixed splits" in one_line_error(invoke("score", runs))


def test_point_missing_a_field(tmp_path: Path):
    run = write_run(tmp_path, "pabee", PABEE)
    lines = (run / POINTS_FILE).read_text().splitlines()
    broken = json.loads(lines[1])
    del broken["mean_flops"]
    lines[1] = json.dumps(broken)
    (run / POINTS_FILE).write_text("\n".join(lines) + "\n")
    line = one_line_error(invoke("score", tmp_path))
    assert f"{POINTS_FILE}:2" in line and "mean_flops" in line


@pytest.mark.parametrize("field, value, message", [
    ("main", "NaN", "main: Input should be a finite number"),
    ("main", "1e308", "main: Input should be less than or equal to 100"),
    ("mean_flops", "-5.0", "mean_flops: Input should be greater than 0"),
    ("mean_flops", "1e308", "mean_flops: Input should be less than or equal to 1000000000000"),
    ("mean_flops", '"many"', "mean_flops: Input should be a valid number"),
    ("avg_exit_layer", "1.0", "avg_exit_layer 1.0 is not the exit histogram's mean"),
])
def test_impossible_numbers_in_a_point_are_refused_naming_file_and_line(tmp_path: Path, field,
                                                                       value, message):
    run = write_run(tmp_path, "pabee", PABEE)
    lines = (run / POINTS_FILE).read_text().splitlines()
    point = json.loads(lines[1])
    lines[1] = json.dumps(point).replace(f'"{field}": {json.dumps(point[field])}',
                                         f'"{field}": {value}')
    (run / POINTS_FILE).write_text("\n".join(lines) + "\n")
    line = one_line_error(invoke("score", tmp_path))
    assert f"{POINTS_FILE}:2: not a valid OperatingPoint" in line and message in line


def test_empty_points_file(tmp_path: Path):
    run = write_run(tmp_path, "pabee", PABEE)
    (run / POINTS_FILE).write_text("")
    assert "no operating points" in one_line_error(invoke("score", tmp_path))


def test_reference_without_the_task(runs: Path, tmp_path: Path):
    ref = build_ref(runs, tmp_path / "ref.json")
    write_run(runs, "pabee", PABEE, task="sst2")
    line = one_line_error(invoke("score", runs, "--reference", ref))
    assert "no curve for task sst2" in line and "rte" in line


def test_reference_of_another_convention(runs: Path, tmp_path: Path):
    other = tmp_path / "other"
    write_run(other, "static", static_points(0.0), convention="1-flop-per-mac")
    ref = build_ref(other, tmp_path / "ref.json")
    assert "FLOPs convention" in one_line_error(invoke("score", runs, "--reference", ref))


@pytest.mark.parametrize("edit", ["schema", "extra", "json"])
def test_malformed_reference_file(runs: Path, tmp_path: Path, edit: str):
    ref = build_ref(runs, tmp_path / "ref.json")
    data = json.loads(ref.read_text())
    if edit == "schema":
        data["schema_version"] = 99
    elif edit == "extra":
        data["tasks"]["rte"]["colour"] = "red"
    ref.write_text(json.dumps(data) if edit != "json" else "{not json")
    one_line_error(invoke("score", runs, "--reference", ref))


@pytest.mark.parametrize("field, value, message", [
    ("flops", -1.0, "flops: Input should be greater than 0"),
    ("flops", 1e308, "flops: Input should be less than or equal to"),
    ("main", 1e308, "main: Input should be less than or equal to 100"),
    ("main", "70", "main: Input should be a valid number"),
    ("mflops", 123.0, "is not flops / 1e6"),
])
def test_impossible_numbers_in_a_reference_are_refused(runs: Path, tmp_path: Path, field, value,
                                                       message):
    ref = build_ref(runs, tmp_path / "ref.json")
    data = json.loads(ref.read_text())
    data["tasks"]["rte"]["points"][0][field] = value
    ref.write_text(json.dumps(data))
    line = one_line_error(invoke("score", runs, "--reference", ref))
    assert "not a valid reference file" in line and message in line, line


def test_reference_build_refuses_non_static_and_mixed(runs: Path, tmp_path: Path):
    line = one_line_error(invoke("reference", "build", runs, "--out", tmp_path / "r.json"))
    assert "not of single-exit models" in line
    write_run(runs / "more", "static", static_points(0.0), split="test", seed=5)
    line = one_line_error(invoke("reference", "build", runs / "minilm-l6" / "static",
                                 runs / "more", "--out", tmp_path / "r.json"))
    assert "mixed splits" in line
    assert not (tmp_path / "r.json").exists()


def test_compare_unknown_method_is_a_usage_error(runs: Path):
    result = invoke("score", runs, "--compare", "pabee", "bert")
    assert result.exit_code == 2 and "no method 'bert'" in result.stderr
