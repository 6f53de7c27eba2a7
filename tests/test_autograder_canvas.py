"""The grades written back into the instructor's own Canvas gradebook export.

A gradebook export as Canvas writes it (identity columns with an ``Integration ID``,
assignment columns ``<name> (<id>)`` for the two chapters and for a quiz the course does
not grade, the read-only totals, a ``Points Possible`` row, a dropped student, Canvas's
test student) is filled from a grades CSV, written, read back as CSV and compared cell by
cell with what each cell must hold: the score for a matched student's chapter cell, the
export's own value everywhere else. The matching rules and their errors are checked on
their own, and the ``export`` command is run with ``--canvas-template`` on a graded
class.
"""

from __future__ import annotations

import csv
import subprocess
import sys

import pytest

from autograder import REPO_ROOT
from autograder.course.canvas import (
    canvas_from_template,
    chapter_names,
    match_chapters,
    match_students,
    read_gradebook,
)
from autograder.csv_safe import safe_cell

READ_ONLY = [
    "Assignments Current Points",
    "Assignments Final Points",
    "Assignments Current Score",
    "Assignments Unposted Current Score",
    "Assignments Final Score",
    "Assignments Unposted Final Score",
    "Current Points",
    "Final Points",
    "Current Score",
    "Unposted Current Score",
    "Final Score",
    "Unposted Final Score",
    "Current Grade",
    "Unposted Current Grade",
    "Final Grade",
    "Unposted Final Grade",
]
IDENTITY = ["Student", "ID", "SIS User ID", "SIS Login ID", "Integration ID", "Section"]
ASSIGNMENTS = ["the  Rank-Bound (4101)", "Honest error bars (4102)", "Reading quiz 1 (4200)"]
HEADER = IDENTITY + ASSIGNMENTS + READ_ONLY

#: Canvas's rows: (name, Canvas id, SIS User ID, SIS Login ID, section, quiz score)
PEOPLE = [
    ("Student, Alice", "101", "alice", "alice@uni.example", "A", "4.00"),
    ("Student, Bob", "102", "S-0002", "BOB@uni.example", "A", "5.00"),  # login, any case
    ("Student, Carol", "103", "CAROL", "carol.c@uni.example", "B", ""),  # SIS id, any case
    ("Dropped, Dan", "104", "dan", "dan@uni.example", "B", "3.00"),  # not on the roster
    ("=Student, Mallory", "106", "mallory", "mallory@uni.example", "B", ""),  # a formula
    ("Student, Test", "105", "", "", "", ""),  # Canvas's test student
]

#: the grades CSV of `autograder export`: (student, chapter, score, max_score)
GRADES = [
    ("alice", "rank", 8.0, 8.0),
    ("alice", "noise", 11.5, 12.0),
    ("bob", "rank", 0.0, 8.0),
    ("bob", "noise", 7.25, 12.0),
    ("carol", "rank", 6.0, 8.0),
    ("carol", "noise", 12.0, 12.0),
    ("mallory", "rank", 1.0, 8.0),
    ("mallory", "noise", 2.0, 12.0),
    ("erin", "rank", 3.0, 8.0),  # graded, but Canvas has no row for her
    ("erin", "noise", 4.0, 12.0),
]


def _key_equal(a, b):
    """The matching rule, written out: case, '_', '-', repeated spaces and a leading
    'The' do not count."""
    import re

    def key(s):
        s = " ".join(re.sub(r"[_-]", " ", s).split()).lower()
        return s[4:] if s.startswith("the ") else s

    return key(a) == key(b)


def _page_of(title):
    """The book page whose level-1 heading is ``title`` or starts with it."""
    for page in (REPO_ROOT / "book").glob("*.md"):
        for line in page.read_text().splitlines():
            if line.startswith("# ") and line[2:].strip().startswith(title):
                return page.stem
    return None


def _template(path, points=("8.00", "99.00", "5.00"), header=HEADER):
    rows = [header]
    possible = ["    Points Possible", "", "", "", "", "", *points]
    rows.append(possible + ["(read only)"] * (len(header) - len(possible)))
    for name, cid, sis, login, section, quiz in PEOPLE:
        old = "2.00" if sis == "dan" else ""  # Dan's rank cell already holds a grade
        totals = [f"{k}.5" for k in range(len(READ_ONLY))]
        rows.append([name, cid, sis, login, "", section, old, "", quiz, *totals][: len(header)])
    # Canvas writes a byte-order mark first
    with path.open("w", newline="", encoding="utf-8-sig") as fh:
        csv.writer(fh).writerows(rows)
    return rows


def _grades(path):
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["assignment", "student_id", "last_name", "score", "max_score"])
        for sid, chapter, score, top in GRADES:
            w.writerow([chapter, sid, "Student", f"{score:g}", f"{top:g}"])


def test_round_trip_keeps_every_column_and_fills_the_grades(tmp_path):
    template = tmp_path / "canvas_export.csv"
    original = _template(template)
    grades = tmp_path / "grades.csv"
    _grades(grades)
    lines = []
    out, missing = canvas_from_template(grades, template, tmp_path / "upload.csv", log=lines.append)
    assert missing == ["erin"]
    with out.open(newline="", encoding="utf-8") as fh:
        back = list(csv.reader(fh))
    assert back[0] == HEADER
    assert len(back) == len(original) and all(len(r) == len(HEADER) for r in back)
    assert back[1] == original[1]  # Points Possible: Canvas's own, unchanged
    score = {(sid, ch): s for sid, ch, s, _ in GRADES}
    ours = {"Student, Alice": "alice", "Student, Bob": "bob", "Student, Carol": "carol"}
    ours["=Student, Mallory"] = "mallory"
    chapter_of = {HEADER.index(ASSIGNMENTS[0]): "rank", HEADER.index(ASSIGNMENTS[1]): "noise"}
    for before, after in zip(original[2:], back[2:], strict=True):
        sid = ours.get(before[0])
        for j, (was, now) in enumerate(zip(before, after, strict=True)):
            if sid is not None and j in chapter_of:
                assert float(now) == score[sid, chapter_of[j]], (before[0], HEADER[j], now)
            else:  # identity, other assignments, read-only totals, other people's rows
                assert now == safe_cell(was), (before[0], HEADER[j], was, now)
    # the name that would be a formula is written so that no spreadsheet evaluates it
    mallory = next(r for r in back if r[1] == "106")
    assert mallory[0] == safe_cell("=Student, Mallory") != "=Student, Mallory"
    # one line names the graded students without a row; one warns of Canvas's points
    assert [line for line in lines if "erin" in line] == [lines[-1]]
    assert "no row in the Canvas gradebook" in lines[-1]
    assert any("99.00" in line and "noise" in line and "12" in line for line in lines)
    assert not any("Rank-Bound" in line for line in lines)  # 8 points on both sides
    # Canvas reads the same assignments back, each with its own id
    reread = read_gradebook(out)
    assert reread.assignments() == read_gradebook(template).assignments()
    assert {reread.header[i] for i in chapter_of} == set(ASSIGNMENTS[:2])


def test_chapters_match_by_id_or_page_title_and_unmatched_ones_are_named(tmp_path):
    names = chapter_names(["rank", "noise", "protocols"])
    # the id, the book page's level-1 heading, and that heading up to its colon
    heading = next(
        line[2:].strip()
        for line in (REPO_ROOT / "book" / "rank.md").read_text().splitlines()
        if line.startswith("# ")
    )
    short = heading.split(":")[0].strip()
    assert short != heading and names["rank"] == ["rank", heading, short], names["rank"]
    assert _key_equal(short, "the  Rank-Bound")
    # a chapter whose notebooks belong to two book pages may carry either page's title
    assert {"protocols", "invariances"} <= {_page_of(n) for n in names["protocols"][1:]}
    template = tmp_path / "t.csv"
    header = IDENTITY + ["RANK (1)", "Honest_error_bars (2)", "What each protocol ignores (3)"]
    _template(template, points=("1", "2", "3"), header=header)
    book = read_gradebook(template)
    assert match_chapters(book, {"rank": names["rank"], "noise": names["noise"]}) == {
        "rank": 6,
        "noise": 7,
    }
    with pytest.raises(ValueError) as err:
        match_chapters(book, names)
    text = str(err.value)
    assert all(repr(n) in text for n in names["protocols"]), text
    assert "'What each protocol ignores (3)'" in text  # the columns it could have been
    assert "rank" not in text.split("Assignment columns")[0].replace("protocols", "")
    # one column claimed by two chapters, one chapter with two columns
    with pytest.raises(ValueError, match="one column"):
        match_chapters(book, {"rank": ["rank"], "other": ["Rank"]})
    twice = tmp_path / "twice.csv"
    _template(twice, points=("1", "2"), header=IDENTITY + ["rank (1)", "The rank bound (2)"])
    with pytest.raises(ValueError, match="several columns"):
        match_chapters(read_gradebook(twice), {"rank": names["rank"]})


def test_students_match_by_sis_id_then_login_and_clashes_are_errors(tmp_path):
    template = tmp_path / "t.csv"
    _template(template)
    book = read_gradebook(template)
    rows_of, missing = match_students(book, ["alice", "bob", "carol", "erin", "dan"])
    names = {sid: book.rows[i][0] for sid, i in rows_of.items()}
    assert names == {
        "alice": "Student, Alice",
        "bob": "Student, Bob",
        "carol": "Student, Carol",
        "dan": "Dropped, Dan",
    }
    assert missing == ["erin"]
    # an exact SIS User ID wins over a login that only differs by case
    rows_of, _ = match_students(book, ["S-0002"])
    assert book.rows[rows_of["S-0002"]][0] == "Student, Bob"
    # two of our ids that differ only by case would take Carol's row twice
    with pytest.raises(ValueError, match="several students"):
        match_students(book, ["carol", "Carol"])
    with pytest.raises(ValueError, match="student_ids"):
        match_students(book, ["alice", ""])


def test_a_file_that_is_not_a_canvas_export_is_refused(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("name,score\nalice,3\n")
    with pytest.raises(ValueError, match="'ID'"):
        read_gradebook(bad)
    plain = tmp_path / "plain.csv"
    plain.write_text("Student,ID,SIS User ID,SIS Login ID,Section,rank\n")
    with pytest.raises(ValueError, match="no assignment column"):
        read_gradebook(plain)
    with pytest.raises(ValueError, match="canvas_template"):
        read_gradebook(tmp_path / "absent.csv")


def _autograder(course, *args, cwd=REPO_ROOT):
    cmd = [sys.executable, "-m", "autograder", "--course", str(course), "--timeout", "30", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=1500, cwd=cwd)


@pytest.mark.slow  # a class of two graded end to end
def test_export_command_fills_the_instructors_gradebook(tmp_path):
    import nbformat
    from helpers.answer_notebooks import with_answer

    from autograder.build import solution_source
    from autograder.exercises import load

    spec = load("rank_bound")
    subs = tmp_path / "submissions"
    for sid, code in (("alice", solution_source(spec)), ("bob", "def rank_bound(H, y, K):\n")):
        path = subs / sid / "rank" / "rank_bound.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(with_answer(spec, code), str(path))
    roster = tmp_path / "roster.csv"
    roster.write_text(
        "id,first_name,last_name,email\nalice,Alice,Student,a@x.org\nbob,Bob,Student,b@x.org\n"
    )
    course = tmp_path / "course"
    for args in (
        ("setup", "--assign", "rank"),
        ("roster", str(roster)),
        ("collect", str(subs)),
        ("autograde", "--seed", "3"),
    ):
        proc = _autograder(course, *args)
        assert proc.returncode == 0, (args, proc.stdout[-2000:], proc.stderr[-2000:])
    template = tmp_path / "canvas_export.csv"
    with template.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Rank bound (77)"])
        w.writerow(["Points Possible", "", "", "", "", "8"])
        w.writerow(["Student, Alice", "1", "alice", "alice", "A", ""])
        w.writerow(["Student, Zoe", "2", "zoe", "zoe", "A", ""])
    grades = tmp_path / "grades.csv"
    proc = _autograder(course, "export", str(grades), "--canvas-template", str(template))
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-2000:])
    assert "bob" in proc.stdout and "no row in the Canvas gradebook" in proc.stdout
    with grades.open(newline="") as fh:
        score = {r["student_id"]: r["score"] for r in csv.DictReader(fh)}
    with (tmp_path / "grades_canvas.csv").open(newline="") as fh:
        back = list(csv.reader(fh))
    assert back[0][-1] == "Rank bound (77)" and back[1] == ["Points Possible", "", "", "", "", "8"]
    assert back[2][:5] == ["Student, Alice", "1", "alice", "alice", "A"]
    assert float(back[2][5]) == float(score["alice"]) == 8.0
    assert back[3] == ["Student, Zoe", "2", "zoe", "zoe", "A", ""]
