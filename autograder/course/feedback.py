"""The course's feedback step: nbgrader's feedback pages of every graded submission, made
safe and offline (:func:`autograder.feedback.make_feedback_offline`), each with the line
that says when it was submitted and what the late policy did."""

from __future__ import annotations

from pathlib import Path

from ..nbgrader_run import GRADEBOOK, gradebook_url
from .term import late_text

__all__ = ["submission_lines", "write_feedback"]


def write_feedback(root, run, book_url, late_policy, log=print):
    """Generate the feedback pages of course directory ``root``.

    Parameters
    ----------
    root : Path
        The course directory (graded).
    run : callable
        ``run(*nbgrader_args)`` runs nbgrader on the course
        (:meth:`autograder.course.Course.nbgrader`).
    book_url : str or None
        Where the pages link each chapter.
    late_policy : {"mark", "zero"}
        What the submission lines say lateness does.
    log : callable
        Given nbgrader's output when it fails.

    Returns
    -------
    list of Path
        The pages, ``feedback/<student>/<assignment>/<notebook>.html``, sorted.
    """
    from ..feedback import make_feedback_offline, mark_submission

    root = Path(root)
    proc = run("generate_feedback", "*", "--force")
    if proc.returncode != 0:
        log(proc.stdout + proc.stderr)
    make_feedback_offline(root / "feedback", book_url=book_url)
    pages = sorted((root / "feedback").glob("*/*/*.html"))
    when = submission_lines(root, late_policy)
    for page in pages:
        line = when.get((page.parent.parent.name, page.parent.name))
        if line:
            mark_submission(page, line)
    return pages


def submission_lines(root, late_policy):
    """(student, assignment) -> the line about its submission time for the feedback
    page: when it was submitted, the due date, and ``late by 3.25 h`` (the exports'
    wording) with what the late policy (``"mark"`` or ``"zero"``) does, or ``on time``.

    Raises
    ------
    ValueError
        If ``late_policy`` is not ``"mark"`` or ``"zero"``.
    """
    from nbgrader.api import Gradebook

    if late_policy not in ("mark", "zero"):
        raise ValueError(f"late_policy must be 'mark' or 'zero', got {late_policy!r}")
    if not (Path(root) / GRADEBOOK).exists():
        return {}
    zero = late_policy == "zero"
    out = {}
    with Gradebook(gradebook_url(root)) as gb:
        for assignment in gb.assignments:
            for sub in assignment.submissions:
                if sub.timestamp is None:
                    continue
                stamp = f"{sub.timestamp:%Y-%m-%d %H:%M} UTC"
                if assignment.duedate is None:
                    out[sub.student.id, assignment.name] = f"Submitted {stamp}."
                    continue
                due = f"{assignment.duedate:%Y-%m-%d %H:%M} UTC"
                late = late_text(str(sub.timestamp), str(assignment.duedate))
                if late:
                    late = (
                        late[0].upper()
                        + late[1:]
                        + (
                            ": the late policy gives this notebook 0 points."
                            if zero
                            else ": the points are kept and the lateness is reported."
                        )
                    )
                out[sub.student.id, assignment.name] = f"Submitted {stamp}, due {due}. " + (
                    late or "On time."
                )
    return out
