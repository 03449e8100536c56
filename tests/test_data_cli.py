"""`eebench data check` and `eebench data show` through the real CLI (typer's CliRunner)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from eebench.cli import app
from tests import cli
from tests.files import write_file

pytestmark = pytest.mark.usefixtures("no_env_data_dir")

runner = CliRunner()


def invoke(*args: str):
    return cli.invoke(*args, catch_exceptions=False)




# ------------------------------------------------------------- malformed input, one line each
@pytest.mark.parametrize("task,rel,content,needle", [
    ("sst2", None, None, "SST-2/dev.tsv: file not found"),
    ("sst2", "SST-2/dev.tsv", "", "SST-2/dev.tsv: empty file"),
    ("sst2", "SST-2/dev.tsv", "text\tlabel\na\t1\n",
     "SST-2/dev.tsv: missing column(s) sentence (expected: sentence, label; found: text, label)"),
    ("rte", "RTE/dev.tsv", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\tc\td\n",
     "RTE/dev.tsv:3: expected 4 tab-separated fields"),
    ("rte", "RTE/dev.tsv", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentails\n",
     "RTE/dev.tsv:2: unknown label 'entails' (expected one of: entailment, not_entailment)"),
    ("elue-stsb", "ELUE/STS-B/dev.tsv", "sentence1\tsentence2\tlabel\na\tb\t3.2\nc\td\t4,5\n",
     "ELUE/STS-B/dev.tsv:3: cannot parse score '4,5' as a number"),
    ("elue-scitail", "SciTail/dev.tsv", "premise\thypothesis\tlabel\r\na\tb\tcontradiction\r\n",
     "SciTail/dev.tsv:2: unknown label 'contradiction' (expected one of: 0, 1, entails, neutral)"),
    ("wnut17", None, None, "WNUT-17/dev.txt: file not found"),
    ("conll2003", "CoNLL-2003/dev.txt", "-DOCSTART- -X- O O\n\nEU NNP I-NP\n",
     "CoNLL-2003/dev.txt:3: expected 4 non-empty field(s) (token, pos, chunk, ner) separated by "
     "one space, found 3 field(s)"),
    ("wnut17", "WNUT-17/dev.txt", "hi\tO\n\t\nyo\tI-PER\n",
     "WNUT-17/dev.txt:3: unknown tag 'I-PER' (expected one of: O, B-corporation"),
])
def test_malformed_input_is_one_stderr_line_naming_the_file(tmp_path, task, rel, content, needle):
    if rel is not None:
        write_file(tmp_path, rel, content)
    for args in (["data", "show", task, "--data-dir", str(tmp_path)],
                 ["data", "show", task, "--data-dir", str(tmp_path), "--json"]):
        result = invoke(*args)
        assert result.exit_code == 1
        lines = result.stderr.splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("error: ") and needle in lines[0]
        assert str(tmp_path) in lines[0]
        assert result.stdout == ""


@pytest.mark.parametrize("args,needle", [
    (["data", "show", "sst3"], "unknown task 'sst3' (hint: did you mean 'sst2'?)"),
    (["data", "show", "sst2", "--split", "devv"], "task 'sst2' has no split 'devv'"),
    (["data", "check", "--task", "rtee"], "unknown task 'rtee'"),
    (["data", "check"], "data check needs a local data directory"),
])
def test_usage_errors_exit_2_with_one_line(tmp_path, args, needle):
    if args[1] == "check" and "--task" in args:
        args = [*args, "--data-dir", str(tmp_path)]
    result = invoke(*args)
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0]


# ----------------------------------------------------------------------- data check, real data
@pytest.fixture(scope="module")
def real_check(data_dir):
    result = runner.invoke(app, ["data", "check", "--data-dir", str(data_dir), "--json"],
                           catch_exceptions=False)
    return result, json.loads(result.stdout)


def test_data_check_json_on_the_real_data(real_check, data_dir):
    result, report = real_check
    assert result.exit_code == 0, result.stderr
    assert report["ok"] is True and report["data_dir"] == str(data_dir)
    rec = {(r["task"], r["split"]): r for r in report["files"]}
    assert len(rec) == 56  # every split of the 19 tasks (MNLI has five)
    assert {k for k, r in rec.items() if r["status"] == "missing"} == {
        ("qqp", s) for s in ("train", "dev", "test")
    } | {("mnli", s) for s in ("train", "dev", "dev_mismatched", "test", "test_mismatched")} | {
        ("qnli", "train"), ("elue-snli", "train")}
    assert {r["status"] for r in report["files"]} == {"ok", "missing"}
    sst2 = rec[("sst2", "train")]
    assert (sst2["file"], sst2["rows"], sst2["expected"]) == ("SST-2/train.tsv", 67349, 67349)
    assert sst2["labels"] == {"0": 29780, "1": 37569} and sst2["skipped"] == {}
    assert rec[("mrpc", "train")]["labels"]["1"] == 2474
    assert rec[("rte", "train")]["labels"]["entailment"] == 1249
    assert rec[("cola", "train")]["labels"]["1"] == 6023
    assert rec[("elue-scitail", "dev")]["labels"] == {"0": 647, "1": 657}
    assert rec[("elue-scitail", "test")]["labels"] is None
    assert rec[("elue-snli", "dev")]["rows"] == 9842
    imdb_dev = rec[("elue-imdb", "dev")]
    assert imdb_dev["rows"] == 2500 and imdb_dev["file"] == "IMDb/train.tsv"
    assert imdb_dev["labels"] == {"0": 1250, "1": 1250} and "seed 42" in imdb_dev["note"]
    assert rec[("elue-imdb", "train")]["rows"] == 25000  # the file; 22,500 kept for training
    stsb = rec[("elue-stsb", "dev")]["labels"]
    assert stsb["min"] == 0.0 and stsb["max"] == 5.0


def test_data_check_table_and_env_data_dir(data_dir, monkeypatch):
    monkeypatch.setenv("EEBENCH_DATA_DIR", str(data_dir))
    result = invoke("data", "check", "--task", "rte", "--task", "snli")
    assert result.exit_code == 0 and result.stdout == ""
    for text in ("RTE/train.tsv", "2,490", "entailment: 1,249", "SNLI/train.tsv", "missing",
                 "5 of 6 splits present, 0 invalid"):
        assert text in result.stderr


def test_data_check_named_task_with_no_files_exits_1(data_dir):
    result = invoke("data", "check", "--data-dir", str(data_dir), "--task", "qqp", "--json")
    assert result.exit_code == 1
    assert [r["status"] for r in json.loads(result.stdout)["files"]] == ["missing"] * 3
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: no files found for task(s) qqp under {data_dir}")


# ------------------------------------------------------------------ data check, small files
def test_data_check_row_count_mismatch_and_errors_exit_1(tmp_path):
    write_file(tmp_path, "SST-2/dev.tsv", "sentence\tlabel\na\t1\nb\t0\n")
    write_file(tmp_path, "SST-2/test.tsv", "index\tsentence\n0\ta\n1\tb\tc\n")
    result = invoke("data", "check", "--data-dir", str(tmp_path), "--task", "sst2", "--json")
    assert result.exit_code == 1
    rec = {r["split"]: r for r in json.loads(result.stdout)["files"]}
    assert rec["train"]["status"] == "missing"
    assert rec["dev"]["status"] == "row-count mismatch" and rec["dev"]["rows"] == 2
    assert rec["dev"]["reason"] == "2 rows, published size 872"
    assert rec["dev"]["labels"] == {"0": 1, "1": 1}
    assert rec["test"]["status"] == "error"
    assert rec["test"]["reason"].startswith(str(tmp_path / "SST-2/test.tsv") + ":3: expected 2")
    assert result.stderr.strip().splitlines()[-1].startswith("error: 2 invalid file(s)")


def test_data_check_passes_when_every_present_file_is_valid(tmp_path):
    rows = "".join(f"{i}\tThe premise {i}.\tThe hypothesis.\t{i % 2}\n" for i in range(71))
    write_file(tmp_path, "WNLI/dev.tsv", "index\tsentence1\tsentence2\tlabel\n" + rows + "\n")
    result = invoke("data", "check", "--data-dir", str(tmp_path), "--task", "wnli", "--json")
    assert result.exit_code == 0, result.stderr
    rec = {r["split"]: r for r in json.loads(result.stdout)["files"]}
    assert rec["dev"]["status"] == "ok" and rec["dev"]["skipped"] == {"blank line": 1}
    assert [rec[s]["status"] for s in ("train", "test")] == ["missing", "missing"]
    table = invoke("data", "check", "--data-dir", str(tmp_path), "--task", "wnli")
    assert "skipped 1: blank line" in table.stderr


# ------------------------------------------------------------------------------- data show
def test_data_show_json(data_dir):
    result = invoke("data", "show", "scitail", "--split", "train", "-n", "2",
                    "--data-dir", str(data_dir), "--json")
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["rows"] == 23596 and out["labels"] == {"0": 14994, "1": 8602}
    assert out["source"] == str(data_dir / "SciTail/train.tsv")
    assert out["examples"][0] == {
        "id": "0", "label": "0",
        "text": ["Pluto rotates once on its axis every 6.39 Earth days;",
                 "Earth rotates on its axis once times in one day."]}
    assert len(out["examples"]) == 2


def test_data_show_table(data_dir):
    result = invoke("data", "show", "elue-stsb", "--data-dir", str(data_dir), "-n", "1")
    assert result.exit_code == 0 and result.stdout == ""
    assert "1,500 rows" in result.stderr and "A man with a hard hat is dancing." in result.stderr


def test_data_show_prints_text_as_data_not_markup(tmp_path):
    write_file(tmp_path, "SST-2/dev.tsv", "sentence\tlabel\n[bold]loud[/] and [red]clear\t1\n")
    result = invoke("data", "show", "sst2", "--data-dir", str(tmp_path))
    assert result.exit_code == 0, result.stderr
    assert "[bold]loud[/] and [red]clear" in result.stderr
