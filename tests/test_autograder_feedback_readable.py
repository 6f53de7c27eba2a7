"""Feedback pages a student can read, judged on pages the real commands generate.

A class of two hands in the ``rank`` chapter and is set up, collected, autograded and
given feedback by ``python -m autograder ...``:

* ``wrong`` returns a wrong residual and floor (long findings) and wrote a comment line
  of 300 characters without a space into the answer;
* ``extras`` answers correctly and added two cells: one that displays only JavaScript
  (nothing left once the page is sanitised) and one that prints an empty line.

Then, page by page: every preformatted block wraps and no style sheet after the page's
readable one makes it scroll sideways; the summary at the top names each graded cell as
the statement's grading table does (never nbgrader's "Test cell"); no output box is
empty and no graded cell echoes its bare score; the maths bundle sits in the student's
own folder, and a copy of that folder alone still finds it. Where Chromium exists, the
copied page is opened at 390 px (a phone) and 1280 px: nothing is wider than the window,
each finding wraps, MathJax typesets.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from helpers.answer_notebooks import with_answer

from autograder import REPO_ROOT
from autograder.build import grade_ids, solution_source
from autograder.exercises import load
from autograder.feedback import CSP_META, MATHJAX_FILE

#: a class graded end to end: left out of make test-fast
pytestmark = pytest.mark.slow

LONG_TOKEN = "x" * 300
WRONG = f'''import numpy as np

# {LONG_TOKEN}


def rank_bound(H, y, n_classes):
    """Wrong on purpose: no fit at all, and no floor."""
    return float(np.sum(np.asarray(H, dtype=float) ** 2)) + 1.0, 0
'''
JS_ONLY = "from IPython.display import display\ndisplay({'application/javascript': '1'}, raw=True)"
EMPTY_PRINT = "print('')"


def _autograder(course, *args):
    cmd = [sys.executable, "-m", "autograder", "--course", str(course), "--timeout", "30", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1500, cwd=REPO_ROOT)
    assert proc.returncode == 0, (args, proc.stdout[-3000:], proc.stderr[-3000:])
    return proc


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    work = tmp_path_factory.mktemp("readable")
    course = work / "course"
    spec = load("rank_bound")
    subs = work / "submissions"
    wrong = with_answer(spec, WRONG)
    extras = with_answer(spec, solution_source(spec))
    extras.cells.append(nbformat.v4.new_code_cell(JS_ONLY))
    extras.cells.append(nbformat.v4.new_code_cell(EMPTY_PRINT))
    for student, nb in (("wrong", wrong), ("extras", extras)):
        path = subs / student / "rank" / "rank_bound.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(nb, str(path))
    roster = work / "roster.csv"
    roster.write_text(
        "id,first_name,last_name,email\n"
        "wrong,Wrong,Student,wrong@example.org\nextras,Extras,Student,extras@example.org\n"
    )
    _autograder(course, "setup", "--assign", "rank")
    _autograder(course, "roster", str(roster))
    _autograder(course, "collect", str(subs))
    _autograder(course, "autograde", "--seed", "7")
    _autograder(course, "feedback")
    feedback = course / "feedback"
    found = {p.parts[-3]: p for p in sorted(feedback.glob("*/rank/rank_bound.html"))}
    assert sorted(found) == ["extras", "wrong"], sorted(feedback.rglob("*"))
    return {"feedback": feedback, "pages": found, "spec": spec}


class _Page(HTMLParser):
    """The parts of a page these tests read: style sheets, scripts, the summary's links,
    the output areas' text, and the statement's grading table."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.styles, self.scripts, self.toc, self.outputs, self.table = [], [], [], [], []
        self.styles_after_readable = []
        self._stack = []  # (tag, classes, id) of open elements
        self._text = None
        self._style = None

    def _inside(self, cls=None, ident=None):
        return any((cls and cls in c) or (ident and ident == i) for _, c, i in self._stack)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = set((a.get("class") or "").split())
        if tag in ("br", "img", "meta", "link", "hr", "input"):
            if tag == "img" and self._inside("output_area"):
                self.outputs[-1][1] = True
            return
        self._stack.append((tag, classes, a.get("id")))
        if tag == "style":
            self._style = [a.get("id"), ""]
            self.styles.append(self._style)
        elif tag == "script":
            self.scripts.append(a.get("src"))
        elif tag == "a" and self._inside(ident="toc") and (a.get("href") or "").startswith("#"):
            self._text = [a["href"][1:], ""]
            self.toc.append(self._text)
        elif tag == "div" and "output_area" in classes:
            self.outputs.append(["", False])
        elif tag == "tr" and self._inside("text_cell_render"):
            self.table.append([])
        elif tag in ("td", "th") and self._inside("text_cell_render") and self.table:
            self.table[-1].append("")

    def handle_endtag(self, tag):
        while self._stack:
            top = self._stack.pop()[0]
            if top == tag:
                break
        if tag == "style":
            self._style = None
        if tag == "a":
            self._text = None

    def handle_data(self, data):
        if self._style is not None:
            self._style[1] += data
        if self._text is not None:
            self._text[1] += data
        if self._inside("output_area") and self.outputs:
            self.outputs[-1][0] += data
        if self.table and self.table[-1] and any(t in ("td", "th") for t, _, _ in self._stack):
            self.table[-1][-1] = " ".join((self.table[-1][-1] + " " + data).split())


def _parse(page):
    parsed = _Page()
    parsed.feed(page.read_text(encoding="utf-8"))
    return parsed


def _rules(css):
    """(selectors, declarations) of every rule of a style sheet, @media blocks included."""
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    out = []
    for sel, body in re.findall(r"([^{}]+)\{([^{}]*)\}", css):
        sel = sel.split("{")[-1].strip()
        decl = {}
        for item in body.split(";"):
            if ":" in item:
                k, v = item.split(":", 1)
                decl[k.strip().lower()] = v.strip().lower()
        out.append(([s.strip() for s in sel.split(",")], decl))
    return out


def test_findings_wrap_and_no_box_scrolls_sideways(pages):
    for student, page in pages["pages"].items():
        parsed = _parse(page)
        ids = [ident for ident, _ in parsed.styles]
        assert ids[-1] == "autograder-readable", (student, ids)
        readable = _rules(parsed.styles[-1][1])
        pre = [d for sels, d in readable if "pre" in sels]
        assert pre and pre[0]["white-space"] == "pre-wrap", readable
        assert pre[0]["overflow-x"] == "visible"
        boxes = {s for sels, d in readable if d.get("overflow-x") == "visible" for s in sels}
        assert {"div.output_area", "div.output_subarea", "div.input_area"} <= boxes
        # nbgrader's style sheets that came before: each rule that would make a findings
        # box scroll (or keep its lines from wrapping) names a selector the readable sheet
        # overrides with at least the same weight
        for _, css in parsed.styles[:-1]:
            for sels, decl in _rules(css):
                scrolls = decl.get("overflow-x", decl.get("overflow", "")) in ("auto", "scroll")
                nowrap = decl.get("white-space") in ("pre", "nowrap")
                for sel in sels:
                    last = sel.split()[-1] if sel.split() else sel
                    if (scrolls or nowrap) and last in ("pre", "div.output_subarea"):
                        assert sel in {s for sels2, _ in readable for s in sels2}, (sel, decl)
        # no inline style in the body brings a scrolling box back
        body = page.read_text(encoding="utf-8").split("<body", 1)[1]
        assert not re.search(r'style="[^"]*overflow(-x)?:\s*(auto|scroll)', body), student
    wrong = pages["pages"]["wrong"].read_text(encoding="utf-8")
    assert LONG_TOKEN in wrong and "[FAIL]" in wrong


def test_summary_names_each_check_as_the_statement_does(pages):
    spec = pages["spec"]
    for student, page in pages["pages"].items():
        parsed = _parse(page)
        raw = page.read_text(encoding="utf-8")
        assert ">Test cell<" not in raw, student
        # the statement's grading table: header, then one row per graded cell in order
        rows = [r for r in parsed.table if len(r) == 3]
        assert rows[0] == ["test", "what it checks", "points"], rows
        expected = [what for _, what, _ in rows[1:]]
        assert len(expected) == 1 + len(spec.HIDDEN)
        names = [(target, " ".join(text.split())) for target, text in parsed.toc]
        ids = grade_ids(spec)
        assert [t for t, _ in names][-len(expected) :] == [
            f"{spec.NAME}_visible_tests",
            *[ids[c] for c in spec.HIDDEN],
        ]
        shown = [text for _, text in names][-len(expected) :]
        assert expected[0] in shown[0] and "visible" in shown[0]
        assert shown[1:] == expected[1:], (shown, expected)
        # each graded cell's own heading says the same
        for target, text in names:
            assert re.search(
                r'<a name="' + re.escape(target) + r'"></a><div class="panel-heading">'
                r'<span class="nbgrader-label">Grade cell: ' + re.escape(html.escape(text, False)),
                raw,
            ), (student, target, text)


def test_no_empty_output_box_and_no_bare_score(pages):
    for student, page in pages["pages"].items():
        parsed = _parse(page)
        assert parsed.outputs, student
        for text, image in parsed.outputs:
            body = re.sub(r"^\s*Out\[\d+\]:", "", text).strip()
            assert body or image, (student, text)
            # a graded cell's returned score is in its heading, not echoed as Out[n]: 3.0
            assert not re.fullmatch(r"-?\d+(\.\d*)?", body), (student, text)
    # the extras' JavaScript-only and empty-print cells leave no box at all: their input
    # areas are there, each followed by no output area before the next cell
    raw = pages["pages"]["extras"].read_text(encoding="utf-8")
    cells = raw.split('<div class="cell border-box-sizing code_cell rendered">')
    for marker in ("application/javascript", "print"):
        mine = [c for c in cells if marker in html.unescape(re.sub(r"<[^>]+>", "", c))]
        assert mine, marker
        assert 'class="output_area"' not in mine[-1], marker


def _script_src(page):
    srcs = [s for s in _parse(page).scripts if s]
    assert len(srcs) == 1 and srcs[0].endswith(MATHJAX_FILE), srcs
    return srcs[0]


def test_each_student_folder_carries_its_own_maths(pages, tmp_path):
    feedback = pages["feedback"]
    assert not (feedback / MATHJAX_FILE).exists()
    for student, page in pages["pages"].items():
        src = _script_src(page)
        assert not re.match(r"[a-z]+:", src) and not src.startswith("/"), src
        bundle = (page.parent / src).resolve()
        assert bundle == (feedback / student / MATHJAX_FILE).resolve(), (student, src)
        assert bundle.stat().st_size > 10**6
        # handed out alone: the folder copied anywhere still holds what the page loads
        alone = tmp_path / student
        shutil.copytree(feedback / student, alone)
        copied = alone / page.relative_to(feedback / student)
        assert (copied.parent / src).resolve().is_file()
        assert (copied.parent / src).resolve().is_relative_to(alone.resolve())
        # the policy still allows no script from anywhere but the page's own files
        head = copied.read_text(encoding="utf-8").split("<body", 1)[0]
        assert CSP_META in head and head.index(CSP_META) < head.index("<script")
        script_src = re.search(r"script-src ([^;]*);", CSP_META).group(1).split()
        assert not [s for s in script_src if s.startswith(("http", "*", "'unsafe"))], script_src


# --------------------------------------------------------------------------- in a browser


def _chromium():
    for path in (shutil.which("chromium"), "/usr/bin/chromium", shutil.which("chromium-browser")):
        if path and Path(path).exists():
            return path
    return None


_MEASURE = """
(() => {
  const out = {scroll_width: document.documentElement.scrollWidth,
               inner_width: window.innerWidth, unwrapped: [], scrolling: [],
               mjx: document.querySelectorAll('mjx-container').length,
               merror: document.querySelectorAll('mjx-merror').length,
               findings: 0};
  for (const pre of document.querySelectorAll('div.output_area pre')) {
    out.findings += 1;
    if (getComputedStyle(pre).whiteSpace !== 'pre-wrap')
      out.unwrapped.push(pre.innerText.slice(0, 60));
    for (let el = pre; el && el !== document.body; el = el.parentElement) {
      const s = getComputedStyle(el);
      if (['auto', 'scroll'].includes(s.overflowX) && el.scrollWidth > el.clientWidth + 1)
        out.scrolling.push(el.tagName + '.' + el.className);
    }
  }
  return out;
})()
"""

_WAIT_MATHJAX = """
new Promise((resolve) => {
  const t0 = Date.now();
  (function poll() {
    const mj = window.MathJax;
    if (mj && mj.startup && mj.startup.promise) {
      mj.startup.promise.then(() => resolve(true), () => resolve(false));
    } else if (Date.now() - t0 > 30000) { resolve(false); } else { setTimeout(poll, 100); }
  })();
})
"""


def test_a_copied_page_fits_a_phone_and_a_laptop_and_typesets(pages, tmp_path):
    exe = _chromium()
    if exe is None:
        pytest.skip("chromium is not installed")
    websocket = pytest.importorskip("websocket")
    alone = tmp_path / "wrong"
    shutil.copytree(pages["feedback"] / "wrong", alone)
    page = alone / "rank" / "rank_bound.html"
    profile = tempfile.mkdtemp(prefix="feedback-chromium-")
    proc = subprocess.Popen(
        [
            exe,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--no-first-run",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            "--remote-debugging-port=0",
            "--remote-allow-origins=*",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        port_file = Path(profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().strip()):
            assert proc.poll() is None and time.monotonic() < deadline, "chromium did not start"
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as r:
            target = next(t for t in json.load(r) if t.get("type") == "page")
        ws = websocket.create_connection(
            target["webSocketDebuggerUrl"], timeout=60, suppress_origin=True
        )
        calls = iter(range(1, 10**6))

        def call(method, **params):
            ident = next(calls)
            ws.send(json.dumps({"id": ident, "method": method, "params": params}))
            while True:
                msg = json.loads(ws.recv())
                if msg.get("id") == ident:
                    assert "error" not in msg, (method, msg)
                    return msg.get("result", {})
                if msg.get("method") == "Page.loadEventFired":
                    loaded.append(msg)

        def evaluate(expr, wait=False):
            res = call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=wait)
            assert "exceptionDetails" not in res, res
            return res["result"].get("value")

        loaded = []
        call("Page.enable")
        for width, mobile in ((390, True), (1280, False)):
            call(
                "Emulation.setDeviceMetricsOverride",
                width=width,
                height=800,
                deviceScaleFactor=1,
                mobile=mobile,
            )
            loaded.clear()
            call("Page.navigate", url=page.as_uri())
            while not loaded:
                msg = json.loads(ws.recv())
                if msg.get("method") == "Page.loadEventFired":
                    loaded.append(msg)
            assert evaluate(_WAIT_MATHJAX, wait=True) is True, width
            seen = evaluate(_MEASURE)
            assert seen["inner_width"] == width, seen
            assert seen["scroll_width"] <= width + 1, (width, seen)
            assert seen["findings"] >= 5 and not seen["unwrapped"], (width, seen)
            assert not seen["scrolling"], (width, seen)
            assert seen["mjx"] > 0 and seen["merror"] == 0, (width, seen)
        ws.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(profile, ignore_errors=True)
