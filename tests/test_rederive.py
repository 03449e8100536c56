"""Runs are self-contained: every stored decision re-derives from the run directory alone.

A point's decisions (each sample's exit layer and prediction) are rebuilt from the run's own
files (the rule its summary records, the point's sweep value, the variant's temperatures and
settings, the stored logits and signals) and compared sample by sample with what was stored:
for every run a fresh `eebench run` writes, and for every committed run of the benchmark.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from safetensors.numpy import load_file, save_file
from typer.testing import CliRunner

from eebench.cli import app
from eebench.errors import DataError
from eebench.run import artifacts as R
from eebench.run.rederive import rederive
from eebench.run.upgrade import upgrade
from tests import tiny
from tests.committed import audited, is_decoder

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
# Filled by a benchmark while it runs: its runs are checked once they are committed.
IN_PROGRESS: set[str] = set()
# Token runs (sequence labelling) store each exit's tags, not the uncertainties their rules read:
# rederive refuses them in one line; their scores are checked against seqeval instead
# (tests/test_token_run.py).
TOKEN_RUNS = ("ner-minilm", "ner-minilm-tokee", "ner-minilm-test")
COMMITTED = sorted(p.parent for p in RESULTS.rglob(R.SUMMARY_FILE)
                   if p.relative_to(RESULTS).parts[0] not in {*IN_PROGRESS, *TOKEN_RUNS}
                   and not is_decoder(p.parent))  # decoder runs: tests/test_decoder_audit.py
AUDITED = audited(COMMITTED)  # all, or those changed since --audit-since

runner = CliRunner()


@pytest.fixture(scope="module")
def backbone(tmp_path_factory):
    return tiny.save_tiny_backbone(tmp_path_factory.mktemp("tiny-bert"), num_layers=3)


def _runs(tmp_path, backbone, data_dir, *extra, task="rte") -> dict[str, Path]:
    args = ["run", "--task", task, "--model", str(backbone), "--data-dir", str(data_dir),
            "--max-train-samples", "40", "--epochs", "1", "--max-seq-length", "48",
            "--max-eval-samples", "24", "--no-timing", "--out", str(tmp_path / "runs"),
            "--checkpoints", str(tmp_path / "ckpt"), "--json", *extra]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output + str(result.exception)
    out = json.loads(result.stdout)
    return {o["points"][0]["method"]: Path(o["run_dir"])
            for o in (out if isinstance(out, list) else [out])}


def _rederives(run_dir: Path) -> None:
    found = rederive(run_dir)
    assert found.ok, found.mismatches[:3]
    assert found.points == len(R.read_run(run_dir).points) and found.samples > 0


def test_a_calibrated_run_records_its_temperatures_and_re_derives(tmp_path, backbone, data_dir):
    """maxprob's temperatures live in its checkpoint; the run directory records them too, with
    the rule and its comparison, so that every decision re-derives without the checkpoint."""
    from eebench.train.checkpoint import load_trained

    runs = _runs(tmp_path, backbone, data_dir, "--method", "maxprob", "--rule", "maxprob")
    assert set(runs) == {"maxprob", "maxprob+maxprob"}
    for label, run_dir in runs.items():
        summary = R.read_run(run_dir).summary
        [variant] = summary.variants
        model = load_trained(Path(variant.checkpoint))[0]
        assert variant.temperatures == model.temperatures()  # the model has them, either rule
        assert variant.temperatures_source is None  # they are the model's own
        assert variant.settings == {"calibration_fraction": 0.1}
        name = "calibrated-maxprob" if label == "maxprob" else "maxprob"
        assert summary.rule == R.RuleRecord(name=name, comparison=">=", is_regression=False)
        _rederives(run_dir)
    shutil.rmtree(tmp_path / "ckpt")  # the checkpoint is not needed to re-derive
    for run_dir in runs.values():
        _rederives(run_dir)


@pytest.mark.parametrize(("method", "task"), [("berxit", "rte"), ("static", "rte"),
                                              ("pabee", "stsb")])
def test_signals_single_exit_models_and_regression_re_derive(tmp_path, backbone, data_dir,
                                                              method, task):
    """BERxiT's learned exit score (a stored signal), static's one exit per model (no rule), and
    a regression task (PABEE's threshold on the change, a method setting)."""
    extra = ["--sweep", "1,3"] if method == "static" else []
    [run_dir] = _runs(tmp_path, backbone, data_dir, "--method", method, *extra,
                      task=task).values()
    summary = R.read_run(run_dir).summary
    assert summary.rule.name == {"berxit": "learned", "static": None, "pabee": "patience"}[method]
    assert summary.rule.is_regression == (task == "stsb")
    if method == "pabee":
        assert summary.variants[0].settings["regression_threshold"] == 0.1
    _rederives(run_dir)


def test_a_decision_that_differs_is_found_and_a_missing_temperature_named(tmp_path):
    """The check has teeth: one stored exit layer changed is one mismatch naming its point; a
    calibrated run without its temperatures is one line saying so."""
    run_dir = tmp_path / "run"
    shutil.copytree(next(d for d in COMMITTED if "/deebert/" in str(d)), run_dir)
    arrays = load_file(str(run_dir / R.PREDICTIONS_FILE))
    row = 3
    exits = arrays["exit_layer"]
    exits[row, 5] = 1 if exits[row, 5] != 1 else 2
    save_file(arrays, str(run_dir / R.PREDICTIONS_FILE))
    found = rederive(run_dir)
    assert len(found.mismatches) == 1 and f"point {row + 1} " in found.mismatches[0]
    assert "1 of" in found.mismatches[0]

    calibrated = tmp_path / "calibrated"
    shutil.copytree(next(d for d in COMMITTED if "/maxprob/" in str(d)), calibrated)
    summary = json.loads((calibrated / R.SUMMARY_FILE).read_text())
    for v in summary["variants"]:
        v.pop("temperatures", None)
    (calibrated / R.SUMMARY_FILE).write_text(json.dumps(summary))
    with pytest.raises(DataError, match="read temperatures that the run does not record"):
        rederive(calibrated)


def test_older_summaries_read_with_their_rule_and_new_fields_stay_out_at_their_default():
    """A summary written before runs recorded their rule reads with the rule its method used
    then; a record that does not use the new fields serialises without them."""
    cfg = R.RunConfig(model="m", method="pabee", task="rte", split="dev", seed=1, sweep=[1.0],
                      max_seq_length=8, flops_convention="mac2-matmul")
    old = {"schema_version": 2, "model": "m", "method": "pabee", "task": "rte", "split": "dev",
           "seed": 1, "config_hash": "x", "n_samples": 1, "num_points": 1, "variants": [
               {"name": "all", "sweep_values": [1.0], "exit_layers": [1, 2], "hidden_size": 8,
                "pooling": "cls", "logits_key": "exit_logits"}]}
    _, summary = upgrade(cfg, [], old)
    parsed = R.RunSummary.model_validate(summary)
    # patience read PABEE's regression threshold then: now the rule's own setting, recorded
    tau = {"regression_threshold": 0.1}
    assert parsed.rule == R.RuleRecord(name="patience", comparison=">=", settings=tau)
    assert parsed.variants[0].sweep_values == [{"patience": 1}]
    assert [[(r.layers, r.heads) for r in p] for p in parsed.variants[0].exit_paths] == [
        [(1, [1])], [(2, [1, 2])]]
    _, summary = upgrade(cfg.model_copy(update={"rule": "entropy"}), [], old)
    assert summary["rule"] == {"name": "entropy", "comparison": "<"}
    _, summary = upgrade(cfg.model_copy(update={"method": "a-plugins"}), [], old)
    assert "rule" not in summary  # unknown: such a run does not re-derive
    dumped = parsed.model_dump(mode="json")
    assert dumped["rule"] == {"name": "patience", "comparison": ">=", "settings": tau}
    new = {"temperatures", "temperatures_source", "settings"}
    assert set(old["variants"][0]) <= set(dumped["variants"][0]) and not new & set(
        dumped["variants"][0])
    assert "rule" not in parsed.model_copy(update={"rule": None}).model_dump(mode="json")


@pytest.mark.audit
def test_every_committed_benchmark_folder_is_checked_and_its_first_run_re_derives():
    folders = {}
    for d in COMMITTED:
        folders.setdefault(d.relative_to(RESULTS).parts[0], d)
    # a folder counts once a run in it has finished (a benchmark's first runs may be under way)
    finished = {p.name for p in RESULTS.iterdir() if p.is_dir() and any(
        not is_decoder(s.parent) for s in p.rglob(R.SUMMARY_FILE))}
    assert set(folders) == finished - IN_PROGRESS - set(TOKEN_RUNS)
    assert any(R.read_run(d).config.split == "test" for d in COMMITTED)  # no labels stored
    for run_dir in folders.values():
        _rederives(run_dir)


@pytest.mark.audit
def test_committed_calibrated_runs_record_their_temperatures_and_where_they_came_from():
    """Every calibrated max-prob run records a temperature per exit. The nine written before runs
    recorded them had theirs recovered from the runs' own files (benchmarks/recover_temperatures.py)
    and say so; later runs record the ones they calibrated and name no source."""
    calibrated = [d for d in COMMITTED if R.read_run(d).summary.rule.name == "calibrated-maxprob"]
    recovered = []
    for run_dir in calibrated:
        [variant] = R.read_run(run_dir).summary.variants
        assert len(variant.temperatures) == len(variant.exit_layers)
        if variant.temperatures_source is not None:
            assert "recover_temperatures.py" in variant.temperatures_source
            recovered.append(run_dir)
        R.verify_run(run_dir)  # the files its summary vouches for are unchanged
    assert len(recovered) == 9
    assert all(d.is_relative_to(ROOT / "benchmarks/results/elue-minilm") for d in recovered)
    _rederives(recovered[0])
    if len(calibrated) > len(recovered):
        _rederives(next(d for d in calibrated if d not in recovered))


@pytest.mark.audit
@pytest.mark.parametrize("run_dir", AUDITED, ids=[str(d.relative_to(RESULTS)) for d in AUDITED])
def test_every_stored_decision_of_a_committed_run_re_derives(run_dir):
    """Every committed run (test splits included: no labels, the decisions still re-derive),
    from its own files; the calibrated max-prob runs from the temperatures they record. One test
    per run, so that `--audit-since` checks the runs a commit adds and a failure names its run."""
    found = rederive(run_dir)
    assert found.ok, "\n".join(found.mismatches[:10])
    assert found.points > 0


@pytest.mark.audit
def test_shipped_submissions_are_what_the_committed_runs_score(data_dir):
    """Each leaderboard/submissions file is rebuilt from the committed runs as its report block
    declares it (benchmarks/reports.py) and says the same, but for when and by which eebench it
    was made and floats' last bits. (docs/results.md's blocks: tests/test_shipped_results.py.)"""
    import sys

    from eebench.reports.files import MAKING, same_numbers
    from eebench.submit.build import build_submission

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from reports import BLOCKS

    blocks = [b for b in BLOCKS if b.options.get("submissions")]
    assert blocks[0].name == "elue-minilm"
    checked = 0
    for block in blocks:
        o = block.options
        runs = [R.read_run(d) for d in COMMITTED
                if d.is_relative_to(ROOT / block.runs["main"].folder)]
        shipped = sorted((ROOT / o["submissions"]).glob(o["submission_file"].format(method="*")))
        if not (ROOT / o["reference"]).exists():  # written once the block's static runs are whole
            assert not shipped, block.name
            continue
        labels = {r.config.label for r in runs}
        assert {p.name for p in shipped} == {o["submission_file"].format(method=m) for m in labels}
        for path in shipped:
            [method] = [m for m in labels if path.name == o["submission_file"].format(method=m)]
            built = build_submission([r.path for r in runs if r.config.label == method],
                                     data_dir=data_dir, reference=ROOT / o["reference"],
                                     name=o["submission_name"].format(method=method))
            new, old = json.loads(built.model_dump_json()), json.loads(path.read_text())
            assert same_numbers({k: v for k, v in old.items() if k not in MAKING},
                                {k: v for k, v in new.items() if k not in MAKING}), path.name
            checked += 1
    assert checked >= 10
