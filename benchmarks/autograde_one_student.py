"""How long does autograding one student's complete set of notebooks take?

Sets up a scratch course directory, submits the reference solution of every exercise for
one student, and times ``autograder autograde`` (one nbgrader run: a fresh kernel per
notebook, the visible and hidden tests of each). Prints the wall time in total and per
notebook, and writes them to ``benchmarks/results/autograde_one_student.json``.

    .venv/bin/python -m benchmarks.autograde_one_student [--repeat 1] [--timeout 60]

Not a test: it takes a minute or two.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import nbformat

from autograder import REPO_ROOT
from autograder.build import solution_source
from autograder.course import Course
from autograder.exercises import all_specs


def submit_reference(course, subs, student):
    n = 0
    for spec in all_specs():
        release = course.root / "exercises" / spec.ASSIGNMENT / f"{spec.NAME}.ipynb"
        if not release.exists():
            continue
        nb = nbformat.read(str(release), as_version=4)
        for cell in nb.cells:
            if cell.metadata.get("nbgrader", {}).get("solution"):
                cell.source = solution_source(spec)
        out = subs / student / spec.ASSIGNMENT / f"{spec.NAME}.ipynb"
        out.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, str(out))
        n += 1
    return n


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--timeout", type=int, default=60)
    p.add_argument(
        "--out", default=str(REPO_ROOT / "benchmarks" / "results" / "autograde_one_student.json")
    )
    args = p.parse_args(argv)
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench-autograde-") as tmp:
        course = Course(Path(tmp) / "course", timeout=args.timeout, log=lambda *a: None)
        course.setup()
        n_notebooks = submit_reference(course, Path(tmp) / "subs", "student")
        course.collect(Path(tmp) / "subs")
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            course.autograde(seed=1)
            runs.append(time.perf_counter() - t0)
        rows = [r for r in course_scores(course)]
    best = min(runs)
    result = {
        "notebooks": n_notebooks,
        "wall_seconds": [round(r, 1) for r in runs],
        "best_wall_seconds": round(best, 1),
        "seconds_per_notebook": round(best / max(n_notebooks, 1), 1),
        "full_marks": all(s == m for s, m in rows),
        "cpu_count": os.cpu_count(),
        "machine": platform.platform(),
        "load_average_1min": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


def course_scores(course):
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}") as gb:
        for assignment in gb.assignments:
            for nb in assignment.notebooks:
                sub = gb.find_submission_notebook(nb.name, assignment.name, "student")
                yield sub.score, nb.max_score


if __name__ == "__main__":
    raise SystemExit(main())
