"""No bookkeeping on a reader's page.

A reader does not have the course's source files, its issue tracker or its test suite, and
does not know who "lent" a machine to whom. :func:`bookkeeping` finds, in the text a reader
sees on a built page (code cells and their outputs included, scripts and styles not), the
names of source files, phrases pointing at "the seed text" or "the course's notes", issue
numbers, test-file names and words of the development process. The test runs it on every page
of ``_build/html`` (skipped when the book is not built) and, always, on planted strings.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"

#: kind -> what it looks like on a page
PATTERNS = {
    "source file": re.compile(r"\b\d{3}_[0-9a-f]{16}(?:\.txt)?\b"),
    "the course's own sources": re.compile(
        r"\bseed[- ]texts?\b|\bseeds? 00\d\b|course[’']s (?:notes|seeds?|sources?|survey|copy)"
        r"|\bsource material\b|\bthe source[’']s figures\b|\bproject[’']s seeds\b",
        re.IGNORECASE,
    ),
    "issue number": re.compile(r"\b[Ii]ssues? #?\d+\b|\(#\d+\)"),
    "test file": re.compile(r"\btests?/test_\w+\.py\b|\btest_\w+\.py\b"),
    "process word": re.compile(
        r"\blent\b|\bre-measured and merged\b|\bgoals? (?:is|are) still open\b"
        r"|\bwork session\b|\bthis session\b|\bhelper agents?\b",
        re.IGNORECASE,
    ),
}
_SKIPPED = {"script", "style"}


class _ReaderText(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.depth = 0
        self.parts: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in _SKIPPED:
            self.depth += 1

    def handle_endtag(self, tag):
        if tag in _SKIPPED and self.depth:
            self.depth -= 1

    def handle_data(self, data):
        if not self.depth:
            self.parts.append(data)


def reader_text(html: str) -> str:
    """Everything a reader sees on a page: prose, code and outputs, not scripts or styles."""
    parser = _ReaderText()
    parser.feed(html)
    parser.close()
    return "".join(parser.parts)


def bookkeeping(html: str) -> list[tuple[str, str]]:
    """``(kind, snippet)`` for every piece of bookkeeping in the reader's text of one page."""
    text = reader_text(html)
    return [
        (kind, text[max(0, m.start() - 40) : m.end() + 40].replace("\n", " "))
        for kind, pattern in PATTERNS.items()
        for m in pattern.finditer(text)
    ]


@pytest.mark.parametrize(
    "planted, kind",
    [
        ("<p>as the survey (000_90060bc13044315d.txt) quotes</p>", "source file"),
        ("<p>the course’s seed text on evaluation prints</p>", "the course's own sources"),
        ("<p>The small example of the course's notes</p>", "the course's own sources"),
        ("<pre>as quoted in the course's sources</pre>", "the course's own sources"),
        # (the numbers are formatted in, so that this file itself names no issue)
        (f"<p>the report before issue {19} (issue {30})</p>", "issue number"),
        ("<p>as tests/test_zoo.py checks</p>", "test file"),
        ("<p>not measured: no GPU was lent to this task</p>", "process word"),
        ("<p>Until that row is re-measured and merged, the book</p>", "process word"),
        ("<p>One goal is still open.</p>", "process word"),
    ],
)
def test_planted_bookkeeping_is_found(planted, kind):
    assert kind in {k for k, _ in bookkeeping(planted)}


def test_ordinary_prose_and_scripts_pass():
    good = (
        "<p>On this task the probe looks at the box; the seed of each run is fixed; a tissue "
        "sample; 30 issues of a journal are not numbered here; Kendall’s tau.</p>"
        "<p>Oquab et al. (2023) report 86.5; see the noise page.</p>"
        f'<script>var s = "issue {30} tests/test_x.py";</script>'
    )
    assert bookkeeping(good) == []


def _pages():
    if not HTML.is_dir():
        return []
    return sorted(
        p
        for p in HTML.rglob("*.html")
        if "_sources" not in p.parts and p.name not in {"genindex.html", "search.html"}
    )


@pytest.mark.slow
@pytest.mark.skipif(not _pages(), reason="the book is not built (make book)")
def test_no_bookkeeping_on_any_built_page():
    found = {}
    for page in _pages():
        hits = bookkeeping(page.read_text(encoding="utf-8", errors="replace"))
        if hits:
            found[str(page.relative_to(HTML))] = hits
    assert not found, f"bookkeeping a reader cannot use, on the built pages: {found}"
