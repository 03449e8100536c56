"""The task catalog: 17 specs, consistent with themselves and with the real files' headers."""

from __future__ import annotations

import json

import pytest

from eebench.errors import UsageError
from eebench.tasks.catalog import all_tasks, get_task
from eebench.tasks.metrics import COMBINED, SINGLE, TOKEN
from eebench.tasks.spec import TASKS
from eebench.tasks.tsv import read_tsv

GLUE = {"cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli"}
ELUE = {"elue-sst2", "elue-imdb", "elue-mrpc", "elue-stsb", "elue-snli", "elue-scitail"}
# The data README: these ELUE files use CSV quoting; every other file is read with quoting off.
CSV_QUOTED = {"SciTail/train.tsv", "ELUE/STS-B/train.tsv", "ELUE/STS-B/dev.tsv",
              "ELUE/STS-B/test.tsv"}
SPECS = all_tasks()


def test_nineteen_tasks_in_four_benchmarks():
    assert {s.name for s in SPECS if s.benchmark == "glue"} == GLUE
    assert {s.name for s in SPECS if s.benchmark == "elue"} == ELUE
    assert {s.name for s in SPECS if s.benchmark == "ner"} == {"conll2003", "wnut17"}
    assert {s.name for s in SPECS if s.benchmark == "decoder"} == {"imdb-lm", "humaneval-gen"}
    assert len(SPECS) == 19


@pytest.mark.parametrize("alias,name", [("SST-2", "sst2"), ("imdb", "elue-imdb"),
                                        ("snli", "elue-snli"), ("scitail", "elue-scitail"),
                                        ("sts-b", "stsb"), ("CoNLL-2003", "conll2003"),
                                        ("conll", "conll2003"), ("WNUT-17", "wnut17")])
def test_aliases(alias, name):
    assert get_task(alias).name == name and alias in TASKS


def test_unknown_task_is_a_usage_error_with_did_you_mean():
    with pytest.raises(UsageError) as e:
        get_task("scitial")
    assert e.value.exit_code == 2 and "did you mean 'scitail'" in str(e.value)


@pytest.mark.parametrize("spec", [s for s in SPECS if s.unit != "generated"],
                         ids=lambda s: s.name)
def test_spec_is_consistent(spec):  # the decoder tasks': tests/test_decoder_tasks.py
    known = set(TOKEN) if spec.unit == "token" else set(SINGLE) | set(COMBINED)
    assert set(spec.metrics) <= known
    assert spec.main_metric in spec.metrics
    assert set(spec.expected_rows) <= set(spec.splits)
    assert {"train", "dev", "test"} <= set(spec.splits)
    assert spec.is_regression == (spec.labels is None) == ("pearson" in spec.metrics)
    for alias, target in spec.label_aliases.items():
        assert spec.labels and target in spec.labels and alias not in spec.labels
    for split, file in spec.local.items():
        assert file.quoting == ("csv" if file.path in CSV_QUOTED else "none"), file.path
        # a test TSV file's rows have ids; a CoNLL file's sentences are numbered
        assert file.has_labels == (file.index_column is None) or file.format == "conll", split
    if spec.hub is not None:
        assert set(spec.hub.splits) <= set(spec.splits)
        assert len(spec.hub.text_columns) == len(spec.text_columns)
    else:
        assert spec.name == "elue-sst2"  # ELUE's sentence-level SST-2 exists only in ELUE's release
    assert (spec.dev_from_train is not None) == (spec.name == "elue-imdb")
    d = json.loads(json.dumps(spec.to_dict()))
    assert d["name"] == spec.name and d["splits"] == list(spec.splits)
    assert d["local_files"] == {s: f.path for s, f in spec.local.items()}


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_spec_columns_match_the_real_file_headers(spec, data_dir):
    """Every present file has the columns its spec reads; header-less files start with data."""
    checked = 0
    for split, file in spec.local.items():
        path = data_dir / file.path
        if not path.is_file() or file.format == "conll":  # CoNLL files: test_token_tasks.py
            continue
        table = read_tsv(path, quoting=file.quoting, header=file.header, columns=file.columns)
        needed = set(file.text_columns or spec.text_columns)
        needed |= {spec.label_column} if file.has_labels else set()
        needed |= {file.index_column} if file.index_column else set()
        assert needed <= set(table.columns), (split, table.columns)
        if not file.header:  # CoLA: the first line is a data row, not a header
            assert table.rows[0][0] == "gj04" and table.lines[0] == 1
        checked += 1
    if spec.name not in ("qqp", "mnli") and spec.unit == "sequence":  # absent; not TSV
        assert checked >= 2


@pytest.mark.parametrize("spec", [s for s in SPECS if s.unit == "token"], ids=lambda s: s.name)
def test_token_specs_are_iob_tag_sets_read_from_conll_files(spec):
    types = [t[2:] for t in spec.labels[1::2]]
    assert spec.labels == ("O", *(f"{p}-{t}" for t in types for p in "BI"))
    assert spec.label_meanings == spec.labels and spec.main_metric == "entity_f1"
    assert spec.scheme == {"conll2003": "IOB1", "wnut17": "IOB2"}[spec.name]
    assert {f.format for f in spec.local.values()} == {"conll"}
    for split, file in spec.local.items():
        assert file.columns[0] == "token" and (file.columns[-1] == "ner") == file.has_labels
        assert file.has_labels == (split != "test")  # the test files carry no tags
    assert spec.hub.revision == "refs/convert/parquet" and spec.hub.label_column == "ner_tags"
    assert spec.to_dict()["type"] == "token classification"
    assert spec.to_dict()["hub"]["revision"] == "refs/convert/parquet"


def test_a_token_spec_needs_a_tag_scheme_and_a_conll_file_its_columns():
    from dataclasses import replace

    from eebench.tasks.spec import LocalFile

    with pytest.raises(ValueError, match="unit 'token' with tag scheme None"):
        replace(get_task("wnut17"), scheme=None)
    with pytest.raises(ValueError, match="unit 'sequence' with tag scheme 'IOB2'"):
        replace(get_task("sst2"), scheme="IOB2")
    with pytest.raises(ValueError, match="needs its column names"):
        LocalFile("X/train.txt", format="conll")
    with pytest.raises(ValueError, match="unknown file format 'json'"):
        LocalFile("X/train.json", format="json")
