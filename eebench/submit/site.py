"""The static leaderboard page: one self-contained index.html built from a folder of submissions.

Why static and inline: the page must open from disk (file://) with no server and no network, so
the CSS, the sorting/filtering script and the Pareto plots (SVG generated here) are all inside the
one file. Why so careful with strings: every name in a submission comes from a stranger, so each
one is HTML-escaped where it is written, submission data never goes inside the script (the script
reads the table's data-* attributes), and a Content-Security-Policy allows only this page's own
style and script, by hash: even a string that slipped through could not run.

Every file is checked with eebench.submit.validate first; a file that fails is listed with its
reason and never rendered.
"""

from __future__ import annotations

import base64
import hashlib
import html
import math
import re
from collections import defaultdict
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from eebench.errors import DataError
from eebench.io import atomic_write_text
from eebench.submit.schema import Submission
from eebench.submit.validate import Verdict, validate_file

PARAMS_FILTERS = (("≤40M", 40e6), ("≤55M", 55e6), ("≤70M", 70e6), ("≤110M", 110e6),
                  ("all", math.inf))
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b",
           "#e377c2", "#7f7f7f", "#bcbd22")
PLOT_W, PLOT_H = 640, 360
MARGIN = {"left": 56, "right": 176, "top": 16, "bottom": 44}  # the legend sits on the right


def esc(value: object) -> str:
    """Text or attribute value, HTML-escaped (quotes included)."""
    return html.escape(str(value), quote=True)


@dataclass(frozen=True)
class Site:
    index: Path
    accepted: list[Verdict]
    rejected: list[Verdict]


# ----------------------------------------------------------------------------------- template
def _template() -> str:
    return resources.files("eebench.submit").joinpath("leaderboard.html").read_text("utf-8")


def _csp(template: str) -> str:
    """Allow exactly the template's own <style> and <script> blocks (by sha256), nothing else."""
    def digest(tag: str) -> str:
        block = re.search(rf"<{tag}>(.*?)</{tag}>", template, re.S)
        if block is None:
            raise ValueError(f"leaderboard template has no <{tag}> block")
        return base64.b64encode(hashlib.sha256(block.group(1).encode()).digest()).decode()

    return (f"default-src 'none'; style-src 'sha256-{digest('style')}'; "
            f"script-src 'sha256-{digest('script')}'; img-src data:; base-uri 'none'; "
            "form-action 'none'")


def _fill(template: str, values: dict[str, str]) -> str:
    def sub(m: re.Match) -> str:
        return values[m.group(1)]

    return re.sub(r"\{\{(\w+)\}\}", sub, template)


# ---------------------------------------------------------------------------------------- table
def _num(value: float | None, digits: int = 2, signed: bool = True) -> tuple[str, str]:
    """(data-value, shown text) of a number; ("", "–") when missing."""
    if value is None or not math.isfinite(value):
        return "", "–"
    return repr(float(value)), (f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}")


def _cell(value: str, text: str, cls: str = "") -> str:
    classes = " ".join(c for c in (cls, "missing" if value == "" else "") if c)
    attr = f' class="{classes}"' if classes else ""
    return f'<td{attr} data-value="{esc(value)}">{esc(text)}</td>'


def _table(subs: list[tuple[Verdict, Submission]], tasks: list[str]) -> str:
    head = ['<th class="text" data-sort="text">Submission</th>',
            '<th class="text" data-sort="text">Model</th>',
            '<th class="text" data-sort="text">Method</th>',
            '<th data-sort="num">Params</th>']
    head += [f'<th data-sort="num" data-task="{esc(t)}">{esc(t)}</th>' for t in tasks]
    head.append('<th data-sort="num" data-key="overall" aria-sort="descending">Overall</th>')
    rows = []
    for verdict, s in subs:
        elue = s.elue.tasks if s.elue else {}
        cells = [_cell(s.name, s.name, "text"), _cell(s.model.name, s.model.name, "text"),
                 _cell(s.method.name, s.method.name, "text"),
                 _cell(str(s.model.params), f"{s.model.params / 1e6:.1f}M")]
        cells += [_cell(*_num(elue.get(t))) for t in tasks]
        cells.append(_cell(*_num(s.elue.overall if s.elue else None)))
        rows.append(f'<tr data-params="{s.model.params}" data-file="{esc(verdict.path.name)}">'
                    + "".join(cells) + "</tr>")
    return ('<table id="board"><thead><tr>' + "".join(head) + "</tr></thead><tbody>\n"
            + "\n".join(rows) + "\n</tbody></table>")


def _filters() -> str:
    return "".join(
        f'<button type="button" data-limit="{"Infinity" if math.isinf(limit) else int(limit)}" '
        f'aria-pressed="{"true" if math.isinf(limit) else "false"}">{esc(label)}</button>'
        for label, limit in PARAMS_FILTERS
    )


def _rejected(rejected: list[Verdict]) -> str:
    if not rejected:
        return '<p class="note" id="rejected">None.</p>'
    items = [f"<li><code>{esc(v.path.name)}</code>: {esc(v.reason)}</li>" for v in rejected]
    return '<ul id="rejected">' + "".join(items) + "</ul>"


# ---------------------------------------------------------------------------------------- plots
def task_points(s: Submission, task: str) -> list[tuple[float, float]]:
    """(MFLOPs, main) per sweep value of one submission on one task, averaged over seeds."""
    groups: dict[float, list[tuple[float, float]]] = defaultdict(list)
    for run in s.tasks[task].runs:
        for p in run.points:
            groups[p.sweep_value].append((p.mean_mflops, p.main))
    return sorted((sum(x for x, _ in v) / len(v), sum(y for _, y in v) / len(v))
                  for v in groups.values())


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About n round tick values covering [lo, hi]."""
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / n
    step = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * step:
            step *= m
            break
    start = math.floor(lo / step) * step
    count = max(1, math.ceil((hi - start) / step - 1e-9))
    return [round(start + i * step, 10) for i in range(count + 1)]


def _front(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    import numpy as np

    from eebench.score.pareto import pareto_mask

    x = np.array([p[0] for p in points])
    y = np.array([p[1] for p in points])
    return sorted(p for p, on in zip(points, pareto_mask(x, y)) if on)


def _plot(task: str, metric: str, series: list[tuple[str, str, list[tuple[float, float]]]]) -> str:
    xs = [x for _, _, pts in series for x, _ in pts]
    ys = [y for _, _, pts in series for _, y in pts]
    pad = max(0.5, (max(ys) - min(ys)) * 0.05)  # keep points off the frame
    xt = nice_ticks(0.0, max(xs) * 1.04)
    yt = nice_ticks(min(ys) - pad, max(ys) + pad)
    x0, x1, y0, y1 = xt[0], xt[-1], yt[0], yt[-1]
    left, top = MARGIN["left"], MARGIN["top"]
    w = PLOT_W - left - MARGIN["right"]
    h = PLOT_H - top - MARGIN["bottom"]

    def px(x: float) -> float:
        return round(left + (x - x0) / (x1 - x0) * w, 2)

    def py(y: float) -> float:
        return round(top + h - (y - y0) / (y1 - y0) * h, 2)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{PLOT_W}" height="{PLOT_H}" '
           f'role="img" aria-label="Pareto plot for {esc(task)}">']
    for t in xt:
        out.append(f'<line class="grid" x1="{px(t)}" y1="{top}" x2="{px(t)}" y2="{top + h}"/>'
                   f'<text x="{px(t)}" y="{top + h + 16}" text-anchor="middle">{t:g}</text>')
    for t in yt:
        out.append(f'<line class="grid" x1="{left}" y1="{py(t)}" x2="{left + w}" y2="{py(t)}"/>'
                   f'<text x="{left - 6}" y="{py(t) + 4}" text-anchor="end">{t:g}</text>')
    out.append(f'<line class="axis" x1="{left}" y1="{top + h}" x2="{left + w}" y2="{top + h}"/>'
               f'<line class="axis" x1="{left}" y1="{top}" x2="{left}" y2="{top + h}"/>'
               f'<text x="{left + w / 2}" y="{PLOT_H - 8}" text-anchor="middle">'
               "MFLOPs per sample</text>"
               f'<text transform="translate(14 {top + h / 2}) rotate(-90)" '
               f'text-anchor="middle">{esc(metric)}</text>')
    for name, color, pts in series:
        front = " ".join(f"{px(x)},{py(y)}" for x, y in _front(pts))
        out.append(f'<g class="series" data-name="{esc(name)}">'
                   f'<polyline points="{front}" fill="none" stroke="{color}" stroke-width="2"/>')
        for x, y in pts:
            out.append(f'<circle cx="{px(x)}" cy="{py(y)}" r="3.5" fill="{color}">'
                       f"<title>{esc(name)}: {x:.2f} MFLOPs, {y:.2f}</title></circle>")
        out.append("</g>")
    legend_y = top + 6
    for name, color, _ in series:
        out.append(f'<rect x="{left + w + 14}" y="{legend_y}" width="10" height="10" '
                   f'fill="{color}"/><text x="{left + w + 29}" y="{legend_y + 9}">'
                   f"{esc(name[:24])}</text>")
        legend_y += 15
    out.append("</svg>")
    return "".join(out)


def _plots(subs: list[tuple[Verdict, Submission]], tasks: list[str]) -> str:
    figures = []
    for task in tasks:
        series = [(s.name, PALETTE[i % len(PALETTE)], task_points(s, task))
                  for i, (_, s) in enumerate(subs) if task in s.tasks]
        metric = next(s.tasks[task].main_metric for _, s in subs if task in s.tasks)
        figures.append(f'<figure data-task="{esc(task)}"><figcaption>{esc(task)} '
                       f"({esc(metric)})</figcaption>{_plot(task, metric, series)}</figure>")
    return "".join(figures) or '<p class="note">No submissions.</p>'


# ----------------------------------------------------------------------------------------- build
def _sort_key(item: tuple[Verdict, Submission]) -> tuple:
    s = item[1]
    overall = s.elue.overall if s.elue else None
    return (overall is None, -(overall or 0.0), s.name)


def render(accepted: list[Verdict], rejected: list[Verdict]) -> str:
    """The page's HTML for checked submissions (accepted ones carry their Submission)."""
    subs = sorted(((v, v.submission) for v in accepted if v.submission is not None),
                  key=_sort_key)
    tasks = sorted({t for _, s in subs for t in s.tasks})
    with_ref = sum(1 for _, s in subs if s.elue is not None)
    template = _template()
    return _fill(template, {
        "csp": esc(_csp(template)),
        "summary": esc(f"{len(subs)} submissions, {with_ref} with an ELUE score; "
                       f"{len(rejected)} rejected."),
        "filters": _filters(),
        "shown": str(len(subs)),
        "total": str(len(subs)),
        "table": _table(subs, tasks),
        "plots": _plots(subs, tasks),
        "rejected": _rejected(rejected),
    })


def build_site(submissions_dir: Path, out_dir: Path) -> Site:
    """Validate every *.json in `submissions_dir` and write `out_dir/index.html`."""
    submissions_dir = Path(submissions_dir)
    if not submissions_dir.is_dir():
        raise DataError(f"{submissions_dir}: no such directory of submissions")
    verdicts = [validate_file(p) for p in sorted(submissions_dir.glob("*.json"))]
    accepted = [v for v in verdicts if v.ok]
    rejected = [v for v in verdicts if not v.ok]
    index = Path(out_dir) / "index.html"
    atomic_write_text(index, render(accepted, rejected))
    index.chmod(0o644)  # a page to publish: readable by the web server, not only its owner
    return Site(index=index, accepted=accepted, rejected=rejected)
