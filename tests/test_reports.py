"""The report generator (eebench.reports): one formatter, one placing, declared blocks checked
and written; submissions kept when only their making changed."""

from __future__ import annotations

import json
import math

import pytest

from eebench.errors import DataError, UsageError
from eebench.reports import KINDS, Block, Context, generate, page, register_kind
from eebench.reports.core import place
from eebench.reports.files import same_numbers, write_submission_if_changed
from eebench.reports.fmt import markdown, pm, pm_over, signed


def test_mean_pm_std_only_over_two_or_more_seeds_and_never_minus_zero():
    assert pm(71.234, 0.56, 3) == "71.2 ± 0.6"
    assert pm(71.234, 0.56, 1) == "71.2"
    assert pm(-0.04, 0.1, 3) == "0.0 ± 0.1"
    assert pm(0.12345, 0.001, 2, digits=3) == "0.123 ± 0.001"
    assert pm(None) == "-" and pm(math.nan) == "-" and pm(None, none="–") == "–"
    assert pm_over([1.0, 2.0, 3.0]) == "2.0 ± 1.0"
    assert pm_over([5.0]) == "5.0"
    assert pm_over([], none="–") == "–"


def test_signed_scores_keep_their_sign():
    assert signed(0.0) == "+0.00"
    assert signed(-1.234, [-1.0, -1.5]) == "-1.23 ± 0.35"
    assert signed(None) == "-" and signed(math.nan, [1.0, 2.0]) == "-"


def test_markdown_cells_are_text_as_written_unless_numbers_are_parsed():
    text = markdown([{"a": "x", "b": "+0.00"}, {"a": "y", "b": "1.50"}], "lr")
    assert text.splitlines() == ["| a   |     b |", "|:----|------:|",
                                 "| x   | +0.00 |", "| y   |  1.50 |"]
    assert "| 1.5 |" in markdown([{"b": "1.50"}], numparse=True, floatfmt=".1f")


def test_page_unwraps_paragraphs_then_fills_in():
    assert page("one\ntwo {x}\n\n{table}", x=1, table="a\nb") == "one two 1\n\na\nb"
    assert page("{n:.1f} from {n:~run} of {m:~MPNet-base run}", n=1, m=6) == \
        "1.0 from 1 run of 6 MPNet-base runs"
    assert page("{n:~cell}", n=0) == "0 cells"


BLOCK = Block(name="t", kind="test-kind", marker="t", doc="doc.md",
              text={"body": "Made from\n{n} runs.\n\n{table}"}, options={"n": 2})


@register_kind("test-kind")  # once, for this module's tests
def _values(block, ctx):
    n = block.options["n"]
    return {"n": n, "table": markdown([{"x": str(i)} for i in range(n)], "r")}


def test_the_built_in_kinds_are_registered_lazily_in_one_registry():
    """Every kind is a name in the one registry; looking one up imports its module."""
    assert set(KINDS.builtin()) == {
        "ablation", "claims", "static-curves", "run-cost", "decoders", "difficulty",
        "elue-benchmark", "full-models", "published-curve", "quality", "shift", "token-benchmark"}
    assert KINDS.source("test-kind") != "eebench"  # this test module's own
    for name in KINDS.builtin():
        assert callable(KINDS.get(name))
    with pytest.raises(UsageError, match="did you mean 'quality'"):
        KINDS.get("qualty")


def _doc(root, body: str = "old") -> str:
    text = f"# Doc\n\nhand-written\n\n<!-- t:start -->\n{body}\n<!-- t:end -->\n\nmore\n"
    (root / "doc.md").write_text(text)
    return text


def test_check_says_what_would_change_and_writes_nothing(tmp_path):
    before = _doc(tmp_path)
    assert generate([BLOCK], Context(root=tmp_path), check=True) == [tmp_path / "doc.md"]
    assert (tmp_path / "doc.md").read_text() == before


def test_generate_places_the_block_between_its_markers_and_keeps_the_rest(tmp_path):
    _doc(tmp_path)
    assert generate([BLOCK], Context(root=tmp_path)) == [tmp_path / "doc.md"]
    assert (tmp_path / "doc.md").read_text() == (
        "# Doc\n\nhand-written\n\n<!-- t:start -->\n\nMade from 2 runs.\n\n|   x |\n|----:|\n"
        "|   0 |\n|   1 |\n\n<!-- t:end -->\n\nmore\n")
    assert generate([BLOCK], Context(root=tmp_path), check=True) == []  # now up to date


def test_show_prints_the_block_and_writes_nothing(tmp_path):
    before, said = _doc(tmp_path), []
    generate([BLOCK], Context(root=tmp_path, say=said.append), show=True)
    assert len(said) == 1 and said[0].startswith("<!-- t:start -->\n\nMade from 2 runs.")
    assert (tmp_path / "doc.md").read_text() == before


def test_missing_markers_append_under_the_heading_or_stop(tmp_path):
    assert place("# Doc\n", "<!-- t:start -->\nX\n<!-- t:end -->", BLOCK.model_copy(
        update={"heading": "## New"}), tmp_path) == (
        "# Doc\n\n## New\n\n<!-- t:start -->\nX\n<!-- t:end -->\n")
    (tmp_path / "doc.md").write_text("# Doc without markers\n")
    with pytest.raises(DataError, match="no <!-- t:start --> ... <!-- t:end --> block"):
        generate([BLOCK], Context(root=tmp_path))
    assert (tmp_path / "doc.md").read_text() == "# Doc without markers\n"


def test_unknown_block_or_kind_is_a_usage_error(tmp_path):
    _doc(tmp_path)
    with pytest.raises(UsageError, match="no block 'nope'"):
        generate([BLOCK], Context(root=tmp_path), ["nope"])
    with pytest.raises(UsageError, match="no block kind 'gone'"):
        generate([BLOCK.model_copy(update={"kind": "gone"})], Context(root=tmp_path))


def test_runs_are_loaded_once_per_folder_and_filtered(tmp_path, monkeypatch):
    from types import SimpleNamespace

    import eebench.score as score
    from eebench.reports import Runs

    def run(method, seed):
        return SimpleNamespace(config=SimpleNamespace(method=method, task="rte", seed=seed))

    loaded = []
    for i, (m, s) in enumerate([("pabee", 1), ("pabee", 2), ("static", 1)]):
        d = tmp_path / "runs" / str(i)
        d.mkdir(parents=True)
        (d / "summary.json").write_text("{}")
        loaded.append(run(m, s))
    calls = []
    monkeypatch.setattr(score, "load_run", lambda p: calls.append(p) or loaded[int(p.name)])
    ctx = Context(root=tmp_path)
    assert ctx.runs(Runs(folder="runs", methods=("pabee",))) == loaded[:2]
    assert ctx.runs(Runs(folder="runs", seeds=(1,))) == [loaded[0], loaded[2]]
    assert len(calls) == 3  # one load per run directory, however many blocks read them
    assert ctx.runs(Runs(folder="none")) == []
    # a companion folder's runs join the first's, filtered alike, each folder loaded once
    d = tmp_path / "more" / "3"
    d.mkdir(parents=True)
    (d / "summary.json").write_text("{}")
    loaded.append(run("pabee", 3))
    assert ctx.runs(Runs(folder="runs", also=("more", "none"), methods=("pabee",))) == [
        loaded[0], loaded[1], loaded[3]]
    assert len(calls) == 4


SUB = {"schema_version": 2, "created": "2026-01-01T00:00:00+00:00", "name": "x",
       "eebench": {"version": "0.1.0", "git_commit": "a", "git_dirty": False},
       "elue": {"tasks": {"rte": 1.2345678901234567}, "overall": 1.2345678901234567}}


class _Sub:
    def __init__(self, data):
        self.data = data

    def model_dump_json(self, indent=None):
        return json.dumps(self.data, indent=indent)


def test_a_submission_is_kept_when_only_its_making_or_float_noise_changed(tmp_path):
    path = tmp_path / "sub.json"
    path.write_text(json.dumps(SUB))
    noise = json.loads(json.dumps(SUB))
    noise["created"], noise["eebench"]["git_commit"] = "2026-02-02T00:00:00+00:00", "b"
    noise["elue"]["tasks"]["rte"] = 1.2345678901234563
    assert write_submission_if_changed(_Sub(noise), path) is False
    assert json.loads(path.read_text()) == SUB
    changed = json.loads(json.dumps(noise))
    changed["elue"]["tasks"]["rte"] = 1.2346
    assert write_submission_if_changed(_Sub(changed), path) is True
    assert json.loads(path.read_text())["elue"]["tasks"]["rte"] == 1.2346


def test_same_numbers_compares_structure_exactly():
    assert same_numbers({"a": [1, 2.0]}, {"a": [1, 2.0 + 1e-15]})
    assert not same_numbers({"a": [1, 2]}, {"a": [1, 2, 3]})
    assert not same_numbers({"a": 1.0}, {"b": 1.0})
    assert not same_numbers({"a": True}, {"a": 1.0})
    assert not same_numbers({"a": "1.0"}, {"a": 1.0})


def test_a_benchmark_page_without_static_runs_says_so_in_one_line(tmp_path, monkeypatch):
    """The page scores every task against its static runs: with none in yet (a grid's first runs
    are another method's), it names the block and what is missing, not the reference builder."""
    from types import SimpleNamespace

    import eebench.score as score
    from eebench.reports import Runs

    d = tmp_path / "runs" / "0"
    d.mkdir(parents=True)
    (d / "summary.json").write_text("{}")
    deebert = SimpleNamespace(config=SimpleNamespace(method="deebert", task="elue-mrpc", seed=1))
    monkeypatch.setattr(score, "load_run", lambda p: deebert)
    (tmp_path / "bench.toml").write_text('tasks = ["elue-mrpc"]\n')
    block = Block(name="page", kind="elue-benchmark", marker="page", doc="page.md",
                  runs={"main": Runs(folder="runs")}, options={"config": "bench.toml"})
    with pytest.raises(DataError, match="block page: no task has its static runs"):
        KINDS.get("elue-benchmark")(block, Context(root=tmp_path))
