"""What the repository ships from the benchmark: submissions valid under the exported JSON Schema
and `eebench validate`, and a reference curve that scores the static runs it was built from at 0."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from eebench.score import aggregate_seeds, load_reference, load_runs, raw_points, score
from eebench.submit.validate import validate_file

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = sorted((ROOT / "leaderboard" / "submissions").glob("*.json"))
# the encoder submissions, and the decoder ones (`"kind": "decoder"`: benchmarks/decoder_smollm2.sh)
DECODERS = [p for p in SHIPPED if json.loads(p.read_text()).get("kind") == "decoder"]
SUBMISSIONS = [p for p in SHIPPED if p not in DECODERS]
REFERENCE = ROOT / "leaderboard" / "references" / "minilm-l6-static.json"
RUNS = ROOT / "benchmarks" / "results" / "elue-minilm"
# Audits of what the repository ships, not tests of the code: `python -m pytest -m audit`
pytestmark = pytest.mark.audit


def test_the_benchmark_ships_submissions_and_a_reference():
    assert SUBMISSIONS, "leaderboard/submissions/ holds no submission"
    assert REFERENCE.is_file()


@pytest.mark.parametrize("path", SUBMISSIONS, ids=[p.name for p in SUBMISSIONS])
def test_shipped_submission_is_valid(path):
    schema = json.loads((ROOT / "leaderboard" / "schema.json").read_text())
    data = json.loads(path.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(data, schema, cls=jsonschema.Draft202012Validator)
    verdict = validate_file(path)  # its ELUE scores recomputed against leaderboard/references
    assert verdict.ok, verdict.reason
    # each model's submissions against its own static runs' curve, shipped beside them
    shipped = REFERENCE.parent / f"{data['elue']['reference']}.json"
    reference = load_reference(shipped)
    model = "-".join(path.stem.split("-")[:2])  # minilm-l6-pabee.json: minilm-l6
    assert data["elue"]["reference"] == reference.name == f"{model}-static"
    assert set(data["elue"]["tasks"]) == set(data["tasks"]) <= set(reference.tasks)
    # pinned to the shipped reference's bytes: a reference rewritten in place refuses them all
    assert data["elue"]["reference_sha256"] == hashlib.sha256(shipped.read_bytes()).hexdigest()


def _finished(method: str) -> list[Path]:
    return sorted(p.parent for p in (RUNS / "minilm-l6" / method).rglob("summary.json"))


@pytest.mark.parametrize("path", DECODERS, ids=[p.name for p in DECODERS])
def test_shipped_decoder_submission_is_valid_and_what_its_runs_give(path):
    """Valid against the decoder schema and `eebench validate`, and rebuilt from the committed
    decoder runs it names it says the same (but for when and by which eebench it was made)."""
    from eebench.reports.files import MAKING, same_numbers
    from eebench.submit.decoder import build_decoder_submission

    schema = json.loads((ROOT / "leaderboard" / "decoder-schema.json").read_text())
    data = json.loads(path.read_text())
    jsonschema.validate(data, schema, cls=jsonschema.Draft202012Validator)
    verdict = validate_file(path)
    assert verdict.ok, verdict.reason
    runs = ROOT / "benchmarks" / "results" / "decoder-smollm2" / "smollm2-135m" / "decode"
    dirs = [runs / task / r["config_hash"] for task, t in data["tasks"].items() for r in t["runs"]]
    assert all(d.is_dir() for d in dirs), dirs
    built = json.loads(build_decoder_submission(dirs, name=data["name"]).model_dump_json())
    assert same_numbers({k: v for k, v in data.items() if k not in MAKING},
                        {k: v for k, v in built.items() if k not in MAKING}), path.name


def test_the_leaderboard_ships_both_decoder_exits():
    heads = sorted(json.loads(p.read_text())["model"]["head"] for p in DECODERS)
    assert heads == ["adapter", "lens"]


def test_static_runs_score_zero_against_the_shipped_reference():
    reference = load_reference(REFERENCE)
    runs = load_runs(_finished("static"))
    report = score(aggregate_seeds(raw_points(runs)), reference)
    assert set(report.tasks) == set(reference.tasks)
    for task in report.tasks.values():
        assert task.methods["static"].elue == pytest.approx(0.0, abs=1e-9)
    # The other methods score against it; their scores are finite and differ from 0.
    others = load_runs(_finished("pabee"))
    assert others
    for label, per_task in score(aggregate_seeds(raw_points(others)), reference).elue.items():
        assert label == "pabee" and all(abs(v) > 0 for v in per_task.values())


def _blocks():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from reports import BLOCKS

    return BLOCKS


@pytest.fixture(scope="module")
def context(data_dir):
    from eebench.reports import Context

    # runs loaded once for every block; nothing written (figures, references, submissions)
    return Context(root=ROOT, data_dir=data_dir, write=False)


@pytest.mark.parametrize("name", [b.name for b in _blocks()])
def test_generated_block_is_what_its_runs_give(name, context):
    """Every report block of docs/results.md (and docs/benchmarks.md) is rebuilt, byte for byte,
    from the committed runs by its declaration (and the data, for the difficulty block's texts),
    once, and placed in its document it changes nothing; nothing is written."""
    from eebench.reports.core import build, place

    [block] = [b for b in _blocks() if b.name == name]
    where = ROOT / block.doc
    doc = where.read_text(encoding="utf-8")
    text = build(block, context)
    assert text in doc
    assert place(doc, text, block, where) == doc
    assert where.read_text(encoding="utf-8") == doc


def test_report_check_passes_on_the_shipped_documents(data_dir):
    """`python benchmarks/report.py --check` (here on the quick blocks) exits 0: nothing would
    change."""
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "report.py"), "--check",
                          "--block", "shift", "--block", "mpnet-cost",
                          "--data-dir", str(data_dir)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "up to date" in out.stderr


@pytest.mark.parametrize("seeds", [[1], [1, 2]], ids=["whole", "seed 2 to come"])
def test_the_12_layer_page_builds_from_a_12_layer_run_set(tmp_path, seeds):
    """The 12-layer benchmark's page (declared in benchmarks/reports.py once its first run is
    in) builds from a run set of the same shape: here the 12-layer slice's runs, writing its
    reference, figures and submissions into a scratch folder. Submissions pin the reference by
    sha256, so while a static run of the config is still to come (a second seed here) neither
    is written: the page scores against the curve so far and says so."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import reports

    from eebench.reports import Block, Context, Runs, build

    config = tmp_path / "bench.toml"
    config.write_text((ROOT / "benchmarks" / "elue-mpnet.toml").read_text().replace(
        "seeds = [1]", f"seeds = {seeds}"))
    block = Block(
        name="elue-mpnet", kind="elue-benchmark", marker="elue-mpnet",
        runs={"main": Runs(folder="benchmarks/results/elue-mpnet"),
              "rules": Runs(folder=str(tmp_path / "no-rules")),
              "test": Runs(folder="benchmarks/results/elue-mpnet-test")},
        text={"body": reports.MPNET_PAGE, "task": reports.MPNET_TASK, "rules": "{table}",
              "no_rules": ""},
        options={"config": str(config), "reference": str(tmp_path / "ref.json"),
                 "reference_name": "mpnet-base-static", "figures": str(tmp_path / "figures"),
                 "submissions": str(tmp_path / "subs"),
                 "submission_file": "mpnet-base-{method}.json",
                 "submission_name": "MPNet-base {method} (CPU)", "export": str(tmp_path / "x"),
                 "classic": reports.CLASSIC, "field": ["elasticbert"],
                 "field_tasks": ["elue-sst2"], "field_seeds": [1],
                 "pairs": [["pabee", "static"], ["deebert", "static"]], "n_resamples": 100,
                 "setting": {"entropy": "entropy <", "patience": "patience"},
                 "schemes": [], "rules": []})
    text = build(block, Context(root=ROOT, figures=False))
    # static, DeeBERT, PABEE on two tasks: one seed, or the first of two
    assert f"from **6 of {6 * len(seeds)} runs**" in text
    assert "### SST-2 (ELUE) (dev, accuracy" in text and "### SciTail (dev" in text
    assert "figures/results-mpnet/elue-sst2-pareto.png" in text
    assert "ELUE score (mean of *vs reference* over a method's points): static **+0.00**" in text
    shipped = sorted(p.name for p in (tmp_path / "subs").glob("*.json"))
    if len(seeds) == 1:
        assert (tmp_path / "ref.json").is_file() and "written once all are in" not in text
        assert shipped == [
            "mpnet-base-deebert.json", "mpnet-base-pabee.json", "mpnet-base-static.json"]
    else:
        assert not (tmp_path / "ref.json").exists() and shipped == []
        assert ("scored against the reference curve so far, from 2 of the 4 static runs; "
                f"`{tmp_path / 'ref.json'}` and the submissions are written once all are in"
                in text)
