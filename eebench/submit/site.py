"""The static leaderboard page: one self-contained index.html built from a folder of submissions.

Why static and inline: the page must open from disk (file://) with no server and no network, so
the CSS, the sorting/filtering script and the Pareto figures are all inside the one file. The
figures are `eebench plot`'s (eebench.plot.figures.pareto_figure, its styles and palette), drawn
from each submission's seed-averaged points (the results table, eebench.score.table) and inlined
as SVG. Why so careful with strings: every name in a submission comes from a stranger, so each
one is HTML-escaped where it is written (in a figure: XML-escaped, drawn as glyph paths, never
read as $math$), submission data never goes inside the script (the script reads the table's
data-* attributes), and a Content-Security-Policy allows only this page's own style and script,
by hash: even a string that slipped through could not run. The figures carry no CSS for it to
block (see svg).

Every file is checked with eebench.submit.validate first, exactly as `eebench validate` checks
it (its ELUE score recomputed against the reference curves next to the submissions, or those
given); a file that fails is listed with its reason and never rendered.
"""

from __future__ import annotations

import base64
import hashlib
import io
import math
import re
import warnings
from collections import Counter
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from xml.etree import ElementTree

from matplotlib import rc_context
from matplotlib.figure import Figure

from eebench.errors import DataError, printable
from eebench.io import atomic_write_text, not_a_directory
from eebench.measure.quality import PARAM_BUCKETS_M, param_bucket
from eebench.submit.decoder_schema import DecoderSubmission
from eebench.submit.markup import cell, esc, num
from eebench.submit.rescore import References, default_references
from eebench.submit.schema import Submission
from eebench.submit.site_decoder import decoder_table
from eebench.submit.validate import Verdict, validate_file

# ELUE's parameter buckets (eebench.measure.quality.PARAM_BUCKETS_M), and everything
PARAMS_FILTERS = (*((f"≤{b}M", b * 1e6) for b in PARAM_BUCKETS_M), ("all", math.inf))
LEGEND_CHARS = 40  # a longer submission name is cut in the figures' legends
# Figures: submitted names are not parsed as $math$; ids from content hashes with a fixed salt, so
# the same submissions give the same page; text drawn as glyph paths, as `eebench plot` does.
SVG_RC = {"text.parse_math": False, "svg.hashsalt": "eebench-leaderboard", "svg.fonttype": "path"}
SVG_METADATA = ("Date", "Creator", "Format", "Type")
SVG_NS, XLINK_NS = "http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"


@dataclass(frozen=True)
class Site:
    index: Path
    accepted: list[Verdict]  # encoder and decoder submissions
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
def _table(subs: list[tuple[Verdict, Submission]], tasks: list[str]) -> str:
    head = ['<th class="text" data-sort="text">Submission</th>',
            '<th class="text" data-sort="text">Model</th>',
            '<th class="text" data-sort="text">Method</th>',
            '<th data-sort="num">Params</th>',
            '<th class="text" data-sort="text">Bucket</th>']
    head += [f'<th data-sort="num" data-task="{esc(t)}">{esc(t)}</th>' for t in tasks]
    head.append('<th data-sort="num" data-key="overall" aria-sort="descending">Overall</th>')
    head.append('<th class="text" data-sort="text">Reference</th>')
    rows = []
    for verdict, s in subs:
        elue = s.elue.tasks if s.elue else {}
        cells = [cell(s.name, s.name, "text"), cell(s.model.name, s.model.name, "text"),
                 cell(s.method.name, s.method.name, "text"),
                 cell(str(s.model.params), f"{s.model.params / 1e6:.1f}M"),
                 cell(_bucket(s.model.params), _bucket(s.model.params), "text")]
        cells += [cell(*num(elue.get(t))) for t in tasks]
        cells.append(cell(*num(s.elue.overall if s.elue else None)))
        cells.append(_referencecell(verdict))
        rows.append(f'<tr data-params="{s.model.params}" data-file="{esc(_file(verdict))}">'
                    + "".join(cells) + "</tr>")
    return ('<table id="board"><thead><tr>' + "".join(head) + "</tr></thead><tbody>\n"
            + "\n".join(rows) + "\n</tbody></table>")


def _file(verdict: Verdict) -> str:
    """A submission's file name as the page shows it: control and bidirectional characters
    escaped (\\n, \\u202e), never raw."""
    return printable(verdict.path.name)


def _referencecell(verdict: Verdict) -> str:
    """The reference file the ELUE score was recomputed against and its sha256 (shortened; the
    whole digest in the title): two references of one name are told apart."""
    ref = verdict.reference
    if ref is None:
        return cell("", "–", "text")
    name = printable(ref.path.name)
    return (f'<td class="text" data-value="{esc(name)} {ref.sha256}" '
            f'title="{esc(ref.curves.name)}: {esc(name)}, sha256 {ref.sha256}">'
            f'{esc(name)} <code>{ref.sha256[:12]}</code></td>')


def _bucket(params: int) -> str:
    """ELUE's bucket of a model size, as the filters write it: '≤40M' ... '>110M'."""
    return param_bucket(params).replace("<= ", "≤").replace("> ", ">")


def _filters() -> str:
    return "".join(
        f'<button type="button" data-limit="{"Infinity" if math.isinf(limit) else int(limit)}" '
        f'aria-pressed="{"true" if math.isinf(limit) else "false"}">{esc(label)}</button>'
        for label, limit in PARAMS_FILTERS
    )


def _rejected(rejected: list[Verdict]) -> str:
    if not rejected:
        return '<p class="note" id="rejected">None.</p>'
    items = [f"<li><code>{esc(_file(v))}</code>: {esc(v.reason)}</li>" for v in rejected]
    return '<ul id="rejected">' + "".join(items) + "</ul>"


# -------------------------------------------------------------------------------------- figures
def _labels(subs: list[tuple[Verdict, Submission]]) -> list[str]:
    """Each submission's series label: its name, cut for the legend, control characters (which
    SVG, being XML, cannot hold) replaced; a name two submissions share gets the file's name too
    (and every series its file's name, should that clash)."""
    printable = ["".join(c if c.isprintable() else "\ufffd" for c in s.name) for _, s in subs]
    names = [n if len(n) <= LEGEND_CHARS else n[:LEGEND_CHARS - 1] + "…" for n in printable]
    counts = Counter(names)
    labels = [n if counts[n] == 1 else f"{n} ({_file(v)})" for n, (v, _) in zip(names, subs)]
    return labels if len(set(labels)) == len(labels) else [_file(v) for v, _ in subs]


def task_figures(subs: list[tuple[Verdict, Submission]]) -> dict[str, Figure]:
    """`eebench plot`'s Pareto figure of each task: a series per submission (its seed-averaged
    points, from the results table), the front across them, each submission's ELUE score in the
    legend. Submitted names are plain text to matplotlib (no $math$)."""
    from eebench.plot import method_styles, pareto_figure
    from eebench.score import results_frame, score, seed_points, submission_records

    labels = _labels(subs)
    frame = results_frame(row for (_, s), label in zip(subs, labels)
                          for row in submission_records(s, label)
                          if row["split"] == "dev")  # a test split has no metric to plot
    elue = {label: s.elue.tasks if s.elue else {} for (_, s), label in zip(subs, labels)}
    styles = method_styles(labels)
    figures = {}
    for task, rows in frame.groupby("task"):
        report = score(seed_points(rows)).tasks[task]
        report = replace(report, methods={label: replace(m, elue=elue[label].get(task))
                                          for label, m in report.methods.items()})
        with rc_context(SVG_RC):
            figures[task] = pareto_figure(report, styles)
    return figures


def svg(fig: Figure, label: str) -> str:
    """A figure as inline SVG that the page's CSP allows, the same bytes for the same figure.

    matplotlib styles its SVG with CSS (a <style> element and style attributes), which a CSP
    without 'unsafe-inline' blocks: each declaration becomes the SVG presentation attribute of
    the same name (the <style> element's one rule, for every element, goes on the root, whence
    it is inherited). Comments (each text, again) and metadata are left out; what is left is
    re-serialised, so every string in it is escaped as XML."""
    buf = io.StringIO()
    with rc_context(SVG_RC), warnings.catch_warnings():
        # a submitted name in a script DejaVu Sans lacks: boxes on the page, no warning per glyph
        warnings.filterwarnings("ignore", "Glyph .* missing from font")
        fig.savefig(buf, format="svg", metadata=dict.fromkeys(SVG_METADATA))
    root = ElementTree.fromstring(buf.getvalue())
    for parent in list(root.iter()):
        for style in parent.findall(f"{{{SVG_NS}}}style"):
            rule = re.fullmatch(r"\s*\*\s*\{(.*)\}\s*", style.text or "", re.S)
            _set_css(root, rule.group(1) if rule else "")
            parent.remove(style)
    for element in root.iter():
        _set_css(element, element.attrib.pop("style", ""))
    root.set("role", "img")
    root.set("aria-label", label)
    ElementTree.register_namespace("", SVG_NS)  # written as <svg xmlns=...>, not <ns0:svg>
    ElementTree.register_namespace("xlink", XLINK_NS)
    return ElementTree.tostring(root, encoding="unicode")


def _set_css(element: ElementTree.Element, declarations: str) -> None:
    """CSS declarations ("fill: #fff; stroke: none") as presentation attributes."""
    for declaration in declarations.split(";"):
        name, _, value = declaration.partition(":")
        if name.strip():
            element.set(name.strip(), value.strip())


def _plots(subs: list[tuple[Verdict, Submission]]) -> str:
    figures = [f'<figure data-task="{esc(task)}">{svg(fig, f"Pareto figure of {task}")}</figure>'
               for task, fig in task_figures(subs).items()]
    return "".join(figures) or '<p class="note">No submissions.</p>'


# ----------------------------------------------------------------------------------------- build
def _sort_key(item: tuple[Verdict, Submission]) -> tuple:
    s = item[1]
    overall = s.elue.overall if s.elue else None
    return (overall is None, -(overall or 0.0), s.name)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def render(accepted: list[Verdict], rejected: list[Verdict]) -> str:
    """The page's HTML for checked submissions (accepted ones carry their Submission): the
    encoder ones in the sortable table and the Pareto figures, the decoder ones in their own
    section (eebench.submit.site_decoder)."""
    decoders = [v.submission for v in accepted if isinstance(v.submission, DecoderSubmission)]
    subs = sorted(((v, v.submission) for v in accepted if isinstance(v.submission, Submission)),
                  key=_sort_key)
    tasks = sorted({t for _, s in subs for t in s.tasks})
    with_ref = sum(1 for _, s in subs if s.elue is not None)
    template = _template()
    return _fill(template, {
        "csp": esc(_csp(template)),
        "summary": esc(f"{_count(len(subs), 'submission')}, {with_ref} with an ELUE score; "
                       f"{_count(len(decoders), 'decoder submission')}; "
                       f"{len(rejected)} rejected."),
        "filters": _filters(),
        "shown": str(len(subs)),
        "total": str(len(subs)),
        "table": _table(subs, tasks),
        "plots": _plots(subs),
        "decoders": decoder_table(decoders),
        "rejected": _rejected(rejected),
    })


def check_dir(submissions_dir: Path, references: References | None = None) -> list[Verdict]:
    """The verdict on every *.json in `submissions_dir`, in name order, the ELUE scores
    recomputed against `references` (default: the references/ folder next to it, if any, and
    those shipped with eebench: `default_references`)."""
    submissions_dir = Path(submissions_dir)
    if not submissions_dir.is_dir():
        raise DataError(f"{submissions_dir}: "
                        f"{not_a_directory(submissions_dir, ' of submissions')}")
    if references is None:
        references = default_references(submissions_dir)
    return [validate_file(p, references=references)
            for p in sorted(submissions_dir.glob("*.json"))]


def build_site(submissions_dir: Path, out_dir: Path,
               references: References | None = None) -> Site:
    """Validate every *.json in `submissions_dir` (check_dir) and write `out_dir/index.html`."""
    verdicts = check_dir(submissions_dir, references)
    accepted = [v for v in verdicts if v.ok]
    rejected = [v for v in verdicts if not v.ok]
    index = Path(out_dir) / "index.html"
    atomic_write_text(index, render(accepted, rejected))
    index.chmod(0o644)  # a page to publish: readable by the web server, not only its owner
    return Site(index=index, accepted=accepted, rejected=rejected)
