"""The command line's basics: fast --help without heavy imports, python -m, tasks, exit codes."""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from eebench import __version__
from eebench.cli import app
from tests.cli import invoke

HEAVY = ("torch", "transformers", "datasets", "matplotlib", "numpy", "pandas")
runner = CliRunner()


def test_help_is_fast_in_a_fresh_process():
    """Median of 3 runs under 1 s. The bound is on the process's own CPU time (user + sys): on
    shared cores the wall time also measures whatever else is running (it is in the message)."""
    cpu, wall = [], []
    for _ in range(3):
        before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "eebench", "--help"],
                              capture_output=True, text=True, timeout=60)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall.append(time.perf_counter() - start)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        assert proc.returncode == 0 and "Usage" in proc.stdout
    assert statistics.median(cpu) < 1.0, f"cpu {cpu}, wall {wall}"


def test_help_and_task_listing_never_import_heavy_libraries():
    code = (
        "import sys, json\n"
        "from typer.testing import CliRunner\n"
        "from eebench.cli import app\n"
        "r = CliRunner()\n"
        "codes = [r.invoke(app, a).exit_code for a in (['--help'], ['data', '--help'],\n"
        "         ['data', 'check', '--help'], ['tasks', '--json'])]\n"
        f"print(json.dumps([codes, [m for m in {HEAVY!r} if m in sys.modules]]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    codes, heavy = json.loads(proc.stdout.strip().splitlines()[-1])
    assert codes == [0, 0, 0, 0]
    assert heavy == []


def test_python_dash_m_and_version():
    proc = subprocess.run([sys.executable, "-m", "eebench", "--version"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == f"eebench {__version__}"


def test_help_lists_the_data_commands():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "tasks" in result.stdout and "data" in result.stdout
    sub = runner.invoke(app, ["data", "--help"])
    assert "check" in sub.stdout and "show" in sub.stdout


def test_the_command_listing_gives_each_command_its_first_paragraph_reflowed():
    """A docstring's line breaks are not the listing's: `methods`' first paragraph spans two
    source lines and reads as one sentence in `eebench --help`."""
    result = runner.invoke(app, ["--help"], terminal_width=200, env={"COLUMNS": "200"})
    assert result.exit_code == 0
    [line] = [x for x in result.stdout.splitlines() if "│ methods " in x]
    assert "(texts, tokens: sequence labelling, with the rule there)" in line


def test_unknown_command_and_option_exit_2():
    assert runner.invoke(app, ["nonsense"]).exit_code == 2
    assert runner.invoke(app, ["tasks", "--nonsense"]).exit_code == 2


def test_tasks_json_is_every_spec_to_dict():
    from eebench.tasks.catalog import all_tasks

    result = runner.invoke(app, ["tasks", "--json"])
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data == [s.to_dict() for s in all_tasks()] and len(data) == 17
    elue = json.loads(runner.invoke(app, ["tasks", "--json", "--benchmark", "elue"]).stdout)
    assert [d["name"] for d in elue] == ["elue-sst2", "elue-imdb", "elue-mrpc", "elue-stsb",
                                         "elue-snli", "elue-scitail"]


def test_tasks_table_goes_to_stderr():
    result = runner.invoke(app, ["tasks"])
    assert result.exit_code == 0 and result.stdout == ""
    for name in ("cola", "elue-scitail", "stanfordnlp/imdb", "pearson_and_spearman",
                 "dev*", "17 tasks", "conll2003", "9 tags per word, IOB1"):
        assert name in result.stderr
    bad = runner.invoke(app, ["tasks", "--benchmark", "superglue"])
    assert bad.exit_code == 2 and bad.stderr.strip() == (
        "error: unknown benchmark 'superglue' (hint: choose from: glue, elue, ner)")


@pytest.mark.parametrize("command", [
    ["export-conll", "{run}", "--out", "{tmp}/o"], ["export-elue", "{run}", "--out", "{tmp}/o"],
    ["export-model", "{run}", "--out", "{tmp}/o"], ["serve-replay", "{run}"]])
def test_a_command_on_one_run_says_what_it_was_given_instead(command, tmp_path):
    runs = tmp_path / "runs" / "m" / "static" / "rte"
    (runs / "abc123").mkdir(parents=True)
    (runs / "abc123" / "points.jsonl").write_text("")
    (tmp_path / "empty").mkdir()
    for given, said in [(tmp_path / "nowhere", "no such run directory"),
                        (tmp_path / "runs", "not a run directory but a folder of runs"),
                        (tmp_path / "empty", "not a run directory")]:
        result = invoke(*[c.format(run=given, tmp=tmp_path) for c in command])
        assert result.exit_code == 1, result.output
        assert said in result.stderr and "Traceback" not in result.output
        assert "damaged" not in result.stderr
    folder = invoke(*[c.format(run=tmp_path / "runs", tmp=tmp_path) for c in command])
    assert str(runs / "abc123") in folder.stderr.replace("\n", "")
