"""Row 6: the autograder grading a class (one student, or N students serially or in parallel).

A temporary nbgrader course is set up with :class:`autograder.course.Course`; each
student submits the reference solution of every exercise (written into the released
notebook, as a student would); the measured call is ``Course.autograde``: every student's
notebooks run in a sandbox of their own (:mod:`autograder.sandbox`), one student at a
time with ``workers=1``, N at a time with ``workers=N``, then the clean-room verifier
scores every answer. ``verify=False`` leaves the verifier out (the course's ``verify``
replaced by a no-op on that instance), to measure what the verifier adds.
"""

from __future__ import annotations

import csv
import shutil
import tempfile
import threading
import time
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


def _scratch_repo(base, assignments):
    """A repository holding only ``solutions/<assignment>`` for the given assignments."""
    from autograder import REPO_ROOT

    repo = Path(base) / "repo"
    for a in assignments:
        shutil.copytree(REPO_ROOT / "solutions" / a, repo / "solutions" / a)
    return repo


class TreeRssSampler(threading.Thread):
    """Peak of the summed resident size of this process and all its descendants.

    Sampled every ``interval`` seconds with psutil: with several nbgrader processes (and
    their kernels) alive at once, the memory of grading is their sum, which no single
    process's ``ru_maxrss`` shows. Shared pages are counted once per process, so the sum
    is an upper bound.
    """

    def __init__(self, interval=0.25):
        super().__init__(daemon=True)
        import psutil

        self._root = psutil.Process()
        self._interval = interval
        self._stop_event = threading.Event()
        self.peak_mb = 0.0

    def _sample(self):
        import psutil

        total = 0
        for proc in [self._root, *self._root.children(recursive=True)]:
            try:
                total += proc.memory_info().rss
            except psutil.Error:  # the process ended between listing and reading
                pass
        self.peak_mb = max(self.peak_mb, total / 2**20)

    def run(self):
        while not self._stop_event.wait(self._interval):
            self._sample()

    def stop(self):
        self._stop_event.set()
        self.join()
        return self.peak_mb


def _scores(course):
    """``"student/notebook" -> score`` from the course's gradebook."""
    from nbgrader.api import Gradebook

    out = {}
    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}") as gb:
        for assignment in gb.assignments:
            for nb in assignment.notebooks:
                for sub in nb.submissions:
                    out[f"{sub.student.id}/{nb.name}"] = sub.score
    return out


def _below_full(course):
    """How many submitted notebooks of the course's gradebook score below their maximum
    (every student of these benchmarks hands in the reference answers: none should)."""
    from nbgrader.api import Gradebook

    n = 0
    with Gradebook(f"sqlite:///{course.root / 'gradebook.db'}") as gb:
        for assignment in gb.assignments:
            for nb in assignment.notebooks:
                n += sum(sub.score < sub.max_score - 1e-9 for sub in nb.submissions)
    return n


def autograde(n_students, cell_timeout, workers=1, assignments=None, verify=True, one_core=False):
    """Prepare a graded class; return the measured call (``Course.autograde``).

    Parameters
    ----------
    n_students : int
        Size of the class; every student submits every reference solution.
    cell_timeout : int
        Per-cell limit of the grading run, in seconds.
    workers : int
        Passed to :meth:`Course.autograde`: nbgrader processes grading at a time.
    assignments : list of str, optional
        Only these assignments (chapters) of ``solutions/`` (default: all of them).
    verify : bool
        Run the clean-room verifier after nbgrader (default), or leave it out.
    one_core : bool
        Pin this process, and so every process it starts (nbgrader, the kernels, the
        clean room), to one logical core before anything is prepared.

    Returns
    -------
    callable
        Grades the class and returns the number of notebooks per student, the class
        size, the workers, the number of grading issues, every score and the peak summed
        resident size of the process tree during grading.
    """
    import nbgrader.api  # noqa: F401 - imported before the timing, used by _scores

    from autograder import REPO_ROOT

    if one_core:
        import os

        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    base = Path(tempfile.mkdtemp(prefix="bench_autograder_"))
    repo = _scratch_repo(base, assignments) if assignments else REPO_ROOT
    students = [f"s{i:02d}" for i in range(n_students)]
    course, n_notebooks = _class_course(base, "course", students, cell_timeout, repo)
    if not verify:
        course.verify = lambda *args, **kwargs: {}

    def work():
        sampler = TreeRssSampler()
        sampler.start()
        try:
            course.autograde(seed=1, workers=workers)
        finally:
            peak_tree = sampler.stop()
        out = {
            "notebooks_per_student": n_notebooks,
            "students": n_students,
            "workers": workers,
            "one_core": bool(one_core),
            "grading_issues": len(course.issues()),
            "scores": _scores(course),
            "peak_tree_rss_mb": peak_tree,
        }
        shutil.rmtree(base, ignore_errors=True)
        return out

    return work


def _class_course(base, name, students, cell_timeout, repo):
    """A course set up with every chapter of ``repo``, its roster and the reference
    answers of ``students`` collected; returns the course and the number of notebooks
    each student handed in."""
    from autograder.course import Course

    course = Course(base / name, repo=repo, timeout=cell_timeout, log=lambda *a: None)
    course.setup()
    n_notebooks = _submissions(base / f"{name}_subs", students, course.root / "exercises")
    with (base / f"{name}_roster.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "first_name", "last_name", "email"])
        for s in students:
            w.writerow([s, s, "Student", f"{s}@example.org"])
    course.import_roster(base / f"{name}_roster.csv")
    course.collect(base / f"{name}_subs")
    return course, n_notebooks


def term_on_dask(n_students, cell_timeout, workers=2, sample=10, assignments=None, threads=1):
    """Prepare a simulated term graded on a Dask ``LocalCluster``; return the measured call.

    Every student of a class of ``n_students`` hands in the reference answer of every
    exercise. Before the measured call, the first ``sample`` students are graded serially
    in a course of their own (``workers=1``, no cluster). The measured call starts a
    ``LocalCluster`` of ``workers`` worker processes of ``threads`` threads each (a thread
    runs one student's task, whose grading happens in child processes that wait on their
    kernels much of the time) over TLS (throwaway credentials, :mod:`autograder.dask_tls`,
    as an instructor grading a term on one machine would run it), grades the whole class with
    ``Course.autograde(scheduler=...)`` (one task per student, each student's notebooks in a sandbox
    of their own, then the clean-room verifier, with ``workers`` processes on this machine once the
    cluster's tasks are done) and closes the cluster.

    Returns
    -------
    callable
        Grades the term; returns the class size, the workers, the number of notebooks
        per student and of grading issues, and how many of the sample's notebook scores
        differ from the serial run's (``sample_differ``, out of ``sample_notebooks``), how
        many notebooks score below full marks (``below_full``: the reference answers should
        not) and the seconds of the clean-room verification within the call
        (``verify_seconds``).
    """
    import nbgrader.api  # noqa: F401 - imported before the timing, used by _scores
    from distributed import LocalCluster

    from autograder import REPO_ROOT
    from autograder.dask_tls import cluster_security, grader_tls, make_credentials

    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be an integer >= 1, got {threads!r}")
    if isinstance(sample, bool) or not isinstance(sample, int) or not 1 <= sample <= n_students:
        raise ValueError(f"sample must be an integer from 1 to n_students, got {sample!r}")
    base = Path(tempfile.mkdtemp(prefix="bench_term_"))
    repo = _scratch_repo(base, assignments) if assignments else REPO_ROOT
    students = [f"s{i:03d}" for i in range(n_students)]
    serial, _ = _class_course(base, "sample", students[:sample], cell_timeout, repo)
    serial.autograde(seed=1, workers=1)
    want = _scores(serial)
    course, _ = _class_course(base, "term", students, cell_timeout, repo)
    creds = make_credentials(base / "tls")

    phases = {}
    verify = course.verify

    def timed_verify(*args, **kwargs):  # the clean room's share of the measured call
        start = time.perf_counter()
        try:
            return verify(*args, **kwargs)
        finally:
            phases["verify_seconds"] = time.perf_counter() - start

    course.verify = timed_verify

    def work():
        with LocalCluster(
            n_workers=workers,
            threads_per_worker=threads,
            processes=True,
            dashboard_address=None,
            protocol="tls://",
            security=cluster_security(creds),
        ) as cluster:
            # the clean-room verification runs on the grader's machine once the cluster's
            # tasks are done; it uses as many processes as the cluster has workers
            course.autograde(
                seed=1, scheduler=cluster.scheduler_address, tls=grader_tls(creds), workers=workers
            )
        got = _scores(course)
        per_student = len(want) // sample
        out = {
            "students": n_students,
            "workers": workers,
            "threads": threads,
            "notebooks_per_student": per_student,
            "grading_issues": len(course.issues()),
            "sample": sample,
            "sample_notebooks": len(want),
            "sample_differ": sum(got.get(k) != v for k, v in want.items()),
            "graded_notebooks": sum(v is not None for v in got.values()),
            "below_full": _below_full(course),
            **phases,
        }
        shutil.rmtree(base, ignore_errors=True)
        return out

    return work
