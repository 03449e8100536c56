"""How every figure looks: one colour and marker per method, axis labels with units, file names.

The palette is Okabe & Ito's (2008) with two of Paul Tol's colours, chosen to stay
distinguishable under the common forms of colour blindness; each method also gets its own marker,
so a figure still reads in greyscale.
A method keeps its colour and marker in every figure of one `eebench plot` call, because styles
are assigned over the sorted labels of all the runs, not per figure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from matplotlib.figure import Figure

# Okabe-Ito, strongest contrasts on white first; yellow last (faint on a white background).
OKABE_ITO = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
             "#F0E442")
# ten methods in one figure: Paul Tol's wine and olive (also safe for colour-blind readers)
# before the yellow, so ten labels get ten colours
PALETTE = (*OKABE_ITO[:7], "#882255", "#999933", OKABE_ITO[7])
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
REFERENCE_COLOR = "#7F7F7F"  # neutral grey: the reference is a backdrop, not a competitor
FRONT_COLOR = "#000000"
DPI = 150

# gids tag the artists a reader (or a test) looks for: the line of a method, the front, ...
GID_METHOD = "method:"
GID_FRONT = "pareto-front"
GID_REFERENCE = "reference"

METRIC_NAMES = {
    "accuracy": "accuracy (%)",
    "f1": "F1 (%)",
    "mcc": "Matthews corr. (×100)",
    "pearson": "Pearson r (×100)",
    "spearman": "Spearman ρ (×100)",
    "acc_and_f1": "mean of accuracy and F1 (%)",
    "pearson_and_spearman": "mean of Pearson and Spearman (×100)",
}


@dataclass(frozen=True)
class MethodStyle:
    color: str
    marker: str


def method_styles(labels: Iterable[str]) -> dict[str, MethodStyle]:
    """A colour and a marker per method label, in sorted order (stable across figures). Past
    the ten colours the markers shift by one per round, so up to 80 labels (a leaderboard's
    submissions) each get their own pair."""
    n = len(PALETTE)
    return {
        label: MethodStyle(PALETTE[i % n], MARKERS[(i + i // n) % len(MARKERS)])
        for i, label in enumerate(sorted(set(labels)))
    }


def metric_label(name: str) -> str:
    """An axis label for a metric, with its unit (eebench reports every metric x100)."""
    return METRIC_NAMES.get(name, f"{name} (×100)")


def metric_short(name: str) -> str:
    """The metric's name without the unit, for titles and captions."""
    return metric_label(name).rsplit(" (", 1)[0]


def flops_label(convention: str, log: bool = False) -> str:
    scale = ", log scale" if log else ""
    return f"MFLOPs per sample ({convention}{scale})"


def task_title(task: str) -> str:
    """The task's human name (e.g. RTE) when this installation knows the task, else its key."""
    from eebench.errors import EebenchError
    from eebench.tasks.catalog import get_task

    try:
        return get_task(task).title
    except EebenchError:
        return task


def slug(text: str) -> str:
    """A file-name-safe form of a label: `model/method` or a model path become one word."""
    return re.sub(r"[^A-Za-z0-9._]+", "-", text).strip("-._") or "x"


def new_figure(width: float = 6.4, height: float = 4.4) -> tuple[Figure, object]:
    """A figure with one axes, laid out by matplotlib's constrained layout. No pyplot: figures
    are plain objects, never registered in a global state, so nothing leaks across calls."""
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    ax.grid(True, color="#DDDDDD", linewidth=0.6)
    ax.set_axisbelow(True)
    return fig, ax
