"""The grades of a course read from its gradebook as :class:`autograder.course.records.Grade`
records: the raw scores the grader recorded and the stored submission times, with the
term's current due dates and late policies."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

from ..nbgrader_run import GRADEBOOK, gradebook_url
from .records import Grade, Term

__all__ = ["read_grades", "stored_time"]


def _aware(when):
    if when is None:
        return None
    if when.tzinfo is None:
        return when.replace(tzinfo=_dt.timezone.utc)
    return when.astimezone(_dt.timezone.utc)


def stored_time(root, student, assignment):
    """The submission time collect stored for ``student``'s ``assignment`` in course
    directory ``root`` (``submitted/<student>/<assignment>/timestamp.txt``), or None."""
    from .term import parse_due

    path = Path(root) / "submitted" / student / assignment / "timestamp.txt"
    try:
        return parse_due(path.read_text().strip())
    except (OSError, ValueError):
        return None


def read_grades(root, term, students):
    """Every grade of the ``students`` in the chapters of ``term`` of course directory
    ``root``: one :class:`Grade` per student and notebook, sorted by student, chapter and
    notebook.

    Parameters
    ----------
    root : path
        The course directory.
    term : Term
        The term (its chapters, due dates and late policies are applied).
    students : iterable of str
        The students' ids; one with no submission scores 0 in every notebook.

    Returns
    -------
    list of Grade

    Raises
    ------
    ValueError
        If ``term`` is not a :class:`Term` or the course has no gradebook.
    """
    from nbgrader.api import Gradebook, MissingEntry

    if not isinstance(term, Term):
        raise ValueError(f"term must be a Term, got {type(term).__name__}")
    root = Path(root)
    if not (root / GRADEBOOK).exists():
        raise ValueError(f"course {root} has no gradebook: run `autograder setup` first")
    students = sorted(set(students))
    out = []
    with Gradebook(gradebook_url(root)) as gb:
        for chapter in term.chapters:
            try:
                assignment = gb.find_assignment(chapter)
            except MissingEntry:
                continue
            notebooks = sorted(assignment.notebooks, key=lambda nb: nb.name)
            for sid in students:
                try:
                    sub = gb.find_submission(chapter, sid)
                    when = _aware(sub.timestamp)
                except MissingEntry:
                    sub, when = None, None
                if when is None:
                    when = stored_time(root, sid, chapter)
                for nb in notebooks:
                    raw, graded = 0.0, False
                    if sub is not None:
                        try:
                            raw = float(
                                gb.find_submission_notebook(nb.name, chapter, sid).score or 0.0
                            )
                            graded = True
                        except MissingEntry:
                            pass
                    out.append(
                        Grade(
                            sid,
                            chapter,
                            nb.name,
                            max(raw, 0.0),
                            float(nb.max_score or 0.0),
                            submitted=when,
                            due=term.due(chapter),
                            policy=term.policy(chapter),
                            graded=graded,
                        )
                    )
    out.sort(key=lambda g: (g.student, g.assignment, g.notebook))
    return out
