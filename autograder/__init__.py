"""autograder: the repeval exercises, their hidden checks and the nbgrader pipeline.

Parts
-----
``autograder.checks``
    The check framework. A check is a plain function ``(student_fn, rng) -> list[Finding]``
    that draws fresh inputs, calls the student's function and the reference in
    :mod:`repeval_ref`, and explains every difference in the student's terms. Checks run
    inside the notebook kernel (:func:`autograder.checks.grade`) or in a separate process
    that only sends plain numbers back (:func:`autograder.checks.run_check_isolated`).
``autograder.exercises``
    One compact spec per exercise (statement, solution, visible tests, hidden checks).
``autograder.build``
    Turns the specs into the nbgrader source notebooks in ``solutions/``.
``autograder.course``
    The instructor's course: setup, roster, collect, autograde, feedback, export, each done
    by a module of its own (``term``, ``collect``, ``autograde``, ``verification``,
    ``course_feedback``, ``export``); ``autograder.nbgrader_run`` runs nbgrader and makes
    the student release.
``autograder.cli``
    The ``autograder`` command (also ``python -m autograder``).
``autograder/nbgrader_config.py``
    The nbgrader configuration used by every command.
"""

from pathlib import Path

__all__ = ["PACKAGE_DIR", "REPO_ROOT", "NBGRADER_CONFIG"]

PACKAGE_DIR = Path(__file__).resolve().parent
#: The repository (and default course) root: the folder that holds ``solutions/``.
REPO_ROOT = PACKAGE_DIR.parent
NBGRADER_CONFIG = PACKAGE_DIR / "nbgrader_config.py"
