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
* of several files for one exercise (the blank download beside ``knn_classify (1).ipynb``)
  the one whose solution cells hold an answer is graded, then the newest; one line names
  every copy;
* a notebook that carries none of the release's cell ids (a fresh notebook holding the
  function) is graded as the blank exercise, with a line telling the student to paste the
  function into the released notebook;
* a zip file that cannot be read is graded as the blank exercise of every assigned chapter
  the student has no earlier submission of; an earlier submission is kept and graded, and a
  line names it;
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

from ..nbgrader_run import exercise_index
from ..safe_files import (
    MAX_FILE_BYTES,
    Refused,
    open_regular,
    open_zip,
    read_regular,
    walk_regular,
    zip_members,
)
from .issue_log import IssueLog
from .notebook_repair import (
    NOTE_ID,
    add_note,
    answered_cells,
    blank_notebook,
    defined_functions,
    identify,
    restore_deleted_cells,
    solution_syntax_errors,
)
from .roster import roster_problem
from .term import fmt_time, parse_due, utc

__all__ = [
    "KEPT_NOTE_ID",
    "Unreadable",
    "collect_folder",
    "stated_timestamp",
    "student_files",
]

#: the cell id of the note put atop an earlier submission kept in place of an unreadable one
KEPT_NOTE_ID = NOTE_ID + "-kept"
#: how each copy of an exercise is described, by its level (:class:`_Copy`)
_STATE = {2: "answered", 1: "not the released notebook", 0: "unanswered"}
#: copies named one by one in the line about several files for one exercise
_COPIES_LISTED = 5


class Unreadable(Refused):
    """A zip file that is not a zip file, or breaks while it is read (a truncated upload);
    ``str()`` is the reason. A zip refused for its size or members is a plain
    :class:`~autograder.safe_files.Refused`."""


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
        For a zip file that is not read, or not read to its end; :class:`Unreadable`
        where it is not a zip file or breaks while it is read.
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
            raise Unreadable(f"is not a readable zip file ({type(exc).__name__})") from None


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


@dataclasses.dataclass(frozen=True)
class _Course:
    """What collecting one submission needs of the course."""

    root: Path
    index: dict  # exercise -> assignment, the assigned chapters
    everything: dict  # exercise -> assignment, every chapter of the repository
    issues: IssueLog
    times: dict  # (student, assignment or None) -> the instructor's time
    submitted_at: _dt.datetime | None
    releases: dict = dataclasses.field(default_factory=dict)  # exercise -> release node
    functions: dict = dataclasses.field(default_factory=dict)  # exercise -> graded names


@dataclasses.dataclass
class _Copy:
    """One file handed in for an exercise (``nb`` is dropped once another copy wins)."""

    fname: str
    nb: object
    level: int  # 2: an answered solution cell, 1: not the released notebook, 0: the stub
    claim: _dt.datetime  # the time the file carries (orders the student's own copies)
    when: _dt.datetime

    def key(self, exercise):
        """The copy graded is the largest: answered first, then the newest."""
        return (self.level, self.claim, self.when, self.fname == f"{exercise}.ipynb", self.fname)

    def described(self):
        return f"{self.fname!r} ({_STATE[self.level]}, modified {fmt_time(self.claim)[:16]} UTC)"


@dataclasses.dataclass
class _Taken:
    """What one student's files gave so far."""

    found: dict = dataclasses.field(default_factory=dict)  # exercise -> the best _Copy
    others: dict = dataclasses.field(default_factory=dict)  # exercise -> [_Copy], not graded
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
    removed=(),
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
    removed : collection of str
        Ids of students removed from the course: their folders are not collected (one line
        each).
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
        why = (
            f"{student!r} was removed from the course (roster --remove): not collected"
            if student in removed
            else roster_problem(student, roster)
        )
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
        taken = _Taken()
        refused = []
        _broken_zip(course, entry, student, taken, why)
    for ex in list(taken.found):
        _finish(course, student, taken, ex)
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
                nbformat.write(taken.found[ex].nb, str(dest / f"{ex}.ipynb"))
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
    ex = identify(nb, index)
    fresh = ex is None  # none of the release's cell ids: not the released notebook
    if fresh:
        ex = stem or _by_function(course, nb)
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
    level = 1 if fresh else (2 if answered_cells(nb, _release(course, ex)) else 0)
    copy = _Copy(fname, nb, level, claim, when)
    best = taken.found.get(ex)
    if best is not None and best.key(ex) > copy.key(ex):
        best, copy = copy, best
    if best is not None:  # only the copy graded keeps its notebook in memory
        best.nb = None
        taken.others.setdefault(ex, []).append(best)
    taken.found[ex] = copy
    taken.problems.pop(ex, None)


def _release(course, ex):
    """The release notebook of exercise ``ex`` (read once per collection)."""
    if ex not in course.releases:
        path = course.root / "exercises" / course.index[ex] / f"{ex}.ipynb"
        course.releases[ex] = nbformat.read(str(path), as_version=4)
    return course.releases[ex]


def _graded_functions(course, ex):
    """The names of the functions exercise ``ex`` grades (empty when it has no spec)."""
    if ex not in course.functions:
        from ..exercises import load

        try:
            hidden = load(ex).HIDDEN
        except Exception:  # an exercise of the course without a spec here: no names
            hidden = ()
        course.functions[ex] = list(dict.fromkeys(c.split("/", 1)[0] for c in hidden))
    return course.functions[ex]


def _by_function(course, nb):
    """The assigned exercise whose graded functions notebook ``nb`` defines the most of
    (at least one), or None."""
    defined = set(defined_functions(nb))
    if not defined:
        return None
    votes = {ex: len(defined & set(_graded_functions(course, ex))) for ex in course.index}
    best = max(votes, key=votes.get, default=None)
    return best if best is not None and votes[best] else None


def _paste_hint(course, ex, copy):
    """Why a notebook without the release's cell ids is graded blank, and what to do."""
    a = course.index[ex]
    names = [n for n in _graded_functions(course, ex) if n in defined_functions(copy.nb)]
    what = (
        "your function" + ("s " if len(names) > 1 else " ") + ", ".join(names)
        if names
        else "your code"
    )
    return (
        f"Your file {copy.fname} is not the released notebook of this exercise: none of "
        "its cells carries the release's cell ids, so the grader cannot find your answer "
        f"in it. Paste {what} into the solution cell of the released notebook "
        f"exercises/{a}/{ex}.ipynb and hand that notebook in."
    )


def _finish(course, student, taken, ex):
    """Prepare the copy of exercise ``ex`` that is graded: name every copy when there were
    several, give a notebook that is not the released one the paste hint (graded as the
    blank exercise), put deleted read-only cells back, log syntax errors, add the note."""
    record, a = course.issues.record, course.index[ex]
    copy, others = taken.found[ex], taken.others.get(ex, [])
    renamed = copy.fname != f"{ex}.ipynb" and copy.level != 1  # the hint names the file
    notes = []
    if others:
        shown = sorted(others, key=lambda c: c.key(ex), reverse=True)[:_COPIES_LISTED]
        more = len(others) - len(shown)
        record(
            student,
            a,
            ex,
            f"{len(others) + 1} files for this exercise: graded {copy.described()}"
            + (f" as {ex}.ipynb" if renamed else "")
            + ", not "
            + ", ".join(c.described() for c in shown)
            + (f" and {more:,} more" if more else "")
            + "; a copy with an answered solution cell is preferred, then the newest",
        )
        notes.append(
            f"You handed in {len(others) + 1} files for this exercise: {copy.fname} "
            f"({_STATE[copy.level]}) was graded, not "
            + ", ".join(f"{c.fname} ({_STATE[c.level]})" for c in shown)
            + (f" and {more:,} more" if more else "")
            + ". The grader takes a copy whose solution cell holds an answer, then the newest."
        )
    elif renamed:
        record(student, a, ex, f"submitted as {copy.fname}; graded as {ex}.ipynb")
        notes.append(f"Your file {copy.fname} was recognised as {ex}.ipynb and graded as such.")
    if copy.level == 1:  # graded as the blank exercise, the hint as its note and line
        taken.problems[ex] = _paste_hint(course, ex, copy)
        del taken.found[ex]
        return
    nb = copy.nb
    restored = restore_deleted_cells(nb, _release(course, ex))
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


def _broken_zip(course, entry, student, taken, why):
    """A zip file ``entry`` that was not read (``why``, :class:`~autograder.safe_files.Refused`):
    for every assigned chapter with an earlier submission of ``student`` in ``submitted/``,
    a line naming the submission kept (and a note atop its notebooks); where there is none
    and the file is :class:`Unreadable`, every exercise of the chapter is graded as the
    blank exercise with the reason (into ``taken.problems``). A zip refused for its size
    or members, with nothing kept, gets one line."""
    record = course.issues.record
    text = f"{entry.name} {why}"
    # safe_files says so of a file that has no zip end record
    unreadable = isinstance(why, Unreadable) or str(why).startswith("is not a readable zip")
    kept_any = False
    for a in sorted(set(course.index.values())):
        earlier = course.root / "submitted" / student / a
        kept = sorted(p for p in earlier.glob("*.ipynb")) if earlier.is_dir() else []
        if kept:
            kept_any = True
            stamp = earlier / "timestamp.txt"
            try:
                when = f"{parse_due(stamp.read_text()[:40].strip()):%Y-%m-%d %H:%M} UTC"
            except (OSError, ValueError):
                when = "at a time not recorded"
            names = ", ".join(p.name for p in kept)
            record(
                student,
                a,
                "*",
                f"{text}: nothing in it was collected; the earlier submission of {a} "
                f"({names}, submitted {when}) is kept and graded",
            )
            for path in kept:
                try:
                    nb = nbformat.read(str(path), as_version=4)
                except Exception:  # graded as it is; the line above names it
                    continue
                add_note(
                    nb,
                    f"Your latest file {entry.name} {why}, so nothing in it could be read. "
                    f"This is your earlier submission of {a}, submitted {when}, graded in "
                    "its place.",
                    cell_id=KEPT_NOTE_ID,
                )
                nbformat.write(nb, str(path))
        elif unreadable:
            taken.times[a] = utc(entry.lstat().st_ctime)
            for ex in (e for e, aa in course.index.items() if aa == a):
                taken.problems[ex] = (
                    f"Your file {entry.name} {why}: nothing in it could be collected, and "
                    f"no earlier submission of {a} was collected before."
                )
    if not kept_any and not (unreadable and course.index):
        record(student, "*", "*", f"{text}: nothing in it was collected")
