"""The interview page's generator, the Anki deck and the exercise index.

The question count is checked three ways: the generator (MyST's parser), an independent
regex count over the chapter sources, and the notes in the SQLite collection inside the
written ``.apkg``.
"""

from __future__ import annotations

import json
import re
import sqlite3
import zipfile
from pathlib import Path

import pytest

from repeval_book.exercise_index import exercise_index
from repeval_book.interview import (
    Question,
    collect_questions,
    count_dropdowns_regex,
    deck_fields,
    interview_markdown,
    toc_documents,
    write_deck,
)

ROOT = Path(__file__).resolve().parents[1]
pytest.importorskip("myst_parser")


@pytest.fixture(scope="module")
def questions():
    return collect_questions(ROOT)


def _book_sources():
    return {
        d: (ROOT / f"{d}.md").read_text(encoding="utf-8")
        for d in toc_documents(ROOT)
        if (ROOT / f"{d}.md").is_file()
    }


def test_generator_count_matches_an_independent_regex_count(questions):
    by_regex = {d: count_dropdowns_regex(t) for d, t in _book_sources().items()}
    assert sum(by_regex.values()) > 0
    assert len(questions) == sum(by_regex.values())
    for d, n in by_regex.items():
        assert sum(q.docname == d for q in questions) == n, d


def test_questions_are_the_dropdown_titles_of_their_chapters(questions):
    sources = _book_sources()
    for q in questions:
        line = sources[q.docname].splitlines()[q.line - 1]
        assert re.match(r"^:{3,}\{dropdown\}", line)
        assert line.endswith(q.question)
        assert q.answer and not q.answer.startswith(":")
        # the linked section is a real heading of that chapter, never the questions' own
        assert q.section.lower() != "interview questions"
        assert any(
            h.strip() == "#" * h.count("#", 0, 6) + " " + q.section
            for h in sources[q.docname].splitlines()
            if h.startswith("#")
        )


def _chapter(tmp_path, body, name="ch"):
    (tmp_path / "book").mkdir(exist_ok=True)
    (tmp_path / "_toc.yml").write_text(f"format: jb-book\nroot: book/{name}\n")
    (tmp_path / "book" / f"{name}.md").write_text(body)
    return collect_questions(tmp_path)


SMALL = """# Title

## The temperature $\\tau$ sharpens votes

Temperature softmax votes neighbours sharpen.

## Memory of the bank

Bank memory blocks half precision.

```{code-cell} ipython3
# :::{dropdown} Interview: not a question, inside code
```

## Interview questions

:::{dropdown} Interview: Why does a small temperature sharpen the votes?
Because the softmax of the votes with temperature $\\tau$ favours the nearest neighbours.
:::

::::{dropdown} Interview: How much memory does the bank take?
:open:
Half precision halves the bank memory: {glue:text}`bank_gb:.1f` GB.
% explains: #memory-of-the-bank
::::

## What to remember

:::{dropdown} Interview: after the section, not counted
x
:::
"""


def test_sections_code_cells_and_explicit_anchor(tmp_path):
    qs = _chapter(tmp_path, SMALL)
    assert [q.question for q in qs] == [
        "Why does a small temperature sharpen the votes?",
        "How much memory does the bank take?",
    ]
    assert count_dropdowns_regex(SMALL) == 2
    assert qs[0].anchor == "the-temperature--sharpens-votes"  # MyST drops maths from slugs
    assert qs[1].anchor == "memory-of-the-bank"
    assert "explains" not in qs[1].answer and ":open:" not in qs[1].answer
    page = interview_markdown(qs, here="book/interview")
    assert "{glue:text}`ch.md::bank_gb:.1f`" in page
    assert "(ch.md#memory-of-the-bank)" in page
    nested = Question("book/ch", "T", "Q?", "A.\n\n::::{note}\nx\n::::", "S", "s", 1)
    assert ":::::{dropdown} Q?" in interview_markdown([nested])
    with pytest.raises(ValueError, match="explains"):
        _chapter(tmp_path, SMALL.replace("#memory-of-the-bank", "#nowhere"))


def test_deck_text_maths_and_glue(tmp_path):
    qs = _chapter(tmp_path, SMALL)
    glue_dir = tmp_path / "_build" / "jupyter_execute" / "book"
    glue_dir.mkdir(parents=True)
    (glue_dir / "ch.glue.json").write_text(
        json.dumps({"bank_gb": {"data": {"text/plain": "2.4576"}}})
    )
    (front0, back0, tag), (front1, back1, _) = deck_fields(qs, tmp_path / "_build")
    assert tag == "ch"
    assert r"\(\tau\)" in back0 and "$" not in back0
    assert "2.5 GB" in back1
    with pytest.raises(ValueError, match="glued value"):
        deck_fields(qs, tmp_path / "nowhere")
    assert "[value in the chapter]" in deck_fields(qs, tmp_path / "nowhere", "placeholder")[1][1]


def test_deck_notes_equal_the_books_questions(tmp_path, questions):
    out = tmp_path / "deck.apkg"
    n = write_deck(questions, out, ROOT / "_build", missing="placeholder")
    assert n == len(questions)
    with zipfile.ZipFile(out) as z:
        z.extract("collection.anki2", tmp_path)
    con = sqlite3.connect(tmp_path / "collection.anki2")
    try:
        rows = con.execute("select guid, flds, tags from notes").fetchall()
        n_cards = con.execute("select count(*) from cards").fetchone()[0]
    finally:
        con.close()
    assert (
        len(rows)
        == n_cards
        == len(questions)
        == sum(count_dropdowns_regex(t) for t in _book_sources().values())
    )
    fronts = [flds.split("\x1f")[0] for _, flds, _ in rows]
    assert len(set(fronts)) == len(fronts)
    assert any(r"\(" in f for f in fronts) and not any("$" in f for f in fronts)
    # deterministic ids: a second build gives the same note GUIDs
    out2 = tmp_path / "again.apkg"
    write_deck(questions, out2, ROOT / "_build", missing="placeholder")
    with zipfile.ZipFile(out2) as z:
        z.extract("collection.anki2", tmp_path / "again")
    con = sqlite3.connect(tmp_path / "again" / "collection.anki2")
    try:
        assert sorted(g for g, _, _ in rows) == sorted(
            g for (g,) in con.execute("select guid from notes")
        )
    finally:
        con.close()


def test_exercise_index_reads_points_from_nbgrader_metadata():
    rows = exercise_index(ROOT)
    paths = sorted(
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "exercises").rglob("*.ipynb")
        if ".ipynb_checkpoints" not in p.parts
    )
    assert [r["path"] for r in rows] == paths
    for r in rows:
        nb = json.loads((ROOT / r["path"]).read_text())
        total = sum(
            float(c["metadata"]["nbgrader"].get("points", 0))
            for c in nb["cells"]
            if c.get("metadata", {}).get("nbgrader", {}).get("grade")
        )
        assert r["points"] == total == r["visible_points"] + r["hidden_points"]
        statement = "".join(nb["cells"][0]["source"])
        stated = re.search(r"\*\*Points:\*\*\s*(\d+)", statement)
        if stated:  # the statement's own figure agrees with the metadata
            assert float(stated.group(1)) == r["points"], r["path"]
        assert r["command"] == f"make check NB={r['path']}"
        assert (ROOT / f"{r['chapter_doc']}.md").is_file() or r["chapter_doc"] not in toc_documents(
            ROOT
        )


def test_bad_input(tmp_path):
    with pytest.raises(ValueError, match="root"):
        collect_questions(tmp_path)
    with pytest.raises(ValueError, match="root"):
        exercise_index(tmp_path)
    with pytest.raises(ValueError, match="text"):
        count_dropdowns_regex(None)
    with pytest.raises(ValueError, match="questions"):
        interview_markdown("abc")
    with pytest.raises(ValueError, match="missing"):
        deck_fields([], missing="ignore")
    with pytest.raises(ValueError, match="apkg"):
        write_deck([], tmp_path / "deck.zip")
    assert isinstance(Question("a", "b", "c", "d", "e", "f", 1), Question)


def test_built_interview_page_links_resolve_and_holds_every_question(questions):
    """On a built book (skipped without one): every section link lands on an existing id."""
    import os

    html_dir = Path(os.environ.get("REPEVAL_BOOK_HTML", ROOT / "_build" / "html")) / "book"
    page = html_dir / "interview.html"
    if not page.is_file():
        pytest.skip("the book is not built (make book)")
    text = page.read_text(encoding="utf-8")
    assert text.count("<details") == len(questions)
    links = re.findall(r'href="([\w-]+\.html)#([^"]+)"', text)
    assert len(links) >= len(questions)
    for target, anchor in links:
        assert f'id="{anchor}"' in (html_dir / target).read_text(encoding="utf-8"), (target, anchor)
