"""Tasks: frozen specs (spec.py, catalog.py), loaders (local TSV or HF hub; CoNLL files for the
NER tasks: conll.py) and metrics (seqlabel.py: entity F1 for the NER tasks).

The specs import nothing heavy; loaders and metrics (numpy, scipy) are imported on first use, so
the command line can list tasks without loading them.
"""

from __future__ import annotations

from importlib import import_module

from eebench.tasks.catalog import all_tasks, get_task
from eebench.tasks.spec import (
    TASKS,
    DevFromTrain,
    Examples,
    HubSource,
    LocalFile,
    TaskSpec,
)

_LAZY = {
    "load_split": "eebench.tasks.loaders",
    "compute_metrics": "eebench.tasks.metrics",
    "majority_baseline": "eebench.tasks.metrics",
}

__all__ = [
    "TASKS", "DevFromTrain", "Examples", "HubSource", "LocalFile", "TaskSpec", "all_tasks",
    "get_task", *_LAZY,
]


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'eebench.tasks' has no attribute {name!r}")
