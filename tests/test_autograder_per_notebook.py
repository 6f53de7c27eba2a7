"""One notebook's grading cannot cost the student's others, nor leave anything to them.

A class of two students, graded by ``autograde`` as an instructor runs it, over three
notebooks in two chapters (``rank/rank_bound``, ``rankme/rankme``, ``rankme/two_nn_id``):

* ``hang``: the second notebook never ends (a loop that swallows every interrupt, and a
  daemon in a session of its own that ignores SIGTERM); it scores 0 with the reason in
  ``grading_issues.csv`` and at the top of its feedback notebook, the other two keep full
  marks, and the student's one nbgrader run takes at most the per-notebook limit (plus a
  margin of 10 s) longer than the same run of an honest student;
* ``leak``: the second notebook writes a file into every writable place (``/tmp``,
  ``/dev/shm``, ``/var/tmp``, ``/run/lock``, its home, its IPython startup folder) and
  leaves a daemon that keeps writing; the third notebook, in the same chapter folder,
  finds none of those files and no write of the daemon after its own start.

Both need the kernel namespaces of :func:`autograder.confine.kernel_namespaces` (root, or
a machine that lends user namespaces to other users); where they are refused,
:func:`autograder.protection.protection_gaps` names the gap (tested here too).
"""

import json
import shutil
import time

import nbformat
import pytest
from helpers.answer_notebooks import with_answer
from helpers.course_roster import import_roster

from autograder import REPO_ROOT, confine, protection, sandbox
from autograder.build import solution_source
from autograder.course import Course
from autograder.exercises import load

#: a class graded with nbgrader and the clean room: about a minute
pytestmark = pytest.mark.slow

NAMESPACES = protection.kernel_namespaces_allowed()
#: per-notebook limit of the test (s); the cell timeout is far longer, so only the
#: per-notebook limit can stop the hanging notebook
LIMIT_S = 20
CELL_TIMEOUT_S = 300
NOTEBOOKS = (("rank", "rank_bound"), ("rankme", "rankme"), ("rankme", "two_nn_id"))

# only inside nbgrader's kernel (the clean room runs the same source)
HANG = """
import os, signal, sys, time
if "ipykernel" in sys.modules:
    if os.fork() == 0:
        os.setsid()
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        while True:
            time.sleep(0.1)
    while True:
        try:
            time.sleep(0.1)
        except BaseException:
            pass
"""

PLACES = ("/tmp", "/dev/shm", "/var/tmp", "/run/lock", "HOME", "IPYTHONDIR/profile_default/startup")

LEAVE = """
import os, sys, time
if "ipykernel" in sys.modules:
    for place in PLACES:
        where = os.environ[place.split("/")[0]] + place[len(place.split("/")[0]):] \\
            if place[0] != "/" else place
        os.makedirs(where, exist_ok=True)
        with open(os.path.join(where, "left_by_notebook_2.py"), "w") as fh:
            fh.write("LEFT = True\\n")
    if os.fork() == 0:
        os.setsid()
        while True:  # a daemon that keeps writing where the next notebook looks
            for where in ("/tmp", os.getcwd()):
                try:
                    with open(os.path.join(where, "daemon.txt"), "a") as fh:
                        fh.write(f"{time.time()}\\n")
                except OSError:
                    pass
            time.sleep(0.05)
""".replace("PLACES", repr(PLACES))

LOOK = """
import json, os, sys, time
if "ipykernel" in sys.modules:
    _seen = {}
    for place in PLACES:
        where = os.environ[place.split("/")[0]] + place[len(place.split("/")[0]):] \\
            if place[0] != "/" else place
        try:
            _seen[place] = sorted(os.listdir(where))
        except OSError:
            _seen[place] = []
    _start = time.time()
    time.sleep(1.5)
    _late = []
    for where in ("/tmp", os.getcwd()):
        try:
            _late += [float(x) for x in open(os.path.join(where, "daemon.txt")).read().split()
                      if float(x) > _start]
        except (OSError, ValueError):
            pass
    print("SEEN" + json.dumps({"places": _seen, "daemon_writes_after_start": len(_late),
                               "pid": os.getpid()}))
""".replace("PLACES", repr(PLACES))


def _points(course, student, assignment, notebook):
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}") as gb:
        return gb.find_submission_notebook(notebook, assignment, student).score


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The class above, graded once; ``(course, seconds of each student's nbgrader run)``."""
    if not NAMESPACES:
        pytest.skip(
            "this machine refuses the kernels' namespaces (a gap protection_gaps "
            "names, tested below)"
        )
    base = tmp_path_factory.mktemp("per-notebook")
    repo = base / "repo"
    for a, nb in NOTEBOOKS:
        (repo / "solutions" / a).mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO_ROOT / "solutions" / a / f"{nb}.ipynb", repo / "solutions" / a)
    course = Course(base / "course", repo=repo, timeout=CELL_TIMEOUT_S, log=lambda *a: None)
    course.setup()
    extra = {"hang": {"rankme": HANG}, "leak": {"rankme": LEAVE, "two_nn_id": LOOK}}
    for student in extra:
        for a, name in NOTEBOOKS:
            spec = load(name)
            path = base / "subs" / student / a / f"{name}.ipynb"
            path.parent.mkdir(parents=True, exist_ok=True)
            code = solution_source(spec) + "\n" + extra[student].get(name, "")
            nbformat.write(with_answer(spec, code), str(path))
    import_roster(course, list(extra), base)
    course.collect(base / "subs")
    seconds = {}
    real = sandbox.grade_in_sandbox

    def timed(job):
        t0 = time.monotonic()
        try:
            return real(job)
        finally:
            seconds[job["student"]] = time.monotonic() - t0

    # the warm process that starts each run, ready before the clock of the first student
    server = sandbox.start_sandbox_server()
    assert server is None or server.ready(180)
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(sandbox.SANDBOX_LIMITS, "notebook_s", LIMIT_S)
        mp.setattr(sandbox, "grade_in_sandbox", timed)
        course.autograde(seed=3)
    return course, seconds


def test_a_hanging_notebook_scores_zero_with_its_reason_and_costs_nothing_else(graded):
    course, seconds = graded
    for a, name in NOTEBOOKS:
        got = _points(course, "hang", a, name)
        want = 0.0 if name == "rankme" else float(course_max(course, a, name))
        assert got == pytest.approx(want), (name, got)
    problems = [r for r in course.issues() if r["student_id"] == "hang"]
    limit = [r for r in problems if f"limit of {LIMIT_S:g} s per notebook" in r["problem"]]
    assert [(r["assignment"], r["notebook"]) for r in limit] == [("rankme", "rankme")]
    note = (
        nbformat.read(
            str(course.root / "autograded" / "hang" / "rankme" / "rankme.ipynb"), as_version=4
        )
        .cells[0]
        .source
    )
    assert f"limit of {LIMIT_S:g} s per notebook" in note  # what its feedback opens with
    # one nbgrader run of the three notebooks, which took the limit once more than the
    # same run of an honest student (no second try of the hanging notebook, which would
    # only hang again, and no run of it as blank: its unfinished tests are errors)
    runs = {s: _runs(course, s) for s in ("hang", "leak")}
    assert [r[0] for r in runs["hang"]] == ["autograde * --student hang"], runs
    assert [r[0] for r in runs["leak"]] == ["autograde * --student leak"], runs
    assert runs["hang"][0][1] < runs["leak"][0][1] + LIMIT_S + 10, runs
    assert seconds["hang"] < runs["hang"][0][1] + 10, (seconds, runs)


def _runs(course, student):
    """``[(nbgrader's arguments, seconds)]`` of the student's nbgrader runs, from
    ``autograde.log``."""
    import re

    log = (course.root / "autograde.log").read_text()
    part = log.split(f"===== student {student}:", 1)[1].split("===== student", 1)[0]
    return [
        (m.group(1), float(m.group(2)))
        for m in re.finditer(r"^\$ nbgrader (.*?)  \(exit -?\d+, ([0-9.]+) s\)$", part, re.M)
    ]


def course_max(course, a, name):
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}") as gb:
        return gb.find_notebook(name, a).max_score


def test_a_notebook_leaves_nothing_the_next_one_can_see(graded):
    course, _ = graded
    nb = nbformat.read(
        str(course.root / "autograded" / "leak" / "rankme" / "two_nn_id.ipynb"), as_version=4
    )
    text = "".join(
        o.get("text", "")
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "stream"
    )
    seen = json.loads(text.split("SEEN", 1)[1].splitlines()[0])
    for place, names in seen["places"].items():
        assert "left_by_notebook_2.py" not in names and "daemon.txt" not in names, place
    assert seen["daemon_writes_after_start"] == 0  # the daemon ended with its kernel
    assert seen["pid"] == 1  # process 1 of its own PID namespace
    # and the files and the daemon cost the honest answers nothing
    for a, name in NOTEBOOKS:
        assert _points(course, "leak", a, name) == pytest.approx(course_max(course, a, name))


def test_a_machine_that_refuses_the_kernels_namespaces_is_named(monkeypatch):
    monkeypatch.setattr(protection, "kernel_namespaces_allowed", lambda: False)
    gaps = protection.protection_gaps()
    assert any("per-notebook time limit" in g and "/tmp" in g for g in gaps), gaps
    monkeypatch.setattr(protection, "kernel_namespaces_allowed", lambda: True)
    assert not any("per-notebook" in g for g in protection.protection_gaps())
    with pytest.raises(ValueError, match="tmp_size"):  # refused before anything changes
        confine.kernel_namespaces(confine.load_libc(), 0)


# ----------------------------------------------------------------- one kernel, no course
def _processes_marked(token):
    """Process ids whose initial environment holds ``token`` (a kernel server started by
    this test, its watchers, its kernels and whatever a kernel forked: all share the
    environment the server was started with; other tests' servers do not)."""
    import os

    out = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/environ", "rb") as fh:
                    if token.encode() in fh.read():
                        out.add(int(entry))
            except OSError:
                continue
    return out


@pytest.mark.skipif(not NAMESPACES, reason="the kernels' namespaces are refused here")
def test_a_kernel_past_its_limit_is_killed_with_every_process_it_started(monkeypatch, tmp_path):
    from nbformat.v4 import new_code_cell, new_notebook

    from autograder import kernel_fork

    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(var, "1")
    monkeypatch.setenv(kernel_fork.LIMIT_ENV, "4")
    token = f"I30_MARK_{time.time_ns()}"
    monkeypatch.setenv("AUTOGRADER_TEST_MARK", token)
    monkeypatch.setattr(kernel_fork, "_server", None)
    server = kernel_fork.start_server()
    assert server is not None and server.ready(180)
    before = _processes_marked(token)
    assert server.proc.pid in before
    test = new_code_cell("print('never')")
    test.metadata["nbgrader"] = {
        "grade": True,
        "grade_id": "t",
        "points": 1,
        "solution": False,
        "locked": True,
    }
    nb = new_notebook(
        cells=[new_code_cell(HANG.replace('"ipykernel" in sys.modules', "True")), test]
    )
    t0 = time.monotonic()
    nb, _ = kernel_fork.ForkExecute(timeout=600).preprocess(
        nb, {"metadata": {"path": str(tmp_path)}}
    )
    assert time.monotonic() - t0 < 4 + 20
    assert nb.metadata[kernel_fork.TIME_LIMIT_KEY] == 4.0
    assert "limit of 4 s per notebook" in nb.cells[0].source  # the note comes first
    assert [o["ename"] for o in nb.cells[2].outputs] == ["NotebookTimeLimit"]
    time.sleep(0.5)
    # the kernel, its daemon (own session, SIGTERM ignored) and its watcher are gone
    assert _processes_marked(token) - before == set()
    server.close()
