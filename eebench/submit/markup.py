"""HTML pieces of the leaderboard page (eebench.submit.site and its decoder section): every
string is HTML-escaped where it is written, a number cell carries its value for sorting."""

from __future__ import annotations

import html
import math


def esc(value: object) -> str:
    """Text or attribute value, HTML-escaped (quotes included)."""
    return html.escape(str(value), quote=True)


def num(value: float | None, digits: int = 2, signed: bool = True) -> tuple[str, str]:
    """(data-value, shown text) of a number; ("", "–") when missing."""
    if value is None or not math.isfinite(value):
        return "", "–"
    return repr(float(value)), (f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}")


def cell(value: str, text: str, cls: str = "", title: str | None = None) -> str:
    """A table cell: its sort value (data-value), its text, its classes ("missing" when there is
    no value) and a title that says more."""
    classes = " ".join(c for c in (cls, "missing" if value == "" else "") if c)
    attrs = (f' class="{classes}"' if classes else "") + (
        f' title="{esc(title)}"' if title else "")
    return f'<td{attrs} data-value="{esc(value)}">{esc(text)}</td>'
