"""`eebench data check` and `eebench data show`: look at the local data files before a run.

`check` reads every file of every task through the real loader, so a file it calls ok is a file
a run can load; it compares row counts with the published split sizes and shows the labels.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from eebench.cli.app import app, make_app
from eebench.cli.common import (
    DataDirOption,
    JsonOption,
    err_console,
    print_json,
    progress,
    resolve_data_dir,
)
from eebench.cli.info import PANEL
from eebench.errors import DataError, UsageError

if TYPE_CHECKING:
    from eebench.tasks.loaders import Examples
    from eebench.tasks.spec import TaskSpec

data_app = make_app("Inspect and validate local GLUE/ELUE/NER data files.")
app.add_typer(data_app, name="data", rich_help_panel=PANEL)

INVALID = ("error", "row-count mismatch")
TaskOption = typer.Option(
    None, "--task", "-t", help="Check only this task (repeatable); default: every task."
)


def describe_labels(spec: TaskSpec, ex: Examples) -> dict | None:
    """Label distribution (classification: raw label -> rows; a token task: tag -> words) or
    score range (regression)."""
    if ex.labels is None:
        return None
    if spec.unit == "token":  # words per tag
        from eebench.tasks.conll import tag_counts

        return tag_counts(spec, ex)
    if spec.is_regression:
        y = ex.labels
        return {"min": min(y), "max": max(y), "mean": round(sum(y) / len(y), 4)}
    return {spec.labels[i]: n for i, n in ex.label_counts().items()}


def _record(spec: TaskSpec, split: str, file: str, **kw) -> dict:
    rec = {"task": spec.name, "split": split, "file": file, "rows": None,
           "expected": spec.expected_rows.get(split), "labels": None, "skipped": {},
           "status": "ok", "reason": None, "note": None}
    rec.update(kw)
    return rec


def check_task(spec: TaskSpec, data_dir: Path, advance=lambda path: None) -> list[dict]:
    """One record per split; `advance(path)` is called after each file is read."""
    from eebench.io import not_a_file
    from eebench.tasks.loaders import carve_dev, load_file

    records = []
    carve = spec.dev_from_train is not None and "dev" not in spec.local
    for split, file in spec.local.items():
        path = data_dir / file.path
        if path.exists() and not path.is_file():  # a directory, a FIFO, a device: never read
            reason = not_a_file(path)
            records.append(_record(spec, split, file.path, status="error", reason=reason))
            if carve and split == "train":
                records.append(_record(spec, "dev", file.path, status="error", reason=reason))
            continue
        if not path.is_file():
            records.append(_record(spec, split, file.path, status="missing"))
            if carve and split == "train":
                records.append(_record(spec, "dev", file.path, status="missing"))
            continue
        try:
            ex = load_file(spec, split, data_dir)
        except DataError as e:
            records.append(_record(spec, split, file.path, status="error", reason=e.message))
            continue
        finally:
            advance(path)
        rec = _record(spec, split, file.path, rows=len(ex), labels=describe_labels(spec, ex),
                      skipped=dict(ex.skipped))
        if spec.unit == "token":  # a row is a sentence
            rec["note"] = f"rows are sentences; {sum(len(t) for t in ex.texts):,} words"
        if rec["expected"] is not None and rec["rows"] != rec["expected"]:
            rec["status"] = "row-count mismatch"
            rec["reason"] = f"{rec['rows']:,} rows, published size {rec['expected']:,}"
        records.append(rec)
        if carve and split == "train":
            rule = spec.dev_from_train
            train, dev = carve_dev(ex, rule)
            rec["note"] = f"{len(train):,} kept for training"
            records.append(_record(
                spec, "dev", file.path, rows=len(dev), labels=describe_labels(spec, dev),
                note=f"carved: {rule.fraction:.0%} per label, seed {rule.seed}",
            ))
    return records


def _fmt_labels(labels: dict | None, sep: str = "\n") -> str:
    if labels is None:
        return "no labels"
    if "mean" in labels and "min" in labels:
        return f"score {labels['min']:g}–{labels['max']:g}, mean {labels['mean']:.2f}"
    return sep.join(f"{k}: {v:,}" for k, v in labels.items())


def _print_table(records: list[dict], data_dir: Path) -> None:
    from rich.markup import escape
    from rich.table import Table

    colour = {"ok": "green", "missing": "yellow"}
    table = Table(title=escape(f"data check: {data_dir}"), title_justify="left")
    for col in ("task", "split", "file", "rows", "expected", "labels", "status"):
        number = col in ("rows", "expected")
        table.add_column(col, justify="right" if number else "left", no_wrap=number,
                         overflow="fold")
    for r in records:
        status = f"[{colour.get(r['status'], 'red')}]{r['status']}[/]"
        skipped = [f"skipped {n:,}: {why}" for why, n in r["skipped"].items()]
        extra = [r["reason"], r["note"], *skipped]
        status += "".join(f"\n[dim]{escape(x)}[/]" for x in extra if x)
        table.add_row(r["task"], r["split"], escape(r["file"]),
                      "—" if r["rows"] is None else f"{r['rows']:,}",
                      "—" if r["expected"] is None else f"{r['expected']:,}",
                      "—" if r["status"] == "missing" else escape(_fmt_labels(r["labels"])),
                      status)
    err_console.print(table)


@data_app.command("check")
def check(
    data_dir: Path | None = DataDirOption,
    task: list[str] | None = TaskOption,
    as_json: bool = JsonOption,
) -> None:
    """Validate every split file: columns, row counts against the published sizes, labels.

    Exit 0 when every file present is valid (absent tasks are reported as missing), 1 when a
    file is invalid or a task named with --task has no files at all.
    """
    from eebench.tasks.catalog import all_tasks, get_task

    root = resolve_data_dir(data_dir, exit_code=2)  # a usage error here, as below
    if root is None:
        raise UsageError("data check needs a local data directory",
                         hint="pass --data-dir DIR or set EEBENCH_DATA_DIR")
    if not root.is_dir():
        from eebench.io import kind, not_a_directory

        what = "data directory not found" if kind(root) == "missing" else not_a_directory(root)
        raise UsageError(f"{root}: {what}")
    named = [get_task(t) for t in task or ()]
    specs = list({s.name: s for s in named}.values()) or all_tasks()  # aliases counted once

    files = [root / f.path for s in specs for f in s.local.values()]
    total = sum(p.stat().st_size for p in files if p.is_file()) or 1
    records: list[dict] = []
    with progress(transient=True) as bar:
        job = bar.add_task("reading", total=total, info="")

        def advance(path: Path) -> None:
            bar.update(job, advance=path.stat().st_size, info=str(path.relative_to(root)))

        for spec in specs:
            bar.update(job, info=spec.name)
            records.extend(check_task(spec, root, advance))

    invalid = [r for r in records if r["status"] in INVALID]
    absent = [s.name for s in specs if task and all(
        r["status"] == "missing" for r in records if r["task"] == s.name)]
    ok = not invalid and not absent
    if as_json:
        print_json({"data_dir": str(root), "ok": ok, "files": records})
    else:
        _print_table(records, root)
        present = sum(r["status"] != "missing" for r in records)
        err_console.print(f"{present} of {len(records)} splits present, {len(invalid)} invalid")
    if invalid:
        first = invalid[0]
        raise DataError(f"{len(invalid)} invalid file(s); first: {first['task']} {first['split']} "
                        f"({first['file']}): {first['reason']}")
    if absent:
        raise DataError(f"no files found for task(s) {', '.join(absent)} under {root}")


def _label(spec: TaskSpec, ex: Examples, i: int):
    """Row i's label as shown: the raw label, the score, or a token task's tag per word."""
    if ex.labels is None:
        return None
    y = ex.labels[i]
    if spec.is_regression:
        return y
    return [spec.labels[t] for t in y] if spec.unit == "token" else spec.labels[y]


@data_app.command("show")
def show(
    task: str = typer.Argument(..., help="Task name, e.g. sst2 or elue-scitail."),
    split: str = typer.Option("dev", "--split", "-s", help="Split: train, dev or test."),
    n: int = typer.Option(5, "-n", min=0, help="How many rows to print (the first n)."),
    data_dir: Path | None = DataDirOption,
    as_json: bool = JsonOption,
) -> None:
    """Load one split through the loader and print its size, labels and first rows."""
    from eebench.tasks.catalog import get_task
    from eebench.tasks.loaders import load_split

    spec = get_task(task)
    ex = load_split(spec, split, resolve_data_dir(data_dir))
    rows = [{"id": ex.ids[i], "text": list(ex.texts[i]), "label": _label(spec, ex, i)}
            for i in range(min(n, len(ex)))]  # a token task: the words, and a tag per word
    summary = {"task": spec.name, "split": ex.split, "source": ex.source, "rows": len(ex),
               "labels": describe_labels(spec, ex), "skipped": ex.skipped}
    if as_json:
        print_json({**summary, "examples": rows})
        return

    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    err_console.print(f"[bold]{spec.name}[/] {ex.split}: {len(ex):,} rows from "
                      f"{escape(ex.source)}")
    err_console.print(f"labels: {escape(_fmt_labels(summary['labels'], sep=', '))}")
    for why, count in ex.skipped.items():
        err_console.print(f"[yellow]skipped {count:,} rows: {escape(why)}[/]")
    table = Table(show_lines=True)
    table.add_column("id")
    for col in spec.text_columns:
        table.add_column(col, overflow="fold")
    table.add_column("label")
    for r in rows:
        text, label = r["text"], r["label"]
        if spec.unit == "token":  # one cell of words, one of tags
            text, label = [" ".join(text)], None if label is None else " ".join(label)
        cells = [r["id"], *text, "—" if label is None else str(label)]
        table.add_row(*(Text(c) for c in cells))  # data, not markup: "[laughs]" stays as is
    err_console.print(table)
