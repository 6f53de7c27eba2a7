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
from ..nbgrader_run import gradebook_url
from .term import NOT_SUBMITTED, late_text

__all__ = ["export_by_notebook", "export_canvas", "export_grades", "summary_table"]


def export_grades(root, path, run, assignments, issues):
    """Write the grades of course directory ``root`` in three layouts; return their paths.

    * ``path``: nbgrader's CSV (one row per student and assignment, with its
      ``timestamp``, ``duedate`` and ``late_submission_penalty``), rows of the
      ``assignments`` only, with columns added: ``late`` (``late by 2.50 h`` or empty,
      always in hours), ``flags`` (the problems of ``issues`` for that student and
      assignment), and the student's ``student_total``, ``student_max`` and
      ``student_percent`` over the term; a chapter a student never handed in is first
      recorded in ``issues`` (:data:`autograder.course.term.NOT_SUBMITTED`);
    * ``<name>_by_notebook.csv``: one row per student and notebook (:func:`export_by_notebook`);
    * ``<name>_canvas.csv``: Canvas's gradebook layout (:func:`export_canvas`).

    ``run(*nbgrader_args)`` runs nbgrader on the course
    (:meth:`autograder.course.Course.nbgrader`); ``issues`` is the course's
    :class:`autograder.course.issue_log.IssueLog`.

    Returns
    -------
    tuple of Path
        ``(path, by_notebook, canvas)``.

    Raises
    ------
    RuntimeError
        If nbgrader's export fails.
    """
    path = Path(path).resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    proc = run("export", f"--to={path}")
    if proc.returncode != 0 or not path.exists():
        raise RuntimeError("nbgrader export failed:\n" + proc.stdout + proc.stderr)
    rows = _annotate_export(Path(root), path, assignments, issues)
    detail = path.with_name(path.stem + "_by_notebook.csv")
    export_by_notebook(root, detail, assignments, issues.rows())
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


def _annotate_export(root, path, assignments, issues):
    """Add the term's columns to nbgrader's export at ``path``; return its rows."""
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assigned = set(assignments)
    rows = [r for r in rows if r["assignment"] in assigned]
    for r in rows:  # a chapter never handed in is flagged like a missing notebook
        if not (root / "submitted" / r["student_id"] / r["assignment"]).is_dir():
            issues.record(r["student_id"], r["assignment"], "*", NOT_SUBMITTED)
    flags = _flags(issues.rows())
    totals = {}
    for r in rows:
        t = totals.setdefault(r["student_id"], [0.0, 0.0])
        t[0] += float(r["score"] or 0)
        t[1] += float(r["max_score"] or 0)
    for r in rows:
        r["late"] = late_text(r.get("timestamp"), r.get("duedate"))
        r["flags"] = " | ".join(flags.get((r["student_id"], r["assignment"]), []))
        got, top = totals[r["student_id"]]
        r["student_total"] = f"{got:g}"
        r["student_max"] = f"{top:g}"
        r["student_percent"] = f"{100.0 * got / top:.1f}" if top else ""
    fields = (
        list(rows[0])
        if rows
        else [
            "assignment",
            "student_id",
            "score",
            "max_score",
            "late",
            "flags",
            "student_total",
            "student_max",
            "student_percent",
        ]
    )
    with path.open("w", newline="") as fh:
        w = csv_safe.dict_writer(fh, fields)
        w.writeheader()
        w.writerows(rows)
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


def export_by_notebook(root, path, assignments, issue_rows):
    """Write one row per student and notebook of the ``assignments`` in the gradebook of
    course directory ``root`` to ``path``: ``student_id, assignment, notebook, score,
    max_score, issues`` (the problems of ``issue_rows``, the rows of
    ``grading_issues.csv``, for that notebook); a notebook without a submission scores 0.
    Returns ``path``."""
    from nbgrader.api import Gradebook, MissingEntry

    path = Path(path)
    issues = {}
    for row in issue_rows:
        issues.setdefault((row["student_id"], row["notebook"]), []).append(row["problem"])
    assigned = set(assignments)
    with Gradebook(gradebook_url(root)) as gb, path.open("w", newline="") as fh:
        w = csv_safe.writer(fh)
        w.writerow(["student_id", "assignment", "notebook", "score", "max_score", "issues"])
        for assignment in gb.assignments:
            if assignment.name not in assigned:
                continue
            for student in gb.students:
                for nb in assignment.notebooks:
                    try:
                        sub = gb.find_submission_notebook(nb.name, assignment.name, student.id)
                        score = sub.score
                    except MissingEntry:
                        score = 0.0
                    w.writerow(
                        [
                            student.id,
                            assignment.name,
                            nb.name,
                            f"{score:g}",
                            f"{nb.max_score:g}",
                            " | ".join(issues.get((student.id, nb.name), [])),
                        ]
                    )
    return path


def summary_table(csv_path):
    """Rows of an exported grades CSV as dicts (helper for the command line and tests)."""
    with open(csv_path, newline="") as fh:
        return list(csv.DictReader(fh))
