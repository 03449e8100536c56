"""`eebench run` on token tasks (sequence labelling), end to end on a tiny random backbone and real
CoNLL-2003 / WNUT-17 sentences: the token model of static, DeeBERT (the survey's mean-entropy
exit) and SENTEE; entity F1 that seqeval's own report gives from the stored predictions; zero
disagreements between the one-pass simulation and real dynamic inference; and everything
downstream (score with a reference of static token models, plots, a submission that validates).
Refusals are one line, before anything trains."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from eebench.methods.base import get_method
from eebench.score.collect import load_run
from eebench.tasks.catalog import get_task
from tests import tiny
from tests.cli import invoke, tiny_run
from tests.committed import audited

CONLL = get_task("conll2003")
TAGS = len(CONLL.labels)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, data_dir):
    root = tmp_path_factory.mktemp("token-runs")
    backbone = tiny.save_tiny_backbone(root / "backbone")
    out = {}
    for method in ("static", "deebert", "sentee", "tokee"):
        # SENTEE's model also sweeps TOKEE, in the same pass (`--rule`)
        rule = ("--rule", "tokee") if method == "sentee" else ()
        # two time the full model beside each point (words halting live, and not)
        rule += ("--paired-timing",) if method in ("sentee", "tokee") else ()
        res = tiny_run(root, backbone, data_dir, "--method", method, *rule, task="conll2003",
                       train_samples=48, max_seq_length=40, eval_samples=40, time_samples=8)
        out[method] = res
    return root, backbone, out


def _run_dirs(root, method):
    return sorted((root / "runs").glob(f"*/{method}/conll2003/*"))


@pytest.mark.parametrize("method", ["static", "deebert", "sentee", "tokee"])
def test_token_runs_score_entities_and_agree_with_real_inference(runs, method):
    root, _, _ = runs
    [run_dir] = _run_dirs(root, method)
    run = load_run(run_dir)
    config = json.loads((run_dir / "config.json").read_text())
    assert config["method_settings"]["unit"] == "token"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["rule"]["name"] == {"static": None, "deebert": "mean-entropy",
                                       "sentee": "sentee", "tokee": "tokee"}[method]
    arrays = run.predictions()
    words = arrays["words"]
    assert arrays["prediction"].shape == (len(run.points), int(words.sum()))
    assert arrays["exit_layer"].shape == (len(run.points), len(words)) == (len(run.points), 40)
    gold = run.labels()
    assert len(gold) == 40 and all(len(g) == w for g, w in zip(gold, words, strict=True))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from seqeval.metrics import classification_report, f1_score
    for row, p in enumerate(run.points):
        assert p.main_metric == "entity_f1" and p.disagreements == 0
        tags = [[CONLL.labels[t] for t in s] for s in run.by_sentence(arrays["prediction"][row])]
        truth = [[CONLL.labels[t] for t in s] for s in gold]
        # seqeval's own report, from the stored predictions, is the run's score
        report = classification_report(truth, tags, output_dict=True, zero_division=0)
        assert p.main == pytest.approx(100 * report["micro avg"]["f1-score"], abs=1e-9)
        assert p.main == pytest.approx(100 * f1_score(truth, tags, zero_division=0), abs=1e-9)
        timed = [t for t in p.timings if t.mode == "dynamic"]
        assert timed and all(t.raw_ms for t in timed)
        assert [t.batch_size for t in p.timings if t.mode == "full"] == [1, 32]
    # the full model at batch size 1 (8 samples, 8 raw times): each point's own timing, or one
    # per trained model, shared by its points
    full = {tuple(t.raw_ms) for p in run.points for t in p.timings
            if t.mode == "full" and t.batch_size == 1}
    measured = run.points if method in ("sentee", "tokee") else {p.variant for p in run.points}
    assert len(full) == len(measured)
    if method != "static":  # the sweep spans exits: the loosest threshold exits at layer 1
        layers = [p.avg_exit_layer for p in run.points]
        assert max(layers) == 4 and min(layers) < 4
        tags = arrays[run.variants[0].logits_key]  # each exit's tag at the counted words
        assert tags.shape == (4, int(arrays["counted"].sum())) and tags.dtype == np.int8


def test_rederive_refuses_a_token_run_in_one_line(runs):
    from eebench.errors import DataError
    from eebench.run.rederive import rederive

    root, _, _ = runs
    [run_dir] = _run_dirs(root, "sentee")
    with pytest.raises(DataError, match="a token run stores each exit's tags"):
        rederive(run_dir)


def test_token_runs_go_downstream(runs, tmp_path):
    """Reference from the static token runs, the ELUE score, plots, a submission that
    validates."""
    root, _, _ = runs
    [static] = {d.parent.parent for d in _run_dirs(root, "static")}
    ref = tmp_path / "refs" / "ref.json"
    ref.parent.mkdir()
    assert invoke("reference", "build", static, "--out", ref).exit_code == 0
    scored = invoke("score", root / "runs", "--reference", ref, "--json")
    assert scored.exit_code == 0, scored.output
    overall = json.loads(scored.stdout)["overall"]  # ELUE scores against the static curve
    assert set(overall) == {"deebert", "sentee", "sentee+tokee", "static", "tokee"}
    assert overall["static"] == 0.0
    plots = invoke("plot", root / "runs", "--out", tmp_path / "plots")
    assert plots.exit_code == 0, plots.output
    sub = tmp_path / "sub.json"
    [deebert] = _run_dirs(root, "deebert")
    made = invoke("submit", deebert, "--out", sub, "--reference", ref)
    assert made.exit_code == 0, made.output
    checked = invoke("validate", sub, "--references", ref.parent)
    assert checked.exit_code == 0 and "ok" in checked.output, checked.output


@pytest.mark.parametrize("args,said", [
    (("--method", "pabee"), "method 'pabee' has no token model"),
    (("--method", "deebert", "--rule", "entropy"), "rule 'entropy' decides per sequence"),
    (("--method", "tokee", "--model", "mpnet-base"), "runs live on bert, roberta layers"),
])
def test_token_refusals_are_one_line_before_training(args, said, data_dir, tmp_path):
    result = invoke("run", "--task", "conll2003", "--data-dir", data_dir, "--out",
                    tmp_path / "runs", "--checkpoints", tmp_path / "ckpt", *args)
    assert result.exit_code in (1, 2)
    assert said in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "ckpt").exists()


def test_token_methods_refuse_texts_and_name_the_others():
    result = invoke("run", "--task", "rte", "--method", "sentee", "--dry-run")
    assert result.exit_code in (1, 2) and "method 'sentee' does not" in result.stderr
    assert get_method("sentee").settings == {"unit": "token"}
    assert get_method("deebert", unit="token").rule == "mean-entropy"
    assert get_method("deebert").settings == {}  # a text run's name is as before


def test_a_sentence_with_nothing_to_label(data_dir):
    """A sentence whose only word the tokenizer drops (WNUT-17 has lone U+FE0F words) counts no
    token: it encodes, is predicted O, and every token rule lets it go at the first exit."""
    from dataclasses import replace

    import torch

    from eebench.data.tokens import encode_words
    from eebench.rules.tokens import SentenceEntropyRule, TokenHaltRule, simulate_tokens
    from eebench.tasks.loaders import load_split

    dev = load_split("wnut17", "dev", data_dir).take(3, seed=0)
    texts = [["\ufe0f"], *dev.texts[1:]]
    labels = [[0], *dev.labels[1:]]
    enc = encode_words(replace(dev, texts=texts, labels=labels), tiny.tokenizer(), 64)
    assert enc.words_cut == 1 and enc.predictions_per_word(
        [np.full(n, 3) for n in enc.lengths])[0] == [0]
    mask = enc.counting_mask(range(3), max(enc.lengths))
    assert not mask[0].any() and mask[1:].any(1).all()
    logits = torch.randn(3, 3, mask.shape[1], 13, generator=torch.Generator().manual_seed(0))
    for rule in (SentenceEntropyRule(0.0), TokenHaltRule(0.0)):
        dec = simulate_tokens(rule, logits, mask)
        assert dec.exit_index.tolist() == [0, 2, 2]  # threshold 0: the others run to the end


@pytest.mark.parametrize("label", ["tokee", "sentee+tokee"])
def test_tokee_run_records_its_per_token_flops(runs, data_dir, label):
    """Each TOKEE point's FLOPs and tags are what its checkpoint gives when its words halt with
    their states copied (eebench.rules.token_halting), FLOPs counted per token by hand: TOKEE's
    own run, and TOKEE swept on SENTEE's model in SENTEE's pass."""
    from eebench.data.batching import collate
    from eebench.data.tokens import encode_words
    from eebench.measure.cost_table import build_cost_table
    from eebench.rules.catalog import get_rule
    from eebench.rules.token_halting import halting_inference
    from eebench.tasks.loaders import load_split
    from eebench.train.checkpoint import load_trained

    root, _, _ = runs
    [run_dir] = _run_dirs(root, label)
    run = load_run(run_dir)
    model, tokenizer, _ = load_trained(run.variants[0].checkpoint)
    dev = load_split("conll2003", "dev", data_dir).take(40, 0)
    enc = encode_words(dev, tokenizer, 40)
    d, ff = model.config.hidden_size, model.config.intermediate_size
    table = build_cost_table(model, max(enc.lengths))
    n, facts = len(enc), None
    from eebench.rules.catalog import ModelFacts

    facts = ModelFacts(False, TAGS, num_exits=model.num_exits)
    arrays = run.predictions()
    early = 0
    for row, p in enumerate(run.points):
        rule = get_rule("tokee").build(p.sweep["threshold"], facts)
        width = max(enc.lengths)
        got = halting_inference(model, rule, [collate(enc, list(range(n)))], n, width,
                                lambda b: (enc.counting_mask(range(n), b["input_ids"].shape[1]),
                                           enc.piece_owner(range(n), b["input_ids"].shape[1])))
        total = 0
        for i, length in enumerate(enc.lengths):
            stop = int(got.decisions.exit_index[i])
            total += int(table.embedding[length]) + sum(int(table.head[j][length])
                                                        for j in range(stop + 1))
            total += sum(2 * (2 * q * d * d + 2 * length * d * d + 2 * q * length * d
                              + 2 * q * d * ff) for q in got.live_pieces[i] if q)
        assert p.mean_flops == pytest.approx(total / n, rel=1e-12)
        tags = enc.predictions_per_word(got.decisions.prediction.numpy())
        assert np.concatenate(tags).tolist() == arrays["prediction"][row].tolist()
        early += int((got.live_pieces[:, -1] < np.asarray(enc.lengths)).sum())
    assert early > 0  # some points halt words before the last layer


def test_export_conll_writes_a_file_per_point_that_scores_as_the_run(runs, data_dir, tmp_path):
    """`eebench export-conll`: one CoNLL file per point (word, tag; a blank line after each
    sentence), the run's own words; scored against the gold tags, each file gives the point's
    entity F1. Data that is not the run's own is refused in one line."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from seqeval.metrics import f1_score

    root, _, _ = runs
    [run_dir] = _run_dirs(root, "sentee")
    run = load_run(run_dir)
    result = invoke("export-conll", run_dir, "--out", tmp_path / "conll", "--data-dir",
                    data_dir, "--json")
    assert result.exit_code == 0, result.output
    files = json.loads(result.stdout)
    assert len(files) == len(run.points)
    truth = [[CONLL.labels[t] for t in s] for s in run.labels()]
    for f, p in zip(files, run.points, strict=True):
        sentences = [s.splitlines() for s in
                     open(f["path"], encoding="utf-8").read().strip("\n").split("\n\n")]
        assert len(sentences) == f["sentences"] == 40
        tags = [[line.rsplit(" ", 1)[1] for line in s] for s in sentences]
        assert p.main == pytest.approx(100 * f1_score(truth, tags, zero_division=0), abs=1e-9)
    wrong = invoke("export-conll", run_dir, "--out", tmp_path / "other", "--data-dir",
                   tmp_path / "nothing-here")
    assert wrong.exit_code == 1 and len(wrong.stderr.strip().splitlines()) == 1
    text = invoke("export-conll", run_dir.parent.parent.parent / "static" / "conll2003",
                  "--out", tmp_path / "x")
    assert text.exit_code in (1, 2)


def test_the_token_report_block(runs):
    """The `token-benchmark` report kind over token runs: the ELUE scores against the static
    curve, the static curve, the best point per FLOPs budget, and where TOKEE's words exit."""
    from eebench.reports import Block, Context, Runs, build

    root, _, _ = runs
    block = Block(name="ner", kind="token-benchmark", marker="ner",
                  runs={"main": Runs(folder=str(root / "runs"))},
                  options={"tasks": ["conll2003"], "budgets": [0.5, 1.0],
                           "methods": ["static", "deebert", "sentee", "tokee"],
                           "word_points": [0.0, 0.5], "reference_name": "tiny-static"},
                  text={"none": "none", "task": "### {title}\n\n{static}\n\n{budgets}\n\n{words}",
                        "body": "{n_runs} runs, seeds {seeds}\n\n{elue}\n\n{tasks}"})
    text = build(block, Context(root=root, write=False))
    assert "5 runs, seeds 42" in text and "### CoNLL-2003" in text
    import re

    assert re.search(r"\| static +\| +\+0\.00 \|", text)  # the reference scores 0 against itself
    assert "≤ 50% FLOPs" in text and "entity words' layer" in text
    assert text.count("| tokee ") >= 3  # its ELUE score, its budgets, its words
    assert text.count("| sentee+tokee ") >= 3


COMMITTED = audited(p.parent for p in (Path(__file__).resolve().parents[1] / "benchmarks" /
                                       "results").glob("ner-minilm*/*/*/*/*/summary.json"))


@pytest.mark.audit
@pytest.mark.parametrize("run_dir", COMMITTED, ids=[p.name for p in COMMITTED])
def test_seqeval_reports_the_score_of_each_committed_token_run(run_dir):
    """On every committed dev run of the NER benchmark, seqeval's own report from the stored
    tags equals each point's entity F1, precision and recall."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from seqeval.metrics import classification_report

    config = json.loads((run_dir / "config.json").read_text())
    if config["split"] != "dev":
        pytest.skip("a test-split run: its labels are withheld")
    run = load_run(run_dir)
    spec = get_task(run.config.task)
    truth = [[spec.labels[t] for t in s] for s in run.labels()]
    arrays = run.predictions()
    for row, p in enumerate(run.points):
        tags = [[spec.labels[t] for t in s] for s in run.by_sentence(arrays["prediction"][row])]
        report = classification_report(truth, tags, output_dict=True, zero_division=0)
        micro = report["micro avg"]
        assert p.metrics["entity_f1"] == pytest.approx(100 * micro["f1-score"], abs=1e-9)
        assert p.metrics["entity_precision"] == pytest.approx(100 * micro["precision"], abs=1e-9)
        assert p.metrics["entity_recall"] == pytest.approx(100 * micro["recall"], abs=1e-9)
