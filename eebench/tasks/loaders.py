"""Load one split of a task as Examples, from a local data directory (GLUE/ELUE TSV files, CoNLL
(NER) files: eebench.tasks.conll) or the HF hub.

Both sources end in the same plain lists (texts, label ids, ids), so nothing downstream knows
where the data came from. Rows are never dropped silently: a skipped row is counted, by reason,
in `Examples.skipped`. Malformed data raises a one-line DataError naming the file (and line).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from eebench.errors import DataError, UsageError, one_line
from eebench.io import hub_offline_mode, hub_unreachable, not_a_file
from eebench.tasks.catalog import get_task
from eebench.tasks.spec import DevFromTrain, Examples, HubSource, LocalFile, TaskSpec
from eebench.tasks.tsv import read_tsv

SPLIT_ALIASES = {"validation": "dev", "val": "dev", "valid": "dev"}
NO_GOLD = {"-", "-1"}  # SNLI-style items without a gold label: skipped and counted
LOCAL_HINT = "pass --data-dir DIR or set EEBENCH_DATA_DIR to a local GLUE/ELUE TSV directory"


def resolve_split(spec: TaskSpec, split: str) -> str:
    """The canonical split name ("validation" -> "dev"); UsageError with did-you-mean otherwise."""
    name = SPLIT_ALIASES.get(split.lower(), split.lower())
    if name in spec.splits:
        return name
    known = [*spec.splits, *(a for a, s in SPLIT_ALIASES.items() if s in spec.splits)]
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
    hint = f"did you mean {close[0]!r}?" if close else f"choose from: {', '.join(spec.splits)}"
    raise UsageError(f"task {spec.name!r} has no split {split!r}", hint=hint)


def load_split(task: str | TaskSpec, split: str, data_dir: Path | None = None) -> Examples:
    """Load `split` of `task`: from the local TSV layout under `data_dir`, else from the hub; a
    split a PyPI package ships (HumanEval's prompts) from the package, with or without
    `data_dir`, where it is installed (without it and without `data_dir`: the hub)."""
    spec = task if isinstance(task, TaskSpec) else get_task(task)
    split = resolve_split(spec, split)
    if split not in spec.local and spec.package is not None:
        from eebench.tasks.package import installed, load_package

        if data_dir is not None or installed(spec):
            return load_package(spec)
    if data_dir is None:
        return _carved_or(spec, split, spec.hub is not None and "dev" not in spec.hub.splits,
                          lambda s: _load_hub(spec, s))
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        from eebench.io import kind, not_a_directory

        missing = kind(data_dir) == "missing"
        what = "data directory not found" if missing else not_a_directory(data_dir)
        raise DataError(f"{data_dir}: {what}", hint=LOCAL_HINT)
    no_dev = "dev" not in spec.local
    return _carved_or(spec, split, no_dev, lambda s: load_file(spec, s, data_dir))


def _carved_or(
    spec: TaskSpec, split: str, no_dev: bool, load: Callable[[str], Examples]
) -> Examples:
    """Tasks without a dev split (IMDb) get one carved from train; train then excludes it."""
    if spec.dev_from_train is None or not no_dev or split not in ("train", "dev"):
        return load(split)
    train, dev = carve_dev(load("train"), spec.dev_from_train)
    return dev if split == "dev" else train


def carve_dev(train: Examples, rule: DevFromTrain) -> tuple[Examples, Examples]:
    """Split `train` into (train, dev): a seeded `rule.fraction` of each label, stratified.

    Both parts keep file order and their original ids (row numbers), so they are easy to check
    for overlap. Regression or unlabelled data is split at random instead.
    """
    rng = np.random.default_rng(rule.seed)
    if train.labels is None or any(isinstance(y, float) for y in train.labels):
        groups = [np.arange(len(train))]
    else:
        labels = np.asarray(train.labels)
        groups = [np.flatnonzero(labels == c) for c in np.unique(labels)]
    dev_idx: list[int] = []
    for rows in groups:
        k = int(round(len(rows) * rule.fraction))
        dev_idx.extend(int(i) for i in rng.permutation(rows)[:k])
    in_dev = np.zeros(len(train), dtype=bool)
    in_dev[dev_idx] = True
    dev = train.select(np.flatnonzero(in_dev))
    dev.split, dev.skipped = "dev", {}
    return train.select(np.flatnonzero(~in_dev)), dev


# ----------------------------------------------------------------------------------- labels
def label_parser(spec: TaskSpec) -> Callable[[str], int | float | None]:
    """Map a raw label (str) to its id, its float score, or None for "no gold label".

    An unknown value raises ValueError with the reason; the caller adds the file and line.
    """
    if spec.is_regression:

        def parse_score(raw: str) -> float | None:
            text = raw.strip()
            if text in NO_GOLD:
                return None
            try:
                value = float(text)
            except ValueError:
                value = math.nan
            if not math.isfinite(value):
                raise ValueError(f"cannot parse score {raw!r} as a number")
            return value

        return parse_score

    lookup = {name: i for i, name in enumerate(spec.labels)}
    lookup.update({alias: lookup[target] for alias, target in spec.label_aliases.items()})
    expected = ", ".join(list(spec.labels) + list(spec.label_aliases))

    def parse_label(raw: str) -> int | None:
        text = raw.strip()
        if text in lookup:
            return lookup[text]
        if text in NO_GOLD:
            return None
        raise ValueError(f"unknown label {raw!r} (expected one of: {expected})")

    return parse_label


def _numeric_label(spec: TaskSpec, value) -> int | float | None:
    """Hub labels arrive as ints (ClassLabel ids, -1 = no gold label) or floats (scores)."""
    if value is None or (not spec.is_regression and value == -1):
        return None
    if spec.is_regression:
        return float(value)
    if value != int(value) or not 0 <= int(value) < spec.num_labels:
        raise ValueError(f"unknown label {value!r} (expected 0..{spec.num_labels - 1})")
    return int(value)


def _parse_labels(
    spec: TaskSpec, raw: Sequence, at: Callable[[int], str], skipped: dict[str, int]
) -> tuple[list, list[int]]:
    """Parsed labels and the row indices to keep; rows without a gold label are counted.

    `at(i)` names row i in messages ("file:line"); it is only called for a bad row.
    """
    parse = label_parser(spec)
    labels, keep = [], []
    for i, value in enumerate(raw):
        try:
            y = parse(value) if isinstance(value, str) else _numeric_label(spec, value)
        except ValueError as e:
            raise DataError(f"{at(i)}: {e}") from None
        if y is None:
            skipped["no gold label"] = skipped.get("no gold label", 0) + 1
            continue
        labels.append(y)
        keep.append(i)
    return labels, keep


# ------------------------------------------------------------------------------------ local
def load_file(spec: TaskSpec, split: str, data_dir: Path) -> Examples:
    """One local file exactly as it is (no dev carving): the unit `eebench data check` validates."""
    file: LocalFile = spec.local[split]
    path = data_dir / file.path
    if not path.is_file():  # missing, a directory, a FIFO or a device (never read)
        what = not_a_file(path)
        raise DataError(f"{path}: {'file not found' if what == 'not found' else what}",
                        hint="docs/data.md shows the directory layout")
    if file.format == "conll":  # a token per line: eebench.tasks.conll
        from eebench.tasks.conll import load_conll

        return load_conll(spec, split, path)
    table = read_tsv(path, quoting=file.quoting, header=file.header, columns=file.columns)
    text_cols = file.text_columns or spec.text_columns
    required = list(text_cols)
    if file.has_labels:
        required.append(spec.label_column)
    if file.index_column:
        required.append(file.index_column)
    missing = [c for c in required if c not in table.columns]
    if missing:
        raise DataError(
            f"{path}: missing column(s) {', '.join(missing)} (expected: {', '.join(required)}; "
            f"found: {', '.join(table.columns) or 'none'})"
        )
    cols = [table.columns.index(c) for c in text_cols]
    texts = [tuple(row[c] for c in cols) for row in table.rows]
    ids = table.column(file.index_column) if file.index_column else list(
        map(str, range(len(table.rows)))
    )
    skipped = {"blank line": table.blank_lines} if table.blank_lines else {}
    ex = Examples(spec.name, split, texts, None, ids, str(path), skipped)
    if not file.has_labels:
        return ex
    raw = table.column(spec.label_column)
    labels, keep = _parse_labels(spec, raw, lambda i: f"{path}:{table.lines[i]}", skipped)
    if len(keep) < len(ex):
        ex = ex.select(keep)
    ex.labels, ex.skipped = labels, skipped
    return ex


# -------------------------------------------------------------------------------------- hub
def _fetch(hub: HubSource, hub_split: str, where: str):
    # offline mode: the client fails at once or reads its cache; unreachable: fail in seconds
    if not hub_offline_mode() and (host := hub_unreachable()) is not None:
        raise DataError(f"cannot reach the Hugging Face hub ({host}) to load {where}; "
                        f"{LOCAL_HINT}", hint="HF_HUB_OFFLINE=1 reads a cached copy")
    import datasets

    try:
        extra = {"revision": hub.revision} if hub.revision else {}
        return datasets.load_dataset(hub.path, hub.name, split=hub_split, **extra)
    except Exception as e:  # noqa: BLE001 - datasets raises many types; each becomes one line
        if hub_offline_mode():
            why = "offline mode (HF_HUB_OFFLINE) is on and there is no cached copy"
        else:
            why = one_line(e)
        msg = f"cannot load {where} from the Hugging Face hub: {why}; {LOCAL_HINT}"
        raise DataError(msg) from None


def _load_hub(spec: TaskSpec, split: str) -> Examples:
    if spec.hub is None:
        raise DataError(f"task {spec.name!r} ({spec.title}) has no Hugging Face hub source; "
                        f"{LOCAL_HINT}")
    hub = spec.hub
    if split not in hub.splits:
        raise DataError(f"task {spec.name!r} has no {split!r} split on the hub; {LOCAL_HINT}")
    hub_split = hub.splits[split]
    where = f"{hub.path}/{hub.name}:{hub_split}" if hub.name else f"{hub.path}:{hub_split}"
    ds = _fetch(hub, hub_split, where)
    missing = [c for c in hub.text_columns if c not in ds.column_names]
    if missing:
        raise DataError(f"hub:{where}: missing column(s) {', '.join(missing)} "
                        f"(found: {', '.join(ds.column_names)})")
    if spec.unit == "token":  # words and a tag per word: eebench.tasks.conll
        from eebench.tasks.conll import hub_examples

        return hub_examples(spec, ds, where, split)
    texts = list(zip(*(list(ds[c]) for c in hub.text_columns), strict=True))
    ids = [str(i) for i in ds["idx"]] if "idx" in ds.column_names else [
        str(i) for i in range(len(texts))
    ]
    ex = Examples(spec.name, split, texts, None, ids, f"hub:{where}", {})
    if spec.unit == "generated":  # a decoder task: its targets are tokens, never labels
        return ex
    raw = list(ds[hub.label_column]) if hub.label_column in ds.column_names else []
    if all(y is None or (not isinstance(y, str) and y == -1) for y in raw):
        return ex  # unlabelled split (GLUE test sets carry -1 everywhere)
    skipped: dict[str, int] = {}
    labels, keep = _parse_labels(spec, raw, lambda i: f"hub:{where} row {i}", skipped)
    if len(keep) < len(ex):
        ex = ex.select(keep)
    ex.labels, ex.skipped = labels, skipped
    return ex
