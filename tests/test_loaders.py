"""The loaders on the real GLUE/ELUE files, on small malformed files, and on a stand-in hub."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eebench.errors import DataError, UsageError
from eebench.tasks.catalog import get_task
from eebench.tasks.loaders import Examples, carve_dev, load_split, resolve_split
from eebench.tasks.spec import DevFromTrain
from eebench.tasks.tsv import read_tsv

# Data rows per split of every file in the shared data folder (its README's verified counts).
PRESENT = {
    "cola": {"train": 8551, "dev": 1043, "test": 1063},
    "sst2": {"train": 67349, "dev": 872, "test": 1821},
    "mrpc": {"train": 3668, "dev": 408, "test": 1725},
    "stsb": {"train": 5749, "dev": 1500, "test": 1379},
    "qnli": {"dev": 5463, "test": 5463},
    "rte": {"train": 2490, "dev": 277, "test": 3000},
    "wnli": {"train": 635, "dev": 71, "test": 146},
    "elue-sst2": {"train": 8544, "dev": 1101, "test": 2210},
    "elue-imdb": {"train": 22500, "dev": 2500, "test": 25000},  # dev: 10% carved from train
    "elue-mrpc": {"train": 3668, "dev": 408, "test": 1725},
    "elue-stsb": {"train": 5749, "dev": 1500, "test": 1379},
    "elue-snli": {"dev": 9842, "test": 9824},
    "elue-scitail": {"train": 23596, "dev": 1304, "test": 2126},
}
ABSENT = [("qqp", "train"), ("qqp", "dev"), ("mnli", "dev"), ("mnli", "test_mismatched"),
          ("qnli", "train"), ("elue-snli", "train")]


@pytest.fixture(scope="session")
def load(data_dir):
    """load(task, split): each real split is read once per test session (IMDb is 33 MB)."""
    return functools.cache(lambda task, split: load_split(task, split, data_dir))


@pytest.mark.parametrize("task,split,rows", [
    (t, s, n) for t, splits in PRESENT.items() for s, n in splits.items()
])
def test_every_present_split_loads_with_exact_row_count(load, task, split, rows):
    ex = load(task, split)
    spec = get_task(task)
    assert (ex.task, ex.split) == (spec.name, split)
    assert len(ex) == len(ex.texts) == len(ex.ids) == rows
    assert all(len(t) == len(spec.text_columns) for t in ex.texts)
    assert all(isinstance(x, str) for t in ex.texts[:200] for x in t)
    assert ex.skipped == {}
    if split == "test" and not spec.local["test"].has_labels:
        assert ex.labels is None
        assert ex.ids[:3] == ["0", "1", "2"] and ex.ids[-1] == str(rows - 1)
    elif spec.is_regression:
        assert len(ex.labels) == rows and all(0.0 <= y <= 5.0 for y in ex.labels)
    else:
        assert len(ex.labels) == rows and set(ex.labels) == set(range(spec.num_labels))


@pytest.mark.parametrize("task,split", ABSENT)
def test_absent_files_are_a_one_line_data_error(data_dir, task, split):
    with pytest.raises(DataError, match="file not found") as e:
        load_split(task, split, data_dir)
    assert str(data_dir) in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("task,split,counts", [
    ("sst2", "train", {0: 29780, 1: 37569}),
    ("sst2", "dev", {0: 428, 1: 444}),
    ("mrpc", "train", {0: 1194, 1: 2474}),
    ("rte", "train", {0: 1249, 1: 1241}),  # 0 = entailment
    ("cola", "train", {0: 2528, 1: 6023}),
    ("elue-scitail", "train", {0: 14994, 1: 8602}),  # 499 rows with text labels included
    ("elue-scitail", "dev", {0: 647, 1: 657}),
    ("elue-snli", "dev", {0: 3329, 1: 3235, 2: 3278}),
    ("elue-imdb", "test", {0: 12500, 1: 12500}),
])
def test_label_distributions_match_the_published_statistics(load, task, split, counts):
    assert load(task, split).label_counts() == counts


def test_known_rows_first_and_last(load):
    sst2 = load("sst2", "train")
    assert sst2.texts[0] == ("hide new secretions from the parental units ",)  # trailing space kept
    assert sst2.labels[0] == 0
    assert sst2.texts[-1][0].startswith("this new jangle of noise , mayhem and stupidity")
    cola = load("cola", "train")  # no header: the first line is data
    first = "Our friends won't buy this analysis, let alone the next one we propose."
    assert cola.texts[0] == (first,)
    assert cola.labels[0] == 1
    test = load("sst2", "test")
    assert test.ids[-1] == "1820" and test.texts[-1][0].startswith("dazzling and sugar-sweet")
    snli = load("elue-snli", "dev")  # BOM + CRLF: nothing of either leaks into text or label
    assert snli.texts[0] == ("Two women are embracing while holding to go packages .",
                             "The sisters are hugging goodbye while holding to go packages after "
                             "just eating lunch .")
    assert not any("\r" in x or "\ufeff" in x for t in snli.texts for x in t)


def test_quote_none_files_keep_raw_leading_quotes(load):
    mrpc = load("mrpc", "dev")
    assert mrpc.texts[0][1] == ('" The foodservice pie business does not fit our long-term '
                                'growth strategy .')
    assert mrpc.labels[0] == 1
    imdb = load("elue-imdb", "test")
    starts = [t[0] for t in imdb.texts if t[0].startswith('"')]
    assert len(starts) > 200  # the README counts about 550 such reviews over both splits


def test_csv_quoted_files_undouble_quotes(load):
    stsb = load("elue-stsb", "train")
    assert stsb.texts[1523] == ('A dog in a "superman" shirt sleeps on a blanket.',
                                "A brown dog in a Superman shirt is laying on a blue blanket.")
    assert stsb.labels[1523] == 4.0
    scitail = load("elue-scitail", "train")  # line 47: """We may, ... """"That ..."""""""
    assert scitail.texts[45][0] == ('"We may, for example, respond to a loud noise by saying '
                                   '""That sounded like a gunshot."""')


def test_scitail_text_labels_are_mapped(data_dir, load):
    raw = read_tsv(data_dir / "SciTail/train.tsv", quoting="csv").column("label")
    text_rows = [i for i, r in enumerate(raw) if r not in ("0", "1")]
    assert len(text_rows) == 499 and (text_rows[0], text_rows[-1]) == (270, 1982)
    labels = load("elue-scitail", "train").labels
    assert all(labels[i] == {"entails": 1, "neutral": 0}[raw[i]] for i in text_rows)
    assert sum(raw[i] == "entails" for i in text_rows) == 130


def test_bom_is_not_part_of_the_first_column_name(data_dir):
    assert read_tsv(data_dir / "MRPC/train.tsv").columns[0] == "Quality"
    assert read_tsv(data_dir / "SNLI/test.tsv").columns == ("index", "premise", "hypothesis")


def test_test_files_use_their_index_column(data_dir, tmp_path):
    (tmp_path / "SST-2").mkdir()
    (tmp_path / "SST-2/test.tsv").write_text("index\tsentence\n17\ta\n4\tb\n")
    ex = load_split("sst2", "test", tmp_path)
    assert ex.ids == ["17", "4"] and ex.labels is None and ex.texts == [("a",), ("b",)]


# ------------------------------------------------------------------------ IMDb dev carving
def test_imdb_dev_is_stratified_disjoint_and_deterministic(load, data_dir):
    train, dev = load("elue-imdb", "train"), load("elue-imdb", "dev")
    assert dev.label_counts() == {0: 1250, 1: 1250}
    assert train.label_counts() == {0: 11250, 1: 11250}
    assert not set(train.ids) & set(dev.ids)
    assert sorted(map(int, train.ids + dev.ids)) == list(range(25000))
    assert [int(i) for i in dev.ids] == sorted(int(i) for i in dev.ids)  # file order kept
    again = load_split("elue-imdb", "dev", data_dir)  # a fresh read, not the cached object
    assert again.ids == dev.ids and again.texts == dev.texts


def test_carve_dev_seed_and_fraction():
    ex = Examples("t", "train", [(str(i),) for i in range(100)], [i % 4 == 0 for i in range(100)],
                  [str(i) for i in range(100)], "memory")
    ex.labels = [int(y) for y in ex.labels]  # 25 of label 1, 75 of label 0
    train, dev = carve_dev(ex, DevFromTrain(fraction=0.2, seed=1))
    assert dev.label_counts() == {0: 15, 1: 5} and len(train) == 80
    assert dev.split == "dev" and train.split == "train"
    other = carve_dev(ex, DevFromTrain(fraction=0.2, seed=2))[1]
    assert other.ids != dev.ids


# --------------------------------------------------------------------------------- take()
def test_take_is_a_seeded_shuffled_subset(load):
    dev = load("rte", "dev")
    a, b, c = dev.take(50, seed=0), dev.take(50, seed=0), dev.take(50, seed=1)
    assert len(a) == 50 and a.ids == b.ids and a.ids != c.ids
    assert a.ids != sorted(a.ids, key=int)  # shuffled, not a leading slice
    row = {i: (t, y) for i, t, y in zip(dev.ids, dev.texts, dev.labels, strict=True)}
    assert all(row[i] == (t, y) for i, t, y in zip(a.ids, a.texts, a.labels, strict=True))
    assert dev.take(None, seed=3).ids == dev.ids == dev.take(10_000, seed=3).ids
    assert len(dev.take(0, seed=0)) == 0 and len(dev) == 277  # the original is untouched
    with pytest.raises(UsageError):
        dev.take(-1, seed=0)


# -------------------------------------------------------------------------- names / splits
def test_unknown_task_and_split_are_usage_errors_with_did_you_mean():
    with pytest.raises(UsageError) as e:
        load_split("sst", "dev", Path("."))
    assert e.value.exit_code == 2 and "did you mean" in str(e.value)
    with pytest.raises(UsageError, match="no split 'tets'") as e:
        load_split("sst2", "tets", Path("."))
    assert "did you mean 'test'" in str(e.value)
    assert resolve_split(get_task("rte"), "validation") == "dev"
    assert resolve_split(get_task("mnli"), "dev_mismatched") == "dev_mismatched"


# --------------------------------------------------------------------------- malformed files
def _write(root: Path, rel: str, text: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


@pytest.mark.parametrize("task,rel,content,message", [
    ("sst2", "SST-2/dev.tsv", "", r"SST-2/dev.tsv: empty file$"),
    ("sst2", "SST-2/dev.tsv", "sentence\tlabel\n", r"SST-2/dev.tsv: no data rows"),
    ("sst2", "SST-2/dev.tsv", "sentence\tscore\na\t1\n",
     r"SST-2/dev.tsv: missing column\(s\) label \(expected: sentence, label; "
     r"found: sentence, score\)"),
    ("sst2", "SST-2/dev.tsv", "sentence\tlabel\na\t1\nb\t0\textra\n",
     r"SST-2/dev.tsv:3: expected 2 tab-separated fields \(sentence, label\), found 3"),
    ("sst2", "SST-2/dev.tsv", "sentence\tlabel\na\t1\nb\tpositive\n",
     r"SST-2/dev.tsv:3: unknown label 'positive' \(expected one of: 0, 1\)"),
    ("stsb", "STS-B/dev.tsv", "sentence1\tsentence2\tscore\na\tb\t4.5\nc\td\thigh\n",
     r"STS-B/dev.tsv:3: cannot parse score 'high' as a number"),
    ("stsb", "STS-B/dev.tsv", "sentence1\tsentence2\tscore\na\tb\tnan\n",
     r"STS-B/dev.tsv:2: cannot parse score 'nan'"),
    ("elue-stsb", "ELUE/STS-B/dev.tsv", 'sentence1\tsentence2\tlabel\n"a" b\tc\t1.0\n',
     r"ELUE/STS-B/dev.tsv:2: malformed csv-quoted TSV"),
    ("cola", "CoLA/dev.tsv", "gj04\t1\t\tFine.\ngj04\t1\tToo short.\n",
     r"CoLA/dev.tsv:2: expected 4 tab-separated fields \(source, label, mark, sentence\), found 3"),
    ("sst2", "SST-2/dev.tsv", b"sentence\tlabel\n\xff\xfe\t1\n", r"SST-2/dev.tsv: not valid UTF-8"),
])
def test_malformed_files_raise_one_line_data_errors(tmp_path, task, rel, content, message):
    _write(tmp_path, rel, content)
    with pytest.raises(DataError, match=message) as e:
        load_split(task, "dev", tmp_path)
    assert str(e.value).startswith(str(tmp_path / rel)) and "\n" not in str(e.value)


def test_rows_without_gold_label_and_blank_lines_are_counted(tmp_path):
    _write(tmp_path, "SNLI/dev.tsv", "\ufeffpremise\thypothesis\tlabel\r\na\tb\t0\r\nc\td\t-\r\n"
           "\r\ne\tf\t2\r\n")
    ex = load_split("snli", "dev", tmp_path)
    assert ex.labels == [0, 2] and ex.ids == ["0", "2"] and ex.texts == [("a", "b"), ("e", "f")]
    assert ex.skipped == {"blank line": 1, "no gold label": 1}


def test_missing_data_dir_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="data directory not found"):
        load_split("sst2", "dev", tmp_path / "nowhere")


# ---------------------------------------------------------------------- the hub, stood in for
class FakeHub:
    """Stands in for datasets.load_dataset: returns real `datasets.Dataset` objects."""

    def __init__(self, tables: dict):
        self.tables, self.calls = tables, []

    def __call__(self, path, name=None, split=None):
        import datasets

        self.calls.append((path, name, split))
        return datasets.Dataset.from_dict(self.tables[(path, name, split)])


@pytest.fixture
def hub(monkeypatch):
    import datasets

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # no reachability probe: the stand-in answers
    fake = FakeHub({})
    monkeypatch.setattr(datasets, "load_dataset", fake)
    return fake


def test_hub_snli_skips_and_counts_no_gold_label(hub):
    hub.tables[("stanfordnlp/snli", None, "validation")] = {
        "premise": ["p0", "p1", "p2", "p3"], "hypothesis": ["h0", "h1", "h2", "h3"],
        "label": [0, -1, 2, 1]}
    ex = load_split("elue-snli", "validation")
    assert hub.calls == [("stanfordnlp/snli", None, "validation")]
    assert ex.labels == [0, 2, 1] and ex.ids == ["0", "2", "3"]
    assert ex.texts == [("p0", "h0"), ("p2", "h2"), ("p3", "h3")]
    assert ex.skipped == {"no gold label": 1} and ex.source == "hub:stanfordnlp/snli:validation"


def test_hub_glue_test_split_is_unlabelled_with_idx_ids(hub):
    hub.tables[("nyu-mll/glue", "stsb", "test")] = {
        "sentence1": ["a", "b"], "sentence2": ["c", "d"], "label": [-1.0, -1.0], "idx": [7, 8]}
    ex = load_split("stsb", "test")
    assert ex.labels is None and ex.ids == ["7", "8"] and ex.source == "hub:nyu-mll/glue/stsb:test"


def test_hub_scitail_string_labels_and_unknown_label(hub):
    key = ("allenai/scitail", "tsv_format", "train")
    hub.tables[key] = {"premise": ["a", "b"], "hypothesis": ["c", "d"],
                       "label": ["entails", "neutral"]}
    assert load_split("scitail", "train").labels == [1, 0]
    hub.tables[key]["label"] = ["entails", "contradicts"]
    with pytest.raises(DataError, match=r"hub:allenai/scitail/tsv_format:train row 1: unknown "
                                        r"label 'contradicts'"):
        load_split("scitail", "train")


def test_hub_imdb_gets_a_carved_dev_and_checks_columns(hub):
    hub.tables[("stanfordnlp/imdb", None, "train")] = {
        "text": [f"review {i}" for i in range(40)], "label": [i % 2 for i in range(40)]}
    dev, train = load_split("imdb", "dev"), load_split("imdb", "train")
    assert dev.label_counts() == {0: 2, 1: 2} and len(train) == 36
    assert not set(dev.ids) & set(train.ids)
    assert hub.calls == [("stanfordnlp/imdb", None, "train")] * 2
    hub.tables[("nyu-mll/glue", "sst2", "validation")] = {"text": ["x"], "label": [0]}
    with pytest.raises(DataError, match="missing column"):
        load_split("sst2", "dev")


def test_task_without_hub_source_says_so():
    with pytest.raises(DataError, match="'elue-sst2'.*has no Hugging Face hub source.*--data-dir"):
        load_split("elue-sst2", "dev")


def _no_hub_env(tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "TRANSFORMERS_", "EEBENCH_")) and "proxy" not in k.lower()}
    env.update(HF_HOME=str(tmp_path / "hf"), HF_DATASETS_CACHE=str(tmp_path / "hf" / "datasets"))
    return env


@pytest.mark.parametrize("extra", [{"HF_HUB_OFFLINE": "1"}, {"HF_DATASETS_OFFLINE": "1"},
                                   {"HF_ENDPOINT": "https://hub.invalid"}])
def test_offline_hub_fails_fast_with_one_line_naming_data_dir(tmp_path, extra):
    env = {**_no_hub_env(tmp_path), **extra}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "eebench", "data", "show", "sst2"],
                          capture_output=True, text=True, env=env, timeout=120)
    elapsed = time.perf_counter() - start
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert "--data-dir" in lines[0] and "EEBENCH_DATA_DIR" in lines[0]
    assert "nyu-mll/glue/sst2:validation" in lines[0]
    assert elapsed < 20  # the hub client's own retry loop would take ~25 s here
