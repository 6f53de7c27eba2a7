"""Book plumbing: the interview questions of every chapter, gathered from one source.

Not part of the course's formulas. Each chapter of the book ends with a section headed
"Interview questions" whose questions are sphinx-design dropdowns::

    :::{dropdown} Interview: <question, MyST inline markup>
    <answer, MyST>
    :::

:func:`collect_questions` reads the chapters listed in ``_toc.yml`` with MyST's own
markdown parser (so code cells, nested fences and comments are handled as the book's
build handles them) and returns one :class:`Question` per dropdown under such a
heading. ``book/interview.md`` renders them with :func:`interview_markdown`, and
``make deck`` writes the same questions as an Anki package with :func:`write_deck`, so
a question edited in its chapter changes in both places.

The section a question links to is the chapter section whose text is closest to the
question and its answer (TF-IDF cosine similarity, scikit-learn), unless the answer
names one explicitly with a MyST comment line ``% explains: <heading anchor>``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import html
import json
import re
from pathlib import Path

__all__ = [
    "SHEET",
    "Question",
    "toc_documents",
    "collect_questions",
    "interview_markdown",
    "deck_fields",
    "write_deck",
    "count_dropdowns_regex",
    "DECK_NAME",
]

DECK_NAME = "repeval: evaluating learned representations"

#: Figures of the formula sheet that no module of the package holds, because no function
#: uses them: ImageNet-1k's sizes as seed 000 gives them ("1.28 million training
#: photographs in 1,000 classes", "its 50,000 validation images"), the low-shot label
#: fractions of Zhai et al. (2019) that SimCLR adopted (seed 000, "1 or 10 percent"), and
#: the typical top-1 accuracy at which the book quotes a standard error (as in
#: ``book/protocols.md`` and ``book/noise.md``). The k-NN and probe defaults are read from
#: the package itself (``repeval_ref.zoo.evaluate.PROTOCOL``, function signatures).
SHEET = {
    "imagenet_train_images": 1_280_000,
    "imagenet_classes": 1000,
    "imagenet_val_images": 50_000,
    "low_shot_fractions": (0.01, 0.10),
    "typical_top1": 0.80,
}

_INTERVIEW = re.compile(r"^\s*interview questions\s*$", re.IGNORECASE)
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
    found, level, in_interview = [], None, False
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open":
            lev = int(tok.tag[1])
            if in_interview and lev <= level:
                in_interview = False
            if _INTERVIEW.match(tokens[i + 1].content):
                in_interview, level = True, lev
            continue
        if in_interview and tok.type == "colon_fence":
            m = _DROPDOWN.match(tok.info.strip())
            if m:
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
        One per ``{dropdown}`` under a heading "Interview questions" (any level; the
        section ends at the next heading of the same or a higher level).

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
    """Dropdowns under "Interview questions" headings, counted with plain regexes.

    An independent count for the tests: lines inside backtick fences are skipped, a
    heading ``#``-line that reads "Interview questions" opens a section that the next
    heading of the same or a higher level closes, and each ``:::{dropdown}`` line in it
    counts once.

    Parameters
    ----------
    text : str
        A chapter's MyST source.

    Returns
    -------
    int
    """
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    count, fence, level = 0, None, None
    for line in text.splitlines():
        f = re.match(r"^(`{3,})", line)
        if f:
            if fence is None:
                fence = f.group(1)
            elif line.strip() == fence:
                fence = None
            continue
        if fence:
            continue
        h = re.match(r"^(#{1,6})\s+(.*?)\s*$", line)
        if h:
            if level is not None and len(h.group(1)) <= level:
                level = None
            if h.group(2).lower() == "interview questions":
                level = len(h.group(1))
            continue
        if level is not None and re.match(r"^:{3,}\{dropdown\}", line):
            count += 1
    return count


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
        For each chapter, a level-2 heading with a link to the chapter, then one
        dropdown per question whose body is the answer followed by a link to the
        section that explains it. Glue roles point at the chapter that glued them.
    """
    if isinstance(questions, (str, bytes)):
        raise ValueError("questions must be a sequence of Question")
    parts, current = [], None
    for q in questions:
        if not isinstance(q, Question):
            raise ValueError(f"questions must hold Question objects, got {type(q).__name__}")
        if q.docname != current:
            current = q.docname
            chapter_link = _link(dataclasses.replace(q, anchor=""), here).rstrip("#")
            parts.append(f"## {q.chapter}\n\nFrom [the chapter]({chapter_link}).\n")
        question = _cross_doc(q.question, q.docname, here)
        answer = _cross_doc(q.answer, q.docname, here)
        # the wrapping fence is longer than any colon fence inside the answer
        fence = ":" * max([3] + [len(m) + 1 for m in re.findall(r"^:{3,}", answer, re.M)])
        parts.append(
            f"{fence}{{dropdown}} {question}\n{answer}\n\n"
            f"Explained in [{_plain_title(q.section)}]({_link(q, here)}).\n{fence}\n"
        )
    return "\n".join(parts)


def _plain_title(title):
    return _ROLE.sub(lambda m: m.group(2), title).replace("[", "").replace("]", "")


# ---------------------------------------------------------------- the deck


def _glue_values(build_dir, docname):
    path = Path(build_dir) / "jupyter_execute" / f"{docname}.glue.json"
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def _deck_text(markup, glued, docname, missing):
    """MyST inline/block markup -> HTML for Anki, maths as MathJax delimiters."""
    from markdown_it import MarkdownIt
    from myst_nb.core.variables import format_plain_text

    maths = []

    def keep(tex, display):
        maths.append((r"\[" + tex + r"\]") if display else (r"\(" + tex + r"\)"))
        return f"REPEVALMATH{len(maths) - 1}X"  # letters only: markdown leaves it alone

    def glue(m):
        role, arg = m.groups()
        key, _, fmt = arg.partition(":") if role == "glue:text" else (arg, "", "")
        key = key.split("::")[-1]
        if glued is None or key not in glued:
            if missing == "raise":
                raise ValueError(
                    f"{docname}: no glued value {key!r}; build the book first "
                    f"(make book) so that _build/jupyter_execute has it"
                )
            return "[value in the chapter]"
        return format_plain_text(glued[key]["data"]["text/plain"], fmt or "s")

    text = _GLUE.sub(glue, markup)
    text = re.sub(r"\$\$(.+?)\$\$", lambda m: keep(m.group(1), True), text, flags=re.DOTALL)
    text = re.sub(r"(?<![\\$])\$(?!\s)(.+?)(?<![\s\\])\$", lambda m: keep(m.group(1), False), text)
    text = re.sub(r"\{math\}`([^`]+)`", lambda m: keep(m.group(1), False), text)

    def role(m):
        name, arg = m.groups()
        shown = re.match(r"^(.*?)\s*<([^>]+)>$", arg, re.DOTALL)
        if shown:
            return shown.group(1)
        if name == "prf:ref":
            return "the chapter's " + arg.split("-")[0].replace("thm", "theorem").replace(
                "prop", "proposition"
            ).replace("lem", "lemma").replace("def", "definition")
        return arg

    text = _ROLE.sub(role, text)
    rendered = MarkdownIt("commonmark").render(text).strip()
    return re.sub(
        r"REPEVALMATH(\d+)X", lambda m: html.escape(maths[int(m.group(1))], quote=False), rendered
    )


def deck_fields(questions, build_dir="_build", missing="raise"):
    """Front and back of each card, as HTML with Anki's MathJax delimiters.

    Parameters
    ----------
    questions : sequence of Question
    build_dir : str or path-like, default "_build"
        The book's build directory; glued numbers are read from
        ``<build_dir>/jupyter_execute/<docname>.glue.json``.
    missing : {"raise", "placeholder"}
        What to do when a glued value is not there: raise ValueError, or put a
        placeholder sentence in its place.

    Returns
    -------
    list of (str, str, str)
        ``(front, back, tag)`` per question; the tag is the chapter's file stem.
    """
    if missing not in ("raise", "placeholder"):
        raise ValueError(f"missing must be 'raise' or 'placeholder', got {missing!r}")
    out, cache = [], {}
    for q in questions:
        if q.docname not in cache:
            cache[q.docname] = _glue_values(build_dir, q.docname)
        glued = cache[q.docname]
        front = _deck_text(q.question, glued, q.docname, missing)
        back = _deck_text(q.answer, glued, q.docname, missing)
        where = _deck_text(f"{q.chapter}: {_plain_title(q.section)}", glued, q.docname, missing)
        back += f"<p><i>{where.removeprefix('<p>').removesuffix('</p>')}</i></p>"
        out.append((front, back, Path(q.docname).name))
    return out


def _stable_id(text):
    """A 31-bit-range positive integer from ``text`` (genanki's model and deck ids)."""
    return (1 << 30) + int(hashlib.sha256(text.encode()).hexdigest(), 16) % (1 << 30)


def write_deck(questions, path, build_dir="_build", missing="raise"):
    """Write the questions as an Anki package (``.apkg``) with genanki.

    Parameters
    ----------
    questions : sequence of Question
    path : str or path-like
        The ``.apkg`` file to write.
    build_dir, missing :
        As in :func:`deck_fields`.

    Returns
    -------
    int
        Number of notes written (one per question).

    Notes
    -----
    Deck and model ids are hashes of fixed names and each note's GUID a hash of its
    chapter and question, so rebuilding gives the same ids and Anki updates the notes
    a student already has instead of duplicating them.
    """
    import genanki

    if not str(path).endswith(".apkg"):
        raise ValueError(f"path must end in .apkg, got {str(path)!r}")
    model = genanki.Model(
        _stable_id("repeval interview model"),
        "repeval interview question",
        fields=[{"name": "Question"}, {"name": "Answer"}],
        templates=[
            {
                "name": "Card 1",
                "qfmt": "{{Question}}",
                "afmt": "{{FrontSide}}<hr id=answer>{{Answer}}",
            }
        ],
    )
    deck = genanki.Deck(_stable_id(DECK_NAME), DECK_NAME)
    fields = deck_fields(questions, build_dir, missing)
    for q, (front, back, tag) in zip(questions, fields):
        deck.add_note(
            genanki.Note(
                model=model,
                fields=[front, back],
                tags=[tag],
                guid=genanki.guid_for(q.docname, q.question),
            )
        )
    genanki.Package(deck).write_to_file(str(path))
    return len(fields)


def main(argv=None):
    """``python -m repeval_book.interview OUT.apkg [--root .] [--build _build]``."""
    import argparse

    parser = argparse.ArgumentParser(
        description="Write the book's interview questions as an Anki deck."
    )
    parser.add_argument("out")
    parser.add_argument("--root", default=".")
    parser.add_argument("--build", default="_build")
    args = parser.parse_args(argv)
    n = write_deck(collect_questions(args.root), args.out, args.build)
    print(f"{args.out}: {n} notes")


if __name__ == "__main__":
    main()
