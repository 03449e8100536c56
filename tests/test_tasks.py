"""The task catalog: 15 specs, consistent with themselves and with the real files' headers."""

from __future__ import annotations

import json

import pytest

from eebench.errors import UsageError
from eebench.tasks.metrics import COMBINED, SINGLE
from eebench.tasks.spec import TASKS, all_tasks, get_task
from eebench.tasks.tsv import read_tsv

GLUE = {"cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli"}
ELUE = {"elue-sst2", "elue-imdb", "elue-mrpc", "elue-stsb", "elue-snli", "elue-scitail"}
# The data README: these ELUE files use CSV quoting; every other file is read with quoting off.
CSV_QUOTED = {"SciTail/train.tsv", "ELUE/STS-B/train.tsv", "ELUE/STS-B/dev.tsv",
              "ELUE/STS-B/test.tsv"}
SPECS = all_tasks()


def test_fifteen_tasks_in_two_benchmarks():
    assert {s.name for s in SPECS if s.benchmark == "glue"} == GLUE
    assert {s.name for s in SPECS if s.benchmark == "elue"} == ELUE
    assert len(SPECS) == 15


@pytest.mark.parametrize("alias,name", [("SST-2", "sst2"), ("imdb", "elue-imdb"),
                                        ("snli", "elue-snli"), ("scitail", "elue-scitail"),
                                        ("sts-b", "stsb")])
def test_aliases(alias, name):
    assert get_task(alias).name == name and alias in TASKS


def test_unknown_task_is_a_usage_error_with_did_you_mean():
    with pytest.raises(UsageError) as e:
        get_task("scitial")
    assert e.value.exit_code == 2 and "did you mean 'scitail'" in str(e.value)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_spec_is_consistent(spec):
    assert set(spec.metrics) <= set(SINGLE) | set(COMBINED)
    assert spec.main_metric in spec.metrics
    assert set(spec.expected_rows) <= set(spec.splits)
    assert {"train", "dev", "test"} <= set(spec.splits)
    assert spec.is_regression == (spec.labels is None) == ("pearson" in spec.metrics)
    for alias, target in spec.label_aliases.items():
        assert spec.labels and target in spec.labels and alias not in spec.labels
    for split, file in spec.local.items():
        assert file.quoting == ("csv" if file.path in CSV_QUOTED else "none"), file.path
        assert file.has_labels == (file.index_column is None), (split, file.path)
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
        if not path.is_file():
            continue
        table = read_tsv(path, quoting=file.quoting, header=file.header, columns=file.columns)
        needed = set(file.text_columns or spec.text_columns)
        needed |= {spec.label_column} if file.has_labels else set()
        needed |= {file.index_column} if file.index_column else set()
        assert needed <= set(table.columns), (split, table.columns)
        if not file.header:  # CoLA: the first line is a data row, not a header
            assert table.rows[0][0] == "gj04" and table.lines[0] == 1
        checked += 1
    if spec.name not in ("qqp", "mnli"):  # the two GLUE tasks absent from the data folder
        assert checked >= 2
