"""A released exercise notebook with a student's answer in its solution cell (shared by the
grading tests that build small classes)."""

import nbformat

from autograder import REPO_ROOT


def with_answer(spec, code):
    """The student release of exercise ``spec`` (from ``exercises/``) with every solution
    cell's source replaced by ``code``; a new notebook node."""
    nb = nbformat.read(
        str(REPO_ROOT / "exercises" / spec.ASSIGNMENT / f"{spec.NAME}.ipynb"), as_version=4
    )
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = code
    return nb
