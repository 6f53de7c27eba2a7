"""The interview page's generator and the exercise index.

The question count is checked two ways here, the generator (MyST's parser) against an
independent regex count over the chapter sources; ``tests/test_book_deck.py`` checks the
Anki deck. The page must stand alone: no answer may point "above" or at "this chapter"
without a link, and its formula sheet's retrieval formulas are recomputed from their text.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from test_book_browser import browser, site  # noqa: F401 (fixtures: Chromium, the built book)

from repeval_book.exercise_index import exercise_index
from repeval_book.interview import (
    SHEET,
    Question,
    chapter_titles,
    collect_questions,
    count_dropdowns_regex,
    interview_markdown,
    local_references,
    plain_title,
    standalone,
    toc_documents,
)
from repeval_ref.retrieval import ranking_metrics

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

:::{dropdown} A dropdown without the prefix is not a question
x
:::

## Questions to test yourself

:::{dropdown} Interview: Why does a small temperature sharpen the votes?
Because the softmax of the votes with temperature $\\tau$ favours the nearest neighbours.
:::

::::{dropdown} Interview: How much memory does the bank take?
:open:
Half precision halves the bank memory: {glue:text}`bank_gb:.1f` GB, as in the example above.
% explains: #memory-of-the-bank
::::

## What to remember

:::{dropdown} Interview: A question under another heading counts too
Yes: the prefix marks it.
:::
"""


def test_sections_code_cells_and_explicit_anchor(tmp_path):
    qs = _chapter(tmp_path, SMALL)
    assert [q.question for q in qs] == [
        "Why does a small temperature sharpen the votes?",
        "How much memory does the bank take?",
        "A question under another heading counts too",
    ]
    assert count_dropdowns_regex(SMALL) == 3
    assert qs[0].anchor == "the-temperature--sharpens-votes"  # MyST drops maths from slugs
    assert qs[1].anchor == "memory-of-the-bank"
    assert "explains" not in qs[1].answer and ":open:" not in qs[1].answer
    page = interview_markdown(qs, here="book/interview")
    assert "{glue:text}`ch.md::bank_gb:.1f`" in page
    assert "(ch.md#memory-of-the-bank)" in page
    # the answer's "the example above" now names the chapter, with a link to it
    assert "as in the example in the chapter [Title](ch.md)." in page
    assert "From [the chapter]" not in page  # no filler line under the chapter headings
    nested = Question("book/ch", "T", "Q?", "A.\n\n::::{note}\nx\n::::", "S", "s", 1)
    assert ":::::{dropdown} Q?" in interview_markdown([nested])
    with pytest.raises(ValueError, match="explains"):
        _chapter(tmp_path, SMALL.replace("#memory-of-the-bank", "#nowhere"))
    assert chapter_titles(tmp_path) == {"book/ch": "Title"}


@pytest.mark.parametrize(
    ("text", "found", "rewritten"),
    [
        (
            "as with the disk and ring above.",
            ["ring above"],
            "as with the disk and ring in the chapter C.",
        ),
        (
            "in the example above it is 0.6",
            ["example above"],
            "in the example in the chapter C it is 0.6",
        ),
        ("Above, L-BFGS ran.", ["Above,"], "In the chapter C, L-BFGS ran."),
        ("(500 images, above)", ["images, above"], "(500 images, in the chapter C)"),
        ("see above.", ["see above"], "see the chapter C."),
        ("On the example of this chapter.", ["this chapter"], "On the example of the chapter C."),
        # comparisons, network layers, links and maths are not references to the page
        ("far below its fine-tuning", [], None),
        ("scores well above zero.", [], None),
        ("The layer below, h, keeps more.", [], None),
        ("[the grid above](knn.md#grid) shows it", [], None),
        ("$x$ above $y$", [], None),
    ],
)
def test_local_references_are_found_and_rewritten(text, found, rewritten):
    assert local_references(text) == found
    out = standalone(text, "C")
    assert out == (rewritten if rewritten is not None else text)
    assert local_references(out) == []


def test_every_collected_answer_stands_alone(questions):
    """On the interview page no answer points at a place on its chapter's page."""
    assert local_references(interview_markdown(questions, here="book/interview")) == []
    # each rewritten reference links to the chapter it came from
    for q in questions:
        if local_references(q.answer):
            block = interview_markdown([q], here="book/interview")
            link = f"the chapter [{plain_title(q.chapter)}]({Path(q.docname).name}.md)"
            assert block.count(link) == len(local_references(q.answer)), q.question


def test_the_intro_and_every_chapter_with_questions_are_collected(questions):
    docs = {q.docname for q in questions}
    by_regex = {d for d, t in _book_sources().items() if count_dropdowns_regex(t)}
    assert docs == by_regex
    assert "book/intro" in docs  # its questions sit under "Questions to test yourself"


def _ndcg_ap_from_the_sheet(gains, k):
    """nDCG@k and AP exactly as the formula sheet writes them, for gains in rank order."""
    g = [float(x) for x in gains]
    dcg = sum(gj / math.log2(j + 1) for j, gj in enumerate(g[:k], start=1))
    ideal = sorted(g, reverse=True)
    idcg = sum(gj / math.log2(j + 1) for j, gj in enumerate(ideal[:k], start=1))
    rel = [x > 0 for x in g]
    hits, total = 0, 0.0
    for j, r in enumerate(rel, start=1):
        if r:
            hits += 1
            total += hits / j  # precision@j at each relevant rank
    return dcg / idcg, total / sum(rel)


def test_formula_sheet_ndcg_and_ap_match_the_package():
    source = (ROOT / "book" / "interview.md").read_text(encoding="utf-8")
    # the sheet writes the package's conventions: log2 discount, gains as given, AP over R_q
    assert r"\frac{g_j}{\log_2(j + 1)}" in source
    assert r"\mathrm{nDCG@}k = \frac{\mathrm{DCG@}k}{\mathrm{IDCG@}k}" in source
    assert r"\frac{1}{|R_q|} \sum_{j :\, \mathrm{rel}_j = 1} \mathrm{precision@}j" in source
    rng = np.random.default_rng(0)
    cases = [(SHEET["ranked_gains"], SHEET["ndcg_cutoff"])]
    cases += [(tuple(rng.integers(0, 4, size=7)), int(rng.integers(1, 8))) for _ in range(30)]
    for gains, k in cases:
        if not any(gains):
            continue
        n = len(gains)
        scores = -np.arange(n, dtype=float)[None, :]  # rank order = item order
        got = ranking_metrics(scores, np.array([gains], dtype=float), ks=(k,))
        ndcg, ap = _ndcg_ap_from_the_sheet(gains, k)
        assert got[f"ndcg@{k}"] == pytest.approx(ndcg, rel=1e-12), (gains, k)
        assert got["map"] == pytest.approx(ap, rel=1e-12), gains
    # ties: equal scores are ranked by item index (the sheet says so)
    tied = ranking_metrics(np.zeros((1, 4)), np.array([[0.0, 1.0, 0.0, 1.0]]), ks=(2,))
    assert tied["map"] == pytest.approx(_ndcg_ap_from_the_sheet((0, 1, 0, 1), 2)[1])


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
    with pytest.raises(ValueError, match="markup"):
        local_references(None)
    with pytest.raises(ValueError, match="markup"):
        standalone("x", None)
    assert isinstance(Question("a", "b", "c", "d", "e", "f", 1), Question)


def _built_html():
    import os

    html_dir = Path(os.environ.get("REPEVAL_BOOK_HTML", ROOT / "_build" / "html"))
    if not (html_dir / "book" / "interview.html").is_file():
        pytest.skip("the book is not built (make book)")
    return html_dir


def test_built_interview_page_links_resolve_and_holds_every_question(questions):
    """On a built book (skipped without one): every section link lands on an existing id."""
    html_dir = _built_html() / "book"
    text = (html_dir / "interview.html").read_text(encoding="utf-8")
    assert text.count("<details") == len(questions)
    links = re.findall(r'href="([\w-]+\.html)#([^"]+)"', text)
    assert len(links) >= len(questions)
    for target, anchor in links:
        assert f'id="{anchor}"' in (html_dir / target).read_text(encoding="utf-8"), (target, anchor)


def test_built_interview_page_prints_its_answers_and_offers_the_deck(questions):
    """The page loads the print stylesheet and script, and its deck link resolves."""
    html_dir = _built_html()
    text = (html_dir / "book" / "interview.html").read_text(encoding="utf-8")
    css = re.search(r'href="(\.\./_static/repeval-print\.css)[^"]*"', text)
    js = re.search(r'src="(\.\./_static/repeval-print\.js)[^"]*"', text)
    assert css and js
    sheet = (html_dir / "book" / css.group(1)).read_text(encoding="utf-8")
    printed = sheet[sheet.index("@media print") :]
    assert "details.sd-dropdown" in printed and "details-content" in printed
    script = (html_dir / "book" / js.group(1)).read_text(encoding="utf-8")
    assert "beforeprint" in script and 'setAttribute("open"' in script
    deck = re.search(r'href="(\.\./_static/repeval-interview\.apkg)"', text)
    assert deck and (html_dir / "book" / deck.group(1)).stat().st_size > 1000
    # the formula sheet's worked example shows what the package computed
    gains = np.array([SHEET["ranked_gains"]], dtype=float)
    k = SHEET["ndcg_cutoff"]
    got = ranking_metrics(-np.arange(gains.shape[1], dtype=float)[None, :], gains, ks=(k,))
    assert f"{got[f'ndcg@{k}']:.3f}" in text and f"{got['map']:.3f}" in text


# per dropdown, how much taller than its question it is (0 when the answer is not laid out)
_ANSWER_HEIGHTS = """
Array.from(document.querySelectorAll('details.sd-dropdown')).map((d) => {
  const body = d.querySelector('.sd-summary-content');
  if (!body || !body.checkVisibility()) { return 0; }
  const question = d.querySelector('summary').getBoundingClientRect().height;
  return d.getBoundingClientRect().height - question;
})
"""


@pytest.mark.slow
def test_printed_interview_page_shows_every_answer(questions, request):
    """In Chromium: closed on screen, every answer laid out under print media, and the
    print script opens the dropdowns before printing and closes them afterwards."""
    _built_html()
    url, chromium = request.getfixturevalue("site"), request.getfixturevalue("browser")
    chromium.call("Page.navigate", url=f"{url}/book/interview.html")
    chromium.wait_event("Page.loadEventFired", timeout=60)
    on_screen = chromium.evaluate(_ANSWER_HEIGHTS)
    assert len(on_screen) == len(questions) and all(h == 0 for h in on_screen)
    chromium.call("Emulation.setEmulatedMedia", media="print")
    printed = chromium.evaluate(_ANSWER_HEIGHTS)
    assert all(h > 0 for h in printed), printed
    chromium.call("Emulation.setEmulatedMedia", media="screen")
    opened = chromium.evaluate(
        "window.dispatchEvent(new Event('beforeprint'));"
        "document.querySelectorAll('details.sd-dropdown[open]').length"
    )
    assert opened == len(questions)
    closed = chromium.evaluate(
        "window.dispatchEvent(new Event('afterprint'));"
        "document.querySelectorAll('details.sd-dropdown[open]').length"
    )
    assert closed == 0
