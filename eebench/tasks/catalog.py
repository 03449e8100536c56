"""The built-in tasks, read from `catalog.toml` beside this module: GLUE and ELUE, two NER tasks
(CoNLL-2003, WNUT-17) and two decoder tasks (imdb-lm, humaneval-gen).

The file is data, one [[task]] table a `TaskSpec` (its header lists the shorthands); this module
turns each table into the spec's dataclasses and registers it. `get_task` and `all_tasks` are
here, where the specs are registered: a query finds them all.
"""

from __future__ import annotations

import sys
from importlib.resources import files
from typing import Any

from eebench.tasks.spec import (
    LABEL_SPACES,
    TASKS,
    DevFromTrain,
    HubSource,
    LocalFile,
    PackageFile,
    TaskSpec,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

HUB_SPLITS = {"train": "train", "dev": "validation", "test": "test"}
TUPLES = ("text_columns", "labels", "metrics", "columns")  # lists in TOML, tuples in a spec


def _tuples(table: dict[str, Any]) -> dict[str, Any]:
    return {k: tuple(v) if k in TUPLES else v for k, v in table.items()}


def _glue_layout(folder: str, index_column: str) -> dict[str, LocalFile]:
    return {"train": LocalFile(f"{folder}/train.tsv"), "dev": LocalFile(f"{folder}/dev.tsv"),
            "test": LocalFile(f"{folder}/test.tsv", has_labels=False, index_column=index_column)}


def spec_from_table(table: dict[str, Any]) -> tuple[TaskSpec, tuple[str, ...]]:
    """One [[task]] table of the catalog: its spec, and the aliases it is also known by."""
    fields = _tuples(table)
    aliases = tuple(fields.pop("aliases", ()))
    folder, index = fields.pop("folder", None), fields.pop("test_index", "index")
    local = fields.pop("local", None)
    fields["local"] = (_glue_layout(folder, index) if folder is not None else
                       {split: LocalFile(**_tuples(f)) for split, f in local.items()})
    if (hub := fields.get("hub")) is not None:
        fields["hub"] = HubSource(**{"name": None, "splits": HUB_SPLITS, **_tuples(hub)})
    if (package := fields.get("package")) is not None:
        fields["package"] = PackageFile(**_tuples(package))
    if (dev := fields.get("dev_from_train")) is not None:
        fields["dev_from_train"] = DevFromTrain(**dev)
    if "labels" not in fields:  # a token task's tags; else a score or a decoder's tokens
        fields["labels"] = LABEL_SPACES[fields["label_space"]] if fields.get("unit") == "token" \
            else None
    return TaskSpec(**fields), aliases


def _load() -> None:
    text = files("eebench.tasks").joinpath("catalog.toml").read_text(encoding="utf-8")
    for table in tomllib.loads(text)["task"]:
        spec, aliases = spec_from_table(table)
        TASKS.add(spec.name, spec, aliases=aliases)


_load()


def get_task(name: str) -> TaskSpec:
    return TASKS.get(name)


def all_tasks() -> list[TaskSpec]:
    return [spec for _, spec in TASKS.items()]
