"""Sequence-labelling data: CoNLL-format files (a token per line, a blank line after each
sentence) and the hub's token datasets, as Examples whose rows are sentences.

A row's `texts` are its words and its `labels` the tag id of each word (spec.labels order), in
IOB2 whatever the source: an IOB1 file (CoNLL-2003) is converted as it is read, so a model sees
the same tags from the local files and from the hub (whose CoNLL-2003 copy is IOB2).

The files are read strictly: every token line has the fields its `LocalFile.columns` names,
split by its `separator` (CoNLL-2003: one space, 4 fields; WNUT-17: a TAB, 2 fields; a test file
has no tag field) and none of them empty. A line that holds only whitespace ends a sentence
(WNUT-17's train file ends 2,394 of its sentences with a lone TAB). `-DOCSTART-` lines are
document marks, not sentences: skipped and counted. A bad line is a one-line DataError naming
the file and the line.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from eebench.errors import DataError
from eebench.tasks.spec import Examples, LocalFile, TaskSpec

DOCSTART = "-DOCSTART-"
DOCSTART_SKIPPED = "-DOCSTART- line"  # the reason in Examples.skipped


def read_conll(path: Path, file: LocalFile, label: str | None = None
               ) -> tuple[list[list[list[str]]], list[int], int]:
    """The sentences of a CoNLL file as their token lines' fields, the line each sentence starts
    on, and how many -DOCSTART- lines were skipped."""
    name = label or str(path)
    columns = tuple(file.columns or ())
    sentences: list[list[list[str]]] = []
    starts: list[int] = []
    current: list[list[str]] = []
    docstarts = 0
    sep = {"\t": "a TAB", " ": "one space"}.get(file.separator, repr(file.separator))
    try:
        with path.open(encoding="utf-8-sig", newline=None) as f:
            for number, line in enumerate(f, start=1):
                line = line.rstrip("\n")
                fields = line.split(file.separator)
                # a blank or whitespace-only line ends the sentence; so does a document mark
                if not line.strip() or fields[0] == DOCSTART:
                    if current:
                        sentences.append(current)
                    current = []
                    docstarts += bool(line.strip())
                    continue
                if len(fields) != len(columns) or not all(fields):
                    found = f"{len(fields)} field(s)" if all(fields) else "an empty field"
                    raise DataError(
                        f"{name}:{number}: expected {len(columns)} non-empty field(s) "
                        f"({', '.join(columns)}) separated by {sep}, found {found}: "
                        f"{line[:60]!r}")
                if not current:
                    starts.append(number)
                current.append(fields)
    except UnicodeDecodeError as e:
        raise DataError(f"{name}: not valid UTF-8 text ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise DataError(f"{name}: cannot read ({e.strerror or e})") from None
    if current:
        sentences.append(current)
    if not sentences:
        raise DataError(f"{name}: no sentences (a CoNLL file has a token per line and a blank "
                        "line after each sentence)")
    return sentences, starts, docstarts


def load_conll(spec: TaskSpec, split: str, path: Path) -> Any:
    """One local CoNLL file as Examples: a row per sentence, tags in IOB2."""
    from eebench.tasks.seqlabel import to_iob2

    file = spec.local[split]
    sentences, starts, docstarts = read_conll(path, file)
    texts = [tuple(fields[0] for fields in s) for s in sentences]
    skipped = {DOCSTART_SKIPPED: docstarts} if docstarts else {}
    ids = [str(i) for i in range(len(texts))]
    if not file.has_labels:
        return Examples(spec.name, split, texts, None, ids, str(path), skipped)
    lookup = {tag: i for i, tag in enumerate(spec.labels)}
    labels = []
    for sentence, start in zip(sentences, starts, strict=True):
        tags = [fields[-1] for fields in sentence]
        for k, tag in enumerate(tags):
            if tag not in lookup:
                raise DataError(f"{path}:{start + k}: unknown tag {tag!r} (expected one of: "
                                f"{', '.join(spec.labels)})")
        if spec.scheme == "IOB1":
            tags = to_iob2(tags)
        labels.append([lookup[t] for t in tags])
    return Examples(spec.name, split, texts, labels, ids, str(path), skipped)


def hub_examples(spec: TaskSpec, ds: Any, where: str, split: str) -> Any:
    """A hub token dataset (a list of tokens and a list of tag ids per row) as Examples. Tag ids
    are mapped by their names where the dataset names its tags (a ClassLabel), else taken as
    ids in spec.labels order. A split whose tags are all missing is unlabelled."""
    column, tags_column = spec.hub.text_columns[0], spec.hub.label_column
    tokens = [tuple(str(w) for w in row) for row in ds[column]]
    ex = Examples(spec.name, split, tokens, None, [str(i) for i in range(len(tokens))],
                  f"hub:{where}", {})
    if tags_column not in ds.column_names:
        return ex
    rows = list(ds[tags_column])
    if all(not tags or all(t in (None, -1) for t in tags) for tags in rows):
        return ex
    names = getattr(getattr(ds.features[tags_column], "feature", None), "names", None)
    if names:
        unknown = [n for n in names if n not in spec.labels]
        if unknown:
            raise DataError(f"hub:{where}: unknown tag {unknown[0]!r} (expected one of: "
                            f"{', '.join(spec.labels)})")
        lookup = {i: spec.labels.index(n) for i, n in enumerate(names)}
    else:
        lookup = {i: i for i in range(spec.num_labels)}
    labels = []
    for row, (words, tags) in enumerate(zip(tokens, rows, strict=True)):
        if len(tags) != len(words):
            raise DataError(f"hub:{where} row {row}: {len(tags)} tags for {len(words)} tokens")
        bad = [t for t in tags if t not in lookup]
        if bad:
            raise DataError(f"hub:{where} row {row}: unknown tag id {bad[0]!r} "
                            f"(expected 0..{len(lookup) - 1})")
        labels.append([lookup[t] for t in tags])
    ex.labels = labels
    return ex


def tag_counts(spec: TaskSpec, ex: Any) -> dict[str, int] | None:
    """Words per tag (tags in spec order), or None for an unlabelled split. In IOB2 the count
    of `B-X` is the number of X entities."""
    if ex.labels is None:
        return None
    counts = Counter(t for tags in ex.labels for t in tags)
    return {spec.labels[i]: counts[i] for i in range(spec.num_labels) if counts[i]}
