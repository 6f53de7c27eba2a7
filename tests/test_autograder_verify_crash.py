"""A child that dies, or stops answering, while its notebook is verified scores that
notebook 0, whatever it earned before, and the cause is named.

Each attacker hands in the shipped ``rank_bound`` (full marks) wrapped so that, in the
clean room only, the call of the second hidden check (``unbalanced_floor``, the first
call with eight feature columns) ends the child: ``os._exit(0)`` (``exit``),
``os.kill(os.getpid(), 9)`` (``kill``) or a loop that never returns (``loop``). The
visible tests and the first hidden check (``matches_reference``, 4 of the 7 points)
have passed by then. Every attacker also hands in an honest ``linear_cka``; an honest
student hands in both notebooks.

Judged from outside: the verdicts of :func:`autograder.cleanroom.verify_source`, and for
a class graded by ``autograde`` (serially, and with ``--workers 2`` on the command line)
its per-notebook export, ``grading_issues.csv`` and the feedback pages.
"""

import csv
import os
import subprocess
import sys

import nbformat
import pytest
from helpers.answer_notebooks import with_answer
from helpers.course_roster import import_roster

from autograder.build import solution_source
from autograder.checks import check_points
from autograder.cleanroom import verify_source
from autograder.course import Course
from autograder.exercises import load

SEED = 5151
TIMEOUT = 10
FAST = {"call_s": 5.0, "start_s": 30.0, "cpu_s": 30, "memory_bytes": 2 << 30}

#: what the answer does on the call of the second hidden check, and the words of the
#: cause the grader gives for it
ENDINGS = {
    "exit": ("_os._exit(0)", "ended the grading process (exit code 0)"),
    "kill": ("_os.kill(_os.getpid(), 9)", "killed by a signal"),
    "loop": ("while True:\n            _time.sleep(0.1)", "did not return within"),
}
HONEST = "honest"
CHAPTERS = {"rank_bound": "rank", "linear_cka": "cka"}


def _answer(ending):
    """``rank_bound`` as shipped, ending its clean-room child with ``ending`` (a key of
    :data:`ENDINGS`) on the first call with eight feature columns; ``None``: as shipped."""
    shipped = solution_source(load("rank_bound"))
    if ending is None:
        return shipped
    return (
        "import os as _os\nimport sys as _sys\nimport time as _time\n\n"
        "_ROOM = 'ipykernel' not in _sys.modules  # the clean room, not nbgrader's kernel\n\n"
        + shipped.replace("def rank_bound(", "def _shipped(")
        + "\n\ndef rank_bound(H, y, n_classes):\n"
        "    if _ROOM and getattr(H, 'shape', (0,))[-1] == 8:\n"
        f"        {ENDINGS[ending][0]}\n"
        "    return _shipped(H, y, n_classes)\n"
    )


def _top(ex):
    spec = load(ex)
    return float(spec.VISIBLE_POINTS) + sum(check_points(c) for c in spec.HIDDEN)


@pytest.mark.usefixtures("cleanroom_fork_server")
@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_an_answer_that_ends_its_child_after_the_first_check_keeps_nothing(ending):
    spec = load("rank_bound")
    verdicts = verify_source(spec, _answer(ending), SEED, FAST)
    assert len(verdicts) == 1 + len(spec.HIDDEN)
    assert [v.points for v in verdicts] == [0.0] * len(verdicts), [v.message for v in verdicts]
    words = ENDINGS[ending][1]
    for v in verdicts:
        assert words in v.failure, v.failure
        assert v.message.startswith("not graded:") and words in v.message, v.message


@pytest.mark.usefixtures("cleanroom_fork_server")
def test_the_wrapper_alone_keeps_full_marks():
    """The same wrapper without the ending earns every point: what the attackers lose
    is the points of the checks they passed."""
    spec = load("rank_bound")
    wrapped = _answer("exit").replace("_os._exit(0)", "pass")
    verdicts = verify_source(spec, wrapped, SEED, FAST)
    assert all(v.points == v.max_points and not v.failure for v in verdicts), [
        v.message for v in verdicts
    ]


# ------------------------------------------------------------------ a class, end to end
def _course(base):
    students = [HONEST, *ENDINGS]
    course = Course(base / "course", timeout=TIMEOUT, log=lambda *a: None)
    course.setup(sorted(set(CHAPTERS.values())))
    import_roster(course, students, base)
    subs = base / "submissions"
    for s in students:
        for ex, chapter in CHAPTERS.items():
            code = _answer(s if ex == "rank_bound" and s != HONEST else None)
            if ex != "rank_bound":
                code = solution_source(load(ex))
            path = subs / s / chapter / f"{ex}.ipynb"
            path.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(with_answer(load(ex), code), str(path))
    course.collect(subs)
    return course


def _by_notebook(course, base):
    _, detail, _ = course.export(base / "grades.csv")
    with detail.open(newline="") as fh:
        return {(r["student_id"], r["notebook"]): r for r in csv.DictReader(fh)}


def _issues(base):
    with (base / "course" / "grading_issues.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    out = {}
    for r in rows:
        out.setdefault((r["student_id"], r["notebook"]), []).append(r["problem"])
    return out


def _judge(course, base):
    rows, issues = _by_notebook(course, base), _issues(base)
    for ex in CHAPTERS:
        assert float(rows[HONEST, ex]["score"]) == pytest.approx(_top(ex)), rows[HONEST, ex]
        assert not rows[HONEST, ex]["issues"], rows[HONEST, ex]
    for s, (_, words) in ENDINGS.items():
        row = rows[s, "rank_bound"]
        assert float(row["score"]) == 0.0, row
        said = [p for p in issues.get((s, "rank_bound"), []) if words in p]
        assert said and "verification of this notebook failed" in said[0], issues
        assert words in row["issues"], row
        # the other notebook of the same student is graded as usual
        cka = rows[s, "linear_cka"]
        assert float(cka["score"]) == pytest.approx(_top("linear_cka")), cka
        assert not issues.get((s, "linear_cka")), issues


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("verify-crash")
    course = _course(base)
    course.autograde(seed=SEED)
    return course, base


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="the clean room is confined only as root")
def test_a_crash_in_verification_scores_the_notebook_zero_and_no_other(graded):
    _judge(*graded)


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="the clean room is confined only as root")
def test_the_feedback_names_the_cause(graded):
    course, _ = graded
    course.feedback()
    for s, (_, words) in ENDINGS.items():
        nb = nbformat.read(
            str(course.root / "autograded" / s / "rank" / "rank_bound.ipynb"), as_version=4
        )
        note = nb.cells[0]  # Markdown, its punctuation escaped
        assert note.cell_type == "markdown" and words in note.source.replace("\\", ""), note
        hidden = [
            "".join(o.get("text", "") for o in c.get("outputs", []))
            for c in nb.cells
            if c.get("metadata", {}).get("nbgrader", {}).get("grade")
            and not c.metadata.nbgrader.get("grade_id", "").endswith("_visible_tests")
        ]
        assert hidden and all("not graded:" in t and words in t for t in hidden), hidden
        page = course.root / "feedback" / s / "rank" / "rank_bound.html"
        assert words in page.read_text(), page


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="the clean room is confined only as root")
def test_with_workers_the_scores_and_findings_are_the_same(graded):
    course, base = graded
    (course.root / "grading_issues.csv").unlink()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "autograder",
            "--course",
            str(course.root),
            "--timeout",
            str(TIMEOUT),
            "autograde",
            "--workers",
            "2",
            "--seed",
            str(SEED),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    _judge(course, base)
