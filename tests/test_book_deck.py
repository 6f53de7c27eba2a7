"""The Anki deck of the interview questions, and the committed values it quotes.

The deck is written from the chapter sources and ``book/_data/interview_glue.json`` alone:
the tests write it from a copy of the book's sources with no build directory, in a fresh
interpreter, within a minute. Its notes are counted in the SQLite collection inside the
``.apkg`` against an independent regex count of the chapters' dropdowns, and every field of
every card is walked for maths left outside MathJax's delimiters. The committed values must
cover exactly the keys the answers quote, and equal a built book's (skipped without one).
"""

from __future__ import annotations

import html
import json
import re
import shutil
import sqlite3
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("myst_parser")
pytest.importorskip("genanki")

from repeval_book.glued_values import (  # noqa: E402
    VALUES_PATH,
    read_values,
    used_keys,
    values_from_build,
    write_values,
)
from repeval_book.interview import (  # noqa: E402
    Question,
    collect_questions,
    count_dropdowns_regex,
    toc_documents,
)
from repeval_book.interview_deck import deck_fields, write_deck  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def questions():
    return collect_questions(ROOT)


def _regex_count(root):
    return sum(
        count_dropdowns_regex((root / f"{d}.md").read_text(encoding="utf-8"))
        for d in toc_documents(root)
        if (root / f"{d}.md").is_file()
    )


def _notes(apkg, tmp):
    with zipfile.ZipFile(apkg) as z:
        z.extract("collection.anki2", tmp)
    con = sqlite3.connect(Path(tmp) / "collection.anki2")
    try:
        notes = con.execute("select guid, flds, tags from notes").fetchall()
        n_cards = con.execute("select count(*) from cards").fetchone()[0]
    finally:
        con.close()
    return notes, n_cards


_DELIMITED = re.compile(r"\\\((.*?)\\\)|\\\[(.*?)\\\]", re.DOTALL)
_RAW_TEX = re.compile(r"\$|\\[A-Za-z]+|\\[,;:!{}]|[_^]\{")


def raw_latex(field):
    """What looks like LaTeX in a card field once its \\( \\) and \\[ \\] spans are removed."""
    text = _DELIMITED.sub(" ", html.unescape(re.sub(r"<[^>]+>", " ", field)))
    return _RAW_TEX.findall(text)


def test_raw_latex_checker_on_planted_fields():
    assert raw_latex(r"<p>a \(x\,y\) and \[\sum_{i} x_i\]</p>") == []
    assert raw_latex("<p>cost $n$ here</p>") == ["$", "$"]
    assert raw_latex(r"<p>a , comma from \, and \tau</p>") == [r"\,", r"\tau"]
    assert raw_latex("<p>x_{ij} leaks</p>") == ["_{"]


def _copy_sources(dst):
    """The files a clone holds that the deck reads: the table of contents, the pages, the values."""
    shutil.copy(ROOT / "_toc.yml", dst / "_toc.yml")
    for d in toc_documents(ROOT):
        src = ROOT / f"{d}.md"
        if src.is_file():
            (dst / src.relative_to(ROOT)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dst / src.relative_to(ROOT))
    (dst / VALUES_PATH).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / VALUES_PATH, dst / VALUES_PATH)


def test_committed_values_cover_exactly_the_quoted_keys(questions):
    committed = read_values(ROOT / VALUES_PATH)
    assert {d: sorted(v) for d, v in committed.items()} == used_keys(questions), (
        f"{VALUES_PATH} is stale: rebuild the book (make book) and commit the file"
    )


def test_deck_is_written_from_the_committed_values_without_a_build(tmp_path):
    src = tmp_path / "clone"
    src.mkdir()
    _copy_sources(src)
    assert not (src / "_build").exists()
    out = tmp_path / "deck.apkg"
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "repeval_book.interview", str(out), "--root", str(src)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    seconds = time.perf_counter() - start
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert seconds < 60, seconds
    notes, n_cards = _notes(out, tmp_path)
    assert len(notes) == n_cards == _regex_count(src) == _regex_count(ROOT) > 0
    assert f"{len(notes)} notes" in proc.stdout
    # the cards are the fields rendered here from the same sources, every value filled in
    fields = deck_fields(collect_questions(src), read_values(src / VALUES_PATH))
    assert sorted(flds for _, flds, _ in notes) == sorted(f"{a}\x1f{b}" for a, b, _ in fields)
    assert not any("[value in the chapter]" in flds for _, flds, _ in notes)


def test_no_card_keeps_raw_latex(tmp_path, questions):
    values = read_values(ROOT / VALUES_PATH)
    out = tmp_path / "deck.apkg"
    assert write_deck(questions, out, values) == len(questions)
    notes, _ = _notes(out, tmp_path)
    leaks = {
        flds.split("\x1f")[0][:60]: raw_latex(field)
        for _, flds, _ in notes
        for field in flds.split("\x1f")
        if raw_latex(field)
    }
    assert leaks == {}
    fronts = [flds.split("\x1f")[0] for _, flds, _ in notes]
    assert len(set(fronts)) == len(fronts)
    # a rebuild gives the same note GUIDs, so Anki updates the notes a student has
    again = tmp_path / "again"
    again.mkdir()
    write_deck(questions, again / "deck.apkg", values)
    assert sorted(g for g, _, _ in _notes(again / "deck.apkg", again)[0]) == sorted(
        g for g, _, _ in notes
    )


CARD = """Why is $\\mathrm{SE} = \\sqrt{p(1 - p)\\,/
n}$ small?"""
ANSWER = """A formula over a line break, $a\\,
b$, a display

$$
\\sum_{i} x_i
$$

an environment

\\begin{equation}
y = x^{2}
\\end{equation}

a role {math}`\\tau_{\\mathrm{K}}`, a glued {glue:text}`bank_gb:.1f` GB and
{glue:text}`other.md::n_images:,d` images, and the example above.

::::{note}
:class: tip
Inside a note, $k$ still typesets.
::::
"""


def test_card_maths_roles_glue_and_fences():
    q = Question("book/ch", "Title", CARD, ANSWER, "Section $x$", "section-x", 1)
    values = {"book/ch": {"bank_gb": "2.4576", "n_images": "50000"}}
    [(front, back, tag)] = deck_fields([q], values)
    assert tag == "ch"
    assert r"\(\mathrm{SE} = \sqrt{p(1 - p)\,/" + "\nn}\\)" in front
    assert r"\(a\," + "\nb\\)" in back
    assert r"\[\sum_{i} x_i\]" in back
    assert r"\begin{equation}" in back and r"\[" in back
    assert r"\(\tau_{\mathrm{K}}\)" in back
    assert "2.5 GB" in back and "50,000 images" in back
    assert "the example in the chapter <em>Title</em>" in back
    assert r"\(k\)" in back and ":class:" not in back
    assert raw_latex(front) == [] and raw_latex(back) == []
    with pytest.raises(ValueError, match="glued value"):
        deck_fields([q], {})
    assert "[value in the chapter]" in deck_fields([q], {}, "placeholder")[0][1]


def test_committed_values_equal_the_built_book(questions):
    """On a built book (skipped without one): the committed file is what the build glued."""
    build = ROOT / "_build"
    if not (build / "jupyter_execute").is_dir():
        pytest.skip("the book is not built (make book)")
    values, missing = values_from_build(questions, build)
    assert missing == []
    assert read_values(ROOT / VALUES_PATH) == values


def test_bad_input(tmp_path):
    with pytest.raises(ValueError, match="missing"):
        deck_fields([], {}, missing="ignore")
    with pytest.raises(ValueError, match="values"):
        deck_fields([], None)
    with pytest.raises(ValueError, match="apkg"):
        write_deck([], tmp_path / "deck.zip", {})
    with pytest.raises(ValueError, match="path"):
        read_values(tmp_path / "none.json")
    (tmp_path / "bad.json").write_text(json.dumps({"book/a": {"k": 1}}))
    with pytest.raises(ValueError, match="path"):
        read_values(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="values"):
        write_values({"book/a": {"k": 1}}, tmp_path / "v.json")
    with pytest.raises(ValueError, match="build_dir"):
        values_from_build([], tmp_path / "nowhere")
    with pytest.raises(ValueError, match="questions"):
        used_keys("abc")
