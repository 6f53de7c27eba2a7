"""The interview questions as an Anki deck, written from the committed glued values.

Book plumbing, not course material. :func:`deck_fields` turns each question of
:func:`repeval_book.interview.collect_questions` into the front and back of a card (HTML,
maths between MathJax's ``\\(`` ``\\)`` and ``\\[`` ``\\]``, which Anki typesets), with
the numbers the answers glue taken from ``book/_data/interview_glue.json``
(:mod:`repeval_book.glued_values`); :func:`write_deck` writes the ``.apkg`` with genanki.
No chapter is executed, so ``python -m repeval_book.interview OUT.apkg`` (``make deck``)
needs only the package and the book extra.

The markup is read with the same markdown-it plugins MyST uses for dollar maths, AMS
environments, colon fences and roles, so a formula that spans a line break stays one
formula.
"""

from __future__ import annotations

import hashlib
import html
import re
from pathlib import Path

from .glued_values import VALUES_PATH, glue_key, read_values

__all__ = ["DECK_NAME", "deck_fields", "write_deck", "deck_values"]

DECK_NAME = "repeval: evaluating learned representations"

_REF_NAMES = {"thm": "theorem", "prop": "proposition", "lem": "lemma", "def": "definition"}


def _math(tex, display):
    return html.escape((r"\[" + tex.strip() + r"\]") if display else (r"\(" + tex + r"\)"))


def _renderer():
    from markdown_it import MarkdownIt
    from mdit_py_plugins.amsmath import amsmath_plugin
    from mdit_py_plugins.colon_fence import colon_fence_plugin
    from mdit_py_plugins.dollarmath import dollarmath_plugin
    from mdit_py_plugins.myst_role import myst_role_plugin

    md = (
        MarkdownIt("commonmark")
        .use(dollarmath_plugin, double_inline=True)
        .use(amsmath_plugin)
        .use(colon_fence_plugin)
        .use(myst_role_plugin)
    )

    def inline_math(self, tokens, idx, options, env):
        return _math(tokens[idx].content, False)

    def display_math(self, tokens, idx, options, env):
        return f"<p>{_math(tokens[idx].content, True)}</p>\n"

    def amsmath(self, tokens, idx, options, env):
        return f"<p>{_math(tokens[idx].content, True)}</p>\n"

    def role(self, tokens, idx, options, env):
        tok = tokens[idx]
        name, arg = tok.meta.get("name", ""), tok.content
        if name.startswith("glue"):
            return html.escape(env["glue"](name, arg))
        if name == "math":
            return _math(arg, False)
        shown = re.match(r"^(.*?)\s*<([^>]+)>$", arg, re.DOTALL)
        if shown:
            return html.escape(shown.group(1))
        if name == "prf:ref":
            return "the chapter's " + _REF_NAMES.get(arg.split("-")[0], "statement")
        return f"<code>{html.escape(arg)}</code>" if name in ("code", "file") else html.escape(arg)

    def fence(self, tokens, idx, options, env):
        tok = tokens[idx]
        body = "\n".join(ln for ln in tok.content.splitlines() if not re.match(r"^:[\w-]+:", ln))
        kind = re.sub(r"^\{([\w:-]+)\}.*$", r"\1", tok.info.strip())
        title = tok.info.strip().partition("}")[2].strip() or kind.rpartition(":")[2].capitalize()
        inner = md.render(body, env)
        return f"<div><b>{html.escape(title)}</b>\n{inner}</div>\n"

    md.add_render_rule("math_inline", inline_math)
    md.add_render_rule("math_inline_double", display_math)
    md.add_render_rule("math_block", display_math)
    md.add_render_rule("math_block_label", display_math)
    md.add_render_rule("amsmath", amsmath)
    md.add_render_rule("myst_role", role)
    md.add_render_rule("colon_fence", fence)
    return md


def deck_values(root):
    """The committed glued values of the book at ``root`` (``book/_data/interview_glue.json``).

    Parameters
    ----------
    root : str or path-like

    Returns
    -------
    dict of str -> dict of str -> str

    Raises
    ------
    ValueError
        If the file is missing or malformed.
    """
    return read_values(Path(root) / VALUES_PATH)


def deck_fields(questions, values, missing="raise"):
    """Front and back of each card, as HTML with Anki's MathJax delimiters.

    Parameters
    ----------
    questions : sequence of repeval_book.interview.Question
    values : dict of str -> dict of str -> str
        Document name -> glued key -> ``text/plain`` value, as
        :func:`repeval_book.glued_values.read_values` returns it.
    missing : {"raise", "placeholder"}
        What to do when a quoted value is not in ``values``: raise ValueError, or put the
        words "[value in the chapter]" in its place.

    Returns
    -------
    list of (str, str, str)
        ``(front, back, tag)`` per question; the back ends with the chapter's title and
        the section that explains the answer; the tag is the chapter's file stem.

    Raises
    ------
    ValueError
        For a bad ``missing`` or ``values``, or (with ``missing="raise"``) a quoted value
        that ``values`` lacks.
    """
    from myst_nb.core.variables import format_plain_text

    from .interview import Question, plain_title, standalone

    if missing not in ("raise", "placeholder"):
        raise ValueError(f"missing must be 'raise' or 'placeholder', got {missing!r}")
    if not isinstance(values, dict):
        raise ValueError(f"values must be a dict, got {type(values).__name__}")
    md = _renderer()
    out = []
    for q in questions:
        if not isinstance(q, Question):
            raise ValueError(f"questions must hold Question objects, got {type(q).__name__}")
        glued = values.get(q.docname, {})

        def glue(role, arg, doc=q.docname, glued=glued):
            key = glue_key(role, arg)
            fmt = arg.split("::")[-1].partition(":")[2] if role == "glue:text" else ""
            if key not in glued:
                if missing == "raise":
                    raise ValueError(
                        f"{doc}: no glued value {key!r} in {VALUES_PATH}; refresh it from a "
                        "built book (make book, or python -m repeval_book.glued_values)"
                    )
                return "[value in the chapter]"
            return format_plain_text(glued[key], fmt or "s")

        env = {"glue": glue}
        front = md.render(q.question, env).strip()
        back = md.render(standalone(q.answer, f"*{q.chapter}*"), env).strip()
        where = md.renderInline(f"{q.chapter}: {plain_title(q.section)}", env)
        out.append((front, f"{back}\n<p><i>{where}</i></p>", Path(q.docname).name))
    return out


def _stable_id(text):
    """A 31-bit-range positive integer from ``text`` (genanki's model and deck ids)."""
    return (1 << 30) + int(hashlib.sha256(text.encode()).hexdigest(), 16) % (1 << 30)


def write_deck(questions, path, values, missing="raise"):
    """Write the questions as an Anki package (``.apkg``) with genanki.

    Parameters
    ----------
    questions : sequence of repeval_book.interview.Question
    path : str or path-like
        The ``.apkg`` file to write.
    values, missing :
        As in :func:`deck_fields`.

    Returns
    -------
    int
        Number of notes written (one per question).

    Raises
    ------
    ValueError
        If ``path`` does not end in ``.apkg``, or as :func:`deck_fields`.

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
    fields = deck_fields(questions, values, missing)
    for q, (front, back, tag) in zip(questions, fields):
        deck.add_note(
            genanki.Note(
                model=model,
                fields=[front, back],
                tags=[tag],
                guid=genanki.guid_for(q.docname, q.question),
            )
        )
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    genanki.Package(deck).write_to_file(str(path))
    return len(fields)
