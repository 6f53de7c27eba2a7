"""Book plumbing: the interview questions of every chapter, gathered from one source.

Not part of the course's formulas. A chapter's interview questions are sphinx-design
dropdowns whose title starts with ``Interview:``, wherever they stand in the chapter (most
chapters close with a section "Interview questions"; the introduction's are under
"Questions to test yourself")::

    :::{dropdown} Interview: <question, MyST inline markup>
    <answer, MyST>
    :::

:func:`collect_questions` reads the chapters listed in ``_toc.yml`` with MyST's own
markdown parser (so code cells, nested fences and comments are handled as the book's
build handles them) and returns one :class:`Question` per such dropdown.
``book/interview.md`` renders them with :func:`interview_markdown`, and ``make deck``
writes the same questions as an Anki package (:mod:`repeval_book.interview_deck`), so a
question edited in its chapter changes in both places. An answer read on its own page
cannot point "above" or at "this chapter": :func:`standalone` turns such words into a
link to the chapter.

The section a question links to is the chapter section whose text is closest to the
question and its answer (TF-IDF cosine similarity, scikit-learn), unless the answer
names one explicitly with a MyST comment line ``% explains: <heading anchor>``.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from .interview_deck import DECK_NAME, deck_fields, write_deck

__all__ = [
    "SHEET",
    "Question",
    "toc_documents",
    "collect_questions",
    "interview_markdown",
    "deck_fields",
    "write_deck",
    "count_dropdowns_regex",
    "chapter_titles",
    "standalone",
    "local_references",
    "plain_title",
    "DECK_NAME",
]

#: Figures of the formula sheet that no module of the package holds, because no function
#: uses them: ImageNet-1k's sizes (1.28 million training photographs in 1,000 classes and
#: 50,000 validation images; Russakovsky et al., 2015), the low-shot label fractions of
#: Zhai et al. (2019) that SimCLR adopted (1 and 10 percent; Chen et al., 2020), the
#: typical top-1 accuracy at which the book quotes a standard error (as in
#: ``book/protocols.md`` and ``book/noise.md``), and the ranked list (gains in rank order)
#: on which the sheet works out nDCG and average precision. The k-NN and probe defaults
#: are read from the package itself (``repeval_ref.zoo.evaluate.PROTOCOL``, function
#: signatures).
SHEET = {
    "imagenet_train_images": 1_280_000,
    "imagenet_classes": 1000,
    "imagenet_val_images": 50_000,
    "low_shot_fractions": (0.01, 0.10),
    "typical_top1": 0.80,
    "ranked_gains": (2, 0, 1, 0, 2),
    "ndcg_cutoff": 3,
}

_NOT_EXPLAINING = re.compile(
    r"^(interview questions|what to remember|exercises?|further reading"
    r"|questions to test yourself)$",
    re.IGNORECASE,
)
_DROPDOWN = re.compile(r"^\{dropdown\}\s*(.*)$")
_PREFIX = re.compile(r"^interview:\s*", re.IGNORECASE)
_EXPLAINS = re.compile(r"^%\s*explains:\s*#?(\S+)\s*$", re.MULTILINE)
_GLUE = re.compile(r"\{(glue(?::[a-z]+)?)\}`([^`]+)`")
_ROLE = re.compile(r"\{([a-z:]+)\}`([^`]+)`")


@dataclasses.dataclass(frozen=True)
class Question:
    """One interview question of one chapter.

    Attributes
    ----------
    docname : str
        The chapter's document name as in ``_toc.yml`` (for example ``"book/knn"``).
    chapter : str
        The chapter's title (its first heading, as plain text).
    question : str
        The dropdown's title without its ``Interview:`` prefix (MyST inline markup).
    answer : str
        The dropdown's body (MyST).
    section : str
        Title of the chapter section the question links to.
    anchor : str
        That section's HTML anchor (MyST's heading slug).
    line : int
        1-based line of the dropdown in the chapter source.
    """

    docname: str
    chapter: str
    question: str
    answer: str
    section: str
    anchor: str
    line: int


def _parser():
    from markdown_it.renderer import RendererHTML
    from myst_parser.config.main import MdParserConfig
    from myst_parser.parsers.mdit import create_md_parser

    config = MdParserConfig(
        enable_extensions={"colon_fence", "dollarmath", "amsmath", "deflist", "substitution"}
    )
    return create_md_parser(config, RendererHTML)


def toc_documents(root):
    """Document names of every file in ``root/_toc.yml``, in book order.

    Parameters
    ----------
    root : str or path-like
        The book's root directory (the one holding ``_toc.yml``).

    Returns
    -------
    list of str
        Document names without suffix (``"book/intro"``, ``"book/protocols"``, ...).

    Raises
    ------
    ValueError
        If ``root`` has no ``_toc.yml``.
    """
    import yaml

    toc_path = Path(root) / "_toc.yml"
    if not toc_path.is_file():
        raise ValueError(f"root must contain _toc.yml, got {str(root)!r}")
    toc = yaml.safe_load(toc_path.read_text(encoding="utf-8"))
    names = [toc["root"]]

    def walk(entries):
        for entry in entries or ():
            if "file" in entry:
                names.append(entry["file"])
            walk(entry.get("sections"))
            walk(entry.get("chapters"))
            for part in entry.get("parts", ()):
                walk(part.get("chapters"))

    walk(toc.get("chapters"))
    for part in toc.get("parts", ()):
        walk(part.get("chapters"))
    return [str(Path(name).with_suffix("")) if name.endswith(".md") else name for name in names]


def _heading_text(tokens, i):
    """Text and slug text of the heading whose ``heading_open`` is ``tokens[i]``."""
    inline = tokens[i + 1]
    shown = "".join(
        c.content for c in inline.children or () if c.type in ("text", "code_inline", "math_inline")
    )
    slug_text = "".join(
        c.content for c in inline.children or () if c.type in ("text", "code_inline")
    )
    return inline.content, shown, slug_text


def _sections(tokens):
    """Headings up to level 3 as dicts: level, title, anchor, first and last line."""
    from myst_parser.mdit_to_docutils.base import default_slugify

    sections, seen = [], {}
    for i, tok in enumerate(tokens):
        if tok.type != "heading_open" or int(tok.tag[1]) > 3:
            continue
        source, _, slug_text = _heading_text(tokens, i)
        slug = default_slugify(slug_text)
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchor = slug if n == 0 else f"{slug}-{n}"
        sections.append(
            {"level": int(tok.tag[1]), "title": source, "anchor": anchor, "start": tok.map[0]}
        )
    for s, nxt in zip(sections, sections[1:] + [None]):
        s["stop"] = nxt["start"] if nxt else None
    return sections


def _best_sections(sections, lines, queries):
    """Index into ``sections`` of the best TF-IDF match for each query text."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    candidates = [
        j
        for j, s in enumerate(sections)
        if s["level"] > 1 and not _NOT_EXPLAINING.match(s["title"].strip())
    ]
    if not candidates:
        return [0] * len(queries)
    texts = ["\n".join(lines[sections[j]["start"] : sections[j]["stop"]]) for j in candidates]
    vec = TfidfVectorizer(stop_words="english", sublinear_tf=True).fit(texts + queries)
    sim = (vec.transform(queries) @ vec.transform(texts).T).toarray()
    return [candidates[int(row.argmax())] for row in sim]


def _chapter_questions(path, docname, md):
    text = Path(path).read_text(encoding="utf-8")
    lines = text.splitlines()
    tokens = md.parse(text)
    sections = _sections(tokens)
    chapter = next((s["title"] for s in sections if s["level"] == 1), docname)
    found = []
    for tok in tokens:
        if tok.type != "colon_fence":
            continue
        m = _DROPDOWN.match(tok.info.strip())
        if m and _PREFIX.match(m.group(1).strip()):
            body = "\n".join(
                ln for ln in tok.content.splitlines() if not re.match(r"^:[\w-]+:", ln)
            )
            found.append((_PREFIX.sub("", m.group(1).strip()), body.strip(), tok.map[0] + 1))
    if not found:
        return []
    guesses = _best_sections(sections, lines, [q + "\n" + a for q, a, _ in found])
    by_anchor = {s["anchor"]: s for s in sections}
    out = []
    for (q, a, line), j in zip(found, guesses):
        explicit = _EXPLAINS.search(a)
        section = sections[j]
        if explicit:
            if explicit.group(1) not in by_anchor:
                raise ValueError(
                    f"{docname}.md line {line}: explains: no heading anchor {explicit.group(1)!r}"
                )
            section = by_anchor[explicit.group(1)]
            a = _EXPLAINS.sub("", a).strip()
        out.append(Question(docname, chapter, q, a, section["title"], section["anchor"], line))
    return out


def collect_questions(root):
    """Every interview question of every chapter in ``_toc.yml``, in book order.

    Parameters
    ----------
    root : str or path-like
        The book's root directory.

    Returns
    -------
    list of Question
        One per top-level ``{dropdown}`` whose title starts with ``Interview:`` (in a
        chapter's text, not inside a code cell or another directive), in chapter order.

    Raises
    ------
    ValueError
        If ``root`` has no ``_toc.yml`` or a ``% explains:`` line names no heading.
    """
    md = _parser()
    out = []
    for docname in toc_documents(root):
        path = Path(root) / f"{docname}.md"
        if path.is_file():
            out.extend(_chapter_questions(path, docname, md))
    return out


def count_dropdowns_regex(text):
    """Interview dropdowns of a chapter, counted with plain regexes.

    An independent count for the tests: lines inside backtick fences are skipped, and
    each remaining line that opens a ``{dropdown}`` fence titled ``Interview: ...``
    counts once.

    Parameters
    ----------
    text : str
        A chapter's MyST source.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        If ``text`` is not a str.
    """
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    count, fence = 0, None
    for line in text.splitlines():
        f = re.match(r"^(`{3,})", line)
        if f:
            if fence is None:
                fence = f.group(1)
            elif line.strip() == fence:
                fence = None
            continue
        if fence is None and re.match(r"^:{3,}\{dropdown\}\s*interview:", line, re.IGNORECASE):
            count += 1
    return count


def chapter_titles(root):
    """The first heading of every document in ``_toc.yml``, as plain text.

    Parameters
    ----------
    root : str or path-like
        The book's root directory.

    Returns
    -------
    dict of str -> str
        Document name -> title (documents without a level-1 heading are left out).

    Raises
    ------
    ValueError
        If ``root`` has no ``_toc.yml``.
    """
    md = _parser()
    out = {}
    for docname in toc_documents(root):
        path = Path(root) / f"{docname}.md"
        if not path.is_file():
            continue
        tokens = md.parse(path.read_text(encoding="utf-8"))
        title = next((s["title"] for s in _sections(tokens) if s["level"] == 1), None)
        if title is not None:
            out[docname] = plain_title(title)
    return out


#: Words that point at a place on the chapter's own page: "above"/"below" after a noun or
#: before punctuation, "as/see/shown above", a sentence that opens with "Above,", and
#: "this chapter" or "this page". Comparisons ("far below its fine-tuning", "well above
#: zero") and a network's layers ("the layer below") are not matched.
_PLACE_NOUNS = (
    r"example|examples|figure|figures|table|tables|grid|zoo|data|readings?|plots?|panels?|run|"
    r"runs|experiment|cell|code|case|numbers|curves?|results?|values|ring|encoders?|draws|"
    r"images|CNN|section|sections|one|ones|output|setting"
)
_LOCAL = re.compile(
    r"(?P<verb>\b(?:as|see|shown|listed|given|computed|plotted|measured|defined)\s+)"
    r"(?P<w1>above|below)\b"
    r"|(?P<noun>\b(?:" + _PLACE_NOUNS + r")\)?\s+)(?P<w2>above|below)\b"
    r"|(?P<punct>\b(?!(?:layers?|blocks?|heads?|levels?|far|well|just|much|slightly)\b)"
    r"[\w'),]+\s+)(?P<w3>above|below)(?=\s*[,.;:)?!]|\s*$)"
    r"|(?P<start>(?:^|(?<=[.!?]\s)|(?<=\())(?P<w4>Above|Below),)"
    r"|(?P<this>\b[Tt]his (?:chapter|page)\b)",
    re.MULTILINE,
)
_MD_LINK = re.compile(r"\[[^\]]*\]\([^)]*\)|\{[a-z:]+\}`[^`]*`|\$[^$]*\$")


def local_references(markup):
    """The places where ``markup`` points at its chapter's page ("above", "this chapter").

    Links, roles and maths are skipped, so a reference that is already a link is not one.

    Parameters
    ----------
    markup : str
        MyST text.

    Returns
    -------
    list of str
        The matched words, in order.

    Raises
    ------
    ValueError
        If ``markup`` is not a str.
    """
    if not isinstance(markup, str):
        raise ValueError(f"markup must be a str, got {type(markup).__name__}")
    bare = _MD_LINK.sub(lambda m: " " * len(m.group(0)), markup)
    return [m.group(0).strip() for m in _LOCAL.finditer(bare)]


def standalone(markup, chapter):
    """Rewrite an answer so that it reads on a page of its own.

    Each reference :func:`local_references` finds becomes one to ``chapter``: "the
    example above" reads "the example in the chapter <chapter>", "Above," reads "In the
    chapter <chapter>,", "this chapter" reads "the chapter <chapter>".

    Parameters
    ----------
    markup : str
        The answer (MyST).
    chapter : str
        MyST inline markup that names the chapter (a link, or an emphasised title).

    Returns
    -------
    str

    Raises
    ------
    ValueError
        If ``markup`` or ``chapter`` is not a str.
    """
    if not isinstance(markup, str) or not isinstance(chapter, str):
        raise ValueError("markup and chapter must be str")
    skip = [m.span() for m in _MD_LINK.finditer(markup)]

    def fix(m):
        if any(a <= m.start() < b for a, b in skip):
            return m.group(0)
        if m.group("verb"):
            verb = m.group("verb")
            return (
                f"{verb}the chapter {chapter}"
                if verb.strip().lower() == "see"
                else f"{verb}in the chapter {chapter}"
            )
        if m.group("noun") or m.group("punct"):
            return f"{m.group('noun') or m.group('punct')}in the chapter {chapter}"
        if m.group("start"):
            return f"In the chapter {chapter},"
        return f"the chapter {chapter}"

    return _LOCAL.sub(fix, markup)


# ---------------------------------------------------------------- the book's page


def _cross_doc(markup, docname, here):
    """Make the chapter's own glue keys point at the chapter from page ``here``."""
    rel = (
        Path(docname).relative_to(Path(here).parent)
        if docname.startswith(str(Path(here).parent) + "/")
        else Path("/" + docname)
    )
    rel = f"{rel}.md"

    def fix(m):
        role, arg = m.groups()
        if "::" in arg:
            return m.group(0)
        if role == "glue:text" and ":" not in arg:
            arg += ":s"  # the role splits a format off at the last colon, so give it one
        return f"{{{role}}}`{rel}::{arg}`"

    return _GLUE.sub(fix, markup)


def _link(q, here):
    parent = str(Path(here).parent)
    target = (
        str(Path(q.docname).relative_to(parent))
        if q.docname.startswith(parent + "/")
        else "/" + q.docname
    )
    return f"{target}.md#{q.anchor}"


def interview_markdown(questions, here="book/interview"):
    """MyST source of the interview page's questions, grouped by chapter.

    Parameters
    ----------
    questions : sequence of Question
        As returned by :func:`collect_questions`.
    here : str, default "book/interview"
        Document name of the page the markup is rendered in (links and glue keys are
        made relative to it).

    Returns
    -------
    str
        For each chapter, a level-2 heading (its title), then one dropdown per question
        whose body is the answer (made to stand alone by :func:`standalone`, with links
        to the chapter) followed by a link to the section that explains it. Glue roles
        point at the chapter that glued them.
    """
    if isinstance(questions, (str, bytes)):
        raise ValueError("questions must be a sequence of Question")
    parts, current = [], None
    for q in questions:
        if not isinstance(q, Question):
            raise ValueError(f"questions must hold Question objects, got {type(q).__name__}")
        if q.docname != current:
            current = q.docname
            parts.append(f"## {q.chapter}\n")
        chapter_link = _link(dataclasses.replace(q, anchor=""), here).rstrip("#")
        question = _cross_doc(q.question, q.docname, here)
        answer = standalone(
            _cross_doc(q.answer, q.docname, here), f"[{plain_title(q.chapter)}]({chapter_link})"
        )
        # the wrapping fence is longer than any colon fence inside the answer
        fence = ":" * max([3] + [len(m) + 1 for m in re.findall(r"^:{3,}", answer, re.M)])
        parts.append(
            f"{fence}{{dropdown}} {question}\n{answer}\n\n"
            f"Explained in [{plain_title(q.section)}]({_link(q, here)}).\n{fence}\n"
        )
    return "\n".join(parts)


def plain_title(title):
    """A heading's MyST markup as plain text (roles by their argument, no brackets).

    Parameters
    ----------
    title : str

    Returns
    -------
    str

    Raises
    ------
    ValueError
        If ``title`` is not a str.
    """
    if not isinstance(title, str):
        raise ValueError(f"title must be a str, got {type(title).__name__}")
    return _ROLE.sub(lambda m: m.group(2), title).replace("[", "").replace("]", "")


# ---------------------------------------------------------------- the deck


def main(argv=None):
    """``python -m repeval_book.interview OUT.apkg [--root .] [--values FILE]``.

    Writes the Anki deck from the chapters' questions and the committed glued values
    (``book/_data/interview_glue.json``); no chapter is executed.
    """
    import argparse

    from .glued_values import VALUES_PATH, read_values
    from .interview import collect_questions  # not __main__'s copy of the classes

    parser = argparse.ArgumentParser(
        description="Write the book's interview questions as an Anki deck."
    )
    parser.add_argument("out")
    parser.add_argument("--root", default=".")
    parser.add_argument("--values", default=None, help=f"default: ROOT/{VALUES_PATH}")
    args = parser.parse_args(argv)
    values = read_values(args.values or Path(args.root) / VALUES_PATH)
    n = write_deck(collect_questions(args.root), args.out, values)
    print(f"{args.out}: {n} notes")


if __name__ == "__main__":
    main()
