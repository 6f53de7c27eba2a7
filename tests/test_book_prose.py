"""No typed figure in the book's prose: every number is glued, cited or part of the maths.

The rule (notes/RULES.md): a number in a chapter's text comes from a cell that ran
when the book was built (myst-nb ``{glue:text}``), is quoted from a paper named in the same
sentence (authors and year), or belongs to a formula (``$...$``, ``$$...$$``, ``{math}``).
This test reads the MyST sources of every page in ``book/`` (no build needed), keeps only
their markdown, removes what may hold numbers legitimately and reports every number left as
``file:line: number in "sentence"``.

Removed before scanning: the front matter; code cells and other literal blocks (fences whose
directive is ``code-cell``, ``math``, or none, such as ```` ```bash ````); directive option
lines (``:label: ...``); HTML comments; inline and display maths; every role with its
content (``{glue:text}`...```, ``{doc}`...```, ``{ref}`...```, ``{math}`...```, ...);
inline code; link targets (the link text stays); bare URLs. Exempt in place: list numbers at
the start of an item, and references to a part of a work (``Part 1``, ``Table 7``,
``Appendix B.3``, ``§4.1``, ...). A number joined to a letter, a hyphen or a slash is read as
part of a name (``DINOv2``, ``ViT-B/16``, ``top-1``, ``5-NN``, ``16x16``) and left alone. A
sentence that names a source (``Oquab et al. 2023``, ``Kornblith, Shlens and Le (2019)``)
may quote its figures.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
PAGES = sorted(BOOK.glob("*.md"))

# Pages exempt from the rule, by file name (none).
EXEMPT_PAGES: set[str] = set()

_FENCE = re.compile(r"^(\s*)(`{3,}|:{3,})\s*(\{([\w:-]+)\})?(.*)$")
_LITERAL_DIRECTIVES = {"code-cell", "math", "raw-cell", "code", "code-block", "eval-rst"}
_ROLE = re.compile(r"\{[\w:.-]+\}`[^`]*`")
_INLINE_CODE = re.compile(r"`+[^`]*`+")
_DISPLAY_MATH = re.compile(r"\$\$.*?\$\$", re.S)
_INLINE_MATH = re.compile(r"(?<![\\$])\$(?!\$)[^$]+?(?<![\\$])\$")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_URL = re.compile(r"https?://\S+")
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_LIST_NUMBER = re.compile(r"^(\s*)\d+[.)]\s")
_PART_REF = re.compile(
    r"\b(?:Parts?|Chapters?|Tables?|Figures?|Fig\.|Sections?|Appendix|Appendices|Eqs?\.|"
    r"Equations?|Algorithms?|Theorems?|Lemmas?|Step|§)\s*\(?[A-Z]?\d+(?:\.\d+)*\)?"
    r"(?:(?:,\s*|\s+and\s+|\s*[-–]\s*)[A-Z]?\d+(?:\.\d+)*)*"
)
_NUMBER = re.compile(r"(?<![\w/\-.,])\d+(?:[.,]\d+)*(?![\w/\-])(?![.,]\d)")
_CITATION = re.compile(
    r"(?:et\s+al\.|\bcolleagues|"
    r"\b[A-Z][\w'’-]+(?:,\s+[A-Z][\w'’-]+)*(?:\s+and\s+[A-Z][\w'’-]+)?)"
    r",?\s*\(?(?:19|20)\d\d[a-z]?\b"
)
_SENTENCE_END = re.compile(
    r"(?<=[.!?])(?<!\bal\.)(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\b[A-Z]\.)\s+(?=[A-Z*\"“(\[])"
)
# On the references page every entry is one citation: its figures may fill several sentences.
WHOLE_ENTRY_CITES = {"references.md"}


def markdown_lines(text: str) -> list[tuple[int, str]]:
    """(line number, text) of the markdown lines of a MyST page, literal blocks removed."""
    lines = text.split("\n")
    out: list[tuple[int, str]] = []
    i = 0
    if lines and lines[0].strip() == "---":  # front matter
        i = 1
        while i < len(lines) and lines[i].strip() != "---":
            i += 1
        i += 1
    literal_until: str | None = None  # the closing fence of the literal block we are in
    open_prose: list[str] = []  # fences of the prose directives we are inside
    while i < len(lines):
        line = lines[i]
        m = _FENCE.match(line)
        if literal_until is not None:
            if m and m.group(2) == literal_until and not m.group(3) and not m.group(5).strip():
                literal_until = None
            i += 1
            continue
        if m:
            fence, directive, rest = m.group(2), m.group(4), m.group(5)
            bare = directive is None and not rest.strip()
            if bare and open_prose and open_prose[-1] == fence:  # closes a prose directive
                open_prose.pop()
            elif fence.startswith("`") and (directive is None or directive in _LITERAL_DIRECTIVES):
                literal_until = fence  # code, maths, shell ...
            elif directive is not None:
                # a prose directive (prf:theorem, dropdown, note, ...): its title is prose
                open_prose.append(fence)
                out += [(i + 1, ""), (i + 1, rest), (i + 1, "")]
            i += 1
            continue
        if line.strip().startswith("$$") and line.count("$$") == 1:  # display maths block
            i += 1
            while i < len(lines) and "$$" not in lines[i]:
                i += 1
            i += 1
            continue
        if re.match(r"^\s*:[\w-]+:", line):  # directive option such as :label: or :tags:
            i += 1
            continue
        if line.startswith("(") and line.rstrip().endswith(")="):  # a target label
            i += 1
            continue
        out.append((i + 1, line))
        i += 1
    return out


def paragraphs(lines: list[tuple[int, str]]):
    """Group markdown lines into paragraphs (blank lines, list items and table rows split)."""
    block: list[tuple[int, str]] = []
    for no, line in lines:
        starts_item = re.match(r"^\s*([*+-]|\d+[.)])\s", line) or line.lstrip().startswith("|")
        if not line.strip() or starts_item:
            if block:
                yield block
            block = [] if not line.strip() else [(no, line)]
            if line.lstrip().startswith("|"):
                yield block
                block = []
            continue
        if line.lstrip().startswith("#"):
            if block:
                yield block
            yield [(no, line)]
            block = []
            continue
        block.append((no, line))
    if block:
        yield block


def _blank(match: re.Match) -> str:
    """Replace a match by spaces (newlines kept) so that offsets and lines stay put."""
    return re.sub(r"[^\n]", " ", match.group(0))


def typed_numbers(text: str, whole_entry_cites: bool = False) -> list[tuple[int, str, str]]:
    """Every number in the prose of ``text`` that is neither glued, cited nor maths.

    With ``whole_entry_cites`` a citation anywhere in a paragraph (a list entry) covers all
    of it, as on a list of references. Returns (line number, number, sentence) triples.
    """
    found = []
    for block in paragraphs(markdown_lines(text)):
        starts = []
        joined = ""
        for no, line in block:
            line = _LIST_NUMBER.sub(
                lambda m: m.group(1) + " " * (len(m.group(0)) - len(m.group(1))), line
            )
            starts.append((len(joined), no))
            joined += line + "\n"
        clean = joined
        for pattern in (_COMMENT, _DISPLAY_MATH, _ROLE, _INLINE_CODE, _INLINE_MATH, _URL):
            clean = pattern.sub(_blank, clean)
        clean = _LINK.sub(lambda m: m.group(1) + " " * (len(m.group(0)) - len(m.group(1))), clean)
        clean = _PART_REF.sub(_blank, clean)
        # sentences, with their offsets
        pos = 0
        pieces = []
        for m in _SENTENCE_END.finditer(clean):
            pieces.append((pos, clean[pos : m.start()]))
            pos = m.end()
        pieces.append((pos, clean[pos:]))
        if whole_entry_cites and _CITATION.search(clean):
            continue
        for offset, sentence in pieces:
            if _CITATION.search(sentence):
                continue
            for m in _NUMBER.finditer(sentence):
                at = offset + m.start()
                line_no = [no for start, no in starts if start <= at][-1]
                found.append((line_no, m.group(0).rstrip("."), " ".join(sentence.split())[:160]))
    return found


# --------------------------------------------------------------------------- the scanner itself
def test_scanner_flags_typed_numbers_and_spares_the_rest():
    page = "\n".join(
        [
            "---",
            "jupytext: {format: 1.0}",
            "---",
            "# Part 1: a heading",
            "The probe scores 0.73 on the test set.",  # typed: flagged
            "It scores {glue:text}`acc:.3f` with $k = 51$ and $$x = 2$$.",  # glued and maths
            "DINOv2 scores 86.5 (Oquab et al. 2023, Table 4).",  # cited
            "Kornblith, Shlens and Le (2019) saw 179 of 192 pairs.",  # cited, name list
            "ViT-B/16, top-1 and 5-NN are names; see Table 7 and Appendix B.3.",
            "1. a numbered item without figures",
            "```{code-cell} ipython3",
            "x = 12345",
            "```",
            "```bash",
            "make check 42",
            "```",
            ":::{dropdown} Interview: why 3 directions?",
            ":::",
            "A [link](https://example.org/a/2024) and `code 99`.",
            "| a | b |",
            "| --- | --- |",
            "| 7 | $8$ |",
            "Kolesnikov et al. (2019) found 5 things. Then 6 more.",
            "$$",
            "a = 1",
            " + 2",
            "$$",
            "A bank of 1.28M rows, and 3.5 more.",
        ]
    )
    found = typed_numbers(page)
    assert [(n, num) for n, num, _ in found] == [
        (5, "0.73"),
        (17, "3"),
        (22, "7"),
        (23, "6"),
        (28, "3.5"),
    ], found


def test_scanner_reports_the_line_of_each_number_in_a_paragraph():
    page = "A first line without figures,\nthen a second with 2,000 points.\n"
    assert [(n, num) for n, num, _ in typed_numbers(page)] == [(2, "2,000")]


# --------------------------------------------------------------------------- the book
@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_no_typed_number_in_the_prose(page):
    if page.name in EXEMPT_PAGES:
        pytest.skip(f"{page.name}: exempt from the rule")
    found = typed_numbers(page.read_text(), whole_entry_cites=page.name in WHOLE_ENTRY_CITES)
    listing = "\n".join(
        f'book/{page.name}:{no}: {num!r} in "{sentence}"' for no, num, sentence in found
    )
    assert not found, (
        "typed numbers in the prose (glue them from a cell, cite their source in the same "
        f"sentence, or write them as maths):\n{listing}"
    )


# --------------------------------------------------------------------------- structure
@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_headings_run_in_order(page):
    """One title per page, and no heading skips a level (## then ####)."""
    levels = [
        (no, len(m.group(1)))
        for no, line in markdown_lines(page.read_text())
        if (m := re.match(r"^(#{1,6})\s", line))
    ]
    assert [lv for _, lv in levels].count(1) == 1, f"{page.name}: needs exactly one # title"
    for (_, before), (no, level) in zip(levels, levels[1:]):
        assert level <= before + 1, (
            f"book/{page.name}:{no}: heading jumps from level {before} to {level}"
        )


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_markdown_table_has_a_header_row(page):
    """A pipe table's second line is the separator, so its first line renders as header cells."""
    lines = markdown_lines(page.read_text())
    for i, (no, line) in enumerate(lines):
        starts = line.lstrip().startswith("|") and (
            i == 0 or not lines[i - 1][1].lstrip().startswith("|")
        )
        if starts:
            following = lines[i + 1][1] if i + 1 < len(lines) else ""
            assert re.match(r"^\s*\|(\s*:?-+:?\s*\|)+\s*$", following), (
                f"book/{page.name}:{no}: table without a header separator row"
            )
