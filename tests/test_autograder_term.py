"""A simulated term, run with the commands that ``book/instructors.md`` shows.

The instructor assigns two chapters (``rank`` and ``noise``) with due dates, imports a
roster of five students and collects a folder in which

* ``alice`` hands in honest answers on time;
* ``Bob/`` differs from the roster's ``bob`` by case, and ``eve/`` is on no roster;
* ``carol`` hands in late, and her ``rank_bound`` is alice's with renamed variables;
* ``dave``'s ``rank_bound`` has a syntax error and his ``wilson_interval`` is not JSON;
* ``erin`` deleted a test cell, pasted the reference body of ``wilson_interval`` and
  also handed in a notebook of a chapter that was not assigned.

Every shell command of the book's term walkthrough is run here (``autograder ...`` in
process through ``autograder.cli.main``; ``make ...`` checked with ``make -n``), and the
exports, the issue log, the similarity report and the feedback pages are checked.
"""

import csv
import inspect
import json
import os
import re
import shlex
import subprocess
import sys

import nbformat
import pytest

import repeval_ref
from autograder import REPO_ROOT
from autograder.build import solution_source
from autograder.checks import check_points
from autograder.cli import main
from autograder.exercises import load

#: a term of releases, collections and gradings: left out of make test-fast
pytestmark = pytest.mark.slow

BOOK = REPO_ROOT / "book" / "instructors.md"
CHAPTERS = ["noise", "rank"]

RANK_ALICE = '''import numpy as np


def rank_bound(H, y, n_classes):
    """Least-squares residual of one-hot targets and the floor set by rank(H)."""
    feats = np.asarray(H, dtype=float)
    labels = np.asarray(y).astype(int)
    onehot = np.eye(n_classes)[labels]
    with_bias = np.column_stack([feats, np.ones(len(feats))])
    solution = np.linalg.lstsq(with_bias, onehot, rcond=None)[0]
    left_over = onehot - with_bias @ solution
    rank = np.linalg.matrix_rank(feats)
    sizes = sorted(np.bincount(labels, minlength=n_classes).tolist())
    how_many = max(0, n_classes - int(rank) - 1)
    return float((left_over * left_over).sum()), int(sum(sizes[:how_many]))
'''

#: carol's: alice's answer with every name changed
RANK_CAROL = (
    RANK_ALICE.replace("feats", "X")
    .replace("labels", "lab")
    .replace("onehot", "T")
    .replace("with_bias", "A")
    .replace("solution", "beta")
    .replace("left_over", "E")
    .replace("sizes", "cnt")
    .replace("how_many", "m")
)

RANK_ERIN = '''import numpy as np
from scipy import linalg


def rank_bound(H, y, n_classes):
    """Least-squares residual of one-hot targets and the floor set by rank(H)."""
    H = np.asarray(H, float)
    n = H.shape[0]
    targets = np.zeros((n, n_classes))
    for i, label in enumerate(np.asarray(y)):
        targets[i, int(label)] = 1.0
    M = np.hstack((np.ones((n, 1)), H))
    W, res, *_ = linalg.lstsq(M, targets)
    fitted = M.dot(W)
    total = 0.0
    for row in range(n):
        total += float(np.dot(targets[row] - fitted[row], targets[row] - fitted[row]))
    r = np.linalg.matrix_rank(H)
    k = n_classes - r - 1
    if k <= 0:
        return total, 0
    per_class = np.array([np.sum(np.asarray(y) == c) for c in range(n_classes)])
    per_class.sort()
    return total, int(per_class[:k].sum())
'''

WILSON_ALICE = '''import numpy as np
from scipy.stats import binom


def wilson_interval(k, n, z=1.959963984540054):
    """Wilson score interval (lo, hi) for k successes out of n."""
    phat = k / n
    denom = 1 + z ** 2 / n
    mid = (phat + z ** 2 / (2 * n)) / denom
    spread = (z / denom) * np.sqrt(phat * (1 - phat) / n + (z / (2 * n)) ** 2)
    low = 0.0 if k == 0 else max(mid - spread, 0.0)
    high = 1.0 if k == n else min(mid + spread, 1.0)
    return float(low), float(high)


def mcnemar_exact(a_correct, b_correct):
    """Two-sided exact McNemar p-value of two models scored on the same images."""
    a = np.asarray(a_correct, dtype=bool)
    b = np.asarray(b_correct, dtype=bool)
    n01, n10 = int((~a & b).sum()), int((a & ~b).sum())
    if n01 + n10 == 0:
        return 1.0
    return float(min(1.0, 2 * binom.cdf(min(n01, n10), n01 + n10, 0.5)))


def paired_bootstrap_ci(a_correct, b_correct, n_boot, rng, level=0.95):
    """Gain of B over A and its paired bootstrap percentile interval (gain, lo, hi)."""
    a = np.asarray(a_correct, dtype=int)
    b = np.asarray(b_correct, dtype=int)
    n = a.size
    cells = np.bincount(2 * a + b, minlength=4)
    draws = rng.multinomial(n, cells / n, size=n_boot)
    gains = (draws[:, 1] - draws[:, 2]) / n
    tail = 100 * (1 - level) / 2
    lo, hi = np.percentile(gains, [tail, 100 - tail])
    return float(b.mean() - a.mean()), float(lo), float(hi)
'''

WILSON_CAROL = '''import math

import numpy as np
from scipy import stats


def wilson_interval(k, n, z=1.959963984540054):
    """Wilson score interval (lo, hi) for k successes out of n."""
    if k == 0 or k == n:
        edge = z * z / (n + z * z)
        return (0.0, float(edge)) if k == 0 else (float(1.0 - edge), 1.0)
    p = k / n
    centre = (2 * k + z * z) / (2 * (n + z * z))
    half = z * math.sqrt(n * p * (1 - p) + z * z / 4) / (n + z * z)
    return centre - half, centre + half


def mcnemar_exact(a_correct, b_correct):
    """Two-sided exact McNemar p-value of two models scored on the same images."""
    pairs = list(zip(np.asarray(a_correct).astype(int), np.asarray(b_correct).astype(int)))
    b_only = sum(1 for x, y in pairs if x == 0 and y == 1)
    a_only = sum(1 for x, y in pairs if x == 1 and y == 0)
    trials = a_only + b_only
    if not trials:
        return 1.0
    p = 2.0 * stats.binom(trials, 0.5).cdf(min(a_only, b_only))
    return float(p if p < 1.0 else 1.0)


def paired_bootstrap_ci(a_correct, b_correct, n_boot, rng, level=0.95):
    """Gain of B over A and its paired bootstrap percentile interval (gain, lo, hi)."""
    codes = 2 * np.asarray(a_correct).astype(int) + np.asarray(b_correct).astype(int)
    n = len(codes)
    counts = np.array([np.sum(codes == c) for c in range(4)])
    sample = rng.multinomial(n, counts / n, size=n_boot)
    diff = (sample[:, 1] - sample[:, 2]) / n
    edges = np.percentile(diff, [50 * (1 - level), 50 * (1 + level)])
    return float((counts[1] - counts[2]) / n), float(edges[0]), float(edges[1])
'''

#: erin pastes the reference implementations' bodies
WILSON_ERIN = "import numpy as np\nfrom scipy import stats\n\n" + "\n\n".join(
    inspect.getsource(getattr(repeval_ref, f))
    for f in ("wilson_interval", "mcnemar_exact", "paired_bootstrap_ci")
)


def _release(assignment, name):
    return nbformat.read(str(REPO_ROOT / "exercises" / assignment / f"{name}.ipynb"), as_version=4)


def _answer(assignment, name, code):
    nb = _release(assignment, name)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = code
    return nb


#: the LMS's submission times (student, assignment, time), written as lms_times.csv
LMS_TIMES = []


def _put(nb, path, stamp=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    if stamp:
        # what nbgrader submit writes, and what the LMS recorded: the grader trusts the
        # second only
        (path.parent / "timestamp.txt").write_text(stamp)
        LMS_TIMES.append((path, stamp))


def _make_submissions(subs):
    _put(
        _answer("rank", "rank_bound", RANK_ALICE),
        subs / "alice" / "rank" / "rank_bound.ipynb",
        "2026-01-05 10:00:00 UTC",
    )
    _put(
        _answer("noise", "wilson_interval", WILSON_ALICE),
        subs / "alice" / "noise" / "wilson_interval.ipynb",
        "2026-01-19 08:00:00+01:00",
    )
    _put(_answer("rank", "rank_bound", RANK_ALICE), subs / "Bob" / "rank_bound.ipynb")
    _put(_answer("rank", "rank_bound", RANK_ALICE), subs / "eve" / "rank_bound.ipynb")
    _put(
        _answer("rank", "rank_bound", RANK_CAROL),
        subs / "carol" / "rank_bound.ipynb",
        "2026-01-25 12:00:00 UTC",
    )
    _put(
        _answer("noise", "wilson_interval", WILSON_CAROL), subs / "carol" / "wilson_interval.ipynb"
    )
    _put(
        _answer("rank", "rank_bound", "def rank_bound(H, y n_classes):\n    return 0.0, 0\n"),
        subs / "dave" / "rank_bound.ipynb",
        "2026-01-06 09:00:00 UTC",
    )
    (subs / "dave" / "wilson_interval.ipynb").write_text('{"cells": [ broken')
    nb = _answer("rank", "rank_bound", RANK_ERIN)
    nb.cells = [
        c
        for c in nb.cells
        if c.metadata.get("nbgrader", {}).get("grade_id") != "rank_bound_visible_tests"
    ]
    _put(nb, subs / "erin" / "rank_bound.ipynb", "2026-01-07 09:00:00 UTC")
    _put(_answer("noise", "wilson_interval", WILSON_ERIN), subs / "erin" / "wilson_interval.ipynb")
    _put(
        _answer("knn", "knn_classify", solution_source(load("knn_classify"))),
        subs / "erin" / "knn_classify.ipynb",
    )


def book_commands():
    """The shell commands of the book's term walkthrough (```bash blocks), in order."""
    text = BOOK.read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    out = []
    for block in blocks:
        for line in block.splitlines():
            line = line.split("  #", 1)[0].strip()
            if line and not line.startswith("#"):
                out.append(line)
    return out


def _run_autograder(line):
    argv = shlex.split(line)
    if argv[:3] == ["python", "-m", "autograder"]:
        argv = argv[3:]
    elif argv[:1] == ["autograder"]:
        argv = argv[1:]
    else:
        raise AssertionError(f"not an autograder command: {line}")
    return main(argv)


@pytest.fixture(scope="module")
def term(tmp_path_factory):
    base = tmp_path_factory.mktemp("term")
    with (base / "students.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "first_name", "last_name", "email"])
        for sid in ("alice", "bob", "carol", "dave", "erin"):
            w.writerow([sid, sid.title(), "Student", f"{sid}@example.org"])
    LMS_TIMES.clear()
    _make_submissions(base / "submissions")
    index = {"rank_bound": "rank", "wilson_interval": "noise", "knn_classify": "knn"}
    with (base / "lms_times.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["student", "assignment", "timestamp"])
        for path, stamp in LMS_TIMES:
            parts = path.relative_to(base / "submissions").parts
            # a timestamp.txt at the top of a student's folder speaks for all of it
            w.writerow([parts[0], index[path.stem] if len(parts) > 2 else "", stamp])
    commands = [
        c for c in book_commands() if "autograder" in c.split()[0:3] or c.startswith("autograder")
    ]
    ran = []
    cwd = os.getcwd()
    os.chdir(base)
    try:
        for line in commands:
            if "grade-all" in line or "benchmarks" in line:
                continue  # the one-command form runs in its own test below
            assert _run_autograder(line) == 0, line
            ran.append(line)
    finally:
        os.chdir(cwd)
    course = base / "course"

    def rows(name):
        with (base / name).open(newline="") as fh:
            return list(csv.DictReader(fh))

    return {
        "base": base,
        "course": course,
        "ran": ran,
        "grades": rows("grades.csv"),
        "canvas": list(csv.reader((base / "grades_canvas.csv").open(newline=""))),
        "by_nb": rows("grades_by_notebook.csv"),
        "issues": list(csv.DictReader((course / "grading_issues.csv").open(newline=""))),
    }


def test_book_walks_through_every_step(term):
    steps = [
        shlex.split(line)[3] if line.startswith("python") else shlex.split(line)[1]
        for line in term["ran"]
    ]
    steps = [s for s in steps if not s.startswith("--")] or steps
    text = " ".join(term["ran"])
    for step in ("setup", "roster", "collect", "autograde", "feedback", "export", "similarity"):
        assert f" {step}" in f" {text}", (step, term["ran"])
    assert "--assign" in text and "rank=" in text and "--late-policy" in text
    assert "41 s" not in BOOK.read_text() and "41 seconds" not in BOOK.read_text()


def test_make_targets_named_in_the_book_expand_to_the_autograder():
    lines = [c for c in book_commands() if c.startswith("make ")]
    assert lines, "the book shows the make targets too"
    for line in lines:
        out = subprocess.run(
            ["make", "-n", *shlex.split(line)[1:]], cwd=REPO_ROOT, capture_output=True, text=True
        )
        assert out.returncode == 0, (line, out.stderr)
        assert "-m autograder" in out.stdout, (line, out.stdout)


def test_only_the_assigned_chapters_with_their_due_dates(term):
    from nbgrader.api import Gradebook

    course = term["course"]
    state = json.loads((course / "term.json").read_text())
    assert sorted(state["assignments"]) == CHAPTERS and state["late_policy"] == "mark"
    assert state["assignments"]["rank"]["due"].startswith("2026-01-10 23:59")
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert sorted(a.name for a in gb.assignments) == CHAPTERS
        assert str(gb.find_assignment("noise").duedate).startswith("2026-01-20 23:59")
    assert sorted(p.name for p in (course / "exercises").iterdir()) == CHAPTERS
    assert {r["assignment"] for r in term["grades"]} == set(CHAPTERS)
    assert {r["assignment"] for r in term["by_nb"]} == set(CHAPTERS)


def _maximum(names):
    return sum(
        float(load(n).VISIBLE_POINTS) + sum(check_points(c) for c in load(n).HIDDEN) for n in names
    )


def _chapter_notebooks():
    from autograder.exercises import all_specs

    return [s.NAME for s in all_specs() if s.ASSIGNMENT in CHAPTERS]


def test_exports_hold_totals_percentages_late_marks_and_flags(term):
    grades = {(r["student_id"], r["assignment"]): r for r in term["grades"]}
    top = _maximum(_chapter_notebooks())
    alice = grades["alice", "rank"]
    assert float(alice["score"]) == float(alice["max_score"]) == _maximum(["rank_bound"])
    # alice answered rank_bound and wilson_interval honestly and left low_shot_eval out
    earned = _maximum(["rank_bound", "wilson_interval"])
    assert float(alice["student_total"]) == earned and float(alice["student_max"]) == top
    assert alice["student_percent"] == f"{100 * earned / top:.1f}" and alice["late"] == ""
    assert alice["flags"] == ""
    assert "low_shot_eval: No notebook" in grades["alice", "noise"]["flags"]
    for chapter in CHAPTERS:  # in hours, whatever the delay (one unit everywhere)
        assert re.fullmatch(r"late by \d+\.\d\d h", grades["carol", chapter]["late"]), grades[
            "carol", chapter
        ]
        assert grades["alice", chapter]["late"] == ""
    assert grades["dave", "rank"]["late"] == ""  # stated time before the due date
    assert "syntax error" in grades["dave", "rank"]["flags"]
    assert "could not be read" in grades["dave", "noise"]["flags"]
    assert "restored" in grades["erin", "rank"]["flags"]
    assert "not assigned this term" in grades["erin", "rank"]["flags"] + " ".join(
        r["problem"] for r in term["issues"] if r["student_id"] == "erin"
    )
    # bob's folder was refused: he is on the roster with nothing graded
    assert float(grades["bob", "rank"]["score"]) == 0.0
    per_student = {}
    for r in term["grades"]:
        per_student.setdefault(r["student_id"], []).append(float(r["score"]))
    for sid, scores in per_student.items():
        rows = [r for r in term["grades"] if r["student_id"] == sid]
        assert {r["student_total"] for r in rows} == {f"{sum(scores):g}"}
        assert {r["student_percent"] for r in rows} == {f"{100 * sum(scores) / top:.1f}"}

    head, possible, *people = term["canvas"]
    assert head == [
        "Student",
        "ID",
        "SIS User ID",
        "SIS Login ID",
        "Section",
        *CHAPTERS,
        "Final Points",
        "Final Score",
    ]
    assert possible[0] == "Points Possible" and float(possible[-2]) == top
    canvas = {row[2]: row for row in people}
    assert sorted(canvas) == ["alice", "bob", "carol", "dave", "erin"]
    assert canvas["alice"][0] == "Student, Alice"
    assert canvas["alice"][-1] == f"{100 * _maximum(['rank_bound', 'wilson_interval']) / top:.1f}"
    for sid, row in canvas.items():
        assert float(row[-2]) == sum(per_student[sid])


def test_issue_log_names_each_problem_once(term):
    issues = term["issues"]
    keys = [(r["student_id"], r["assignment"], r["notebook"], r["problem"]) for r in issues]
    assert len(keys) == len(set(keys))
    by = {}
    for r in issues:
        by.setdefault(r["student_id"], []).append(r["problem"])
    assert len(by["Bob"]) == 1 and "'bob'" in by["Bob"][0] and "case" in by["Bob"][0]
    assert len(by["eve"]) == 1 and "matches no student id" in by["eve"][0]
    assert not (term["course"] / "submitted" / "Bob").exists()
    # bob (on the roster) handed in nothing that could be collected: every chapter of his
    # is flagged, as a missing notebook would be
    from autograder.course.term import NOT_SUBMITTED

    assert (
        sorted(
            r["assignment"]
            for r in issues
            if r["student_id"] == "bob" and r["problem"] == NOT_SUBMITTED
        )
        == CHAPTERS
    )
    assert not (term["course"] / "submitted" / "eve").exists()
    assert sum("syntax error" in p for p in by["dave"]) == 1
    assert sum("could not be read" in p for p in by["dave"]) == 1
    assert sum("restored" in p for p in by["erin"]) == 1
    assert sum("not assigned this term" in p for p in by["erin"]) == 1
    # the only problem of the two honest students: the notebook they did not hand in
    for sid in ("alice", "carol"):
        assert len(by[sid]) == 1 and "No notebook for this exercise" in by[sid][0], by[sid]


def test_similarity_flags_pasted_and_shared_answers_only(term):
    course = term["course"]
    with (course / "similarity.csv").open(newline="") as fh:
        pairs = list(csv.DictReader(fh))
    found = {(p["notebook"], p["student"], p["other"]) for p in pairs}
    assert ("wilson_interval", "erin", "reference repeval_ref.wilson_interval") in found
    assert ("rank_bound", "alice", "carol") in found
    honest = {"alice", "carol", "erin"}
    for nb, a, b in found:
        assert (nb, a, b) in {
            ("wilson_interval", "erin", f"reference repeval_ref.{f}")
            for f in ("wilson_interval", "mcnemar_exact", "paired_bootstrap_ci")
        } | {("rank_bound", "alice", "carol")}, (nb, a, b)
        assert not (nb == "wilson_interval" and {a, b} <= honest - {"erin"})
    assert all(float(p["threshold"]) > 0 for p in pairs)
    page = (course / "similarity.html").read_text()
    assert "threshold" in page and "<mark>" in page and "changes no grade" in page
    # it informs only: carol keeps the points her answer earns
    grades = {(r["student_id"], r["assignment"]): r for r in term["grades"]}
    assert float(grades["carol", "rank"]["score"]) == float(grades["alice", "rank"]["score"])


def test_feedback_carries_mathjax_per_student_and_links_the_published_book(term):
    """One MathJax copy in each student's folder, which the student's pages load; each
    chapter link goes to the published book (the course's book_url, by default the
    GitHub Pages address), never into the instructor's clone; each page states the
    submission time and, for carol, her lateness in hours."""
    from autograder.feedback import MATHJAX_FILE

    feedback = term["course"] / "feedback"
    pages = sorted(feedback.glob("*/*/*.html"))
    assert pages
    assert not (feedback / MATHJAX_FILE).exists()
    assert not list(feedback.glob(f"*/*/{MATHJAX_FILE}"))
    for page in pages:
        raw = page.read_text(encoding="utf-8")
        src = re.search(r'<script src="([^"]*' + re.escape(MATHJAX_FILE) + ')"', raw).group(1)
        bundle = page.parent.parent / MATHJAX_FILE
        assert (page.parent / src).resolve() == bundle.resolve()
        assert bundle.stat().st_size > 10**6
        links = re.findall(r'href="([^"]*book/[a-z_]+\.(?:md|html))', raw)
        assert links, page
        chapter = page.parent.name
        for link in links:
            assert link == f"https://repeval.github.io/repeval/book/{chapter}.html", link
        assert str(REPO_ROOT) not in raw and 'href="../' not in raw
        assert 'id="autograder-tables"' in raw
        said = re.search(r'<p id="autograder-submission"[^>]*>(.*?)</p>', raw).group(1)
        assert said.startswith("Submitted 20"), said
        student = page.parent.parent.name
        if student == "carol":
            assert re.search(r"Late by \d+\.\d\d h: the points are kept", said), said
        elif student == "alice":
            assert said.endswith("On time."), said


def test_nbgrader_records_raw_scores_whatever_the_late_policy(tmp_path, monkeypatch):
    """The late policy is applied when grades are read (exports, feedback), so nbgrader's
    own penalty stays off even under "zero"."""
    from autograder import course as course_mod
    from autograder import nbgrader_run
    from autograder.course import term

    calls = []

    def fake(root, *args, **kwargs):
        calls.append(args)
        return subprocess.CompletedProcess(args, 0, "", "")

    c = course_mod.Course(tmp_path / "c", log=lambda *a: None)
    c.root.mkdir(parents=True)
    (c.root / term.TERM_FILE).write_text(
        json.dumps({"assignments": {"rank": {"due": None}}, "late_policy": "zero"})
    )
    monkeypatch.setattr(nbgrader_run, "run_nbgrader", fake)
    c.nbgrader("autograde", "*")
    c.nbgrader("export")
    assert calls[0][-1] == "--LateSubmissionPlugin.penalty_method=none"
    assert not any("LateSubmission" in a for a in calls[1])


def test_setup_refuses_unknown_chapters_and_stray_due_dates(tmp_path):
    from autograder.course import Course

    c = Course(tmp_path / "c", log=lambda *a: None)
    with pytest.raises(ValueError, match="assignments"):
        c.setup(["rank", "no_such_chapter"])
    with pytest.raises(ValueError, match="due"):
        c.setup(["rank"], due={"knn": "2026-01-01"})
    with pytest.raises(ValueError, match="due date"):
        c.setup(["rank"], due={"rank": "next tuesday-ish"})
    with pytest.raises(ValueError, match="late_policy"):
        c.setup(["rank"], late_policy="halve")


def test_similarity_threshold_is_validated(tmp_path):
    from autograder.similarity import similarity_report

    with pytest.raises(ValueError, match="threshold"):
        similarity_report(tmp_path, threshold=0)


def test_grade_all_cli_accepts_the_term_options():
    from autograder.cli import build_parser

    args = build_parser().parse_args(
        [
            "grade-all",
            "subs",
            "g.csv",
            "--assign",
            "rank=2026-01-10T23:59",
            "noise",
            "--late-policy",
            "zero",
        ]
    )
    assert args.assign == ["rank=2026-01-10T23:59", "noise"] and args.late_policy == "zero"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
