"""Checks of three things a reader of the book notices at once.

Three things a reader notices at once and a reviewer should not have to find by hand:

* **Unrendered markup.** A role with a broken delimiter (``{glue:text}`key:.0f}``) is not an
  error for Sphinx: the page prints the raw text. :func:`unrendered_markup` finds what is left of
  a MyST role in the visible text of a built page; the test runs it on every page of
  ``_build/html`` (skipped when the book is not built) and, always, on planted strings.
* **Cross-references to the wrong chapter.** :data:`DEFINED_IN` says which page defines each
  metric or protocol; :func:`misdirected_links` reads every ``{doc}`` (and ``{ref}`chapter-*```)
  link of a page and the terms it is attached to (the first cell of a table row, or in prose the
  terms before the link in the same clause) and reports a link that points elsewhere.
* **Works cited but not listed.** :func:`citations` collects every author-year citation of the
  chapters (``Oquab et al. 2023``, ``Kornblith, Shlens and Le (2019)``, ``Study 2026``);
  :func:`reference_entries` parses ``book/references.md``, whose entries end with the pages that
  cite them. Every citation must match an entry (first author, year and any co-authors it
  names) whose list names the citing page, and every page an entry names must cite its first
  author. The list therefore cannot drift from the pages in either direction.
* **Set-up cells in view.** A reader should see only code that teaches. :func:`setup_only`
  says whether a code cell does nothing but bookkeeping (imports, thread limits, seeds,
  warning filters, plot style, glue calls); every such cell of a chapter must carry a tag that
  hides or removes it (``hide-input`` where the imports are worth a click, ``remove-cell``
  otherwise).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import jupytext
import pytest
import yaml
from test_book_prose import markdown_lines

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
HTML = ROOT / "_build" / "html"
REFERENCES = BOOK / "references.md"
CHAPTERS = sorted(p for p in BOOK.glob("*.md") if p.name != "references.md")


# --------------------------------------------------------------------------------------------
# (a) unrendered MyST markup in the built HTML
# --------------------------------------------------------------------------------------------

# What a role leaves behind when MyST does not parse it: the role name in braces followed by a
# backtick (``{glue:text}`...``, ``{doc}`...``, ``{cite:p}`...``), or the role name alone for
# the roles the book uses. A backtick directly followed by a brace is the same failure seen from
# the other side (a literal ```{`` where a role should have closed).
_ROLE_LEFTOVER = re.compile(
    r"\{(?:glue(?::\w+)?|doc|ref|numref|eq|cite(?::\w+)?|term|download|math|abbr|"
    r"prf:\w+|sub-ref)\}|\{[a-z][\w:.-]*\}`|`\{"
)
_SKIPPED_ELEMENTS = {"script", "style", "pre", "textarea"}


class _VisibleText(HTMLParser):
    """The text a reader sees: everything outside script, style and preformatted blocks."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.depth = 0
        self.parts: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in _SKIPPED_ELEMENTS:
            self.depth += 1

    def handle_endtag(self, tag):
        if tag in _SKIPPED_ELEMENTS and self.depth:
            self.depth -= 1

    def handle_data(self, data):
        if not self.depth:
            self.parts.append(data)


def visible_text(html: str) -> str:
    parser = _VisibleText()
    parser.feed(html)
    parser.close()
    return "".join(parser.parts)


def unrendered_markup(html: str) -> list[str]:
    """Snippets of visible text around every leftover of a MyST role in one HTML page."""
    text = visible_text(html)
    return [
        text[max(0, m.start() - 40) : m.end() + 40].replace("\n", " ")
        for m in _ROLE_LEFTOVER.finditer(text)
    ]


def test_checker_finds_a_broken_role():
    bad = (
        "<p>probe, roughly {glue:text}`att_ratio:.0f} times as many.</p>"
        "<p>see {doc}`noise` and <code>`{x}</code></p>"
    )
    found = unrendered_markup(bad)
    assert len(found) == 3 and "att_ratio" in found[0]


def test_checker_passes_rendered_text_and_code_blocks():
    good = (
        '<p>roughly <span class="pasted-text">4</span> times as many '
        '(<a href="noise.html">Honest error bars</a>), a set {1, 2} and a dict {"a": 1}.</p>'
        '<pre>glue("x", 1)  # then {glue:text}`x` in the text</pre>'
        '<script>var t = "{doc}`x`";</script>'
    )
    assert unrendered_markup(good) == []


def _built_pages():
    return sorted(HTML.rglob("*.html")) if HTML.is_dir() else []


@pytest.mark.slow
@pytest.mark.skipif(not _built_pages(), reason="the book is not built (make book)")
def test_no_unrendered_markup_in_the_built_book():
    bad = {
        str(p.relative_to(HTML)): found
        for p in _built_pages()
        if (found := unrendered_markup(p.read_text(encoding="utf-8", errors="replace")))
    }
    assert not bad, f"raw MyST markup in the built pages: {bad}"


# --------------------------------------------------------------------------------------------
# (b) every metric's cross-reference points at the page that defines it
# --------------------------------------------------------------------------------------------

# term (a regular expression, matched case-sensitively as written) -> the pages that define it.
# A term defined in one place and summarised in another lists only the defining page.
DEFINED_IN: dict[str, set[str]] = {
    r"\blinear[ -]probes?\b": {"protocols"},
    r"\b[Ll]eave-one-out\b": {"invariances"},
    r"\b[Rr]idge\b": {"invariances"},
    r"\b(?:[Ww]eighted )?k-NN\b": {"knn"},
    r"\b[Rr]ank bound\b": {"rank"},
    r"\b[Ee]ffective rank\b": {"rank", "rankme"},
    r"\bRankMe\b": {"rankme"},
    r"\bNE-sum\b": {"rankme"},
    r"\b(?:alpha|α)-ReQ\b": {"rankme"},
    r"\bSelf-Cluster\b": {"rankme"},
    r"\bTwoNN\b|\b[Ii]ntrinsic dimension\b": {"rankme"},
    r"\b[Ss]table rank\b": {"rankme"},
    r"\b[Cc]ondition number\b": {"rankme"},
    r"\bDSE\b|\b[Dd]iffusion spectral entropy\b": {"rankme"},
    r"\b[Ll]abel-free\b": {"rankme"},
    r"\bCKA\b": {"cka"},
    r"\b[Pp]articipation ratio\b": {"cka"},
    r"\b[Ii]sotropy\b": {"cka"},
    r"\b[Uu]niformity\b": {"cka"},
    r"\b[Mm]ean pairwise cosine\b": {"cka"},
    r"\b[Ll]ow-shot\b": {"noise"},
    r"\bWilson\b": {"noise"},
    r"\bMcNemar\b": {"noise"},
    r"\b[Pp]aired bootstrap\b": {"noise"},
    r"\b[Tt]ransfer suites?\b": {"noise"},
    r"\b[Aa]ttentive probes?\b": {"attentive"},
    r"\bLP-FT\b": {"lpft"},
    r"\b[Ff]ine-tuning\b": {"lpft"},
    r"\bBatchNorm\b": {"batchnorm"},
    r"\b(?:reference|PyTorch) loop\b|\b[Tt]he loop\b": {"torchloop"},
    r"\b[Rr]ecall@k\b|\bnDCG\b|\bmAP\b|\b[Rr]etrieval\b": {"retrieval"},
}
_TERMS = [(re.compile(pattern), pages) for pattern, pages in DEFINED_IN.items()]
_LINK = re.compile(
    r"\{doc\}`(?:[^`<]*<)?(?P<doc>[\w/.-]+)>?`|\{ref\}`(?:[^`<]*<)?chapter-(?P<ref>[\w-]+)>?`"
)
_MASK = re.compile(r"\$\$.*?\$\$|(?<![\\$])\$(?!\$)[^$]+?(?<![\\$])\$|\{glue(?::\w+)?\}`[^`]*`")
_CLAUSE_END = re.compile(r"[.;!?]\s|:\s|\),\s|,\s+and\s|\(\s*$")
_PARENTHETICAL = re.compile(r"\([^()]*\)")
WINDOW = 80  # characters before a link in which its term is looked for


def _link_target(m: re.Match) -> str:
    return Path(m.group("doc") or m.group("ref")).name


def _terms_in(text: str) -> list[tuple[int, set[str], str]]:
    """(end position, defining pages, matched text) of every term in ``text``."""
    return sorted((m.end(), pages, m.group(0)) for rx, pages in _TERMS for m in rx.finditer(text))


def misdirected_links(source: str, page: str = "page") -> list[str]:
    """``page:line: [term] -> {doc}`target`` for each link attached to a term defined elsewhere.

    In a table row the terms of the first cell must each have their defining page among the
    row's links. In prose every term before a link, within :data:`WINDOW` characters and in the
    same clause (no ``.``, ``;``, ``:``, ``!``, ``?``, ``),``, ``, and`` or other link in between)
    and outside a closed parenthesis, must be defined on the linked page. Maths and glued
    numbers are masked first.
    """
    problems = []
    paragraph: list[tuple[int, str]] = []  # (line number, text) of the prose lines so far

    def check_prose():
        text, starts = "", []
        for lineno, line in paragraph:
            starts.append((len(text), lineno))
            text += line + " "
        previous_end = 0
        for m in _LINK.finditer(text):
            lineno = max(ln for offset, ln in starts if offset <= m.start())
            before = text[max(previous_end, m.start() - WINDOW) : m.start()]
            # the clause the link belongs to: cut at the last sentence or clause break, but keep
            # the words in front of an opening parenthesis ("RBF CKA ({doc}`cka`)")
            cut = [c.end() for c in _CLAUSE_END.finditer(before) if not c.group(0).startswith("(")]
            clause = _PARENTHETICAL.sub(" ", before[cut[-1] :] if cut else before)
            for _, pages, term in _terms_in(clause):
                if _link_target(m) not in pages:
                    problems.append(f"{page}:{lineno}: [{term}] -> {_link_target(m)}")
            previous_end = m.end()
        paragraph.clear()

    for lineno, line in markdown_lines(source):
        line = _MASK.sub(lambda m: " " * len(m.group(0)), line)
        if line.lstrip().startswith("|"):  # a table row
            check_prose()
            links = list(_LINK.finditer(line))
            cells = line.strip().strip("|").split("|")
            targets = {_link_target(m) for m in links}
            for _, pages, term in _terms_in(_LINK.sub(" ", cells[0])) if links else []:
                if not pages & targets:
                    problems.append(f"{page}:{lineno}: [{term}] -> {sorted(targets)}")
        elif line.strip():
            paragraph.append((lineno, line.strip()))
        else:
            check_prose()
    check_prose()
    return problems


def test_link_checker_catches_the_reviewed_mistakes():
    planted = "\n".join(
        [
            "The loop of the linear-probe chapter ({doc}`protocols`) extracts frozen features.",
            "",
            "| output | definition |",
            "|---|---|",
            "| ridge probe | {doc}`protocols` |",
            "| TwoNN intrinsic dimension | {doc}`rank` |",
            "| alpha-ReQ, NE-sum, participation ratio | {doc}`rankme` |",
            "",
            "It prints linear and RBF CKA ({doc}`rank`), then splits the images.",
            "",
            "Read these rankings with care: the comparative study of label-free metrics that the",
            "{doc}`rank` chapter follows found that their agreement with accuracy changes.",
        ]
    )
    found = misdirected_links(planted)
    assert [f.split(": ", 1)[1] for f in found] == [
        "[The loop] -> protocols",
        "[ridge] -> ['protocols']",
        "[TwoNN] -> ['rank']",
        "[intrinsic dimension] -> ['rank']",
        "[participation ratio] -> ['rankme']",
        "[CKA] -> rank",
        "[label-free] -> rank",
    ], found


def test_link_checker_accepts_correct_links():
    fine = "\n".join(
        [
            "The PyTorch reference loop ({doc}`torchloop`) extracts frozen features; the weighted",
            "k-NN ({doc}`knn`) and the linear probe of {doc}`protocols`. Read more in {doc}`cka`.",
            "",
            "| alpha-ReQ, NE-sum, participation ratio | {doc}`rankme` (alpha-ReQ, NE-sum), "
            "{doc}`cka` |",
            "| Dense probe | one linear map | this chapter |",
            "",
            "A value of $k$-NN ({doc}`knn`), and a glued {glue:text}`x_CKA` ({doc}`noise`).",
            "",
            "The protocols of {doc}`protocols` (linear probe, k-NN) and the vote of {doc}`knn`;",
            "{ref}`chapter-rank` proves the rank bound, and {ref}`chapter-knn` reads the geometry.",
        ]
    )
    assert misdirected_links(fine) == []


@pytest.mark.parametrize("path", CHAPTERS + [REFERENCES], ids=lambda p: p.name)
def test_cross_references_point_at_the_defining_page(path):
    assert not misdirected_links(path.read_text(), path.name)


# --------------------------------------------------------------------------------------------
# (c) every cited work is in the references, and the references list who cites them
# --------------------------------------------------------------------------------------------

_NAME = r"(?:(?:d['’]|de |van |von )?[A-Z][\w'’-]*\w)"
_CITE = re.compile(
    rf"(?<![\w.'’-])(?P<authors>{_NAME}(?:\s+et\s+al\.|\s+and\s+colleagues|"
    rf"(?:,\s+{_NAME})*,?\s+(?:and|&)\s+{_NAME})?),?\s+\(?(?P<year>(?:19|20)\d\d)[a-z]?(?!\w)"
)
# capitalised words that can stand before a year without being an author
_NOT_AUTHORS = {
    "In",
    "Since",
    "From",
    "By",
    "Until",
    "After",
    "Before",
    "As",
    "Of",
    "The",
    "To",
    "For",
    "At",
    "On",
    "And",
    "Or",
    "Table",
    "Figure",
    "Section",
    "Appendix",
    "Year",
    "ImageNet",
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
    "Spring",
    "Summer",
    "Autumn",
    "Winter",
    "Fall",
}
_STRIP = re.compile(r"\{[\w:.-]+\}`[^`]*`|`[^`]*`|\$\$.*?\$\$|\$[^$]*\$|\[([^\]]*)\]\([^)]*\)")


def _surnames(authors: str) -> tuple[list[str], bool]:
    """Surnames in an author string, and whether it ends in "et al."/"and colleagues"."""
    open_list = bool(re.search(r"et\s+al\.|and\s+colleagues", authors))
    authors = re.sub(r"\s+et\s+al\.|\s+and\s+colleagues", "", authors)
    names = [n.strip() for n in re.split(r",\s*|\s+and\s+|\s*&\s*", authors) if n.strip()]
    names = [n for n in names if not re.fullmatch(r"(?:[A-Z]\.\s*)+", n)]  # initials
    return names, open_list


@dataclass(frozen=True)
class Citation:
    page: str
    line: int
    surnames: tuple[str, ...]
    year: str
    open_list: bool


def _paragraphs(source: str):
    lines, start = [], None
    for lineno, text in markdown_lines(source):
        if text.strip():
            start = lineno if start is None else start
            lines.append(text.strip())
        elif lines:
            yield start, " ".join(lines)
            lines, start = [], None
    if lines:
        yield start, " ".join(lines)


def citations(source: str, page: str = "page") -> list[Citation]:
    """Every author-year citation in the prose of one MyST page (paragraphs joined)."""
    out = []
    for lineno, text in _paragraphs(source):
        text = _STRIP.sub(lambda m: m.group(1) or " ", text)
        for m in _CITE.finditer(text):
            names, open_list = _surnames(m.group("authors"))
            if names and names[0] not in _NOT_AUTHORS:
                out.append(Citation(page, lineno, tuple(names), m.group("year"), open_list))
    return out


@dataclass
class Entry:
    text: str
    surnames: list[str]
    year: str
    cited_in: set[str] = field(default_factory=set)


_ENTRY = re.compile(
    r"^\*\s+\*(?P<title>.+?)\*\s+—\s+(?P<authors>.+?),\s+(?P<year>(?:19|20)\d\d)\b"
    r"(?P<rest>.*)$",
    re.S,
)
_CITED_IN = re.compile(r"Cited in\s+(?P<pages>(?:\{doc\}`[\w/.-]+`(?:,\s*|\s+and\s+)?)+)\.?\s*$")


def reference_entries(source: str) -> list[Entry]:
    """The bulleted entries of the references page, with their authors, year and citing pages."""
    bullets, current = [], None
    for line in source.split("\n"):
        if line.startswith("* "):
            current = [line]
            bullets.append(current)
        elif current is not None and line.startswith("  ") and line.strip():
            current.append(line.strip())
        else:
            current = None
    entries = []
    for lines in bullets:
        text = " ".join(lines)
        m = _ENTRY.match(text)
        if not m:
            raise ValueError(f"references.md: cannot read the entry {text[:80]!r}")
        authors = re.sub(r"^cited as\s+", "", m.group("authors"))
        names, _ = _surnames(authors)
        cited = _CITED_IN.search(m.group("rest"))
        pages = set(re.findall(r"\{doc\}`([\w/.-]+)`", cited.group("pages"))) if cited else set()
        entries.append(Entry(text, names, m.group("year"), pages))
    return entries


def _matches(cite: Citation, entry: Entry) -> bool:
    if cite.year != entry.year or not entry.surnames or cite.surnames[0] != entry.surnames[0]:
        return False
    # a citation that names its co-authors needs an entry that names them too
    return cite.open_list or set(cite.surnames) <= set(entry.surnames)


def citation_problems(pages: dict[str, str], references: str) -> list[str]:
    """Citations without an entry that lists their page, and entries listing a page that does
    not cite them (``pages`` maps a page name without ``.md`` to its source)."""
    entries = reference_entries(references)
    problems = []
    for page, source in pages.items():
        for cite in citations(source, page):
            candidates = [e for e in entries if _matches(cite, e)]
            label = f"{', '.join(cite.surnames)}{' et al.' if cite.open_list else ''} {cite.year}"
            if not candidates:
                problems.append(f"{page}.md:{cite.line}: {label} is not in references.md")
            elif not any(page in e.cited_in for e in candidates):
                problems.append(
                    f"{page}.md:{cite.line}: {label}: its entry does not list "
                    f"{{doc}}`{page}` under 'Cited in'"
                )
    for entry in entries:
        if not entry.cited_in:
            problems.append(f"references.md: {entry.text[:60]!r} lists no citing page")
        for page in sorted(entry.cited_in):
            source = pages.get(page)
            if source is None:
                problems.append(
                    f"references.md: {entry.text[:60]!r} lists a page {page!r} that does not exist"
                )
            elif not re.search(rf"\b{re.escape(entry.surnames[0])}\b", source):
                problems.append(
                    f"references.md: {entry.text[:60]!r} lists {page!r}, which never "
                    f"names {entry.surnames[0]}"
                )
    return problems


def test_citation_parser():
    text = (
        "DINOv2 reaches it (Oquab et al. 2023, Table 4). Kornblith, Shlens and Le (2019)\n"
        "found more; so did the Study (Study 2026) and Facco, d'Errico, Rodriguez and Laio\n"
        "(2017). In 2019 the field moved, and {glue:text}`x` 2020 is not a citation."
    )
    got = [(c.surnames, c.year, c.open_list) for c in citations(text)]
    assert got == [
        (("Oquab",), "2023", True),
        (("Kornblith", "Shlens", "Le"), "2019", False),
        (("Study",), "2026", False),
        (("Facco", "d'Errico", "Rodriguez", "Laio"), "2017", False),
    ]


def test_citation_checker_finds_a_missing_work_and_a_missing_page():
    refs = (
        "# References\n\n"
        "* *Do Better ImageNet Models Transfer Better?* — Kornblith, Shlens and Le, 2019\n"
        "  (CVPR). Transfer. Cited in {doc}`lpft`.\n"
    )
    pages = {
        "lpft": "As Kornblith, Shlens and Le (2019) found.",
        "cka": "CKA as Kornblith et al. (2019) define it, and HSIC (Gretton et al. 2005).",
    }
    problems = citation_problems(pages, refs)
    assert len(problems) == 2
    assert "cka.md:1: Kornblith et al. 2019: its entry does not list {doc}`cka`" in problems[0]
    assert "Gretton et al. 2005 is not in references.md" in problems[1]


def test_citation_checker_finds_a_stale_entry():
    refs = (
        "* *Learning to Rank using Gradient Descent* — Burges and colleagues, 2005 (ICML).\n"
        "  RankNet. Cited in {doc}`retrieval` and {doc}`knn`.\n"
    )
    pages = {"retrieval": "Burges et al. (2005) use exponential gains.", "knn": "No citation."}
    assert citation_problems(pages, refs) == [
        "references.md: '* *Learning to Rank using Gradient Descent* — Burges and col' "
        "lists 'knn', which never names Burges"
    ]


def test_every_cited_work_is_in_the_references():
    pages = {p.stem: p.read_text() for p in CHAPTERS}
    problems = citation_problems(pages, REFERENCES.read_text())
    assert not problems, "\n".join(problems)


# --------------------------------------------------------------------------------------------
# the table of contents: one caption style
# --------------------------------------------------------------------------------------------


def test_part_captions_share_one_style():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    captions = [part["caption"] for part in toc["parts"]]
    odd = [c for c in captions if not re.fullmatch(r"[A-Z][a-z-]*(?: [a-z][a-z-]*)*", c)]
    assert not odd, f"captions not in the book's style (sentence case, no numbering): {odd}"


# --------------------------------------------------------------------------------------------
# (e) no set-up cell in view
# --------------------------------------------------------------------------------------------

HIDING_TAGS = {"remove-cell", "remove-input", "hide-input", "hide-cell"}

# Calls that only prepare the page: thread limits, seeds, warning filters, plot and table style,
# the glue that hands numbers to the prose, and a seeded generator.
_BOOKKEEPING_CALLS = {
    "threadpool_limits",
    "set_num_threads",
    "manual_seed",
    "seed",
    "default_rng",
    "filterwarnings",
    "simplefilter",
    "resetwarnings",
    "set_option",
    "set_printoptions",
    "use",
    "rc",
    "update",
    "set_style",
    "glue",
    "glue_all",
    "cycler",
}
# Names whose items may be set in a set-up cell: os.environ[...] = ..., plt.rcParams[...] = ...
_BOOKKEEPING_TARGETS = {"environ", "rcParams"}


def _call_name(node) -> str | None:
    if isinstance(node, ast.Call):
        f = node.func
        return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
    return None


def _target_name(node) -> str | None:
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        if isinstance(node, ast.Attribute) and node.attr in _BOOKKEEPING_TARGETS:
            return node.attr
        node = node.value
    return node.id if isinstance(node, ast.Name) and node.id in _BOOKKEEPING_TARGETS else None


def _bookkeeping(stmt) -> bool:
    if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Pass)):
        return True
    if isinstance(stmt, ast.Expr):
        return _call_name(stmt.value) in _BOOKKEEPING_CALLS or isinstance(stmt.value, ast.Constant)
    if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if all(_target_name(t) for t in targets):
            return True
        return _call_name(stmt.value) in _BOOKKEEPING_CALLS
    if isinstance(stmt, (ast.For, ast.With, ast.If)):
        return all(_bookkeeping(s) for s in stmt.body + getattr(stmt, "orelse", []))
    return False


def setup_only(source: str) -> bool:
    """True when a code cell does nothing but set the page up (see the module docstring)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:  # IPython magics and the like: not plain set-up
        return False
    return bool(tree.body) and all(_bookkeeping(s) for s in tree.body)


def shown_setup_cells(source: str, page: str = "page") -> list[str]:
    """The set-up cells of a MyST page that a reader would see, as ``page: cell n: first line``."""
    nb = jupytext.reads(source, fmt="myst")
    out = []
    for n, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        tags = set(cell.metadata.get("tags", []))
        if not tags & HIDING_TAGS and setup_only(cell.source):
            out.append(f"{page}: code cell {n + 1}: {cell.source.strip().splitlines()[0]}")
    return out


def test_setup_checker_on_planted_cells():
    assert setup_only("import numpy as np\nfrom scipy import stats\n")
    assert setup_only("import os\nfor v in ('OMP_NUM_THREADS',):\n    os.environ[v] = '1'\n")
    assert setup_only(
        "threadpool_limits(1)\nplt.rcParams['font.size'] = 9\n"
        "plt.rcParams.update({'figure.dpi': 100})\nwarnings.simplefilter('ignore')\n"
    )
    assert setup_only("rng = np.random.default_rng(0)\ntorch.manual_seed(0)\n")
    assert setup_only("glue_all({'a': a}, prefix='p_')\n")
    assert not setup_only("import numpy as np\nx = np.ones(3)\nprint(x.sum())\n")
    assert not setup_only("def f(x):\n    return x\n")
    assert not setup_only("")
    page = (
        "```{code-cell} ipython3\nimport numpy as np\n```\n\n"
        "```{code-cell} ipython3\n:tags: [remove-cell]\nthreadpool_limits(1)\n```\n\n"
        "```{code-cell} ipython3\nnp.ones(2).sum()\n```\n"
    )
    assert shown_setup_cells(page, "toy") == ["toy: code cell 1: import numpy as np"]


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_no_setup_cell_is_shown(path):
    shown = shown_setup_cells(path.read_text(), path.name)
    assert not shown, (
        "set-up cells in view (tag them remove-cell, or hide-input when the "
        "imports are worth showing on request):\n" + "\n".join(shown)
    )
