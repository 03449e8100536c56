"""The one way report blocks write numbers and tables: `mean ± std` over seeds, signed scores,
markdown pipe tables."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from eebench.score import sample_std
from eebench.tasks.catalog import get_task

ALIGN = {"l": "left", "r": "right", "c": "center"}


def pm(mean: float | None, std: float | None = None, n: int = 1, digits: int = 1,
       none: str = "-") -> str:
    """`mean ± std` when there are two or more seeds, else the mean alone (never "-0.0")."""
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return none
    mean = round(float(mean), digits) + 0.0
    return f"{mean:.{digits}f} ± {std:.{digits}f}" if n > 1 else f"{mean:.{digits}f}"


def pm_over(values: Iterable[float], digits: int = 1, none: str = "-") -> str:
    """The mean ± sample std of per-seed values."""
    import numpy as np

    a = np.asarray(list(values), dtype=float)
    if not len(a):
        return none
    return pm(float(a.mean()), sample_std(a), len(a), digits)


def signed(value: float | None, seeds: Iterable[float] = (), digits: int = 2) -> str:
    """A score with its sign, ± the sample std of its seeds' own scores when there are two or
    more; "-" for none."""
    if value is None or math.isnan(value):
        return "-"
    seeds = [float(s) for s in seeds]
    spread = f" ± {sample_std(seeds):.{digits}f}" if len(seeds) > 1 else ""
    return f"{value:+.{digits}f}{spread}"


def markdown(rows: Any, align: str | None = None, numparse: bool = False, **options) -> str:
    """A pipe table of `rows` (a DataFrame or a list of dicts). By default its cells are text as
    written ("+0.00" stays) and `align` has a letter per column, l(eft), r(ight) or c(enter);
    with `numparse` numbers are parsed, and aligned and formatted (`floatfmt`) as numbers."""
    import pandas as pd

    frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(rows)
    if not numparse:
        frame, options = frame.astype(str), {**options, "disable_numparse": True}
    if align:
        options["colalign"] = [ALIGN[a] for a in align]
    return frame.to_markdown(index=False, **options)


def title(task: str) -> str:
    """The task's name in tables (RTE, SST-2 (ELUE))."""
    return get_task(task).title


def task_order(task: str) -> tuple:
    """GLUE tasks first, then ELUE's, each by name."""
    return task.startswith("elue-"), task


def in_order(name: str, first: Iterable[str]) -> tuple:
    """A sort key: the names in `first` in that order, then the others by name."""
    first = list(first)
    return (first.index(name) if name in first else len(first), name)
