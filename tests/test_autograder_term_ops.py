"""Term operations through the real command line: one chapter's due date or policy changed
without touching the others, a changed policy reaching the exports and the feedback pages
without grading again, a student removed (archived, absent everywhere, even after nbgrader
adds them back), one student regraded, progress on stdout and nbgrader's messages in the
course's log, user errors as one line and exit status 2, and the make targets' TIMES and
ROSTER.

One class of two students (``ann`` hands in the reference answer of ``rank_bound``,
``ben`` the blank release) is graded once; each test that changes it works on a copy.
"""

import csv
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys

import nbformat
import pytest

from autograder import REPO_ROOT
from autograder.build import solution_source
from autograder.checks import check_points
from autograder.exercises import all_specs, load

#: grading runs: left out of make test-fast
pytestmark = pytest.mark.slow

RANK_DUE = "2026-01-10T23:59"
NOISE_DUE = "2026-01-24T23:59"
#: the LMS's times: ann and ben handed in rank on time
TIMES = {"ann": "2026-01-05 10:00:00 UTC", "ben": "2026-01-06 12:30:00 UTC"}


def _maximum(names):
    return sum(
        float(load(n).VISIBLE_POINTS) + sum(check_points(c) for c in load(n).HIDDEN) for n in names
    )


def _notebooks(chapter):
    return sorted(s.NAME for s in all_specs() if s.ASSIGNMENT == chapter)


def _run(course, *args, check=True, cwd=None):
    env = dict(os.environ)
    env.setdefault("PYTEST_XDIST_WORKER", "term_ops")
    cmd = [sys.executable, "-m", "autograder", "--course", str(course), "--timeout", "20", *args]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=900, cwd=cwd or REPO_ROOT, env=env
    )
    if check:
        assert proc.returncode == 0, (args, proc.stdout[-3000:], proc.stderr[-3000:])
    return proc


def _release(name):
    return nbformat.read(str(REPO_ROOT / "exercises" / "rank" / f"{name}.ipynb"), as_version=4)


def _answered(name):
    nb = _release(name)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = solution_source(load(name))
    return nb


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _export(course, tmp):
    _run(course, "export", str(tmp / "grades.csv"))
    grades = {(r["student_id"], r["assignment"]): r for r in _rows(tmp / "grades.csv")}
    by_nb = {(r["student_id"], r["notebook"]): r for r in _rows(tmp / "grades_by_notebook.csv")}
    with open(tmp / "grades_canvas.csv", newline="") as fh:
        canvas = list(csv.reader(fh))
    return grades, by_nb, canvas


def _page(course, student):
    return course / "feedback" / student / "rank" / "rank_bound.html"


def _header_score(page):
    return re.search(r"<h4>rank_bound \(Score: ([^)]*)\)</h4>", page.read_text()).group(1)


def _submission_line(page):
    return re.search(r'<p id="autograder-submission"[^>]*>(.*?)</p>', page.read_text()).group(1)


def _write_class(base):
    subs = base / "submissions"
    nbformat.write(_answered("rank_bound"), str(_mk(subs / "ann" / "rank") / "rank_bound.ipynb"))
    nbformat.write(_release("rank_bound"), str(_mk(subs / "ben" / "rank") / "rank_bound.ipynb"))
    with (base / "lms_times.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["student", "assignment", "timestamp"])
        for sid, when in TIMES.items():
            w.writerow([sid, "rank", when])
    with (base / "students.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "first_name", "last_name", "email"])
        for sid in TIMES:
            w.writerow([sid, sid.title(), "Student", f"{sid}@example.org"])
    return subs


def _mk(path):
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("term_ops")
    subs = _write_class(base)
    course = base / "course"
    _run(course, "setup", "--assign", f"rank={RANK_DUE}", f"noise={NOISE_DUE}")
    _run(course, "roster", str(base / "students.csv"))
    _run(course, "collect", str(subs), "--times", str(base / "lms_times.csv"))
    proc = _run(course, "autograde", "--seed", "7")
    _run(course, "feedback")
    return {"base": base, "course": course, "autograde": proc}


def _copy(graded, tmp_path):
    course = tmp_path / "course"
    shutil.copytree(graded["course"], course, symlinks=True)
    return course


def test_autograde_reports_progress_and_keeps_nbgrader_in_the_log(graded):
    out = graded["autograde"].stdout.splitlines()
    done = [line for line in out if line.startswith("graded ")]
    assert sorted(done) == ["graded 1/2 students: ann", "graded 2/2 students: ben"] or sorted(
        done
    ) == ["graded 1/2 students: ben", "graded 2/2 students: ann"], out
    assert not any("nbgrader" in line and line.startswith("$") for line in out), out
    assert "[AutogradeApp]" not in graded["autograde"].stdout + graded["autograde"].stderr
    log = (graded["course"] / "autograder.log").read_text()
    assert "$ nbgrader generate_assignment" in log


def test_setting_one_due_date_keeps_the_other_chapters(graded, tmp_path):
    course = _copy(graded, tmp_path)
    _run(course, "setup", "--assign", "rank=2026-02-01T12:00")
    term = json.loads((course / "term.json").read_text())
    assert sorted(term["assignments"]) == ["noise", "rank"]
    assert term["assignments"]["noise"]["due"].startswith("2026-01-24 23:59")
    assert term["assignments"]["rank"]["due"].startswith("2026-02-01 12:00")
    grades, by_nb, canvas = _export(course, tmp_path)
    assert {a for _, a in grades} == {"noise", "rank"}
    assert grades["ann", "noise"]["duedate"].startswith("2026-01-24 23:59")
    head, possible = canvas[0], canvas[1]
    assert head[5:7] == ["noise", "rank"]
    top = _maximum(_notebooks("rank") + _notebooks("noise"))
    assert float(possible[-2]) == top
    assert {nb for _, nb in by_nb} == set(_notebooks("rank") + _notebooks("noise"))
    # replacing the term takes the explicit flag
    _run(course, "setup", "--replace", "--assign", "rank")
    grades, _, canvas = _export(course, tmp_path)
    assert {a for _, a in grades} == {"rank"}
    assert float(canvas[1][-2]) == _maximum(_notebooks("rank"))


def test_a_new_policy_reaches_export_and_feedback_without_grading_again(graded, tmp_path):
    course = _copy(graded, tmp_path)
    top = _maximum(["rank_bound"])
    grades, by_nb, _ = _export(course, tmp_path)
    assert float(grades["ann", "rank"]["score"]) == top and grades["ann", "rank"]["late"] == ""
    assert _header_score(_page(course, "ann")) == f"{top} / {top}"
    # rank was due before ann handed it in: late by 106 h, zero points under "zero"
    _run(course, "setup", "--assign", "rank=2026-01-01T00:00", "--late-policy", "zero")
    assert len((course / "grading_seeds.log").read_text().splitlines()) == 1  # no regrading
    late = (dt.datetime(2026, 1, 5, 10) - dt.datetime(2026, 1, 1)).total_seconds() / 3600
    grades, by_nb, canvas = _export(course, tmp_path)
    ann = grades["ann", "rank"]
    assert float(ann["raw_score"]) == top and float(ann["score"]) == 0.0
    assert float(ann["late_submission_penalty"]) == top
    assert ann["late"] == f"late by {late:.2f} h" and float(ann["student_total"]) == 0.0
    assert float(by_nb["ann", "rank_bound"]["score"]) == 0.0
    assert float(by_nb["ann", "rank_bound"]["raw_score"]) == top
    people = {row[2]: row for row in canvas[2:]}
    assert float(people["ann"][canvas[0].index("rank")]) == 0.0 and float(people["ann"][-2]) == 0
    # the page says the same as the exports, with no feedback command run
    page = _page(course, "ann")
    assert _header_score(page) == f"0.0 / {top}"
    assert f"Late by {late:.2f} h: the late policy gives this notebook 0 points" in (
        _submission_line(page)
    )
    # the feedback command agrees too
    _run(course, "feedback")
    assert _header_score(page) == f"0.0 / {top}"
    # one chapter's own policy over the term's: points kept, lateness reported
    _run(course, "setup", "--chapter-policy", "rank=mark")
    grades, by_nb, _ = _export(course, tmp_path)
    assert float(grades["ann", "rank"]["score"]) == top and grades["ann", "rank"]["late"]
    assert _header_score(page) == f"{top} / {top}"
    assert "the points are kept" in _submission_line(page)
    term = json.loads((course / "term.json").read_text())
    assert term["late_policy"] == "zero" and term["assignments"]["rank"]["policy"] == "mark"
    assert term["assignments"]["noise"]["due"].startswith("2026-01-24 23:59")


def test_regrading_one_student_leaves_the_others_alone(graded, tmp_path):
    course = _copy(graded, tmp_path)
    top = _maximum(["rank_bound"])
    ann_page, ben_page = _page(course, "ann"), _page(course, "ben")
    ann_nb = course / "autograded" / "ann" / "rank" / "rank_bound.ipynb"
    kept = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in (ann_page, ann_nb)}
    ben_before = ben_page.stat().st_mtime_ns
    assert _header_score(ben_page) == f"0.0 / {top}"
    grades_before, _, _ = _export(course, tmp_path)
    # ben's notebook, fixed by the instructor after a collection problem
    nbformat.write(_answered("rank_bound"), str(course / "submitted/ben/rank/rank_bound.ipynb"))
    proc = _run(course, "autograde", "--student", "ben", "--seed", "7")
    assert f"ben rank/rank_bound: 0 -> {top:g}" in proc.stdout.splitlines(), proc.stdout
    assert "graded 1/1 students: ben" in proc.stdout
    assert not any(line.startswith("ann ") for line in proc.stdout.splitlines())
    for p, (data, mtime) in kept.items():
        assert p.read_bytes() == data and p.stat().st_mtime_ns == mtime, p
    assert ben_page.stat().st_mtime_ns > ben_before
    assert _header_score(ben_page) == f"{top} / {top}"
    grades, _, _ = _export(course, tmp_path)
    assert grades["ann", "rank"] == grades_before["ann", "rank"]
    assert float(grades["ben", "rank"]["score"]) == top


def test_removed_student_is_archived_and_stays_out(graded, tmp_path):
    course = _copy(graded, tmp_path)
    submitted = (course / "submitted/ben/rank/rank_bound.ipynb").read_bytes()
    proc = _run(course, "roster", "--remove", "ben")
    archived = list((course / "archive" / "ben").glob("*/submitted/rank/rank_bound.ipynb"))
    assert len(archived) == 1 and archived[0].read_bytes() == submitted, proc.stdout
    assert (archived[0].parents[2] / "feedback" / "rank" / "rank_bound.html").is_file()
    assert (archived[0].parents[2] / "grades.csv").is_file()
    for folder in ("submitted", "autograded", "feedback"):
        assert not (course / folder / "ben").exists()

    def absent():
        grades, by_nb, canvas = _export(course, tmp_path)
        assert {s for s, _ in grades} == {"ann"}
        assert {s for s, _ in by_nb} == {"ann"}
        assert [row[2] for row in canvas[2:]] == ["ann"]

    absent()
    # nbgrader adds him back: the roster is the truth
    from autograder.course import Course

    c = Course(course, log=lambda *a: None)
    proc = c.nbgrader("db", "student", "add", "ben", "--first-name=Ben")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ben" in {s.id for s in _gradebook_students(course)}
    absent()
    # and no later grading run grades him, even with his folder back in submitted/
    (course / "submitted" / "ben").mkdir()
    shutil.copytree(archived[0].parent, course / "submitted" / "ben" / "rank")
    ann_page = _page(course, "ann")
    old_page = ann_page.stat().st_mtime_ns
    out = _run(course, "autograde", "--seed", "7").stdout
    assert "graded 1/1 students: ann" in out and "ben" not in out, out
    # ann's page would be older than her new grade: it is written again
    assert ann_page.stat().st_mtime_ns > old_page and "written again" in out, out
    absent()
    # a new hand-in of his is not collected, and says why in one line
    subs = tmp_path / "late_subs"
    shutil.copytree(archived[0].parent, subs / "ben" / "rank")
    shutil.rmtree(course / "submitted" / "ben")
    _run(course, "collect", str(subs))
    assert not (course / "submitted" / "ben").exists()
    issues = _rows(course / "grading_issues.csv")
    assert any(r["student_id"] == "ben" and "removed" in r["problem"] for r in issues), issues
    # a removed student cannot be removed twice, nor an unknown one
    again = _run(course, "roster", "--remove", "ben", check=False)
    assert again.returncode == 2 and "ben" in again.stderr and "Traceback" not in again.stderr


def _gradebook_students(course):
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return list(gb.students)


@pytest.mark.parametrize(
    "args",
    [
        ("export", "g.csv"),
        ("feedback",),
        ("autograde",),
        ("collect", "subs"),
        ("roster", "students.csv"),
        ("roster", "--remove", "ann"),
        ("similarity",),
    ],
)
def test_a_mistyped_course_is_one_line_and_creates_nothing(tmp_path, args):
    (tmp_path / "subs").mkdir()
    (tmp_path / "students.csv").write_text("id\nann\n")
    proc = _run(tmp_path / "cuorse", *args, check=False, cwd=tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "cuorse" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "cuorse").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["students.csv", "subs"]


def test_a_missing_submissions_folder_is_one_line(tmp_path):
    course = tmp_path / "course"
    course.mkdir()
    for args in (("collect", "nosuch"), ("grade-all", "nosuch", "g.csv")):
        proc = _run(course, *args, check=False, cwd=tmp_path)
        assert proc.returncode == 2 and "nosuch" in proc.stderr, (args, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert list(course.iterdir()) == []
    # grade-all creates its course, but not for a folder that is not there
    proc = _run(tmp_path / "fresh", "grade-all", "nosuch", "g.csv", check=False, cwd=tmp_path)
    assert proc.returncode == 2 and not (tmp_path / "fresh").exists()


def test_a_roster_with_one_id_twice_is_refused(tmp_path):
    course = tmp_path / "course"
    course.mkdir()
    roster = tmp_path / "students.csv"
    roster.write_text(
        "id,first_name,last_name,email\n"
        "ann,Ann,S,a@example.org\nzoe,Zoe,S,z@example.org\nann,Anne,T,t@example.org\n"
    )
    proc = _run(course, "roster", str(roster), check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "'ann'" in lines[0] and "twice" in lines[0], lines
    assert list(course.iterdir()) == []  # nothing imported


def test_make_collect_and_grade_pass_the_lms_times_and_roster(tmp_path):
    for target in ("collect", "grade"):
        out = subprocess.run(
            ["make", "-n", target, "TIMES=lms times.csv", "ROSTER=students.csv"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
        ).stdout
        assert "--times 'lms times.csv'" in out and "--roster 'students.csv'" in out, out
    # one real run: files copied here long after the due date stay on time with TIMES
    subs = _write_class(tmp_path)
    env = dict(os.environ, PYTEST_XDIST_WORKER=os.environ.get("PYTEST_XDIST_WORKER", "term_ops"))
    late = {}
    for name, times, roster in (
        ("with", str(tmp_path / "lms_times.csv"), str(tmp_path / "students.csv")),
        ("without", "", ""),
    ):
        course = tmp_path / f"course_{name}"
        _run(course, "setup", "--assign", f"rank={RANK_DUE}")
        for target, extra in (
            ("collect", [f"SUBMISSIONS={subs}", f"TIMES={times}", f"ROSTER={roster}"]),
            ("grades", [f"GRADES={tmp_path / name / 'grades.csv'}"]),
        ):
            proc = subprocess.run(
                ["make", "-s", target, f"COURSE={course}", *extra],
                cwd=REPO_ROOT,
                capture_output=True,
                text=True,
                env=env,
            )
            assert proc.returncode == 0, (target, proc.stdout[-2000:], proc.stderr[-2000:])
        rows = _rows(tmp_path / name / "grades.csv")
        late[name] = {r["student_id"]: r["late"] for r in rows if r["assignment"] == "rank"}
    assert late["with"] == {"ann": "", "ben": ""}
    assert json.loads((tmp_path / "course_with" / "roster.json").read_text())["students"]
    assert all(v.startswith("late by") for v in late["without"].values()), late
