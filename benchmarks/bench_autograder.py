"""Row 6: the autograder grading one student's full set of notebooks.

A temporary nbgrader course is set up with :class:`autograder.course.Course`; each
student submits the reference solution of every exercise (written into the released
notebook, as a student would); the measured call is ``Course.autograde`` (one nbgrader
run over every submission, one notebook after the other).
"""
from __future__ import annotations

import csv
import tempfile
from pathlib import Path


def _submissions(root, students, release_root):
    import nbformat

    from autograder.build import solution_source
    from autograder.exercises import all_specs

    n = 0
    for spec in all_specs():
        path = Path(release_root) / spec.ASSIGNMENT / f"{spec.NAME}.ipynb"
        if not path.exists():
            continue
        nb = nbformat.read(str(path), as_version=4)
        for cell in nb.cells:
            if cell.metadata.get("nbgrader", {}).get("solution"):
                cell.source = solution_source(spec)
        for s in students:
            out = Path(root) / s / spec.ASSIGNMENT / f"{spec.NAME}.ipynb"
            out.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, str(out))
        n += 1
    return n


def autograde(n_students, cell_timeout):
    from autograder.course import Course

    base = Path(tempfile.mkdtemp(prefix="bench_autograder_"))
    course = Course(base / "course", timeout=cell_timeout, log=lambda *a: None)
    course.setup()
    students = [f"s{i:02d}" for i in range(n_students)]
    n_notebooks = _submissions(base / "subs", students, course.root / "exercises")
    with (base / "roster.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "first_name", "last_name", "email"])
        for s in students:
            w.writerow([s, s, "Student", f"{s}@example.org"])
    course.import_roster(base / "roster.csv")
    course.collect(base / "subs")

    def work():
        import shutil

        course.autograde(seed=1)
        issues = course.issues() if hasattr(course, "issues") else []
        shutil.rmtree(base, ignore_errors=True)
        return {"notebooks_per_student": n_notebooks, "students": n_students,
                "grading_issues": len(issues) if hasattr(issues, "__len__") else None}

    return work
