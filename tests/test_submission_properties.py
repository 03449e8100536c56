"""Property-based: thousands of mutants of real submissions, and the validator holds.

The bases are the shipped submissions (leaderboard/submissions/*.json, cut to one task, two seeds
and six points a run so that an example takes milliseconds, their ELUE block rescored) and the
golden tiny submission (its normalised fields filled in). Each test mutates them one way,
hundreds of times: numbers scaled, negated, made huge or retyped; fields deleted, retyped,
renamed or duplicated; lists truncated and extended; strings replaced by hostile text; scores
edited; the JSON text itself broken. For every mutant:

- `validate_file` returns a Verdict, never raises (anything but the DataError it turns into a
  reason would fail the test), and a refusal is one printable line;
- a mutant it accepts renders: the page is well-formed HTML, has only the tags a clean page has,
  one script and one style, no event-handler attribute, and no string of the file with markup in
  it appears unescaped; a sample of the accepted mutants is rendered together with the figures;
- an ELUE score edited beyond the tolerance is always refused, however consistent the rest.

Deterministic (derandomize, no example database) and fast: about 2,000 examples in seconds.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from collections import Counter
from dataclasses import dataclass, field, replace
from html.parser import HTMLParser
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eebench.score.elue import overall
from eebench.submit import site
from eebench.submit.rescore import ELUE_TOLERANCE, References, elue_scores
from eebench.submit.validate import (
    Verdict,
    parse_submission,
    validate_data,
    validate_file,
)
from tests.test_submit_schema import write_reference

REPO = Path(__file__).resolve().parents[1]
# The shipped submissions that have RTE runs (the methods run on every task), cut to RTE below;
# tests/test_shipped_results.py validates every shipped submission whole.
SHIPPED = [p for p in sorted((REPO / "leaderboard" / "submissions").glob("*.json"))
           if "rte" in json.loads(p.read_text())["tasks"]]
REFERENCE = REPO / "leaderboard" / "references" / "minilm-l6-static.json"
GOLDEN = REPO / "tests" / "golden" / "submission_tiny.json"
SETTINGS = settings(max_examples=300, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FIGURE_PAGES = 8  # accepted mutants rendered together with the figures, per test

HOSTILE = [
    "<script>alert('ee')</script>", "<img src=x onerror=alert(1)>", '"><svg onload=alert(1)>',
    "</td></tr></table><h1>ee</h1>", "<!-- ee", "]]><ee/>", "{{csp}}", "{{table}}",
    "$\\frac{$", "$x^2$", "a & b < c > d \" e ' f", "\x00\x07\x1b[31mee", "\u202eee", "ee\ud800",
    "_nolegend_", "😀" * 60, "A" * 2000, "\n\r\t", " ", "", "%s%n{0}", "NaN", "null",
    "javascript:alert(1)", "&lt;script&gt;", "\\", "<" * 300,
]
SPECIAL_NUMBERS = [0, -1, 1, 0.5, 2, 1e-300, 5e-324, 1e300, 1.7e308, -1.7e308, 2**53 + 1,
                   2**63, -(2**63), 10**30, 3.0, True, False]
RETYPES = [None, True, 0, -1, 1.5, "3", "", [], {}, [1], {"a": 1}, [None], "2026-01-01"]


# ------------------------------------------------------------------------------------- the bases
@dataclass
class Base:
    name: str
    text: str
    numbers: list[tuple] = field(default_factory=list)  # paths to numeric leaves
    strings: list[tuple] = field(default_factory=list)
    keys: list[tuple] = field(default_factory=list)  # paths to dict entries (key = path[-1])
    lists: list[tuple] = field(default_factory=list)
    nodes: list[tuple] = field(default_factory=list)
    scores: list[tuple] = field(default_factory=list)  # elue.tasks.<task>, elue.overall


def _index(name: str, data: dict) -> Base:
    base = Base(name, json.dumps(data))

    def walk(node, path: tuple) -> None:
        if path:
            base.nodes.append(path)
        if isinstance(node, dict):
            for k, v in node.items():
                base.keys.append(path + (k,))
                walk(v, path + (k,))
        elif isinstance(node, list):
            base.lists.append(path)
            for i, v in enumerate(node):
                walk(v, path + (i,))
        elif isinstance(node, str):
            base.strings.append(path)
        elif isinstance(node, (int, float)) and not isinstance(node, bool):
            base.numbers.append(path)

    walk(data, ())
    if data.get("elue"):
        base.scores = [("elue", "tasks", t) for t in data["elue"]["tasks"]] + [("elue", "overall")]
    return base


def _rescored(data: dict, refs: References) -> dict:
    sub = parse_submission(data)
    known = refs.find(sub.elue.reference, sub.elue.reference_sha256)
    scores = elue_scores(sub, known.curves, known.sha256)
    data["elue"]["tasks"], data["elue"]["overall"] = scores, overall(scores)
    return data


def _cut(path: Path, refs: References) -> dict:
    """A shipped submission cut to rte, two seeds and six points a run (every sixth of a longer
    sweep), its model's size and ELUE rescored."""
    data = json.loads(path.read_text())
    task = data["tasks"]["rte"]
    task["runs"] = task["runs"][:2]
    for run in task["runs"]:
        run["points"] = run["points"][::max(1, len(run["points"]) // 6)][:6]
    data["tasks"] = {"rte": task}
    data["seeds"] = [r["seed"] for r in task["runs"]]
    data["model"]["params"] = max(p["params_total"] for r in task["runs"] for p in r["points"])
    return _rescored(data, refs)


def _golden(tiny_ref: Path) -> dict:
    """The golden tiny submission with its normalised fields filled in."""
    data = json.loads(GOLDEN.read_text())
    data["created"] = "2026-01-01T00:00:00+00:00"
    data["eebench"] = {"version": "0.1.0", "git_commit": None, "git_dirty": None}
    data["model"]["name"] = "tiny-bert"
    for task in data["tasks"].values():
        for f in task["data_files"]:
            f["sha256"] = f["sha256"] and "a" * 64
        for run in task["runs"]:
            run["predictions_sha256"], run["config_hash"] = "b" * 64, "c0ffee"
    ref = json.loads(tiny_ref.read_text())
    data["elue"]["reference_model"] = ref["model"]
    data["elue"]["reference_sha256"] = hashlib.sha256(tiny_ref.read_bytes()).hexdigest()
    return data


class Page(HTMLParser):
    """Tags, attributes and nesting of a page; `errors` lists end tags that close nothing."""

    VOID = {"meta", "br", "img", "input", "link", "hr"}

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.tags: Counter = Counter()
        self.attrs: set[str] = set()
        self.errors: list[str] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags[tag] += 1
        self.attrs.update(name for name, _ in attrs)
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags[tag] += 1
        self.attrs.update(name for name, _ in attrs)

    def handle_endtag(self, tag):
        if not self.stack or self.stack.pop() != tag:
            self.errors.append(tag)


@dataclass
class World:
    refs: References
    bases: list[Base]
    file: Path
    tags: set[str]  # what a clean page holds


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    root = tmp_path_factory.mktemp("properties")
    tiny_ref = write_reference(root)
    refs = References.from_files([REFERENCE, tiny_ref])
    datas = [(p.stem, _cut(p, refs)) for p in SHIPPED] + [("golden", _golden(tiny_ref))]
    for _, data in datas:
        validate_data(copy.deepcopy(data), refs)  # every base is valid
    clean = site.render([Verdict(Path(f"{n}.json"), parse_submission(d), None)
                         for n, d in datas], [Verdict(Path("refused.json"), None, "a reason")])
    return World(refs, [_index(n, d) for n, d in datas], root / "mutant.json",
                 set(Page(clean).tags))


# ------------------------------------------------------------------------------ the properties
def _get(doc, path: tuple):
    for k in path:
        doc = doc[k]
    return doc


def _set(doc, path: tuple, value) -> None:
    _get(doc, path[:-1])[path[-1]] = value


def _strings(node):
    if isinstance(node, dict):
        for k, v in node.items():
            yield k
            yield from _strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from _strings(v)
    elif isinstance(node, str):
        yield node


def judge(world: World, mutant, accepted: list | None = None) -> Verdict:
    """Validate a mutant (a document or raw bytes) through the file; check what it gives."""
    raw = mutant if isinstance(mutant, bytes) else json.dumps(mutant).encode("utf-8",
                                                                            "surrogatepass")
    world.file.write_bytes(raw)
    verdict = validate_file(world.file, references=world.refs)  # raises nothing
    assert isinstance(verdict, Verdict) and verdict.ok == (verdict.submission is not None)
    if not verdict.ok:
        assert verdict.reason and len(verdict.reason) <= 300
        assert verdict.reason.isprintable(), verdict.reason
        return verdict
    # the file's strings that hold markup (the bases hold none: only a mutant's can)
    markup = [] if b"<" not in raw else [
        s for s in _strings(json.loads(raw) if isinstance(mutant, bytes) else mutant)
        if "<" in s and len(s) >= 8]
    with mock.patch.object(site, "_plots", lambda subs: ""):  # the figures: check_figures
        page = site.render([verdict], [Verdict(Path("refused.json"), None, "a reason")])
    check_page(world, page, markup)
    if accepted is not None:
        accepted.append((verdict, markup))
    return verdict


def check_page(world: World, page: str, markup: list[str]) -> None:
    parsed = Page(page)
    assert not parsed.errors and not parsed.stack, (parsed.errors, parsed.stack)
    assert set(parsed.tags) <= world.tags | {"g", "path", "use", "defs", "clippath", "rect"}
    assert parsed.tags["script"] == 1 and parsed.tags["style"] == 1
    assert not any(a.startswith("on") for a in parsed.attrs)
    for s in markup:
        assert s not in page, f"unescaped: {s[:60]!r}"
    assert page.encode("utf-8")  # the page is written as UTF-8


def check_figures(world: World, accepted: list) -> None:
    """Accepted mutants, a sample of them, on one page with the figures."""
    if not accepted:
        return
    step = max(1, len(accepted) // FIGURE_PAGES)
    sample = accepted[::step][:FIGURE_PAGES]
    verdicts = [replace(v, path=Path(f"mutant-{i}.json")) for i, (v, _) in enumerate(sample)]
    page = site.render(verdicts, [])
    assert page.count("<figure") >= 1
    check_page(world, page, [s for _, markup in sample for s in markup])


def _base(data, bases: list[Base]) -> Base:
    """A base, drawn by name (what hypothesis prints of a failing example)."""
    by_name = {b.name: b for b in bases}
    return by_name[data.draw(st.sampled_from(sorted(by_name)), label="base")]


def _edit_number(value, how):
    if isinstance(how, str):
        return {"negate": -value, "zero": 0 * value, "half": value / 2, "double": value * 2,
                "times 1e6": value * 1e6, "over 1e6": value / 1e6, "plus 1": value + 1,
                "minus 1": value - 1, "float": float(value),
                "int": int(value) if math.isfinite(value) else 0}[how]
    return how


NUMBER_EDITS = st.one_of(
    st.sampled_from(["negate", "zero", "half", "double", "times 1e6", "over 1e6", "plus 1",
                     "minus 1", "float", "int"]),
    st.sampled_from(SPECIAL_NUMBERS),
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(min_value=-(2**70), max_value=2**70),
)
TEXT = st.one_of(st.sampled_from(HOSTILE), st.text(max_size=40))


def test_numbers_scaled_negated_huge_or_retyped(world):
    accepted: list = []

    @SETTINGS
    @given(st.data())
    def run(data):
        base = _base(data, world.bases)
        doc = json.loads(base.text)
        for _ in range(data.draw(st.integers(1, 3))):
            path = data.draw(st.sampled_from(base.numbers))
            _set(doc, path, _edit_number(_get(doc, path), data.draw(NUMBER_EDITS)))
        judge(world, doc, accepted)

    run()
    check_figures(world, accepted)


def test_fields_deleted_retyped_renamed(world):
    @SETTINGS
    @given(st.data())
    def run(data):
        base = _base(data, world.bases)
        doc = json.loads(base.text)
        how = data.draw(st.sampled_from(["delete", "retype", "rename", "copy"]))
        path = data.draw(st.sampled_from(base.keys))
        parent, key = _get(doc, path[:-1]), path[-1]
        if how == "delete":
            del parent[key]
        elif how == "retype":
            parent[key] = data.draw(st.sampled_from(RETYPES))
        elif how == "rename":
            parent[data.draw(TEXT)] = parent.pop(key)
        else:  # another field's value in its place
            parent[key] = copy.deepcopy(_get(doc, data.draw(st.sampled_from(base.nodes))))
        judge(world, doc)

    run()


def test_lists_truncated_extended_emptied(world):
    @SETTINGS
    @given(st.data())
    def run(data):
        base = _base(data, world.bases)
        doc = json.loads(base.text)
        path = data.draw(st.sampled_from(base.lists))
        items = _get(doc, path)
        how = data.draw(st.sampled_from(["truncate", "repeat", "append", "empty", "reverse"]))
        if how == "truncate":
            del items[data.draw(st.integers(0, max(0, len(items) - 1))):]
        elif how == "repeat" and items:
            items.extend(copy.deepcopy(items) * data.draw(st.integers(1, 3)))
        elif how == "append":
            items.append(data.draw(st.sampled_from(RETYPES + [copy.deepcopy(items[:1])])))
        elif how == "empty":
            items.clear()
        else:
            items.reverse()
        judge(world, doc)

    run()


def test_strings_replaced_by_hostile_text(world):
    accepted: list = []

    @SETTINGS
    @given(st.data())
    def run(data):
        base = _base(data, world.bases)
        doc = json.loads(base.text)
        for _ in range(data.draw(st.integers(1, 3))):
            _set(doc, data.draw(st.sampled_from(base.strings)), data.draw(TEXT))
        if data.draw(st.booleans()):  # the strings the page shows
            doc["name"], doc["model"]["name"] = data.draw(TEXT), data.draw(TEXT)
            doc["method"]["name"] = data.draw(TEXT)
        judge(world, doc, accepted)

    run()
    assert accepted  # hostile names are names: they must show, as text
    check_figures(world, accepted)


def test_scores_edited_are_refused(world):
    """A careful forger: one task's score moved, the overall kept the mean of the tasks; or any
    score or metric moved alone. Moved beyond the tolerance, always refused."""
    bases = [b for b in world.bases if b.scores]

    @SETTINGS
    @given(st.data())
    def run(data):
        base = _base(data, bases)
        doc = json.loads(base.text)
        delta = data.draw(st.one_of(st.floats(-100, 100), st.sampled_from([1e-3, -1e-5, 42.0])))
        path = data.draw(st.sampled_from(base.scores * 2 + [("name",)]))  # a fifth: metrics
        moved = delta  # how far the task's ELUE score moves
        if path[-1] == "name":  # a metric of a point instead
            runs = doc["tasks"]["rte"]["runs"]
            point = runs[0]["points"][data.draw(st.integers(0, 2))]
            point["metrics"]["accuracy"] = point["main"] = point["main"] + delta
            moved = delta / len(runs) / len(runs[0]["points"])  # its share of the mean
        else:
            _set(doc, path, _get(doc, path) + delta)
            if path[1] == "tasks" and data.draw(st.booleans()):
                doc["elue"]["overall"] = overall(doc["elue"]["tasks"])
        verdict = judge(world, doc)
        if abs(moved) > 2 * ELUE_TOLERANCE:
            assert not verdict.ok, f"a score moved by {moved} was accepted"

    run()


def test_broken_json_text(world):
    @SETTINGS
    @given(st.data())
    def run(data):
        base = _base(data, world.bases)
        text = base.text
        how = data.draw(st.sampled_from(["cut", "insert", "duplicate key", "literal", "bytes"]))
        at = data.draw(st.integers(0, len(text)))
        if how == "cut":
            raw = text[:at].encode()
        elif how == "insert":
            raw = (text[:at] + data.draw(st.sampled_from(list('{}[]",:0-.eE\\') + HOSTILE))
                   + text[at:]).encode("utf-8", "surrogatepass")
        elif how == "duplicate key":
            key = data.draw(st.sampled_from(['"name": ', '"main": ', '"seed": ', '"rte": ']))
            raw = text.replace(key, f'{key}{json.dumps(data.draw(st.sampled_from(RETYPES)))}, '
                                    f'{key}', 1).encode()
        elif how == "literal":
            raw = text.replace('"mean_flops": ', '"mean_flops": ' + data.draw(st.sampled_from(
                ["NaN", "Infinity", "-Infinity", "1e999", "9" * 5000, "0x10", "1_000", "+1",
                 "01", ".5", "1e308 1"])) + " + ", 1).encode()
            raw = raw.replace(b" + ", b"", 1) if data.draw(st.booleans()) else raw
        else:
            raw = text.encode()[:at] + data.draw(st.binary(min_size=1, max_size=4)) + \
                text.encode()[at:]
        judge(world, raw)

    run()
