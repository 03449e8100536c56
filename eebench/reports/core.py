"""The generator: declared blocks built from run directories and placed between their markers.

A `Block` names its runs, its kind (a function in the `KINDS` registry, eebench.registry,
registered with `@register_kind`: declaration and context in, the values of its text out), its
text (templates: paragraphs unwrapped, `{names}` filled), options, and its document and marker
(`<!-- MARKER:start -->` ... `<!-- MARKER:end -->`). A block with `test` runs and an `export`
folder exports their ELUE test files when asked.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from eebench.errors import DataError, UsageError
from eebench.registry import Lazy, Registry


class Runs(BaseModel):
    """The runs under `folder` (relative to the root) that hold results, filtered: each read
    verified (eebench.score.load_run), so an unfinished or edited one is refused, not skipped;
    a run still training (its config alone) is not one yet."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    folder: str
    also: tuple[str, ...] = ()  # further folders whose runs join these (a companion config's)
    methods: tuple[str, ...] = ()  # empty: every method
    tasks: tuple[str, ...] = ()
    seeds: tuple[int, ...] = ()


class Block(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    kind: str
    marker: str
    doc: str = "docs/results.md"
    runs: dict[str, Runs] = {}
    text: dict[str, str] = {}  # "body" is the block; the others are parts a kind repeats
    options: dict[str, Any] = {}
    heading: str | None = None  # a document without the markers gets the block under this


Kind = Callable[["Block", "Context"], dict[str, Any]]
KINDS: Registry[Kind] = Registry("report kind")


def register_kind(name: str) -> Callable[[Kind], Kind]:
    """Register a block kind: a function (block, context) -> the values of its body template."""
    return KINDS.register(name)


@dataclass
class Context:
    """What a kind may use: the repository root, one run loader, and what it may write."""

    root: Path
    data_dir: Path | None = None
    write: bool = True  # files beside the documents: references, figures, submissions
    figures: bool = True
    export: bool = False
    say: Callable[[str], None] = print
    _runs: dict[tuple, list] = field(default_factory=dict)

    def runs(self, spec: Runs, quality: bool = False, required: bool = False) -> list:
        """The runs `spec` names, loaded once per folder (with `quality`: a copy whose points
        have their quality fields filled from the stored arrays); `required`: none is an error."""
        from eebench.score import load_run
        from eebench.score.collect import run_dirs_under

        for folder in (spec.folder, *spec.also):
            if (folder, quality) not in self._runs:
                root = self.path(folder)
                runs = [load_run(p) for p in run_dirs_under(root)] if root.is_dir() else []
                if quality:
                    from eebench.score.quality import fill_quality

                    fill_quality(runs)
                self._runs[folder, quality] = runs
        runs = [r for folder in (spec.folder, *spec.also) for r in self._runs[folder, quality]
                if (not spec.methods or r.config.method in spec.methods)
                and (not spec.tasks or r.config.task in spec.tasks)
                and (not spec.seeds or r.config.seed in spec.seeds)]
        if required and not runs:
            raise DataError(f"no finished runs under {spec.folder} ({spec.model_dump()})")
        return runs

    def path(self, relative: str) -> Path:
        return self.root / relative


class _Counts(string.Formatter):
    """str.format, and `{n:~run}` for a count and its noun: "1 run", "6 runs"."""

    def format_field(self, value: Any, format_spec: str) -> str:
        if format_spec.startswith("~"):
            return f"{value} {format_spec[1:]}{'' if value == 1 else 's'}"
        return super().format_field(value, format_spec)


def page(template: str, **values) -> str:
    """`template` with each paragraph on one line (a Markdown table, whose lines begin with "|",
    kept as it is), then filled in (`{n:~run}`: "1 run", "6 runs")."""
    text = "\n\n".join(p if p.startswith("|") else " ".join(p.splitlines())
                         for p in template.split("\n\n"))
    return _Counts().vformat(text, (), values)


def build(block: Block, ctx: Context) -> str:
    """The block's text, markers included."""
    if block.kind not in KINDS:
        raise UsageError(f"block {block.name}: no block kind {block.kind!r}",
                         hint="kinds: " + ", ".join(sorted(KINDS)))
    body = page(block.text["body"], **KINDS.get(block.kind)(block, ctx))
    return f"<!-- {block.marker}:start -->\n\n{body}\n\n<!-- {block.marker}:end -->"


def place(doc: str, text: str, block: Block, where: Path) -> str:
    """`doc` with `text` in place of its block between the markers (or appended under the
    block's heading where the markers are missing)."""
    start, end = f"<!-- {block.marker}:start -->", f"<!-- {block.marker}:end -->"
    head, sep, rest = doc.partition(start)
    _, sep2, tail = rest.partition(end)
    if not (sep and sep2):
        if block.heading is None:
            raise DataError(f"{where}: no {start} ... {end} block to replace")
        head, tail = doc.rstrip("\n") + f"\n\n{block.heading}\n\n", "\n"
    return head + text + tail


def generate(blocks: Iterable[Block], ctx: Context, names: Iterable[str] | None = None,
             check: bool = False, show: bool = False) -> list[Path]:
    """Build the blocks (all, or those named, in declaration order), place each in its document
    and write the documents that change; returns those. With `check` nothing is written; with
    `show` the blocks are printed (`ctx.say`) and nothing is written."""
    from eebench.io import atomic_write_text

    blocks, names = list(blocks), list(names or [])
    unknown = sorted(set(names) - {b.name for b in blocks})
    if unknown:
        raise UsageError(f"no block {unknown[0]!r}",
                         hint="blocks: " + ", ".join(b.name for b in blocks))
    ctx.write = ctx.write and not (check or show)
    docs: dict[Path, str] = {}
    for block in [b for b in blocks if not names or b.name in names]:
        where = ctx.path(block.doc)
        text = build(block, ctx)
        if show:
            ctx.say(text)
        docs[where] = place(docs.get(where) or where.read_text(encoding="utf-8"), text, block,
                            where)
        if ctx.write and ctx.export and "test" in block.runs:
            from eebench.reports.files import export_tests

            export_tests(ctx, block.runs["test"], block.options["export"])
    changed = [p for p, text in docs.items() if p.read_text(encoding="utf-8") != text]
    for p in changed if ctx.write else []:
        atomic_write_text(p, docs[p])
    return changed


# The built-in kinds, a module each (or two to a module), imported when a block first names one.
for _name, _ref in (("ablation", "ablation:ablation_block"), ("claims", "claims:claims"),
                    ("static-curves", "curves:static_curves"), ("run-cost", "curves:run_cost"),
                    ("decoders", "decoders:decoders_block"),
                    ("difficulty", "difficulty:difficulty_block"),
                    ("elue-benchmark", "elue:benchmark_page"),
                    ("full-models", "full_models:full_models"),
                    ("published-curve", "full_models:published_curve"),
                    ("quality", "quality:quality_block"), ("shift", "shift:shift_block"),
                    ("token-benchmark", "tokens:token_page")):
    KINDS.add(_name, Lazy(f"eebench.reports.{_ref}"))
