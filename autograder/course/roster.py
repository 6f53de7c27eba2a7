"""The class list of a course: ``roster.json`` is the truth every export and every
grading run reads.

* :func:`import_roster` reads nbgrader's roster CSV (``id, first_name, last_name,
  email``), refuses one that names an id twice, and adds the students to ``roster.json``
  and to the gradebook;
* :func:`remove_student` moves every file of a student into
  ``archive/<id>/<UTC time>/`` (nothing is deleted; their grades are kept there as
  ``grades.csv``), takes them out of the gradebook and lists them as removed, so that a
  student that nbgrader (or a later collect) brings back into the gradebook stays out of
  the exports and of later grading runs;
* a course without ``roster.json`` (no roster was ever imported) has the gradebook's
  students and those with a folder under ``submitted/``, less the removed ones.
"""

from __future__ import annotations

import csv
import datetime as _dt
import json
import shutil
from pathlib import Path

from .. import csv_safe
from ..nbgrader_run import GRADEBOOK, gradebook_url
from .records import RosterEntry

__all__ = [
    "ARCHIVE",
    "ROSTER_FILE",
    "imported_ids",
    "active_roster",
    "import_roster",
    "read_roster_csv",
    "removed_ids",
    "roster_problem",
    "remove_student",
]

ROSTER_FILE = "roster.json"
ARCHIVE = "archive"
#: course folders with one sub-folder per student
STUDENT_FOLDERS = ("submitted", "autograded", "feedback", "submitted_original")


def read_roster_csv(path):
    """The students of a roster CSV with an ``id`` column (and optionally
    ``first_name``, ``last_name``, ``email``), in file order.

    Raises
    ------
    ValueError
        Naming the file for a missing file or ``id`` column, an empty id, or an id given
        twice (the id and both lines are named).
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"roster file not found: {path}")
    out, seen = [], {}
    with path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        cols = {c.strip().lower(): c for c in reader.fieldnames or []}
        if "id" not in cols:
            raise ValueError(f"roster file {path}: no id column (header {reader.fieldnames})")
        for line, row in enumerate(reader, start=2):
            sid = (row.get(cols["id"]) or "").strip()
            if not sid:
                raise ValueError(f"roster file {path}, line {line}: no student id")
            if sid in seen:
                raise ValueError(
                    f"roster file {path}: student id {sid!r} appears twice "
                    f"(lines {seen[sid]} and {line}); nothing was imported"
                )
            seen[sid] = line
            out.append(
                RosterEntry(
                    sid,
                    *[
                        (row.get(cols[k]) or "").strip() if k in cols else ""
                        for k in (
                            "first_name",
                            "last_name",
                            "email",
                        )
                    ],
                )
            )
    return out


def _load(root):
    path = Path(root) / ROSTER_FILE
    if not path.exists():
        return None, {}
    data = json.loads(path.read_text())
    students = data.get("students")
    entries = None if students is None else [RosterEntry(**e) for e in students]
    return entries, dict(data.get("removed", {}))


def _save(root, entries, removed):
    # students None: no roster was imported, the gradebook's students are the class
    data = {
        "students": None
        if entries is None
        else [vars(e) for e in sorted(entries, key=lambda e: e.id)],
        "removed": removed,
    }
    (Path(root) / ROSTER_FILE).write_text(json.dumps(data, indent=2) + "\n")


def imported_ids(root):
    """Ids of the imported roster (``roster.json``) of course directory ``root``, less the
    removed ones, sorted; empty when no roster was ever imported (collect then takes every
    folder name as a student id)."""
    entries, removed = _load(root)
    return sorted(e.id for e in entries or () if e.id not in removed)


def roster_problem(student, roster):
    """Why a submission folder named ``student`` cannot be matched to ``roster`` (a set of
    ids; empty: no roster), or None if it can (one line, saying what to do)."""
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


def removed_ids(root):
    """Ids of the students removed from course directory ``root``, sorted."""
    return sorted(_load(root)[1])


def _gradebook_students(root):
    from nbgrader.api import Gradebook

    if not (Path(root) / GRADEBOOK).exists():
        return []
    with Gradebook(gradebook_url(root)) as gb:
        return [
            RosterEntry(s.id, s.first_name or "", s.last_name or "", s.email or "")
            for s in gb.students
        ]


def active_roster(root):
    """The class of course directory ``root``: the students of ``roster.json``, else
    those of the gradebook and of ``submitted/``, less the removed ones; a list of
    :class:`RosterEntry` sorted by id."""
    entries, removed = _load(root)
    if entries is None:  # no roster: whoever the gradebook has or handed something in
        entries = _gradebook_students(root)
        known = {e.id for e in entries}
        base = Path(root) / "submitted"
        if base.is_dir():
            entries += [
                RosterEntry(p.name)
                for p in sorted(base.iterdir())
                if p.is_dir() and p.name not in known and p.name == p.name.strip()
            ]
    return sorted((e for e in entries if e.id not in removed), key=lambda e: e.id)


def import_roster(root, csv_path):
    """Add the students of roster CSV ``csv_path`` (:func:`read_roster_csv`) to course
    directory ``root``: to ``roster.json`` (a known id gets the file's names) and to the
    gradebook. A removed student named again is back in the class.

    Returns
    -------
    (list of RosterEntry, list of str)
        The class after the import and the ids that were new.
    """
    from nbgrader.api import Gradebook

    new_entries = read_roster_csv(csv_path)
    entries, removed = _load(root)
    if entries is None:  # the first import keeps whoever the gradebook already has
        entries = [e for e in _gradebook_students(root) if e.id not in removed]
    before = {e.id for e in entries if e.id not in removed}
    merged = {e.id: e for e in entries}
    for e in new_entries:
        merged[e.id] = e
        removed.pop(e.id, None)
    _save(root, merged.values(), removed)
    with Gradebook(gradebook_url(root)) as gb:
        for e in new_entries:
            gb.update_or_create_student(
                e.id, first_name=e.first_name, last_name=e.last_name, email=e.email or None
            )
    after = active_roster(root)
    return after, sorted({e.id for e in after} - before)


def remove_student(root, student, grades=()):
    """Take ``student`` out of course directory ``root``.

    Their folders (:data:`STUDENT_FOLDERS`) move to ``archive/<student>/<UTC time>/``,
    their ``grades`` (:class:`autograder.course.records.Grade` records) are written there
    as ``grades.csv``, they leave the gradebook and ``roster.json`` lists them as removed.

    Returns
    -------
    Path
        The archive folder.

    Raises
    ------
    ValueError
        If ``student`` is not a student of the course (on the roster, in the gradebook or
        with files).
    """
    from nbgrader.api import Gradebook, MissingEntry

    root = Path(root)
    if not isinstance(student, str) or not student or "/" in student or student in (".", ".."):
        raise ValueError(f"student must be a student id, got {student!r}")
    entries, removed = _load(root)
    known = {e.id for e in (entries if entries is not None else [])}
    known |= {e.id for e in _gradebook_students(root)}
    folders = [root / f / student for f in STUDENT_FOLDERS if (root / f / student).exists()]
    if student in removed or (student not in known and not folders):
        raise ValueError(f"student {student!r} is not in the course {root}")
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    dest = root / ARCHIVE / student / stamp
    dest.mkdir(parents=True)
    for folder in folders:
        shutil.move(str(folder), str(dest / folder.parent.name))
    with (dest / "grades.csv").open("w", newline="") as fh:
        w = csv_safe.writer(fh)
        w.writerow(["assignment", "notebook", "raw_score", "max_score", "submitted"])
        for g in grades:
            w.writerow(
                [
                    g.assignment,
                    g.notebook,
                    f"{g.raw_score:g}",
                    f"{g.max_score:g}",
                    g.submitted or "",
                ]
            )
    if (root / GRADEBOOK).exists():
        with Gradebook(gradebook_url(root)) as gb:
            try:
                gb.remove_student(student)
            except MissingEntry:
                pass
    removed[student] = {"archive": str(dest.relative_to(root)), "removed": stamp}
    _save(root, None if entries is None else [e for e in entries if e.id != student], removed)
    return dest
