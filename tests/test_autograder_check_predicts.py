"""The student's `check` predicts the grade and says what a failed test saw.

Through the real commands (``python -m autograder check NB``, ``... --hidden``, and a class
graded with ``collect`` / ``autograde`` / ``export``), on notebooks made from the release
with answers from the specs' solutions:

* an answer that imports the reference package, by an ``import`` statement or by a name
  built at run time, gets from ``check`` the verdict the grader records (every test 0),
  said once, with a non-zero exit, with or without ``--hidden``;
* the first line says the notebook is running and how long a cell may take;
* a failed visible test prints what its comparison got (computed here independently, by
  calling the same wrong function) and what it expected.
"""

import csv
import subprocess
import sys

import nbformat
import pytest
from helpers.answer_notebooks import with_answer

from autograder import REPO_ROOT
from autograder.build import solution_source
from autograder.checks import check_points
from autograder.exercises import load

KNN = load("knn_classify")
WILSON = load("wilson_interval")
#: the reference imported by a statement, and by a name the source never spells out
STATIC = "from repeval_ref import knn_classify\n"
DYNAMIC = (
    "import importlib\n\n"
    "def knn_classify(*args):\n"
    "    return importlib.import_module('repeval' + '_ref').knn_classify(*args)\n"
)
VERDICT = (
    "your answer imports repeval_ref: answers may not use the course's reference package "
    "or the grader, so this exercise scores 0"
)


def _run(*args, timeout=600):
    return subprocess.run(
        [sys.executable, "-m", "autograder", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO_ROOT,
    )


def _notebook(tmp_path, spec, code, name):
    path = tmp_path / name / f"{spec.NAME}.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(with_answer(spec, code), str(path))
    return path


def _top(spec):
    return float(spec.VISIBLE_POINTS) + sum(check_points(c) for c in spec.HIDDEN)


def _check(path, *flags, timeout_s=25):
    proc = _run("--timeout", str(timeout_s), "check", *flags, str(path))
    return proc.returncode, proc.stdout.splitlines()


@pytest.mark.slow
def test_check_gives_a_reference_import_the_graders_verdict_once(tmp_path):
    static = _notebook(tmp_path, KNN, STATIC, "subs/sam/knn")
    dynamic = _notebook(tmp_path, KNN, DYNAMIC, "subs/dan/knn")
    top = _top(KNN)
    said = {}
    for path, flags in ((static, ()), (dynamic, ()), (dynamic, ("--hidden",))):
        rc, lines = _check(path, *flags)
        assert rc != 0, lines
        assert [line for line in lines if "imports" in line] == [f"FAILED: {VERDICT} (as graded)."]
        assert lines[-1] == (
            f"SCORE: visible tests 0 / {float(KNN.VISIBLE_POINTS):g}; hidden checks "
            f"0 / {top - float(KNN.VISIBLE_POINTS):g}; total 0 / {top:g} points"
        ), lines
        assert not any("pass" in line for line in lines), lines
        said[path.parent.parent.name, flags] = lines

    # the grader: both answers graded as a class, through the commands
    course = tmp_path / "course"
    assert _run("--course", str(course), "setup", "--assign", "knn").returncode == 0
    roster = tmp_path / "roster.csv"
    roster.write_text("id,first_name,last_name,email\ndan,Dan,S,d@x.org\nsam,Sam,S,s@x.org\n")
    for step in (
        ("roster", str(roster)),
        ("collect", str(tmp_path / "subs")),
        ("autograde", "--seed", "3"),
        ("export", str(tmp_path / "grades.csv")),
    ):
        proc = _run("--course", str(course), "--timeout", "25", *step)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    with (tmp_path / "grades.csv").open(newline="") as fh:
        rows = {r["student_id"]: r for r in csv.DictReader(fh)}
    for student in ("sam", "dan"):
        assert float(rows[student]["score"]) == 0.0, rows[student]
        graded = nbformat.read(
            str(course / "autograded" / student / "knn" / "knn_classify.ipynb"), as_version=4
        )
        outputs = " ".join(
            o.get("text", "") for c in graded.cells if c.cell_type == "code" for o in c.outputs
        )
        assert VERDICT in outputs, (student, outputs[:1000])


def test_check_says_it_is_running_and_what_a_failed_test_got(tmp_path):
    # knn: argmin instead of argmax, so the one stored neighbour's class loses
    wrong_knn = solution_source(KNN).replace("np.argmax(votes", "np.argmin(votes")
    path = _notebook(tmp_path, KNN, wrong_knn, "knn")
    rc, lines = _check(path, timeout_s=25)
    assert rc == 1
    assert lines[0] == (
        f"Running {path} from top to bottom in a fresh Python kernel, as the grader does; "
        "each cell may take up to 25 s before it is stopped."
    ), lines
    ns = {}
    exec(wrong_knn, ns)
    visible = KNN.VISIBLE_TESTS.splitlines()
    setup = "\n".join(visible[: next(i for i, t in enumerate(visible) if "assert" in t)])
    exec(setup, ns)  # the visible test's own inputs, up to its first assert
    got = ns["pred"][0]
    assert got != 1
    block = lines[lines.index("FAILED: the visible tests (cell knn_classify_visible_tests)") :]
    assert block[1].startswith("  line ") and "assert pred[0] == 1" in block[1], block
    assert block[2:4] == ["  expected: pred[0] == 1", f"  got: pred[0] = {got!r}"], block
    assert block[4].startswith("  message: with k = 1"), block

    # Wilson without the shrinkage: its lower end is off by more than the tolerance
    wrong_wilson = solution_source(WILSON).replace("shrink = 1.0 + z * z / n", "shrink = 1.0")
    path = _notebook(tmp_path, WILSON, wrong_wilson, "noise")
    rc, lines = _check(path)
    assert rc == 1 and lines[0].startswith(f"Running {path} ")
    ns = {}
    exec(wrong_wilson, ns)
    lo, _ = ns["wilson_interval"](80, 100)
    assert abs(lo - 0.7111708) >= 1e-6
    block = lines[lines.index("FAILED: the visible tests (cell wilson_interval_visible_tests)") :]
    assert f"  got: lo = {lo!r}" in block, block
    assert "  expected: abs(lo - 0.7111708) < 1e-6 and abs(hi - 0.8666331) < 1e-6" in block
    assert any(line.startswith("  message: 80 of 100: expected") for line in block), block
