"""`eebench tasks`, `methods`, `backbones`, `data check` and `data show` on hostile input."""

from __future__ import annotations

import pytest

from tests.hostile.helpers import fails, unchanged

UNTERMINATED = ('sentence1\tsentence2\tlabel\n'
                'A man is dancing.\tA man dances.\t5.0\n'
                '"A quote that never closes.\tA child rides.\t4.0\n'
                'A dog barks.\tA dog is barking.\t4.8\n')


@pytest.mark.parametrize("args,code,needle", [
    (["tasks", "--benchmark", "superglue"], 2, "unknown benchmark 'superglue'"),
    (["tasks", "--nonsense"], 2, "No such option: --nonsense"),
    (["tasks", "surplus"], 2, "unexpected extra argument"),
    (["methods", "--nonsense"], 2, "No such option"),
    (["methods", "surplus"], 2, "unexpected extra argument"),
    (["backbones", "--nonsense"], 2, "No such option"),
    (["backbones", "surplus"], 2, "unexpected extra argument"),
    (["no-such-command"], 2, "No such command"),
    (["--nonsense", "tasks"], 2, "No such option: --nonsense"),
])
def test_listings_refuse_bad_usage(args, code, needle):
    fails(*args, code=code, needle=needle)


def test_data_check_reports_a_directory_in_place_of_a_file_not_a_missing_file(rte):
    (rte / "RTE" / "dev.tsv").unlink()
    (rte / "RTE" / "dev.tsv").mkdir()
    with unchanged(rte):
        fails("data", "check", "--data-dir", rte, "--task", "rte", "--json", code=1,
              report=True, needle="RTE/dev.tsv): is a directory, not a file")


def test_data_check_names_the_line_where_an_unterminated_quote_starts(tmp_path):
    stsb = tmp_path / "ELUE" / "STS-B"
    stsb.mkdir(parents=True)
    (stsb / "dev.tsv").write_text(UNTERMINATED)
    with unchanged(tmp_path):
        fails("data", "check", "--data-dir", tmp_path, "--task", "elue-stsb", "--json",
              code=1, report=True, needle="dev.tsv:3: unterminated quote")
    line = fails("data", "show", "elue-stsb", "--data-dir", tmp_path, code=1)
    assert line.startswith(f"error: {stsb / 'dev.tsv'}:3: unterminated quote")  # not line 4


def test_data_check_refuses_a_binary_file(rte):
    (rte / "RTE" / "train.tsv").write_bytes(bytes(range(256)) * 4)
    with unchanged(rte):
        fails("data", "check", "--data-dir", rte, "--task", "rte", "--json", code=1,
              report=True, needle="UTF-8")


def test_data_check_refuses_a_file_as_data_directory(tmp_path):
    a_file = tmp_path / "data.tsv"
    a_file.write_text("x\n")
    with unchanged(tmp_path):
        fails("data", "check", "--data-dir", a_file, code=2, needle="is a file, not a directory")
        fails("data", "check", "--data-dir", tmp_path / "missing", code=2, needle="not found")


def test_data_check_without_a_data_directory_is_a_usage_error(monkeypatch):
    monkeypatch.delenv("EEBENCH_DATA_DIR", raising=False)
    fails("data", "check", code=2, needle="needs a local data directory")


def test_data_show_reports_a_directory_in_place_of_a_file(rte):
    (rte / "RTE" / "dev.tsv").unlink()
    (rte / "RTE" / "dev.tsv").mkdir()
    with unchanged(rte):
        fails("data", "show", "rte", "--data-dir", rte, code=1,
              needle="dev.tsv: is a directory, not a file")


def test_data_show_refuses_a_binary_file_and_a_file_as_data_directory(rte):
    (rte / "RTE" / "dev.tsv").write_bytes(b"index\tsentence1\xff\xfe\n")
    with unchanged(rte):
        fails("data", "show", "rte", "--data-dir", rte, code=1, needle="not valid UTF-8")
        fails("data", "show", "rte", "--data-dir", rte / "RTE" / "train.tsv", code=1,
              needle="is a file, not a directory")


def test_data_show_refuses_a_row_with_too_few_fields(rte):
    dev = rte / "RTE" / "dev.tsv"
    lines = dev.read_text().splitlines(keepends=True)
    lines[5] = "5\tonly one sentence\n"
    dev.write_text("".join(lines))
    with unchanged(rte):
        fails("data", "show", "rte", "--data-dir", rte, code=1, needle="dev.tsv:6: expected 4")


@pytest.mark.parametrize("args,needle", [
    (["data", "show", "rte", "-n", "-1"], "Invalid value for '-n'"),
    (["data", "show", "sst3"], "did you mean 'sst2'"),
    (["data", "show", "rte", "--split", "trian"], "has no split 'trian'"),
    (["data", "show"], "Missing argument"),
])
def test_data_show_usage_errors(args, needle):
    fails(*args, code=2, needle=needle)
