"""The grades of the assigned chapters written for the instructor and the LMS.

Three CSV files (every cell written through :mod:`autograder.csv_safe`, so that no
spreadsheet evaluates a cell a student's text reached):

* nbgrader's export, one row per student and assignment, with its lateness, its
  problems from ``grading_issues.csv`` and the student's totals over the term added;
* one row per student and notebook, with that notebook's problems;
* Canvas's gradebook layout, one row per student and one column per assignment.
"""

from __future__ import annotations

import csv
from pathlib import Path

from .. import csv_safe
from .records import Grade, RosterEntry
from .term import NOT_SUBMITTED

__all__ = ["chapter_rows", "export_by_notebook", "export_canvas", "export_grades", "summary_table"]

#: the columns of the grades CSV: nbgrader's export's, then the term's
GRADE_COLUMNS = [
    "assignment",
    "duedate",
    "timestamp",
    "student_id",
    "last_name",
    "first_name",
    "email",
    "raw_score",
    "late_submission_penalty",
    "score",
    "max_score",
    "late",
    "flags",
    "student_total",
    "student_max",
    "student_percent",
]


def _check(grades, roster):
    if any(not isinstance(g, Grade) for g in grades):
        raise ValueError("grades must hold Grade records")
    if any(not isinstance(e, RosterEntry) for e in roster):
        raise ValueError("roster must hold RosterEntry records")


def export_grades(root, path, grades, roster, assignments, issues):
    """Write the grades of course directory ``root`` in three layouts; return their paths.

    * ``path``: nbgrader's export's columns (one row per student and assignment, with its
      ``timestamp``, ``duedate``, ``raw_score``, ``late_submission_penalty`` and
      ``score``), with columns added: ``late`` (``late by 2.50 h`` or empty, always in
      hours), ``flags`` (the problems of ``issues`` for that student and assignment), and
      the student's ``student_total``, ``student_max`` and ``student_percent`` over the
      term; a chapter a student never handed in is first recorded in ``issues``
      (:data:`autograder.course.term.NOT_SUBMITTED`);
    * ``<name>_by_notebook.csv``: one row per student and notebook (:func:`export_by_notebook`);
    * ``<name>_canvas.csv``: Canvas's gradebook layout (:func:`export_canvas`).

    Parameters
    ----------
    root : path
        The course directory.
    path : path
        The grades CSV to write (its folder is created).
    grades : list of Grade
        Every notebook's grade (:func:`autograder.course.gradebook.read_grades`), the late
        policy applied (:attr:`Grade.score`).
    roster : list of RosterEntry
        The class: exactly these students are exported.
    assignments : list of str
        The term's chapters, in column order.
    issues : IssueLog
        The course's :class:`autograder.course.issue_log.IssueLog`.

    Returns
    -------
    tuple of Path
        ``(path, by_notebook, canvas)``.

    Raises
    ------
    ValueError
        If ``grades`` or ``roster`` hold other things than their records.
    """
    grades, roster = list(grades), list(roster)
    _check(grades, roster)
    path = Path(path).resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    root = Path(root)
    people = {e.id for e in roster}
    grades = [g for g in grades if g.student in people and g.assignment in set(assignments)]
    for e in roster:  # a chapter never handed in is flagged like a missing notebook
        for a in assignments:
            if not (root / "submitted" / e.id / a).is_dir():
                issues.record(e.id, a, "*", NOT_SUBMITTED)
    rows = chapter_rows(grades, roster, assignments, _flags(issues.rows()))
    with path.open("w", newline="") as fh:
        w = csv_safe.dict_writer(fh, GRADE_COLUMNS)
        w.writeheader()
        w.writerows(rows)
    detail = path.with_name(path.stem + "_by_notebook.csv")
    export_by_notebook(grades, detail, issues.rows())
    canvas = path.with_name(path.stem + "_canvas.csv")
    export_canvas(rows, canvas, assignments)
    return path, detail, canvas


def _flags(rows):
    """(student, assignment) -> the problems of issue-log ``rows``, in order, once each."""
    flags = {}
    for row in rows:
        problems = flags.setdefault((row["student_id"], row["assignment"]), [])
        text = (
            f"{row['notebook']}: {row['problem']}"
            if row["notebook"] not in ("*", "?")
            else row["problem"]
        )
        if text not in problems:
            problems.append(text)
    return flags


def _when(t):
    """A time as nbgrader's export writes it (naive UTC), or ``""``."""
    return "" if t is None else str(t.replace(tzinfo=None))


def chapter_rows(grades, roster, assignments, flags=None):
    """One row (a dict of :data:`GRADE_COLUMNS`) per student of ``roster`` and chapter of
    ``assignments``, summing that chapter's ``grades`` (raw score, late penalty, score
    after the late policy, maximum), with the student's term totals; ``flags`` maps
    (student, assignment) to its problems."""
    flags = flags or {}
    by = {}
    for g in grades:
        by.setdefault((g.student, g.assignment), []).append(g)
    rows = []
    for e in sorted(roster, key=lambda e: e.id):
        mine = []
        for a in assignments:
            gs = by.get((e.id, a), [])
            first = gs[0] if gs else None
            raw = sum(g.raw_score for g in gs)
            score = sum(g.score for g in gs)
            mine.append(
                {
                    "assignment": a,
                    "duedate": _when(first.due) if first else "",
                    "timestamp": _when(first.submitted) if first else "",
                    "student_id": e.id,
                    "last_name": e.last_name,
                    "first_name": e.first_name,
                    "email": e.email,
                    "raw_score": f"{raw:g}",
                    "late_submission_penalty": f"{raw - score:g}",
                    "score": f"{score:g}",
                    "max_score": f"{sum(g.max_score for g in gs):g}",
                    "late": first.late if first else "",
                    "flags": " | ".join(flags.get((e.id, a), [])),
                }
            )
        got = sum(float(r["score"]) for r in mine)
        top = sum(float(r["max_score"]) for r in mine)
        for r in mine:
            r["student_total"] = f"{got:g}"
            r["student_max"] = f"{top:g}"
            r["student_percent"] = f"{100.0 * got / top:.1f}" if top else ""
        rows += mine
    return rows


def export_canvas(rows, path, assignments):
    """Write Canvas's gradebook layout of the export ``rows`` (dicts with
    ``student_id``, ``assignment``, ``score``, ``max_score`` and the names) to ``path``:
    one row per student and one column per assignment of ``assignments``, a ``Points
    Possible`` row first, the term's total in Canvas's read-only ``Final Points`` /
    ``Final Score`` columns. Returns ``path``."""
    assignments = list(assignments)
    people, scores, maxima = {}, {}, {}
    for r in rows:
        sid = r["student_id"]
        last, first = r.get("last_name") or "", r.get("first_name") or ""
        people[sid] = f"{last}, {first}".strip(", ") or sid
        scores[sid, r["assignment"]] = float(r["score"] or 0)
        maxima[r["assignment"]] = float(r["max_score"] or 0)
    head = [
        "Student",
        "ID",
        "SIS User ID",
        "SIS Login ID",
        "Section",
        *assignments,
        "Final Points",
        "Final Score",
    ]
    top = sum(maxima.get(a, 0.0) for a in assignments)
    with Path(path).open("w", newline="") as fh:
        w = csv_safe.writer(fh)
        w.writerow(head)
        w.writerow(
            [
                "Points Possible",
                "",
                "",
                "",
                "",
                *[f"{maxima.get(a, 0.0):g}" for a in assignments],
                f"{top:g}",
                "100",
            ]
        )
        for sid in sorted(people):
            got = sum(scores.get((sid, a), 0.0) for a in assignments)
            w.writerow(
                [
                    people[sid],
                    "",
                    sid,
                    sid,
                    "",
                    *[f"{scores.get((sid, a), 0.0):g}" for a in assignments],
                    f"{got:g}",
                    f"{100.0 * got / top:.1f}" if top else "",
                ]
            )
    return path


def export_by_notebook(grades, path, issue_rows):
    """Write one row per :class:`Grade` of ``grades`` to ``path``: ``student_id,
    assignment, notebook, score`` (after the late policy), ``max_score, raw_score, late,
    issues`` (the problems of ``issue_rows``, the rows of ``grading_issues.csv``, for that
    notebook); a notebook without a submission scores 0. Returns ``path``."""
    grades = list(grades)
    _check(grades, [])
    path = Path(path)
    issues = {}
    for row in issue_rows:
        issues.setdefault((row["student_id"], row["notebook"]), []).append(row["problem"])
    with path.open("w", newline="") as fh:
        w = csv_safe.writer(fh)
        w.writerow(
            [
                "student_id",
                "assignment",
                "notebook",
                "score",
                "max_score",
                "raw_score",
                "late",
                "issues",
            ]
        )
        for g in sorted(grades, key=lambda g: (g.assignment, g.student, g.notebook)):
            w.writerow(
                [
                    g.student,
                    g.assignment,
                    g.notebook,
                    f"{g.score:g}",
                    f"{g.max_score:g}",
                    f"{g.raw_score:g}",
                    g.late,
                    " | ".join(issues.get((g.student, g.notebook), [])),
                ]
            )
    return path


def summary_table(csv_path):
    """Rows of an exported grades CSV as dicts (helper for the command line and tests)."""
    with open(csv_path, newline="") as fh:
        return list(csv.DictReader(fh))
