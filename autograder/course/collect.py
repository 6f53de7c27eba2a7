"""Collecting a folder of submissions into a course's ``submitted/<student>/<assignment>/``.

Every byte of a submission is hostile: only regular files are read, never through a
link, each capped (:mod:`autograder.safe_files`); one submission that cannot be read never
stops the others. Whatever is wrong with a submission gets a line in the issue log
(``grading_issues.csv``, :class:`autograder.course.issue_log.IssueLog`):

* a notebook that is not valid notebook JSON, that cannot be matched to an exercise, or
  that is missing is replaced by the blank release notebook with a note at the top
  explaining why (:func:`autograder.course.notebook_repair.blank_notebook`); it is graded (zero)
  like any other;
* a renamed notebook is matched to its exercise through the nbgrader cell ids it carries,
  and read-only cells a student deleted are put back from the release;
* the submission time nbgrader compares with the due date is the instructor's (an LMS
  export, one time for everyone) or when the files reached this machine; a time the
  submission carries is never used, and one much earlier than the time used is named.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
import shutil
import zipfile
from pathlib import Path

import nbformat

from .issue_log import IssueLog
from ..nbgrader_run import exercise_index
from .notebook_repair import (
    add_note,
    blank_notebook,
    identify,
    restore_deleted_cells,
    solution_syntax_errors,
)
from ..safe_files import (
    MAX_FILE_BYTES,
    Refused,
    open_regular,
    open_zip,
    read_regular,
    walk_regular,
    zip_members,
)
from .term import fmt_time, parse_due, utc

__all__ = ["collect_folder", "roster_problem", "stated_timestamp", "student_files"]


def student_files(entry, refused):
    """(name, bytes, arrived, claimed) of every .ipynb of one student's folder or zip file
    ``entry``, one at a time (a generator: only the file being handed over is in memory);
    the (name, reason) of each file refused is appended to the list ``refused``.

    ``arrived`` is when the file (the zip file) reached this machine, its inode change
    time, which no tool of the student's sets; ``claimed`` is the time the file carries
    (its modification time, the zip entry's date), which the student controls. Both are
    aware datetimes. Only regular files are read, never through a link and at most
    :data:`autograder.safe_files.MAX_FILE_BYTES` each; a zip file is read only when it has
    at most :data:`~autograder.safe_files.MAX_ZIP_MEMBERS` members whose notebooks unpack
    to at most :data:`~autograder.safe_files.MAX_ZIP_BYTES` (:mod:`autograder.safe_files`).

    Raises
    ------
    autograder.safe_files.Refused
        For a zip file that is not read, or not read to its end.
    """

    def kept(name):  # editor and archiver leftovers are not submissions
        parts = Path(name).parts
        return ".ipynb_checkpoints" not in parts and (not parts or parts[0] != "__MACOSX")

    if entry.is_dir():
        paths, bad = walk_regular(entry, ".ipynb")
        refused += [
            (str(p.relative_to(entry)), why) for p, why in bad if kept(p.relative_to(entry))
        ]
        for rel in (p.relative_to(entry) for p in paths):
            if not kept(rel):
                continue
            try:
                data, st = read_regular(rel, top=entry, full_stat=True)
            except Refused as why:
                refused.append((str(rel), str(why)))
                continue
            yield rel.name, data, utc(st.st_ctime), utc(st.st_mtime)
    elif entry.suffix == ".zip":
        fh, zst = open_regular(entry, 16 * MAX_FILE_BYTES)
        try:
            with fh, open_zip(fh) as zf:
                for info, data, why in zip_members(zf, ".ipynb"):
                    if not kept(info.filename):
                        continue
                    if why is not None:
                        refused.append((info.filename, why))
                        continue
                    yield (
                        Path(info.filename).name,
                        data,
                        utc(zst.st_ctime),
                        _dt.datetime(*info.date_time, tzinfo=_dt.timezone.utc),
                    )
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError) as exc:
            raise Refused(f"is not a readable zip file ({type(exc).__name__})") from None


def stated_timestamp(entry, assignment):
    """The submission time a folder ``entry`` states in nbgrader's ``timestamp.txt`` (what
    ``nbgrader submit`` writes): ``<entry>/<assignment>/timestamp.txt``, else one at the
    top of the folder; None without either (a link or anything but a small regular file
    is not read)."""
    if not entry.is_dir() or entry.is_symlink():
        return None
    for stamp in (Path(assignment, "timestamp.txt"), Path("timestamp.txt")):
        if os.path.lexists(entry / stamp):
            try:
                text = read_regular(stamp, 4096, top=entry)[0].decode("utf-8").strip()
                return parse_due(text)
            except (Refused, UnicodeDecodeError, ValueError):
                return None
    return None


def roster_problem(student, roster):
    """Why a submission folder named ``student`` cannot be matched to ``roster`` (a set of
    ids; empty: no roster), or None if it can."""
    if not roster or student in roster:
        return None
    close = [r for r in roster if r.lower() == student.lower()]
    if close:
        return (
            f"the folder {student!r} is not on the roster, but {close[0]!r} is (the "
            f"case differs): not graded. Rename it to {close[0]!r} and collect "
            "again."
        )
    return (
        f"the folder {student!r} matches no student id of the roster: not graded. "
        "Fix the folder name or add the student to the roster, then collect again."
    )


@dataclasses.dataclass(frozen=True)
class _Course:
    """What collecting one submission needs of the course."""

    root: Path
    index: dict  # exercise -> assignment, the assigned chapters
    everything: dict  # exercise -> assignment, every chapter of the repository
    issues: IssueLog
    times: dict  # (student, assignment or None) -> the instructor's time
    submitted_at: _dt.datetime | None


@dataclasses.dataclass
class _Taken:
    """What one student's files gave so far."""

    found: dict = dataclasses.field(default_factory=dict)  # exercise -> notebook node
    problems: dict = dataclasses.field(default_factory=dict)  # exercise -> reason
    times: dict = dataclasses.field(default_factory=dict)  # assignment -> latest arrival
    claims: dict = dataclasses.field(default_factory=dict)  # assignment -> latest claim


def collect_folder(
    root,
    repo,
    folder,
    issues,
    times=None,
    submitted_at=None,
    roster=(),
    require_roster=False,
    log=print,
):
    """Copy the submissions of ``folder`` into ``root/submitted/<student>/<assignment>/``.

    Parameters
    ----------
    root, repo : Path
        The course directory (set up: ``solutions/`` and ``exercises/`` of the assigned
        chapters) and the repository (every chapter, to name a notebook of one that is not
        assigned).
    folder : Path
        One entry per student, named by the student id: a directory of notebooks (any
        nesting) or a ``.zip`` file.
    issues : IssueLog
        Where every problem is recorded (flushed before returning).
    times : dict, optional
        ``{(student, assignment or None): datetime}``, the instructor's submission times
        (:func:`autograder.course.term.read_submission_times`).
    submitted_at : datetime, optional
        One submission time for everyone without a row in ``times``; without either, a
        submission's time is when its files reached this machine.
    roster : collection of str
        The course's student ids; empty: every folder name is taken as a student id, with
        a line saying so.
    require_roster : bool
        Refuse to collect without a roster.
    log : callable
        Given one line of progress at a time.

    Returns
    -------
    dict
        ``{student: [assignments collected]}``.

    Raises
    ------
    ValueError
        If ``require_roster`` is set and ``roster`` is empty, or ``folder`` is not a
        directory.
    """
    folder = Path(folder)
    if times is None and submitted_at is None:
        log(
            "submission times: when each file reached this machine (no --times "
            "file or --submitted-at given); if the folder was copied here after "
            "the due date, give the LMS's times with --times"
        )
    course = _Course(
        Path(root),
        exercise_index(root),
        exercise_index(repo),
        issues,
        dict(times or {}),
        submitted_at,
    )
    roster = set(roster)
    if require_roster and not roster:
        raise ValueError(
            "require_roster: the course has no roster; import one first "
            "(autograder roster students.csv)"
        )
    if not folder.is_dir():
        raise ValueError(f"folder: not a directory: {folder}")
    if not roster:
        log(
            "no roster: every folder name is taken as a student id (import one "
            "with `autograder roster`, or pass --require-roster to refuse)"
        )
    collected = {}
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith("."):
            continue
        student = entry.stem if entry.suffix == ".zip" else entry.name
        why = roster_problem(student, roster)
        if why:
            issues.record(student, "*", "*", why)
            continue
        if not roster:
            issues.record(
                student,
                "*",
                "*",
                "graded without a roster: the folder "
                f"name {student!r} is taken as the student id unchecked",
            )
        if entry.is_symlink() or not (entry.is_dir() or entry.suffix == ".zip"):
            what = "a symbolic link" if entry.is_symlink() else "neither a folder nor a zip file"
            issues.record(student, "*", "*", f"{entry.name} is {what}: not collected")
            continue
        try:
            collected_now = _collect_one(course, entry, student)
        except Exception as exc:  # one bad submission never stops the others
            issues.record(
                student,
                "*",
                "*",
                "collecting this submission failed "
                f"({type(exc).__name__}: {str(exc)[:200]}): not collected",
            )
            continue
        collected[student] = collected_now
    issues.flush()
    return collected


def _collect_one(course, entry, student):
    """Collect one student's folder or zip file; returns the assignments written."""
    record, index = course.issues.record, course.index
    taken = _Taken()
    refused = []
    try:
        for fname, data, when, claim in student_files(entry, refused):
            _take_file(course, student, taken, fname, data, when, claim)
    except Refused as why:  # a zip file not read (to its end): nothing of it is kept
        record(student, "*", "*", f"{entry.name} {why}")
        taken = _Taken()
        refused = []
    for name, why in refused:
        ex = Path(name).stem if Path(name).stem in index else None
        record(student, index[ex] if ex else "?", ex or name, f"{name} {why}")
        if ex and ex not in taken.found:  # graded as the blank release, with the reason
            taken.problems.setdefault(ex, f"Your file {name} {why}.")
    assignments = sorted({index[e] for e in list(taken.found) + list(taken.problems)})
    for a in assignments:
        dest = course.root / "submitted" / student / a
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        # nbgrader compares this time with the due date: one the instructor states,
        # else the arrival of the files here; never a time inside the submission
        when = (
            course.times.get((student, a))
            or course.times.get((student, None))
            or course.submitted_at
            or taken.times.get(a)
            or _dt.datetime.now(_dt.timezone.utc)
        )
        claim = stated_timestamp(entry, a) or taken.claims.get(a)
        if claim is not None and claim < when - _dt.timedelta(hours=1):
            record(
                student,
                a,
                "*",
                f"the submission carries the time {fmt_time(claim)} "
                f"(its timestamp.txt, file or zip-entry dates), earlier than when it "
                f"reached the grader, {fmt_time(when)}; times inside a submission are "
                "not trusted, so it is graded as submitted at the later time",
            )
        (dest / "timestamp.txt").write_text(fmt_time(when))
        for ex in sorted(e for e, aa in index.items() if aa == a):
            if ex in taken.found:
                nbformat.write(taken.found[ex], str(dest / f"{ex}.ipynb"))
                continue
            reason = taken.problems.get(ex, "No notebook for this exercise was submitted.")
            record(student, a, ex, reason)
            nbformat.write(blank_notebook(course.root, a, ex, reason), str(dest / f"{ex}.ipynb"))
    return assignments


def _take_file(course, student, taken, fname, data, when, claim):
    """Take one notebook file of a student's submission: its exercise into
    ``taken.found`` (a notebook node) or ``taken.problems`` (why it is graded as blank),
    its times into ``taken.times`` and ``taken.claims``, and what is wrong with it into
    the issue log."""
    record, index = course.issues.record, course.index
    stem = Path(fname).stem if Path(fname).stem in index else None
    try:
        nb = nbformat.reads(data.decode("utf-8"), as_version=4)
    except Exception as exc:  # invalid JSON, wrong encoding, not a notebook
        if stem is None:
            record(student, "?", fname, f"unreadable file ignored ({type(exc).__name__})")
            return
        taken.problems[stem] = (
            f"Your file {fname} could not be read as a notebook "
            f"({type(exc).__name__}: {str(exc).splitlines()[0][:160]})."
        )
        return
    ex = identify(nb, index) or stem
    if ex is None:
        other = identify(nb, course.everything)
        if other is not None:
            chapter = course.everything[other]
            record(
                student,
                chapter,
                other,
                f"{fname} belongs to the chapter {chapter}, which is not assigned this term; "
                "ignored",
            )
            return
        record(student, "?", fname, "not recognised as any exercise notebook; ignored")
        return
    a = index[ex]
    taken.times[a] = max(taken.times.get(a, when), when)
    taken.claims[a] = max(taken.claims.get(a, claim), claim)
    notes = []
    if fname != f"{ex}.ipynb":
        record(student, a, ex, f"submitted as {fname}; graded as {ex}.ipynb")
        notes.append(f"Your file {fname} was recognised as {ex}.ipynb and graded as such.")
    if ex in taken.found:
        record(student, a, ex, f"several files for this exercise; used {fname}")
    release = nbformat.read(str(course.root / "exercises" / a / f"{ex}.ipynb"), as_version=4)
    restored = restore_deleted_cells(nb, release)
    if restored:
        record(
            student,
            a,
            ex,
            "deleted read-only cell(s) restored from the release: " + ", ".join(restored),
        )
        notes.append(
            "Read-only cells were missing from your notebook and were "
            "put back from the release before grading: " + ", ".join(restored) + "."
        )
    for line in solution_syntax_errors(nb):
        record(student, a, ex, line)
    if notes:
        add_note(nb, " ".join(notes))
    taken.found[ex] = nb
    taken.problems.pop(ex, None)
