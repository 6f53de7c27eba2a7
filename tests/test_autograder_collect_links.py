"""`collect` reads only regular files of a submission, never through a link.

A submission folder is written by students: a name in it may be a symbolic link to another
student's notebook or to a file only the grader can read, a FIFO, a device that never ends,
or a file too large to hold. Each is refused with a line in ``grading_issues.csv``, the
exercise it stands for is graded as the blank release with the reason, nothing is read or
written through the link, and the honest students of the same run are collected.
"""

import json
import os
import shutil
import stat
import zipfile

import nbformat
import pytest

from autograder import REPO_ROOT
from autograder.course import Course
from autograder.safe_files import MAX_FILE_BYTES, Refused, read_regular, walk_regular, zip_members

SECRET = "only the grader may read this line"


def _course(tmp_path):
    course = Course(tmp_path / "course", log=lambda *a: None)
    for top in ("exercises", "solutions"):
        (course.root / top / "knn").mkdir(parents=True)
        shutil.copy(REPO_ROOT / top / "knn" / "knn_classify.ipynb", course.root / top / "knn")
    return course


def _release():
    return (REPO_ROOT / "exercises" / "knn" / "knn_classify.ipynb").read_bytes()


def _problems(course):
    return [(r["student_id"], r["notebook"], r["problem"]) for r in course.issues()]


def _submitted(course, student):
    path = course.root / "submitted" / student / "knn" / "knn_classify.ipynb"
    return path, path.read_text()


def test_links_fifos_devices_and_huge_files_are_refused_and_the_class_is_collected(tmp_path):
    course = _course(tmp_path)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    victim = outside / "victim_knn_classify.ipynb"  # another student's notebook, say
    nb = nbformat.reads(_release().decode(), as_version=4)
    nb.cells[0].source += "\n\n" + SECRET
    victim.write_text(nbformat.writes(nb))
    victim_before = victim.read_bytes()
    subs = tmp_path / "subs"
    (subs / "honest" / "work").mkdir(parents=True)
    (subs / "honest" / "work" / "knn_classify.ipynb").write_bytes(_release())
    # a link to another student's notebook, named as the exercise
    (subs / "linker").mkdir()
    os.symlink(victim, subs / "linker" / "knn_classify.ipynb")
    # a link to a device that never ends
    (subs / "zero").mkdir()
    os.symlink("/dev/zero", subs / "zero" / "knn_classify.ipynb")
    # a FIFO: opening it for reading would block without O_NONBLOCK
    (subs / "fifo").mkdir()
    os.mkfifo(subs / "fifo" / "knn_classify.ipynb")
    # a file larger than the cap (sparse: no disk is used)
    (subs / "huge").mkdir()
    with open(subs / "huge" / "knn_classify.ipynb", "wb") as fh:
        fh.truncate(MAX_FILE_BYTES + 1)
    # a linked folder inside a submission, and a student entry that is itself a link
    (subs / "dirlink").mkdir()
    os.symlink(outside, subs / "dirlink" / "more")
    os.symlink(subs / "honest", subs / "copycat")
    # a stated submission time behind a link
    (subs / "stamp" / "knn").mkdir(parents=True)
    (subs / "stamp" / "knn" / "knn_classify.ipynb").write_bytes(_release())
    (outside / "ts.txt").write_text("2019-12-31 23:59:00 UTC")
    os.symlink(outside / "ts.txt", subs / "stamp" / "knn" / "timestamp.txt")

    got = course.collect(subs)

    assert got["honest"] == ["knn"] and got["stamp"] == ["knn"]
    assert nbformat.reads(_submitted(course, "honest")[1], as_version=4) == nbformat.reads(
        _release().decode(), as_version=4
    )
    problems = _problems(course)
    for student, words in (
        ("linker", "symbolic link"),
        ("zero", "symbolic link"),
        ("fifo", "FIFO"),
        ("huge", "larger than"),
    ):
        assert got[student] == ["knn"]  # the chapter is graded, as the blank release
        path, text = _submitted(course, student)
        assert not path.is_symlink() and words in text and SECRET not in text, student
        assert any(s == student and n == "knn_classify" and words in p for s, n, p in problems), (
            student,
            problems,
        )
    assert any(s == "dirlink" and "symbolic link to a folder" in p for s, _, p in problems)
    assert got["dirlink"] == []
    assert "copycat" not in got
    assert any(s == "copycat" and "symbolic link" in p for s, _, p in problems)
    # the stated time behind the link is not taken: the file's own time is
    stamp = (course.root / "submitted" / "stamp" / "knn" / "timestamp.txt").read_text()
    assert not stamp.startswith("2019")
    # nothing was read or written through a link
    assert victim.read_bytes() == victim_before
    assert SECRET not in (course.root / "grading_issues.csv").read_text()
    for p in (course.root / "submitted").rglob("*"):
        assert not p.is_symlink(), p


def test_zip_members_that_are_links_or_too_large_are_refused(tmp_path):
    course = _course(tmp_path)
    subs = tmp_path / "subs"
    subs.mkdir()
    with zipfile.ZipFile(subs / "mallory.zip", "w") as zf:
        link = zipfile.ZipInfo("knn_classify.ipynb")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(link, "/course/gradebook.db")
    with zipfile.ZipFile(subs / "oscar.zip", "w") as zf:
        zf.writestr("nested/knn_classify.ipynb", _release())
    got = course.collect(subs)
    assert got == {"mallory": ["knn"], "oscar": ["knn"]}
    assert "symbolic link" in _submitted(course, "mallory")[1]
    assert any(
        s == "mallory" and "symbolic link in the zip file" in p for s, _, p in _problems(course)
    )
    with zipfile.ZipFile(subs / "oscar.zip") as zf:
        got = list(zip_members(zf, ".ipynb", limit=10))
    assert [(data, why is not None) for _, data, why in got] == [(None, True)]
    assert "larger than 10 bytes" in got[0][2]


def test_read_regular_and_walk_regular(tmp_path):
    f = tmp_path / "a.ipynb"
    f.write_text(json.dumps({"x": 1}))
    data, mtime = read_regular(f)
    assert data == f.read_bytes() and mtime == pytest.approx(f.stat().st_mtime)
    os.symlink(f, tmp_path / "link.ipynb")
    os.mkfifo(tmp_path / "pipe.ipynb")
    for bad, words in (
        (tmp_path / "link.ipynb", "symbolic link"),
        (tmp_path / "pipe.ipynb", "FIFO"),
        ("/dev/null", "device"),
        (tmp_path / "missing", "cannot be opened"),
        (tmp_path, "folder"),
    ):
        with pytest.raises(Refused, match=words):
            read_regular(bad)
    with pytest.raises(Refused, match="larger than 3 bytes"):
        read_regular(f, limit=3)
    for bad in (-1, 1.5, True, "10"):
        with pytest.raises(ValueError, match="limit"):
            read_regular(f, limit=bad)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.ipynb").write_text("{}")
    (tmp_path / "sub" / "notes.txt").write_text("")
    os.symlink(tmp_path / "sub", tmp_path / "linked")
    files, refused = walk_regular(tmp_path, ".ipynb")
    assert files == [f, tmp_path / "sub" / "b.ipynb"]
    assert sorted((p.name, why.split(":")[0]) for p, why in refused) == [
        ("link.ipynb", "is a symbolic link"),
        ("linked", "is a symbolic link to a folder"),
        ("pipe.ipynb", "is a FIFO"),
    ]
    with pytest.raises(Refused, match="symbolic link"):
        walk_regular(tmp_path / "linked")
    # under a base folder, no folder on the way may be a link, and the path stays inside
    assert read_regular("sub/b.ipynb", top=tmp_path)[0] == b"{}"
    with pytest.raises(Refused, match="linked folder"):
        read_regular("linked/b.ipynb", top=tmp_path)
    for bad in ("../a.ipynb", str(f), ""):
        with pytest.raises(ValueError, match="path"):
            read_regular(bad, top=tmp_path / "sub")
    with pytest.raises(ValueError, match="zf"):
        zip_members(str(tmp_path / "x.zip"))


# ---------------------------------------------------------------- times
def _zip_dated(path, nb_bytes, year):
    with zipfile.ZipFile(path, "w") as zf:
        info = zipfile.ZipInfo("knn_classify.ipynb", date_time=(year, 12, 31, 12, 0, 0))
        zf.writestr(info, nb_bytes)


def _stamp(course, student):
    import datetime as dt

    text = (course.root / "submitted" / student / "knn" / "timestamp.txt").read_text()
    return dt.datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f UTC").replace(tzinfo=dt.timezone.utc)


def test_backdated_zip_and_timestamp_are_not_trusted(tmp_path):
    """A zip whose entries are dated 2019 and a folder whose timestamp.txt and file times
    say 2019 are both recorded at their arrival (now), each with a line naming the claim."""
    import datetime as dt

    course = _course(tmp_path)
    subs = tmp_path / "subs"
    subs.mkdir()
    _zip_dated(subs / "zipped.zip", _release(), 2019)
    (subs / "stamped" / "knn").mkdir(parents=True)
    nb = subs / "stamped" / "knn" / "knn_classify.ipynb"
    nb.write_bytes(_release())
    (subs / "stamped" / "knn" / "timestamp.txt").write_text("2019-12-31 12:00:00 UTC")
    old = dt.datetime(2019, 12, 31, tzinfo=dt.timezone.utc).timestamp()
    os.utime(nb, (old, old))
    before = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=5)
    course.collect(subs)
    for student in ("zipped", "stamped"):
        assert _stamp(course, student) > before, student
        lines = [p for s_, _, p in _problems(course) if s_ == student]
        assert any("2019-12-31" in p and "not trusted" in p for p in lines), lines


def test_times_stated_by_the_instructor_win(tmp_path):
    import csv

    course = _course(tmp_path)
    subs = tmp_path / "subs"
    subs.mkdir()
    _zip_dated(subs / "zipped.zip", _release(), 2019)
    (subs / "other").mkdir()
    (subs / "other" / "knn_classify.ipynb").write_bytes(_release())
    times = tmp_path / "lms.csv"
    with times.open("w", newline="") as fh:
        csv.writer(fh).writerows(
            [["student", "assignment", "timestamp"], ["zipped", "knn", "2026-01-09 08:30:00+01:00"]]
        )
    course.collect(subs, times=times, submitted_at="2026-01-20 10:00")
    assert str(_stamp(course, "zipped")).startswith("2026-01-09 07:30:00")
    assert str(_stamp(course, "other")).startswith("2026-01-20 10:00:00")
    bad = tmp_path / "bad.csv"
    bad.write_text("student,timestamp\nzipped,yesterday-ish\n")
    with pytest.raises(ValueError, match=r"bad.csv, line 2"):
        course.collect(subs, times=bad)
    bad.write_text("who,when\nzipped,2026-01-01\n")
    with pytest.raises(ValueError, match="student"):
        course.collect(subs, times=bad)


def test_no_roster_is_named_per_student_and_can_be_refused(tmp_path):
    course = _course(tmp_path)
    subs = tmp_path / "subs"
    (subs / "alcie").mkdir(parents=True)  # a typo nobody would notice
    (subs / "alcie" / "knn_classify.ipynb").write_bytes(_release())
    with pytest.raises(ValueError, match="require_roster"):
        course.collect(subs, require_roster=True)
    assert not (course.root / "submitted").exists()
    course.collect(subs)
    assert [(s_, p) for s_, _, p in _problems(course) if "without a roster" in p] == [
        (
            "alcie",
            "graded without a roster: the folder name 'alcie' is taken as the student id unchecked",
        )
    ]
