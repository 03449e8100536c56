"""`eebench export-elue`: ELUE test-prediction files from real test-split runs (a tiny local
backbone on real WNLI: the whole 146-row test file, and a 20-row subset)."""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import pytest
from safetensors.numpy import load_file
from typer.testing import CliRunner

import eebench.cli.submit  # noqa: F401  (registers the commands)
from eebench.cli import app
from eebench.run import artifacts as R
from eebench.submit.export_elue import Structure, export_elue, modules
from eebench.tasks.catalog import get_task
from eebench.tasks.loaders import load_split
from tests import tiny
from tests.cli import tiny_run

runner = CliRunner()
HIDDEN = 32
MAX_LEN = 128
MODULE = re.compile(r"^\((\d+)(?:,(\d+))?\),(emb|layer_(\d+)|exit_(\d+))$")


def _run(root: Path, backbone: Path, data_dir: Path, *extra: str) -> Path:
    return Path(tiny_run(root, backbone, data_dir, *extra, task="wnli", max_seq_length=MAX_LEN,
                         eval_samples=None, time_samples=None)["run_dir"])


@pytest.fixture(scope="module")
def runs(tmp_path_factory, data_dir):
    root = tmp_path_factory.mktemp("export-elue")
    backbone = tiny.save_tiny_backbone(root / "tiny-bert", num_layers=3, hidden=HIDDEN)
    return {
        "root": root,
        "pabee": _run(root, backbone, data_dir, "--method", "pabee", "--split", "test",
                      "--time-samples", "6"),
        "static": _run(root, backbone, data_dir, "--method", "static", "--split", "test",
                       "--sweep", "1,3", "--max-eval-samples", "20"),
        "dev": _run(root, backbone, data_dir, "--method", "pabee", "--split", "dev",
                    "--max-eval-samples", "10"),
        "mean": _run(root, backbone, data_dir, "--method", "deebert", "--split", "test",
                     "--pooling", "mean", "--max-eval-samples", "20", "--sweep", "0,0.5"),
    }


def _read_tsv(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")
    assert lines[0] == "index\tpred\tmodules" and lines[-1] == ""
    return [dict(zip(("index", "pred", "modules"), line.split("\t"))) for line in lines[1:-1]]


def _check_rows(rows, run_dir: Path, point: int, exits: tuple[int, ...], pooling: str = "cls"
                ) -> None:
    """Each row: its id, its label name, and modules at its token length up to its exit (a head
    on [CLS] reads one vector, a mean-pooling head every token)."""
    arrays = load_file(str(run_dir / R.PREDICTIONS_FILE))
    ids = (run_dir / R.IDS_FILE).read_text().splitlines()
    labels = get_task("wnli").labels
    assert [r["index"] for r in rows] == ids
    for i, row in enumerate(rows):
        n, layer = int(arrays["lengths"][i]), int(arrays["exit_layer"][point, i])
        assert row["pred"] == labels[int(arrays["prediction"][point, i])]
        parsed = [MODULE.match(m) for m in row["modules"].split("; ")]
        assert all(parsed), row["modules"]
        kinds = [m.group(3) for m in parsed]
        assert kinds[0] == "emb" and parsed[0].group(1) == str(n) and parsed[0].group(2) is None
        layers = [int(m.group(4)) for m in parsed if m.group(4)]
        heads = [int(m.group(5)) for m in parsed if m.group(5)]
        assert layers == list(range(1, layer + 1))
        assert heads == [e for e in exits if e <= layer] and heads[-1] == layer
        head_shape = (str(n), str(HIDDEN)) if pooling == "mean" else (str(HIDDEN), None)
        for m in parsed[1:]:
            shape = (m.group(1), m.group(2))
            assert shape == ((str(n), str(HIDDEN)) if m.group(4) else head_shape)
        # each exit head right after its layer
        for e in heads:
            assert kinds[kinds.index(f"layer_{e}") + 1] == f"exit_{e}"


def test_modules_string_matches_the_elue_example():
    s = Structure(hidden=384, exit_layers=(1, 2, 3, 4, 5, 6))
    assert modules(15, 2, s) == "(15),emb; (15,384),layer_1; (384),exit_1; (15,384),layer_2; " \
                                "(384),exit_2"
    static = Structure(hidden=384, exit_layers=(3,))
    assert modules(7, 3, static) == "(7),emb; (7,384),layer_1; (7,384),layer_2; " \
                                    "(7,384),layer_3; (384),exit_3"
    mean = Structure(hidden=384, exit_layers=(1, 2, 3, 4, 5, 6), pooling="mean")
    assert modules(15, 2, mean) == "(15),emb; (15,384),layer_1; (15,384),exit_1; " \
                                   "(15,384),layer_2; (15,384),exit_2"


def test_export_of_a_mean_pooling_run(runs, tmp_path):
    cfg = R.RunConfig.model_validate_json((runs["mean"] / R.CONFIG_FILE).read_text())
    assert cfg.pooling == "mean"
    export = export_elue(runs["mean"], tmp_path)
    assert [f.path.name for f in export.files] == ["wnli_threshold-0.tsv",
                                                   "wnli_threshold-0.5.tsv"]
    for p, f in enumerate(export.files):
        rows = _read_tsv(f.path)
        assert len(rows) == 20
        _check_rows(rows, runs["mean"], p, exits=(1, 2, 3), pooling="mean")


def test_export_of_a_whole_test_file(runs, data_dir, tmp_path):
    result = runner.invoke(app, ["export-elue", str(runs["pabee"]), "--out", str(tmp_path),
                                 "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["rows"] == 146 == report["expected_rows"] and report["complete"]
    assert "warning" not in result.stderr
    points = R.read_run(runs["pabee"]).points
    names = [Path(f["path"]).name for f in report["files"]]
    assert names == [f"wnli_patience-{p.sweep_value:g}.tsv" for p in points]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names)

    with open(data_dir / "WNLI" / "test.tsv", encoding="utf-8", newline="") as f:
        test_index = [r["index"] for r in csv.DictReader(f, delimiter="\t",
                                                         quoting=csv.QUOTE_NONE)]
    # real token lengths: the run's, which are the tokenizer's on the real test rows
    examples = load_split("wnli", "test", data_dir)
    enc = tiny.tokenizer()([t[0] for t in examples.texts], [t[1] for t in examples.texts],
                           truncation=True, max_length=MAX_LEN)
    lengths = load_file(str(runs["pabee"] / R.PREDICTIONS_FILE))["lengths"]
    assert lengths.tolist() == [len(ids) for ids in enc["input_ids"]]
    for p, name in enumerate(names):
        rows = _read_tsv(tmp_path / name)
        assert len(rows) == 146
        assert [r["index"] for r in rows] == test_index  # every test row, in file order
        _check_rows(rows, runs["pabee"], p, exits=(1, 2, 3))


def test_export_of_a_subset_and_of_a_static_model(runs, tmp_path):
    export = export_elue(runs["static"], tmp_path)
    assert export.rows == 20 and export.expected_rows == 146 and not export.complete
    assert [f.path.name for f in export.files] == ["wnli_layers-1.tsv", "wnli_layers-3.tsv"]
    for p, (f, k) in enumerate(zip(export.files, (1, 3))):
        rows = _read_tsv(f.path)
        assert len(rows) == 20 == f.rows  # the rows evaluated
        _check_rows(rows, runs["static"], p, exits=(k,))
        assert all(r["modules"].count("exit_") == 1 for r in rows)
    result = runner.invoke(app, ["export-elue", str(runs["static"]), "--out",
                                 str(tmp_path / "cli")])
    assert result.exit_code == 0 and "warning: 20 of 146 test rows" in result.stderr


def _one_number(sweep: dict) -> dict:
    """A point's sweep as schema 1 wrote it: one number, named."""
    [(name, value)] = sweep.items()
    return {"sweep_param": name, "sweep_value": float(value)}


def test_runs_written_before_variants_export_the_same_files(runs, tmp_path):
    """A run in the first schemas (no variants, no hidden size, checkpoints gone) is upgraded on
    reading: the exits follow from the method, the hidden size from the model."""
    for name in ("pabee", "static", "mean"):
        moved = tmp_path / name
        shutil.copytree(runs[name], moved)
        summary = json.loads((moved / R.SUMMARY_FILE).read_text())
        summary["checkpoints"] = [str(tmp_path / "gone" / v["name"]) for v in summary["variants"]]
        del summary["variants"], summary["files"]
        summary["schema_version"] = 1
        (moved / R.SUMMARY_FILE).write_text(json.dumps(summary))
        lines = (moved / R.POINTS_FILE).read_text().splitlines()
        old = [{k: v for k, v in json.loads(line).items() if k not in ("variant", "sweep")}
               | _one_number(json.loads(line)["sweep"]) for line in lines]
        (moved / R.POINTS_FILE).write_text("".join(json.dumps({**p, "schema_version": 1}) + "\n"
                                                   for p in old))
        upgraded = R.read_run(moved)
        assert [p.variant for p in upgraded.points] == [p.variant
                                                        for p in R.read_run(runs[name]).points]
        assert all(v.hidden_size is None for v in upgraded.summary.variants)
        first = export_elue(runs[name], tmp_path / f"{name}-a")
        second = export_elue(moved, tmp_path / f"{name}-b")
        for a, b in zip(first.files, second.files):
            assert a.path.read_text() == b.path.read_text()


def test_export_refuses_dev_runs_and_incomplete_run_directories(runs, tmp_path):
    dev = runner.invoke(app, ["export-elue", str(runs["dev"]), "--out", str(tmp_path / "x")])
    assert dev.exit_code == 2 and "a dev-split run" in dev.stderr
    assert len(dev.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()

    no_ids = tmp_path / "no-ids"
    shutil.copytree(runs["static"], no_ids)
    (no_ids / R.IDS_FILE).unlink()
    result = runner.invoke(app, ["export-elue", str(no_ids), "--out", str(tmp_path / "y")])
    assert result.exit_code == 1 and "ids.txt: missing" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1

    short = tmp_path / "short-ids"
    shutil.copytree(runs["static"], short)
    (short / R.IDS_FILE).write_text("0\n1\n")
    result = runner.invoke(app, ["export-elue", str(short), "--out", str(tmp_path / "z")])
    assert result.exit_code == 1 and "does not match the sha256" in result.stderr
    # the same run as an older version wrote it (no hashes in its summary): the rows are checked
    summary = json.loads((short / R.SUMMARY_FILE).read_text())
    del summary["files"]
    (short / R.SUMMARY_FILE).write_text(json.dumps(summary))
    result = runner.invoke(app, ["export-elue", str(short), "--out", str(tmp_path / "z")])
    assert result.exit_code == 1 and "2 ids for 20 samples" in result.stderr
    ids = [str(i) for i in range(20)]
    ids[4] = "4\tx"
    (short / R.IDS_FILE).write_text("".join(f"{i}\n" for i in ids))
    result = runner.invoke(app, ["export-elue", str(short), "--out", str(tmp_path / "z")])
    assert result.exit_code == 1 and "ids.txt:5: the id holds a tab" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "z").exists()

    missing = runner.invoke(app, ["export-elue", str(tmp_path / "nothing"), "--out",
                                  str(tmp_path / "w")])
    assert missing.exit_code == 1 and "no such run directory" in missing.stderr


def test_the_report_manifest_lists_every_test_split_run_and_the_models_that_made_it(
        runs, data_dir, tmp_path):
    """`report.py --export`: every test-split run of the folder, each with its method, task,
    seed and key, a `--test-out` twin with its dev run and checkpoints, and its files."""
    from eebench.reports import Context, Runs
    from eebench.reports.files import export_tests

    folder = tmp_path / "results" / "tiny-test"
    dev = tiny_run(tmp_path, runs["root"] / "tiny-bert", data_dir, "--method", "deebert",
                   "--test-out", folder, task="wnli", max_seq_length=MAX_LEN, eval_samples=10,
                   time_samples=None)
    made_alone = folder / runs["pabee"].relative_to(runs["root"] / "runs")  # --split test
    shutil.copytree(runs["pabee"], made_alone)
    said: list[str] = []
    export_tests(Context(root=tmp_path, say=said.append), Runs(folder="results/tiny-test"),
                 "results/export")
    manifest = json.loads((folder / "export-manifest.json").read_text())
    assert manifest["schema_version"] == 2
    twin, alone = manifest["runs"]
    assert [(e["method"], e["task"]) for e in (twin, alone)] == [("deebert", "wnli"),
                                                                  ("pabee", "wnli")]
    assert alone["key"] == made_alone.name and "provenance" not in alone
    made = twin["provenance"]
    assert made["dev_run"] == Path(dev["run_dir"]).name
    [model] = made["models"]  # DeeBERT's one model, trained with the run's seed
    assert model["seed"] == twin["seed"] and len(model["weights_sha256"]) == 64
    for entry in (twin, alone):
        run = R.read_run(tmp_path / entry["run"])
        assert (entry["key"], entry["seed"]) == (run.config.key(), run.config.seed)
        assert "rule" not in entry
        assert [f["sweep"].split("=")[0] for f in entry["files"]] == [
            p.sweep_param for p in run.points]
        for f in entry["files"]:
            assert f["rows"] == 146 and (tmp_path / f["file"]).is_file()
    assert said == [f"exported {len(twin['files']) + len(alone['files'])} ELUE test files of 2 "
                    "test-split runs to results/export"]
