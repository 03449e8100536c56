"""The NER tasks (CoNLL-2003, WNUT-17): CoNLL-format files, IOB1 read as IOB2, the hub's token
datasets, entity scores by seqeval, word-piece alignment, and `eebench data check` / `data show`
on CoNLL files (real data through the data_dir fixture, hand-made files for the broken cases)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import datasets
import pytest
from typer.testing import CliRunner

from eebench.cli import app
from eebench.data.batching import IGNORE, collate
from eebench.data.tokens import align_labels, encode_words
from eebench.errors import DataError, EebenchError
from eebench.tasks.catalog import get_task
from eebench.tasks.conll import read_conll, tag_counts
from eebench.tasks.loaders import Examples, load_split
from eebench.tasks.metrics import compute_metrics, majority_baseline
from eebench.tasks.seqlabel import to_iob2
from tests.files import write_file

pytestmark = pytest.mark.usefixtures("no_env_data_dir")

CONLL, WNUT = get_task("conll2003"), get_task("wnut17")
runner = CliRunner()


def ids(spec, text: str) -> list[int]:
    return [spec.labels.index(t) for t in text.split()]


def names(spec, sentences) -> list[list[str]]:
    return [[spec.labels[t] for t in s] for s in sentences]




@pytest.fixture(scope="module")
def conll_train(data_dir):
    return load_split("conll2003", "train", data_dir)


# ----------------------------------------------------------------------------- the real files
@pytest.mark.parametrize("task,split,sentences,words,docstarts", [
    ("conll2003", "train", 14041, 203621, 946), ("conll2003", "dev", 3250, 51362, 216),
    ("conll2003", "test", 3453, 46435, 231), ("wnut17", "train", 3394, 62730, 0),
    ("wnut17", "dev", 1009, 15733, 0), ("wnut17", "test", 1287, 23394, 0)])
def test_real_files_have_the_published_sentences_and_words(data_dir, task, split, sentences,
                                                           words, docstarts):
    ex = load_split(task, split, data_dir)
    assert len(ex) == sentences == get_task(task).expected_rows[split]
    assert sum(len(w) for w in ex.texts) == words
    assert ex.skipped == ({"-DOCSTART- line": docstarts} if docstarts else {})
    assert all(w and all(t and t.strip() == t for t in w) for w in ex.texts)  # no "" token
    assert "-DOCSTART-" not in {t for w in ex.texts for t in w}
    assert (ex.labels is None) == (split == "test")  # the test files carry no tags
    if ex.labels is not None:
        assert [len(t) for t in ex.labels] == [len(w) for w in ex.texts]


@pytest.mark.parametrize("task,split,entities", [
    ("conll2003", "train", {"PER": 6600, "LOC": 7140, "ORG": 6321, "MISC": 3438}),
    ("conll2003", "dev", {"PER": 1842, "LOC": 1837, "ORG": 1341, "MISC": 922}),
    ("wnut17", "train", {"person": 660, "location": 548, "group": 264, "corporation": 221,
                         "creative-work": 140, "product": 142}),
    ("wnut17", "dev", {"person": 470, "location": 74, "group": 39, "corporation": 34,
                       "creative-work": 105, "product": 114})])
def test_entities_per_type_are_the_data_readme_counts(data_dir, task, split, entities):
    """Loaded tags are IOB2, so B-X counts the X entities (the data README's tables)."""
    spec = get_task(task)
    counts = tag_counts(spec, load_split(task, split, data_dir))
    assert {t[2:]: n for t, n in counts.items() if t.startswith("B-")} == entities


def test_conll_iob1_file_is_read_as_iob2_with_the_same_entities(data_dir, conll_train):
    from seqeval.metrics.sequence_labeling import get_entities

    raw, _, _ = read_conll(data_dir / CONLL.local["train"].path, CONLL.local["train"])
    raw_tags = [[fields[-1] for fields in s] for s in raw]
    assert sum(t.startswith("B-") for s in raw_tags for t in s) == 37 + 24 + 11  # README
    loaded = names(CONLL, conll_train.labels)
    assert loaded == [to_iob2(s) for s in raw_tags]
    assert [get_entities(s) for s in loaded] == [get_entities(s) for s in raw_tags]
    # the first sentence, as the hub's IOB2 copy has it: EU (B-ORG) ... German, British (B-MISC)
    assert conll_train.texts[0][:3] == ("EU", "rejects", "German")
    assert conll_train.labels[0] == [3, 0, 7, 0, 0, 0, 7, 0, 0]


def test_to_iob2():
    assert to_iob2("I-PER I-PER O I-LOC".split()) == "B-PER I-PER O B-LOC".split()
    assert to_iob2("I-ORG B-ORG I-ORG".split()) == "B-ORG B-ORG I-ORG".split()
    assert to_iob2("I-PER I-LOC O B-MISC I-MISC".split()) == "B-PER B-LOC O B-MISC I-MISC".split()


def test_wnut_whitespace_only_lines_end_sentences(tmp_path):
    """WNUT-17's train file ends most sentences with a line holding a lone TAB."""
    write_file(tmp_path, "WNUT-17/dev.txt", "Empire\tB-location\nState\tI-location\n\t\n"
                                        "@x\tO\n \n\nhi\tO\n\t\n")
    ex = load_split("wnut17", "dev", tmp_path)
    assert ex.texts == [("Empire", "State"), ("@x",), ("hi",)]
    assert ex.labels == [ids(WNUT, "B-location I-location"), [0], [0]]
    assert ex.ids == ["0", "1", "2"] and ex.skipped == {}


@pytest.mark.parametrize("newline", ["\n", "\r\n"])  # some copies have CRLF line ends
def test_conll_docstart_lines_are_skipped_and_counted(tmp_path, newline):
    text = ("-DOCSTART- -X- -X-\n\nEU NNP I-NP\n. . O\n\n"
            "-DOCSTART- -X- -X-\n\nPeter NNP I-NP\n\n\n")
    write_file(tmp_path, "CoNLL-2003/test.txt", text.replace("\n", newline))
    ex = load_split("conll2003", "test", tmp_path)
    assert ex.texts == [("EU", "."), ("Peter",)] and ex.labels is None
    assert ex.skipped == {"-DOCSTART- line": 2}


# --------------------------------------------------------------------------------- the metric
def test_an_iob1_entity_that_starts_with_i_is_counted_once():
    gold = [ids(CONLL, "I-PER I-PER O I-LOC"), ids(CONLL, "O I-ORG I-ORG B-ORG")]
    assert compute_metrics(CONLL, gold, gold)["entity_f1"] == 100.0
    # gold has 4 entities: one person (not two, not none), one location, two organisations
    only_person = [ids(CONLL, "I-PER I-PER O O"), ids(CONLL, "O O O O")]
    m = compute_metrics(CONLL, only_person, gold)
    assert m["entity_precision"] == 100.0 and m["entity_recall"] == 25.0
    cut = [ids(CONLL, "I-PER B-PER O I-LOC"), gold[1]]  # the person cut in two: both wrong
    m = compute_metrics(CONLL, cut, gold)
    assert m["entity_precision"] == pytest.approx(100 * 3 / 5)
    assert m["entity_recall"] == pytest.approx(100 * 3 / 4)
    # the same entities in IOB2 (as loaded) score the same; only token accuracy sees the tags
    iob2 = [ids(CONLL, " ".join(to_iob2(s))) for s in names(CONLL, gold)]
    m = compute_metrics(CONLL, gold, iob2)
    assert m["entity_f1"] == 100.0 and m["token_accuracy"] == pytest.approx(100 * 5 / 8)


def test_an_entity_that_starts_with_i_in_iob2_counts_as_in_conlleval_and_wnuteval():
    gold = [ids(WNUT, "B-person I-person O B-group")]
    loose = [ids(WNUT, "I-person I-person O I-group")]  # ill-formed IOB2: O I-X read as O B-X
    assert compute_metrics(WNUT, loose, gold)["entity_f1"] == 100.0
    other = [ids(WNUT, "B-person I-group O B-group")]  # I-group after person: a new entity
    m = compute_metrics(WNUT, other, gold)
    assert m["entity_precision"] == pytest.approx(100 / 3) and m["entity_recall"] == 50.0


@pytest.mark.parametrize("task", ["conll2003", "wnut17"])
def test_the_metric_equals_seqeval_on_the_same_tags(data_dir, task):
    """eebench's scores are seqeval's f1/precision/recall and classification_report's micro
    average, on a real dev split against predictions with errors of every kind."""
    import numpy as np
    from seqeval.metrics import classification_report, f1_score

    spec = get_task(task)
    gold = load_split(task, "dev", data_dir).labels[:400]
    rng = np.random.default_rng(0)
    pred = [[int(rng.integers(spec.num_labels)) if rng.random() < 0.15 else t for t in s]
            for s in gold]
    y_true, y_pred = names(spec, gold), names(spec, pred)
    report = classification_report(y_true, y_pred, output_dict=True, zero_division=0)
    m = compute_metrics(spec, pred, gold)
    assert 20 < m["entity_f1"] < 95
    assert m["entity_f1"] == pytest.approx(100 * report["micro avg"]["f1-score"], abs=1e-9)
    assert m["entity_f1"] == pytest.approx(100 * f1_score(y_true, y_pred), abs=1e-9)
    assert m["entity_precision"] == pytest.approx(100 * report["micro avg"]["precision"])
    assert m["entity_recall"] == pytest.approx(100 * report["micro avg"]["recall"])
    assert list(m) == list(spec.metrics) and spec.main_metric == "entity_f1"
    assert majority_baseline(spec, gold)["entity_f1"] == 0.0  # all O: no entity found


@pytest.mark.parametrize("pred,needle", [
    ([[0, 0]], "sentence 0 has 1 words but 2 predicted tags"),
    ([[0], [0]], "2 predicted sentences for 1 labelled ones"),
    ([[IGNORE]], "tag ids 0..8"), ([[-1]], "tag ids 0..8"), ([[9]], "tag ids 0..8"),
    ([["B-PER"]], "tag ids 0..8"),
])
def test_bad_predictions_are_one_line_errors(pred, needle):
    with pytest.raises(EebenchError, match=needle) as e:
        compute_metrics(CONLL, pred, [[1]])
    assert "\n" not in str(e.value)
    with pytest.raises(EebenchError, match="no labels"):
        compute_metrics(CONLL, [[0]], None)


# ------------------------------------------------------------------------ word-piece alignment
def test_the_first_piece_of_a_word_carries_its_tag():
    #            [CLS] Black -burn  is  [SEP]
    word_ids = [None, 0, 0, 1, None]
    assert align_labels(word_ids, [1, 0]) == [IGNORE, 1, IGNORE, 0, IGNORE]
    with pytest.raises(DataError):
        align_labels([None, 0, 2, None], [1, 0])


def test_encode_words_aligns_truncates_and_reads_back_per_word(minilm_path, data_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(minilm_path))
    words = ("Peter", "Blackburnshire", "visited", "Gardena", "\ufe0f", ".")
    tags = ids(WNUT, "B-person I-person O B-location O O")
    ex = Examples("wnut17", "dev", [words], [tags], ["0"], "memory")
    enc = encode_words(ex, tokenizer, 32)
    w, labels = enc.word_ids[0], enc.labels[0]
    assert w[0] is None and w[-1] is None and w.count(1) > 1  # a word of several pieces
    for k, (word, label) in enumerate(zip(w, labels)):
        first = word is not None and (k == 0 or w[k - 1] != word)
        assert label == (tags[word] if first else IGNORE)
    assert 4 not in w and enc.words_cut == 1  # U+FE0F (in WNUT dev and test): no piece at all
    assert enc.predictions_per_word([labels]) == [[*tags[:4], 0, tags[5]]]  # no piece: O
    short = encode_words(ex, tokenizer, 8)  # 8 pieces: [CLS] + 6 + [SEP], some words cut
    assert short.lengths == [8] and short.words_cut > 1
    assert len(short.predictions_per_word([[1] * 8])[0]) == len(words)

    dev = load_split("conll2003", "dev", data_dir).take(64, seed=0)
    enc = encode_words(dev, tokenizer, 128)
    gold_back = enc.predictions_per_word(
        [[t if t != IGNORE else 0 for t in s] for s in enc.labels])
    assert gold_back == dev.labels and enc.words_cut == 0
    batch = collate(enc, [0, 1, 2])
    assert batch["labels"].shape == batch["input_ids"].shape
    pad = batch["attention_mask"] == 0
    assert (batch["labels"][pad] == IGNORE).all()
    unlabelled = replace(dev.select([0]), labels=None)
    assert encode_words(unlabelled, tokenizer, 16).labels is None


# ----------------------------------------------------------------- the CLI: tasks, check, show
def test_tasks_lists_both_ner_tasks_with_entity_f1():
    result = runner.invoke(app, ["tasks", "--benchmark", "ner", "--json"])
    assert result.exit_code == 0, result.stderr
    tasks = {t["name"]: t for t in json.loads(result.stdout)}
    assert set(tasks) == {"conll2003", "wnut17"}
    assert {t["main_metric"] for t in tasks.values()} == {"entity_f1"}
    assert tasks["conll2003"]["scheme"] == "IOB1" and tasks["wnut17"]["scheme"] == "IOB2"
    table = runner.invoke(app, ["tasks"])
    assert "conll2003" in table.stderr and "wnut17" in table.stderr
    assert "entity_f1" in table.stderr


def test_data_check_passes_on_the_shared_folders(data_dir):
    result = runner.invoke(app, ["data", "check", "--data-dir", str(data_dir), "--json",
                                 "-t", "conll2003", "-t", "wnut17"])
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is True and len(report["files"]) == 6
    for r in report["files"]:
        assert r["status"] == "ok" and r["rows"] == r["expected"], r
        assert (r["labels"] is None) == (r["split"] == "test")
    dev = next(r for r in report["files"] if r["task"] == "conll2003" and r["split"] == "dev")
    assert dev["labels"]["B-PER"] == 1842 and dev["skipped"] == {"-DOCSTART- line": 216}
    assert dev["note"] == "rows are sentences; 51,362 words"


def test_data_show_prints_words_and_a_tag_per_word(data_dir):
    result = runner.invoke(app, ["data", "show", "conll", "--data-dir", str(data_dir),
                                 "-n", "2", "--json"])
    assert result.exit_code == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["rows"] == 3250 and shown["skipped"] == {"-DOCSTART- line": 216}
    first = shown["examples"][0]
    assert first["text"] == ["CRICKET", "-", "LEICESTERSHIRE", "TAKE", "OVER", "AT", "TOP",
                             "AFTER", "INNINGS", "VICTORY", "."]
    assert first["label"] == ["O", "O", "B-ORG", "O", "O", "O", "O", "O", "O", "O", "O"]
    table = runner.invoke(app, ["data", "show", "wnut17", "-s", "test", "--data-dir",
                                str(data_dir), "-n", "1"])
    assert table.exit_code == 0 and "1,287 rows" in table.stderr


GOOD = "-DOCSTART- -X- O O\n\nEU NNP I-NP I-ORG\nrejects VBZ I-VP O\n\n"


@pytest.mark.parametrize("rel,content,needle", [
    ("CoNLL-2003/train.txt", GOOD + "to TO I-VP\n\n",
     "train.txt:6: expected 4 non-empty field(s) (token, pos, chunk, ner) separated by one "
     "space, found 3 field(s): 'to TO I-VP'"),
    ("CoNLL-2003/train.txt", GOOD + "to TO I-VP I-TO\n",
     "train.txt:6: unknown tag 'I-TO' (expected one of: O, B-PER"),
    ("CoNLL-2003/train.txt", GOOD + "to\tTO\tI-VP\tO\n", "train.txt:6: expected 4 non-empty"),
    ("CoNLL-2003/train.txt", GOOD + "to TO I-VP O \n", "train.txt:6: expected 4 non-empty "
     "field(s) (token, pos, chunk, ner) separated by one space, found an empty field"),
    ("CoNLL-2003/train.txt", GOOD.encode() + b"caf\xe9 NN I-NP O\n", "train.txt: not valid "
     "UTF-8"),
    ("CoNLL-2003/train.txt", "\n\n", "train.txt: no sentences"),
    ("CoNLL-2003/test.txt", "EU NNP I-NP I-ORG\n", "test.txt:1: expected 3 non-empty field(s) "
     "(token, pos, chunk)"),
    ("WNUT-17/dev.txt", "hi\tO\nthere\n", "dev.txt:2: expected 2 non-empty field(s) (token, "
     "ner) separated by a TAB, found 1 field(s)"),
    ("WNUT-17/dev.txt", "hi\tB-PER\n", "dev.txt:1: unknown tag 'B-PER'"),
])
def test_a_broken_file_is_refused_in_one_line_naming_file_and_line(tmp_path, rel, content,
                                                                  needle):
    path = write_file(tmp_path, rel, content)
    task = "conll2003" if rel.startswith("CoNLL") else "wnut17"
    split = Path(rel).stem
    check = runner.invoke(app, ["data", "check", "--data-dir", str(tmp_path), "-t", task])
    assert check.exit_code == 1 and isinstance(check.exception, SystemExit)
    assert "Traceback" not in check.output
    last = check.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: 1 invalid file(s); first: {task} {split} ({rel}): {path}")
    assert needle in last
    show = runner.invoke(app, ["data", "show", task, "-s", split, "--data-dir", str(tmp_path)])
    assert show.exit_code == 1 and "Traceback" not in show.output
    lines = show.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}") and needle in lines[0]


# ------------------------------------------------------------------------------------ the hub
def test_hub_token_dataset_maps_tags_by_name(monkeypatch):
    tags = list(CONLL.labels)
    features = datasets.Features({
        "tokens": datasets.Sequence(datasets.Value("string")),
        "ner_tags": datasets.Sequence(datasets.ClassLabel(names=tags[::-1]))})
    table = datasets.Dataset.from_dict(  # ids in reversed order: 5 = B-ORG, 1 = B-MISC
        {"tokens": [["EU", "rejects", "German"], ["Peter"]], "ner_tags": [[5, 8, 1], [7]]},
        features=features)
    calls = []

    def load_dataset(path, name=None, split=None, **kw):
        calls.append((path, name, split, kw))
        return table

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # no reachability check
    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    ex = load_split("conll2003", "dev")
    assert calls == [("eriktks/conll2003", None, "validation",
                      {"revision": "refs/convert/parquet"})]
    assert ex.texts == [("EU", "rejects", "German"), ("Peter",)]
    assert ex.labels == [ids(CONLL, "B-ORG O B-MISC"), ids(CONLL, "B-PER")]
    assert ex.source == "hub:eriktks/conll2003:validation"
    bad = datasets.Dataset.from_dict({"tokens": [["a", "b"]], "ner_tags": [[0]]})
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: bad)
    with pytest.raises(DataError, match=r"hub:leondz/wnut_17:train row 0: 1 tags for 2 tokens"):
        load_split("wnut17", "train")


@pytest.mark.parametrize("task,extra,where", [
    ("wnut17", {"HF_HUB_OFFLINE": "1"}, "leondz/wnut_17:validation"),
    ("conll2003", {"HF_ENDPOINT": "https://hub.invalid"}, "eriktks/conll2003:validation"),
])
def test_offline_hub_is_one_line(tmp_path, task, extra, where):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "TRANSFORMERS_", "EEBENCH_")) and "proxy" not in k.lower()}
    env.update(HF_HOME=str(tmp_path / "hf"), **extra)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "eebench", "data", "show", task],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and where in lines[0]
    assert "--data-dir" in lines[0] and "EEBENCH_DATA_DIR" in lines[0]
    assert time.perf_counter() - start < 20


def test_a_sequence_method_on_a_token_task_is_refused_in_one_line():
    result = runner.invoke(app, ["run", "--method", "pabee", "--task", "conll2003",
                                 "--dry-run"])
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "method 'pabee' has no token model" in result.stderr
    assert "token methods: static, deebert, sentee, tokee" in result.stderr
