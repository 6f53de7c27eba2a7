"""Autograding a collected class: nbgrader's run of every student's notebooks, each in a
sandbox of its own (:mod:`autograder.sandbox_runs`), here or on a Dask cluster, then the
clean room's scores over nbgrader's (:mod:`autograder.verification`).

* nbgrader runs once per student, in a throwaway copy of the course that holds only that
  student's submission and a scratch gradebook (:mod:`autograder.sandbox`; as root, under
  a user id of its own that cannot reach the real course); the grader merges the results
  into the real gradebook itself. If one notebook brings nbgrader down (a kernel that
  dies, e.g. ``os._exit``, or one that cannot be interrupted), the submission is re-graded
  notebook by notebook in the same copy, and a notebook that fails again is graded as
  blank with the reason stated. The other students are never affected;
* the recorded scores are the clean-room verifier's, computed from the answers as
  submitted, read before any student code runs;
* ``workers=N`` grades N students at a time on this machine and ``scheduler=ADDRESS``
  sends one task per student to a Dask cluster; the grades are the same either way;
* an infinite loop costs one cell in nbgrader's run: the per-cell timeout interrupts it.
"""

from __future__ import annotations

import datetime as _dt
import secrets
from pathlib import Path

import nbformat

from .. import protection, sandbox_runs
from ..scheduling import check_scheduler, check_workers, dask_settings, scheduler_config
from ..verification import FORK_FROM
from .notebook_repair import blank_notebook
from .term import LATE_POLICIES

__all__ = ["SEED_LOG", "autograde_class", "read_answers", "students", "submissions"]

SEED_LOG = "grading_seeds.log"


def submissions(root):
    """(student, assignment) of every collected submission folder of course directory
    ``root`` (``submitted/<student>/<assignment>/``), sorted."""
    out = []
    base = Path(root) / "submitted"
    for student in students(root):
        for adir in sorted(p for p in (base / student).iterdir() if p.is_dir()):
            out.append((student, adir.name))
    return out


def students(root):
    """Ids of the students with a folder under ``submitted/`` of course directory
    ``root``, sorted; a student removed from the roster is never among them."""
    from .roster import removed_ids

    base = Path(root) / "submitted"
    if not base.exists():
        return []
    gone = set(removed_ids(root))
    return sorted(p.name for p in base.iterdir() if p.is_dir() and p.name not in gone)


def read_answers(root, only=None):
    """(student, assignment, notebook) -> the submitted notebook of course directory
    ``root`` (of the students in ``only`` when given), for the verifier (a file that is
    not a notebook is left out: collecting replaced every unreadable one)."""
    out = {}
    for student, assignment in submissions(root):
        if only is not None and student not in only:
            continue
        for path in sorted((Path(root) / "submitted" / student / assignment).glob("*.ipynb")):
            try:
                out[student, assignment, path.stem] = nbformat.read(str(path), as_version=4)
            except Exception:  # collect already replaced unreadable files
                continue
    return out


def autograde_class(
    root,
    timeout,
    late_policy,
    issues,
    verify,
    seed=None,
    workers=1,
    scheduler=None,
    tls=None,
    insecure_scheduler=False,
    log=print,
    only=None,
    progress=None,
):
    """Autograde every collected submission of course directory ``root``; returns the
    grading seed.

    Parameters
    ----------
    root : Path
        The course directory, set up and collected.
    timeout : int
        The per-cell timeout of nbgrader's run (seconds).
    late_policy : {"mark", "zero"}
        The term's late policy (:data:`autograder.course.term.LATE_POLICIES`).
    issues : IssueLog
        Where every problem is recorded.
    verify : callable
        ``verify(answers, seed, workers=workers)`` records the clean room's scores
        (:meth:`autograder.course.Course.verify`).
    seed, workers, scheduler, tls, insecure_scheduler :
        As :meth:`autograder.course.Course.autograde` takes them.
    log : callable
        Given one line at a time (the seed, and every protection this machine lacks).
    only : list of str, optional
        Grade these students only (each must have a submission); the others' grades,
        notebooks and pages are left as they are.
    progress : callable, optional
        Given one line per student graded (``graded 2/30 students: alice``).

    Returns
    -------
    int
        The grading seed, also appended to ``grading_seeds.log``.

    Raises
    ------
    ValueError
        If ``workers`` is not an integer >= 1, ``scheduler`` is not a non-empty
        string, its credentials are missing or readable by others, or ``late_policy``
        is unknown.
    """
    workers = check_workers(workers)
    check_scheduler(scheduler)
    if late_policy not in LATE_POLICIES:
        raise ValueError(f"late_policy must be one of {sorted(LATE_POLICIES)}, got {late_policy!r}")
    dask_config = scheduler_config(scheduler, tls, insecure_scheduler)
    root = Path(root)
    if seed is None:
        seed = secrets.randbits(32)
    seed = int(seed)
    with (root / SEED_LOG).open("a") as fh:
        fh.write(
            f"{_dt.datetime.now(_dt.timezone.utc).isoformat(timespec='seconds')} "
            f"autograde seed {seed}\n"
        )
    log(f"grading seed {seed}")
    gaps = protection.protection_gaps()
    for gap in gaps:
        log(f"WARNING: {gap}")
    class_ = students(root)
    if only is not None:
        missing = sorted(set(only) - set(class_))
        if missing:
            raise ValueError(f"student: no submission of {', '.join(missing)} in {root}")
        class_ = [s for s in class_ if s in set(only)]
    progress = progress or log
    # the answers as submitted, read before any student code runs
    answers = read_answers(root, only=set(class_))
    template = sandbox_runs.template_gradebook(root)
    jobs = [
        sandbox_runs.sandbox_job(root, s, template, seed, timeout, LATE_POLICIES[late_policy])
        for s in class_
    ]
    # one warm process starts every student's nbgrader run with its kernel server
    # (the fork server's sandbox role) once the class has a few notebooks to grade
    notebooks = sum(
        name.endswith(".ipynb")
        for job in jobs
        for parts in job["assignments"].values()
        for name in parts["files"]
    )
    for job in jobs:
        job["fork_server"] = notebooks >= FORK_FROM
    if scheduler is None and notebooks >= FORK_FROM:
        from ..sandbox import start_sandbox_server

        start_sandbox_server()  # its imports overlap the rest of the set-up
    with dask_settings(dask_config):
        results = _run_with_progress(jobs, workers, scheduler, progress)
    _name_unconfined(jobs, results, gaps, issues)
    with (root / "autograde.log").open("w" if only is None else "a") as fh:
        for job in jobs:
            res = results[job["student"]]
            fh.write(
                f"===== student {job['student']}: "
                f"{'confined' if res.get('confined') else 'not confined'}\n"
            )
            fh.write(res.get("log", ""))
    for job in jobs:
        sandbox_runs.merge_sandbox(root, job, results[job["student"]], issues, late_policy)
        # a notebook whose nbgrader run crashed or went past its time limit is graded
        # as the blank release with the reason (its feedback says so), in the clean
        # room too: it scores 0, whatever its functions would have scored there
        res = results[job["student"]]
        for a, nb, *why in [*res.get("blanked", []), *res.get("ungraded", [])]:
            if (job["student"], a, nb) in answers:
                answers[job["student"], a, nb] = blank_notebook(
                    root, a, nb, why[0] if why else "Its grading run failed."
                )
    progress(f"clean room: verifying {len(answers)} notebook(s)")
    others = _runtime_code_rows(root, keep=lambda student: student not in set(class_))
    verify(answers, seed, workers=workers)
    if only is not None:  # the other students' record of run-time code stays
        _keep_runtime_code(root, others)
    return seed


def _runtime_code_rows(root, keep):
    """The rows of ``runtime_code.json`` whose student ``keep`` accepts."""
    import json

    from ..similarity import RUNTIME_CODE_NAME

    path = Path(root) / RUNTIME_CODE_NAME
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [r for r in rows if isinstance(r, dict) and keep(r.get("student"))]


def _keep_runtime_code(root, rows):
    """Add ``rows`` (of students not graded in this run) back to ``runtime_code.json``."""
    from ..similarity import write_runtime_code

    code = {
        (r["student"], r["assignment"], r["notebook"]): list(r["sources"])
        for r in [*_runtime_code_rows(root, keep=lambda s: True), *rows]
    }
    write_runtime_code(root, code)


def _run_with_progress(jobs, workers, scheduler, progress):
    """:func:`autograder.sandbox_runs.run_sandboxes`, one line to ``progress`` as each
    student's run ends (on a Dask cluster, once all have ended)."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    total = len(jobs)
    if scheduler is not None:
        results = sandbox_runs.run_sandboxes(jobs, workers, scheduler)
        for done, job in enumerate(jobs, start=1):
            progress(f"graded {done}/{total} students: {job['student']}")
        return results
    results = {}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(sandbox_runs.run_sandboxes, [job], 1, None) for job in jobs]
        for done, fut in enumerate(as_completed(futures), start=1):
            res = fut.result()
            results.update(res)
            progress(f"graded {done}/{total} students: {', '.join(res)}")
    return results


def _name_unconfined(jobs, results, gaps, issues):
    """A line for every student graded with less than full confinement: the machine's
    ``gaps``, or a grading process (a Dask worker) that was not root."""
    for job in jobs:
        res = results[job["student"]]
        why = list(gaps)
        if not res.get("confined") and not res.get("error") and not gaps:
            why.append(
                "nbgrader's run of these notebooks (their kernel) had no user id, "
                "private folders or network cut of its own: the process that ran "
                "it, a Dask worker for instance, was not root"
            )
        if why:
            issues.record(
                job["student"], "*", "*", "graded without full confinement: " + "; ".join(why)
            )
