"""Serial, ``--workers 2`` and a Dask ``LocalCluster`` grade a class identically.

The cluster speaks TLS only and accepts only clients with a certificate of its authority;
the grader connects with its own credentials (``tls=``). Where the
``openssl`` command is missing, the cluster falls back to plain TCP, which the grader
then has to be told to accept (``insecure_scheduler``).

One short notebook (batchnorm/fold_batchnorm) and four students: the reference, a typical
wrong answer, a kernel that crashes (``os._exit``) and an infinite
loop (cut by the per-cell timeout; it sleeps, see ``LOOP``). The same collected course is copied
three times and graded with the same seed; every cell's score and comment and every problem logged
must match, and the crash and the loop cost only their own student's points.
"""

import copy
import shutil

import nbformat
import pytest
from helpers.autograder_cases import WRONG
from helpers.course_roster import import_roster

from autograder import REPO_ROOT, sandbox_runs
from autograder.build import solution_source
from autograder.checks import check_points
from autograder.course import Course
from autograder.dask_tls import cluster_security, grader_tls, have_openssl, make_credentials
from autograder.exercises import load

#: classes graded serially, by worker processes and by dask: left out of make test-fast
pytestmark = pytest.mark.slow

SEED = 777
TIMEOUT = 8
CRASH = "import os\n\nos._exit(1)\n"
#: a loop that never ends, cut by the per-cell timeout. It sleeps rather than spins: the
#: class is graded three times here, and a spinning loop would burn a core for the whole
#: timeout of each (about a minute of CPU in all) that the other test worker needs; the
#: clean room's own tests keep the spinning loop (tests/test_autograder_cleanroom.py)
LOOP = "import time\n\nwhile True:\n    time.sleep(0.5)\n"


def _with_code(blank, code):
    nb = copy.deepcopy(blank)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = code
    return nb


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    base = tmp_path_factory.mktemp("dask")
    repo = base / "repo"
    (repo / "solutions" / "batchnorm").mkdir(parents=True)
    shutil.copy(
        REPO_ROOT / "solutions" / "batchnorm" / "fold_batchnorm.ipynb",
        repo / "solutions" / "batchnorm",
    )
    course = Course(base / "serial", repo=repo, timeout=TIMEOUT, log=lambda *a: None)
    course.setup()
    spec = load("fold_batchnorm")
    blank = nbformat.read(
        str(course.root / "exercises" / "batchnorm" / "fold_batchnorm.ipynb"), as_version=4
    )
    wrong = solution_source(spec) + "\n\n" + WRONG["fold_batchnorm"]["accepts_bad_scale"][0]
    subs = base / "subs"
    for student, nb in (
        ("ref", _with_code(blank, solution_source(spec))),
        ("wrong", _with_code(blank, wrong)),
        ("crash", _with_code(blank, CRASH)),
        ("loop", _with_code(blank, LOOP)),
    ):
        path = subs / student / "batchnorm" / "fold_batchnorm.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(nb, str(path))
    import_roster(course, ["crash", "loop", "ref", "wrong"], base)
    course.collect(subs)
    return base, course


def _copy(base, course, name):
    shutil.copytree(course.root, base / name)
    return Course(base / name, repo=course.repo, timeout=TIMEOUT, log=lambda *a: None)


def _grades(course):
    """(student, cell) -> (score, comment), and the problems logged, from the gradebook."""
    from nbgrader.api import Gradebook

    out = {}
    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}") as gb:
        for st in gb.students:
            nb = gb.find_submission_notebook("fold_batchnorm", "batchnorm", st.id)
            for g in nb.grades:
                out[st.id, g.name] = g.score
            for c in nb.comments:
                out[st.id, "comment", c.name] = c.auto_comment
    problems = sorted((r["student_id"], r["notebook"], r["problem"]) for r in course.issues())
    return out, problems


@pytest.fixture(scope="module")
def ungraded(collected):
    """A copy of the collected course made before any grading (for the broken pool)."""
    base, serial = collected
    shutil.copytree(serial.root, base / "broken")
    return base / "broken"


#: what the serial run's nbgrader sandboxes returned, by student (for the broken pool)
_SANDBOX_RESULTS = {}


@pytest.fixture(scope="module")
def three_ways(collected, ungraded):
    from distributed import LocalCluster

    base, serial = collected
    parallel = _copy(base, serial, "parallel")
    dask = _copy(base, serial, "dask")
    run_sandboxes = sandbox_runs.run_sandboxes

    def recorded(jobs, workers, scheduler):
        results = run_sandboxes(jobs, workers, scheduler)
        _SANDBOX_RESULTS.update(copy.deepcopy(results))
        return results

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sandbox_runs, "run_sandboxes", recorded)
        assert serial.autograde(seed=SEED, workers=1) == SEED
    assert parallel.autograde(seed=SEED, workers=2) == SEED
    if have_openssl():
        creds = make_credentials(base / "tls")
        secure = {"protocol": "tls://", "security": cluster_security(creds)}
        connect = {"tls": grader_tls(creds)}
    else:  # pragma: no cover - a machine without openssl
        secure, connect = {}, {"insecure_scheduler": True}
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, **secure
    ) as cluster:
        assert cluster.scheduler_address.startswith("tls://" if secure else "tcp://")
        assert dask.autograde(seed=SEED, scheduler=cluster.scheduler_address, **connect) == SEED
    return serial, parallel, dask


def test_serial_workers_and_dask_grade_identically(three_ways):
    serial, parallel, dask = three_ways
    one, two, three = _grades(serial), _grades(parallel), _grades(dask)
    assert one == two == three
    assert len({s for s, *_ in one[0]}) == 4


def test_a_crash_or_a_loop_costs_only_its_own_points(three_ways):
    spec = load("fold_batchnorm")
    total = float(spec.VISIBLE_POINTS) + sum(check_points(c) for c in spec.HIDDEN)
    grades, problems = _grades(three_ways[0])
    score = {}
    for key, value in grades.items():
        if key[1] != "comment":
            score[key[0]] = score.get(key[0], 0.0) + value
    assert score["ref"] == total
    assert score["crash"] == 0.0 and score["loop"] == 0.0
    assert 0 < score["wrong"] < total
    named = {s for s, _, _ in problems}
    assert "crash" in named and not named & {"ref", "wrong"}
    assert any(s == "crash" and "kernel crashed" in p for s, _, p in problems)
    for course in three_ways:
        log = (course.root / "autograde.log").read_text()
        assert [
            line.split()[2] for line in log.splitlines() if line.startswith("===== student")
        ] == ["crash:", "loop:", "ref:", "wrong:"]


def test_scheduler_must_be_an_address(tmp_path):
    course = Course(tmp_path / "c", log=lambda *a: None)
    for bad in ("", "   ", 8786, "tcp://127.0.0.1:8786"):
        with pytest.raises(ValueError, match="scheduler"):
            course.autograde(seed=1, scheduler=bad)


class _BrokenPool:
    """Stands in for ProcessPoolExecutor: every task fails as if its worker had died."""

    def __init__(self, *args, **kwargs):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def submit(self, *args, **kwargs):
        from concurrent.futures import Future
        from concurrent.futures.process import BrokenProcessPool

        fut = Future()
        fut.set_exception(BrokenProcessPool("a worker died"))
        return fut


def test_a_broken_verifier_pool_falls_back_to_the_same_grades(ungraded, three_ways, monkeypatch):
    """If the clean-room worker processes die, each notebook is verified again in the
    grader's process, with a line in the log, and the grades are those of a serial run.

    Only the verifier's pool is under test here: nbgrader's sandboxes (the phase before
    it, which the other tests of this file run three times) hand back what they handed
    the serial run, so the class is not put through nbgrader a fourth time."""
    import concurrent.futures

    serial = three_ways[0]
    assert sorted(_SANDBOX_RESULTS) == ["crash", "loop", "ref", "wrong"]
    messages = []
    broken = Course(ungraded, repo=serial.repo, timeout=TIMEOUT, log=messages.append)
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", _BrokenPool)
    monkeypatch.setattr(
        sandbox_runs,
        "run_sandboxes",
        lambda jobs, workers, scheduler: {
            job["student"]: copy.deepcopy(_SANDBOX_RESULTS[job["student"]]) for job in jobs
        },
    )
    assert broken.autograde(seed=SEED, workers=2) == SEED
    assert _grades(broken) == _grades(serial)
    failed = [m for m in messages if "clean-room worker failed" in m]
    assert len(failed) == 4 and all("BrokenProcessPool" in m for m in failed)
