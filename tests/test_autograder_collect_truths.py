"""`collect` says what it did with each submission, in one line each, and grades what the
student meant to hand in.

Every case goes through the real commands (``python -m autograder --course DIR ...``) with
notebooks made from the release in ``exercises/`` and answers from the specs' solutions:

* the blank download beside an answered ``knn_classify (1).ipynb``: the answered copy is
  graded, whatever their dates, and one line names both; of two answered copies the newer;
* a fresh notebook holding a correct function (none of the release's cell ids): graded as
  the blank exercise with one line telling the student to paste the function into the
  released notebook, in the issue log and atop the feedback;
* a zip file that is not a zip file: the blank grade with a note atop the feedback and a
  flag in the export; where an earlier submission of the chapter exists it is kept,
  graded, and named.
"""

import csv
import datetime as dt
import os
import re
import subprocess
import sys
import time

import nbformat
import pytest
from helpers.answer_notebooks import with_answer

from autograder import REPO_ROOT
from autograder.build import solution_source
from autograder.checks import check_points
from autograder.exercises import load

SPEC = load("knn_classify")
ANSWER = solution_source(SPEC)
HINT = (
    "Paste your function knn_classify into the solution cell of the released notebook "
    "exercises/knn/knn_classify.ipynb and hand that notebook in."
)
#: the times a newer and an older copy carry (seconds since the epoch): the newer within
#: the hour before collection (an earlier time would be named as backdated), the older a
#: month before
NEW = time.time() - 120
OLD = NEW - 30 * 86400


def _minute(stamp):
    return dt.datetime.fromtimestamp(stamp, dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _autograder(course, *args, timeout=600):
    """One real command on ``course``; its output."""
    proc = subprocess.run(
        [sys.executable, "-m", "autograder", "--course", str(course), "--timeout", "30", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO_ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _new_course(base, students):
    course = base / "course"
    _autograder(course, "setup", "--assign", "knn")
    roster = base / "roster.csv"
    with roster.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "first_name", "last_name", "email"])
        w.writerows([s, s.title(), "Student", f"{s}@example.org"] for s in students)
    _autograder(course, "roster", str(roster))
    return course


def _issues(course, student):
    with (course / "grading_issues.csv").open(newline="") as fh:
        return [r for r in csv.DictReader(fh) if r["student_id"] == student]


def _submitted(course, student):
    path = course / "submitted" / student / "knn" / "knn_classify.ipynb"
    return nbformat.read(str(path), as_version=4)


def _solution_cell(nb):
    return next(c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution"))


def _write(nb, path, mtime):
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    os.utime(path, (mtime, mtime))


def _release():
    return nbformat.read(str(REPO_ROOT / "exercises" / "knn" / "knn_classify.ipynb"), as_version=4)


def _fresh(code):
    """A notebook the student made anew: one plain code cell, no nbgrader metadata."""
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])


def _note(nb):
    first = nb.cells[0]
    assert first.cell_type == "markdown" and first.get("id", "").startswith(
        "autograder-grading-note"
    ), first
    return re.sub(r"\\(.)", r"\1", first.source)  # the note's Markdown escapes undone


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    """A course of the knn chapter, four students collected once:

    * amy: the blank download (newer) and an answered ``knn_classify (1).ipynb`` (older);
    * bea: two answered copies, the newer one with a comment the older lacks;
    * ned: a fresh notebook named as the exercise, holding the correct function;
    * ola: a fresh ``Untitled.ipynb`` holding the correct function.
    """
    base = tmp_path_factory.mktemp("truths")
    course = _new_course(base, ["amy", "bea", "ned", "ola"])
    subs = base / "subs"
    _write(_release(), subs / "amy" / "knn_classify.ipynb", NEW)
    _write(with_answer(SPEC, ANSWER), subs / "amy" / "knn_classify (1).ipynb", OLD)
    _write(with_answer(SPEC, ANSWER), subs / "bea" / "old" / "knn_classify.ipynb", OLD)
    newer = ANSWER + "\n# the newer copy\n"
    _write(with_answer(SPEC, newer), subs / "bea" / "new" / "knn_classify (2).ipynb", NEW)
    _write(_fresh(ANSWER), subs / "ned" / "knn_classify.ipynb", NEW)
    _write(_fresh(ANSWER), subs / "ola" / "Untitled.ipynb", NEW)
    out = _autograder(course, "collect", str(subs))
    return course, out, newer


def test_the_answered_copy_is_graded_and_one_line_names_both(collected):
    course, out, _ = collected
    assert _solution_cell(_submitted(course, "amy")) == ANSWER
    lines = [r["problem"] for r in _issues(course, "amy")]
    assert len(lines) == 1, lines  # one line, not one per file
    line = lines[0]
    assert (
        "'knn_classify (1).ipynb' (answered" in line and "'knn_classify.ipynb' (unanswered" in line
    )
    assert line.index("graded 'knn_classify (1).ipynb'") < line.index("not 'knn_classify.ipynb'")
    assert line in out  # the command says it too
    assert "knn_classify (1).ipynb (answered) was graded" in _note(_submitted(course, "amy"))


def test_of_two_answered_copies_the_newer_is_graded(collected):
    course, _, newer = collected
    assert _solution_cell(_submitted(course, "bea")) == newer
    (line,) = [r["problem"] for r in _issues(course, "bea")]
    assert line.startswith("2 files for this exercise: graded 'knn_classify (2).ipynb'"), line
    assert f"(answered, modified {_minute(NEW)})" in line, line
    assert f"'knn_classify.ipynb' (answered, modified {_minute(OLD)})" in line, line


@pytest.mark.parametrize(
    "student, fname", [("ned", "knn_classify.ipynb"), ("ola", "Untitled.ipynb")]
)
def test_a_fresh_notebook_gets_one_line_with_the_paste_hint(collected, student, fname):
    course, out, _ = collected
    (line,) = [r["problem"] for r in _issues(course, student)]
    assert line.startswith(f"Your file {fname} is not the released notebook") and HINT in line
    assert "restored" not in line and line in out
    nb = _submitted(course, student)
    assert HINT in _note(nb)
    # graded as the blank release: its cells, the stub in the solution cell
    release = _release()
    assert [c.source for c in nb.cells[1:]] == [c.source for c in release.cells]


@pytest.mark.slow
def test_a_broken_zip_is_graded_blank_with_a_note_and_a_flag_and_an_earlier_one_is_kept(
    tmp_path,
):
    """kim handed in a correct answer, then a zip that is not a zip file: the earlier
    answer is kept, graded (full marks) and named. lee's only file is such a zip: the
    blank grade, a note atop the feedback, a flag in the export. ned's fresh notebook:
    the paste hint atop the feedback."""
    course = _new_course(tmp_path, ["kim", "lee", "ned"])
    first = tmp_path / "first"
    _write(with_answer(SPEC, ANSWER), first / "kim" / "knn" / "knn_classify.ipynb", OLD)
    _autograder(course, "collect", str(first), "--submitted-at", "2026-01-05 10:00")
    later = tmp_path / "later"
    later.mkdir()
    for student in ("kim", "lee"):  # a truncated upload: the zip's first bytes only
        (later / f"{student}.zip").write_bytes(b"PK\x03\x04\x14\x00\x00\x00\x08\x00")
    _write(_fresh(ANSWER), later / "ned" / "knn_classify.ipynb", NEW)
    out = _autograder(course, "collect", str(later))

    kept = [r["problem"] for r in _issues(course, "kim")]
    assert kept == [
        "kim.zip is not a readable zip file: nothing in it was collected; the earlier "
        "submission of knn (knn_classify.ipynb, submitted 2026-01-05 10:00 UTC) is kept and "
        "graded"
    ], kept
    assert kept[0] in out
    assert _solution_cell(_submitted(course, "kim")) == ANSWER
    blank = [r["problem"] for r in _issues(course, "lee")]
    assert blank == [
        "Your file lee.zip is not a readable zip file: nothing in it could be collected, "
        "and no earlier submission of knn was collected before."
    ], blank

    _autograder(course, "autograde", "--seed", "7")
    _autograder(course, "feedback")
    _autograder(course, "export", str(tmp_path / "grades.csv"))

    top = float(SPEC.VISIBLE_POINTS) + sum(check_points(c) for c in SPEC.HIDDEN)
    with (tmp_path / "grades.csv").open(newline="") as fh:
        rows = {r["student_id"]: r for r in csv.DictReader(fh) if r["assignment"] == "knn"}
    assert float(rows["kim"]["score"]) == top
    assert float(rows["lee"]["score"]) == 0.0 and float(rows["ned"]["score"]) == 0.0
    assert "lee.zip is not a readable zip file" in rows["lee"]["flags"]
    assert "earlier submission of knn (knn_classify.ipynb" in rows["kim"]["flags"]
    assert HINT in rows["ned"]["flags"]
    for student, words in (
        ("lee", "Your file lee.zip is not a readable zip file"),
        ("ned", HINT),
        ("kim", "This is your earlier submission of knn, submitted 2026-01-05 10:00 UTC"),
    ):
        page = (course / "feedback" / student / "knn" / "knn_classify.html").read_text()
        text = re.sub(r"<[^>]+>", "", page)
        text = re.sub(r"\s+", " ", text.replace("&#39;", "'"))
        assert words in text, (student, text[:2000])
        # the note comes before the statement
        assert text.index(words) < text.index("Weighted k-NN classifier"), student
