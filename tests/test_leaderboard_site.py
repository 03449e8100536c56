"""The static leaderboard page: built from good and hostile submissions, checked as HTML and in a
real headless Chromium opened from disk (file://), driven over the DevTools protocol on a pipe.

The browser part needs the Debian package `chromium`; without it the test skips with a reason,
except under CI=true, where it fails.
"""

from __future__ import annotations

import base64
import copy
import fcntl
import hashlib
import json
import os
import re
import select
import shutil
import subprocess
import time
from dataclasses import replace
from html import escape
from pathlib import Path

import numpy as np
import pytest

from eebench.plot import GID_FRONT, GID_METHOD, method_styles
from eebench.submit.build import build_submission, write_submission
from eebench.submit.site import build_site, svg, task_figures
from tests.test_submit_schema import write_method_runs, write_reference

HOSTILE_NAME = "<script>window.__pwned = 1</script>"
HOSTILE_MODEL = "<img src=x onerror=\"window.__pwned = 2\">"
MATH_NAME = "gamma $\\frac{$"  # matplotlib would parse $...$ as math, and fail on this
# name, params, ELUE shift (the runs' accuracy pattern differs per shift)
SUBMISSIONS = [("alpha", 30_000_000, 0), ("beta", 50_000_000, 1), (MATH_NAME, 66_000_000, 2),
               (HOSTILE_NAME, 100_000_000, 3), ("delta", 200_000_000, 4)]


@pytest.fixture(scope="module")
def site(tmp_path_factory, data_dir):
    """Five good submissions (one with hostile strings) and three bad files, built into a page."""
    root = tmp_path_factory.mktemp("site")
    ref = write_reference(root)
    subs = root / "submissions"
    subs.mkdir()
    for i, (name, params, shift) in enumerate(SUBMISSIONS):
        runs = write_method_runs(root / f"runs-{i}", seeds=(1 + shift,), params=params)
        sub = build_submission(runs, data_dir=data_dir, reference=ref, name=name)
        if name == HOSTILE_NAME:
            sub = sub.model_copy(update={"model": sub.model.model_copy(
                update={"name": HOSTILE_MODEL})})
        write_submission(sub, subs / f"{i}-{name[:5].strip('<')}.json")
    good = json.loads((subs / "0-alpha.json").read_text())
    bad = copy.deepcopy(good)
    bad["tasks"]["rte"]["runs"][0]["points"][0]["exit_histogram"] = [1, 1, 1]
    (subs / "bad-histogram.json").write_text(json.dumps(bad))
    (subs / "bad-nan.json").write_text(re.sub(r'"main": [0-9.]+', '"main": NaN',
                                              json.dumps(good), count=1))
    evil = copy.deepcopy(good)
    evil["name"] = "<b>never shown</b>"
    evil["model"]["params"] = -1
    (subs / "bad-evil.json").write_text(json.dumps(evil))
    result = build_site(subs, root / "site")
    elue = {s.submission.name: s.submission.elue.overall for s in result.accepted}
    return {"root": root, "result": result, "html": result.index.read_text(), "elue": elue}


def _rows(html: str) -> list[str]:
    return re.findall(r"<tr data-params=[^>]*>.*?</tr>", html)


def test_page_lists_good_submissions_and_rejects_bad_ones(site):
    result, html = site["result"], site["html"]
    assert len(result.accepted) == len(SUBMISSIONS) and len(result.rejected) == 3
    assert len(_rows(html)) == len(SUBMISSIONS)
    reasons = {v.path.name: v.reason for v in result.rejected}
    assert "exit_histogram adds up to 3" in reasons["bad-histogram.json"]
    assert reasons["bad-nan.json"] == "not valid JSON: NaN is not a JSON number"
    for name, reason in reasons.items():
        assert f"<code>{name}</code>: " in html
        assert reason.replace("'", "&#x27;") in html
    assert "never shown" not in html  # a rejected submission is listed, never rendered
    order = [re.search(r'<td class="text" data-value="([^"]*)"', r).group(1) for r in _rows(html)]
    expected = sorted(site["elue"], key=lambda n: -site["elue"][n])
    assert [o.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"')
            .replace("&#x27;", "'").replace("&amp;", "&") for o in order] == expected


def test_every_submitted_string_is_escaped(site):
    html = site["html"]
    assert HOSTILE_NAME not in html and HOSTILE_MODEL not in html
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=&quot;window.__pwned = 2&quot;&gt;" in html
    assert html.count("<script>") == 1 and "onerror=" not in html.replace("onerror=&quot;", "")


def test_page_is_self_contained_and_allows_only_its_own_code(site):
    html = site["html"]
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "@import" not in html and not re.search(r"url\((?!#)", html)  # only #fragments
    # the figures carry no CSS (the CSP allows none but the page's own <style>)
    assert html.count("<style") == 1 and not re.search(r"<[^>]* style=", html)
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html).group(1)
    csp = csp.replace("&#x27;", "'")
    for tag in ("script", "style"):
        body = re.search(rf"<{tag}>(.*?)</{tag}>", html, re.S).group(1)
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        assert f"{tag}-src 'sha256-{digest}'" in csp
    assert "default-src 'none'" in csp and "unsafe-inline" not in csp


def _figure(html: str, task: str) -> str:
    return re.search(rf'<figure data-task="{task}">.*?</figure>', html, re.S).group(0)


def test_each_task_has_eebench_plots_pareto_figure(site):
    """An inline SVG per task, drawn by eebench.plot: a series per submission (tagged by its
    gid), the front; submitted names only as escaped XML, never as markup or CSS."""
    figure = _figure(site["html"], "rte")
    assert figure.count("<svg") == 1 and f'id="{GID_FRONT}"' in figure
    series = re.findall(rf'id="{GID_METHOD}([^"]*)"', figure)
    assert sorted(series) == sorted(escape(n, quote=False) for n, _, _ in SUBMISSIONS)
    assert "<!--" not in figure and "<metadata" not in figure


def test_figures_show_each_submissions_seed_averaged_points(site):
    """The figure's series are the submissions' points averaged over seeds (the results table,
    grouped), computed here from the submission files directly."""
    subs = [(v, v.submission) for v in site["result"].accepted]
    figures = task_figures(subs)
    assert list(figures) == ["rte"]
    ax = figures["rte"].axes[0]
    lines = {line.get_gid()[len(GID_METHOD):]: line.get_xydata() for line in ax.get_lines()
             if (line.get_gid() or "").startswith(GID_METHOD)}
    assert set(lines) == {s.name for _, s in subs}
    for _, s in subs:
        by_value: dict[tuple, list] = {}
        for run in s.tasks["rte"].runs:
            for p in run.points:
                key = tuple(sorted(p.sweep.items()))
                by_value.setdefault(key, []).append((p.mean_flops / 1e6, p.main))
        expected = sorted(tuple(np.mean(v, axis=0)) for v in by_value.values())
        np.testing.assert_allclose(lines[s.name], expected)
    names = [t.get_text() for t in ax.get_legend().get_texts()]
    assert f"{MATH_NAME} (ELUE {site['elue'][MATH_NAME]:+.2f})" in names  # text, not math


def test_submissions_sharing_a_name_get_a_series_each(site):
    (verdict, sub), = [(v, v.submission) for v in site["result"].accepted[:1]]
    twin = replace(verdict, path=verdict.path.with_name("twin.json"))
    ax = task_figures([(verdict, sub), (twin, sub)])["rte"].axes[0]
    gids = sorted(line.get_gid() for line in ax.get_lines() if line.get_gid())
    assert gids == sorted([GID_FRONT, f"{GID_METHOD}{sub.name} ({verdict.path.name})",
                           f"{GID_METHOD}{sub.name} (twin.json)"])


def test_names_svg_cannot_hold_are_shown_replaced(site):
    """XML has no control characters: in a figure they become U+FFFD, not a broken page."""
    verdict = site["result"].accepted[0]
    sub = verdict.submission.model_copy(update={"name": "bell\x07 and nul\x00"})
    fig = task_figures([(verdict, sub)])["rte"]
    assert f'id="{GID_METHOD}bell\ufffd and nul\ufffd"' in svg(fig, "rte")


def test_the_same_submissions_give_the_same_page(site, tmp_path):
    again = build_site(site["root"] / "submissions", tmp_path / "again")
    assert again.index.read_bytes() == site["result"].index.read_bytes()


# ---------------------------------------------------------------------------------- the browser
class Chromium:
    """Headless Chromium driven over the DevTools protocol on a pipe (fds 3 and 4 of the child:
    --remote-debugging-pipe), so no port, no websocket and no extra package are needed."""

    def __init__(self, exe: str, url: str, profile: Path):
        ours_r, theirs_w = os.pipe()
        theirs_r, ours_w = os.pipe()
        # the child's ends, moved above 9 so that placing them at 3 and 4 cannot clobber them
        high_r = fcntl.fcntl(theirs_r, fcntl.F_DUPFD, 10)
        high_w = fcntl.fcntl(theirs_w, fcntl.F_DUPFD, 10)
        os.close(theirs_r)
        os.close(theirs_w)

        def child_fds() -> None:
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        args = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", f"--user-data-dir={profile}", "--remote-debugging-pipe",
                "--window-size=1280,1000", url]
        # close_fds=False: only fds 3 and 4 are inheritable (Python opens everything else
        # non-inheritable), and preexec_fn runs before exec
        self.proc = subprocess.Popen(args, close_fds=False, preexec_fn=child_fds,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(high_r)
        os.close(high_w)
        self.r, self.w, self.buf, self.next_id = ours_r, ours_w, b"", 0
        self.events: list[dict] = []
        self.session = None

    def send(self, method: str, params: dict | None = None, timeout: float = 30.0) -> dict:
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if self.session and not method.startswith(("Target.", "Browser.")):
            msg["sessionId"] = self.session
        os.write(self.w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" in self.buf:
                raw, self.buf = self.buf.split(b"\0", 1)
                reply = json.loads(raw)
                if "method" in reply:  # an event, e.g. Log.entryAdded
                    self.events.append(reply)
                if reply.get("id") == self.next_id:
                    if "error" in reply:
                        raise RuntimeError(f"{method}: {reply['error']}")
                    return reply["result"]
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"chromium did not answer {method}")
            if select.select([self.r], [], [], left)[0]:
                chunk = os.read(self.r, 1 << 16)
                if not chunk:
                    raise RuntimeError("chromium closed the DevTools pipe")
                self.buf += chunk

    def attach_page(self) -> None:
        pages = [t for t in self.send("Target.getTargets")["targetInfos"] if t["type"] == "page"]
        self.session = self.send("Target.attachToTarget",
                                 {"targetId": pages[0]["targetId"], "flatten": True})["sessionId"]

    def csp_violations(self) -> list[str]:
        """What the page logged about its Content-Security-Policy (Log.enable replays it all)."""
        self.send("Log.enable")
        texts = [e["params"]["entry"]["text"] for e in self.events
                 if e["method"] == "Log.entryAdded"]
        return [t for t in texts if "Content Security Policy" in t]

    def js(self, expression: str):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError(result["exceptionDetails"])
        return result["result"].get("value")

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=5)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.r)
        os.close(self.w)


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        msg = "chromium not installed (apt-get install -y chromium)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return exe


NAMES = "Array.from(document.querySelectorAll('#board tbody tr'))" \
        ".filter(r => !r.hidden).map(r => r.cells[0].textContent)"


def _header(browser: Chromium, text: str) -> None:
    browser.js(f"Array.from(document.querySelectorAll('#board th'))"
               f".find(th => th.textContent.trim() === {json.dumps(text)}).click()")


def test_page_in_headless_chromium(site, tmp_path):
    browser = Chromium(_chromium(), site["result"].index.resolve().as_uri(), tmp_path / "profile")
    try:
        browser.attach_page()
        url = site["result"].index.resolve().as_uri()
        loaded = f"location.href === {json.dumps(url)} && document.readyState === 'complete'"
        for _ in range(200):
            if browser.js(loaded):
                break
            time.sleep(0.05)
        assert browser.js(loaded), "the page did not load"
        elue = site["elue"]
        by_score = sorted(elue, key=lambda n: -elue[n])
        assert browser.js(NAMES) == by_score  # rendered rows, best overall first

        # hostile strings are text in the DOM and nothing ran
        assert HOSTILE_NAME in browser.js(NAMES)
        models = browser.js("Array.from(document.querySelectorAll('#board tbody tr'))"
                            ".map(r => r.cells[1].textContent)")
        assert HOSTILE_MODEL in models
        assert browser.js("typeof window.__pwned") == "undefined"
        assert browser.js("document.querySelectorAll('script').length") == 1
        assert browser.js("document.querySelectorAll('#board img').length") == 0

        _header(browser, "Overall")  # it was sorted descending: a click makes it ascending
        assert browser.js(NAMES) == by_score[::-1]
        assert browser.js("document.querySelector('th[data-key=overall]')"
                          ".getAttribute('aria-sort')") == "ascending"
        _header(browser, "Params")  # numbers: largest first
        assert browser.js(NAMES) == [n for n, _, _ in sorted(SUBMISSIONS, key=lambda s: -s[1])]
        _header(browser, "Submission")  # text: A to Z
        assert browser.js(NAMES) == sorted(elue, key=str.lower)

        browser.js("document.querySelector('#params-filter button[data-limit=\"55000000\"]')"
                   ".click()")
        assert sorted(browser.js(NAMES)) == ["alpha", "beta"]
        assert browser.js("document.getElementById('shown').textContent") == "2"
        browser.js("document.querySelector('#params-filter button[data-limit=\"Infinity\"]')"
                   ".click()")
        assert len(browser.js(NAMES)) == len(SUBMISSIONS)

        rejected = browser.js("Array.from(document.querySelectorAll('#rejected li'))"
                              ".map(li => li.textContent)")
        assert len(rejected) == 3 and any("bad-nan.json" in r for r in rejected)
        # the figures: a series per submission, styled (by attributes), nothing blocked
        series = "figure[data-task=rte] svg [id^='method:']"
        assert browser.js(f"document.querySelectorAll({json.dumps(series)}).length") == 5
        assert browser.js("document.querySelector('figure svg').getBoundingClientRect()"
                          ".width") > 300
        color = method_styles(n for n, _, _ in SUBMISSIONS)["alpha"].color
        stroke = browser.js("getComputedStyle(document.querySelector("
                            "'[id=\"method:alpha\"] path')).stroke")
        assert stroke == "rgb({}, {}, {})".format(*bytes.fromhex(color[1:]))
        assert browser.csp_violations() == []
        browser.js("document.body.insertAdjacentHTML('beforeend', '<p style=\"color: red\">')")
        assert browser.csp_violations()  # how a violation would have shown

        shot = base64.b64decode(browser.send("Page.captureScreenshot",
                                             {"format": "png"})["data"])
        path = tmp_path / "leaderboard.png"
        path.write_bytes(shot)
        assert shot[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000
    finally:
        browser.close()
