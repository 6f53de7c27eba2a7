"""nbgrader's run of each student's notebooks, one sandbox per student, and what the
course takes back from it.

Each student's notebooks are run by nbgrader in a throwaway course of their own
(:func:`autograder.sandbox.grade_in_sandbox`): a job of plain data (:func:`sandbox_job`:
the student's files, the chapters' sources and releases, a gradebook without students)
goes out, a result of plain data comes back, here (``workers`` at a time) or on a Dask
cluster (:func:`run_sandboxes`). Everything in a result is untrusted:
:func:`merge_sandbox` reads the scratch gradebook in a temporary copy, clamps every score
to the real gradebook's maximum, takes the submission time from the real ``submitted/``
folder and keeps only autograded files that are notebooks of that student's exercises.
"""

from __future__ import annotations

import secrets
import shutil
import sqlite3
import tempfile
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat

from .course.notebook_repair import blank_notebook
from .nbgrader_run import GRADEBOOK, shared_db_url

__all__ = ["merge_sandbox", "read_scratch", "run_sandboxes", "sandbox_job", "template_gradebook"]


def template_gradebook(root):
    """Bytes of a copy of the gradebook of course directory ``root`` with every student
    removed (the assignments, their notebooks, cells and due dates stay): the scratch
    gradebook of a sandbox."""
    from nbgrader.api import Gradebook

    with tempfile.TemporaryDirectory(prefix="autograder-template-") as tmp:
        path = Path(tmp) / GRADEBOOK
        src = sqlite3.connect(str(Path(root) / GRADEBOOK))
        dst = sqlite3.connect(str(path))
        with dst:
            src.backup(dst)
        src.close()
        dst.close()
        with Gradebook(f"sqlite:///{path}") as gb:
            for st in list(gb.students):
                gb.remove_student(st.id)
        con = sqlite3.connect(str(path))
        con.execute("VACUUM")
        con.close()
        return path.read_bytes()


def sandbox_job(root, student, template, seed, timeout, late_policy):
    """The plain-data job of :func:`autograder.sandbox.grade_in_sandbox` for ``student``
    of course directory ``root``: their collected files, each chapter's source files and
    release notebooks, the scratch gradebook ``template``, the grading ``seed``, the
    per-cell ``timeout`` and nbgrader's late penalty ``late_policy`` (a value of
    :data:`autograder.course.term.LATE_POLICIES`)."""
    from .sandbox import SANDBOX_LIMITS

    root = Path(root)
    assignments = {}
    for adir in sorted(p for p in (root / "submitted" / student).iterdir() if p.is_dir()):
        a = adir.name
        files = {
            p.name: p.read_bytes()
            for p in sorted(adir.iterdir())
            if p.is_file() and (p.suffix == ".ipynb" or p.name == "timestamp.txt")
        }
        src = root / "solutions" / a
        source = (
            {
                str(p.relative_to(src)): p.read_bytes()
                for p in sorted(src.rglob("*"))
                if p.is_file() and p.suffix != ".ipynb" and ".ipynb_checkpoints" not in p.parts
            }
            if src.is_dir()
            else {}
        )
        rel = root / "exercises" / a
        release = {p.stem: p.read_bytes() for p in sorted(rel.glob("*.ipynb"))}
        assignments[a] = {"files": files, "source": source, "release": release}
    return {
        "student": student,
        "assignments": assignments,
        "gradebook": template,
        "seed": int(seed),
        "timeout": int(timeout),
        "late_policy": late_policy,
        "hide": [str(root)],
        "limits": dict(SANDBOX_LIMITS),
    }


def _failed(job, exc):
    """The result of a grading task that raised ``exc``: nothing graded (the clean room
    still scores the answers)."""
    return {
        "student": job["student"],
        "gradebook": None,
        "autograded": {},
        "blanked": [],
        "ungraded": [],
        "confined": False,
        "log": f"[autograder] the grading task failed: {type(exc).__name__}: {exc}\n",
        "error": f"{type(exc).__name__}: {str(exc)[:300]}",
    }


def run_sandboxes(jobs, workers, scheduler):
    """Run every job of ``jobs`` (:func:`sandbox_job`) through
    :func:`autograder.sandbox.grade_in_sandbox`: here, ``workers`` at a time, or on the
    Dask scheduler ``scheduler`` (an address; the connection's settings are those in
    force, :func:`autograder.scheduling.dask_settings`).

    Returns
    -------
    dict
        student -> result; a task that fails becomes a result with nothing graded and its
        ``error``, so one student's failure never stops the others.
    """
    from .sandbox import grade_in_sandbox
    from .scheduling import check_workers

    workers = check_workers(workers)
    results = {}
    if scheduler is None:

        def one(job):
            try:
                return grade_in_sandbox(job)
            except Exception as exc:  # the sandbox itself broke: this student only
                return _failed(job, exc)

        with ThreadPoolExecutor(max_workers=workers) as pool:
            for res in pool.map(one, jobs):
                results[res["student"]] = res
        return results
    from distributed import Client

    with Client(scheduler, set_as_default=False) as client:
        futures = {
            client.submit(
                grade_in_sandbox, job, pure=False, key=f"autograde-{secrets.token_hex(6)}-{i}"
            ): job
            for i, job in enumerate(jobs)
        }
        for fut, job in futures.items():  # merged afterwards, so order is free
            try:
                results[job["student"]] = fut.result()
            except Exception as exc:
                results[job["student"]] = _failed(job, exc)
    return results


def read_scratch(data, student, assignments):
    """(assignment, notebook) -> ``{"grades": {cell: (score, needs manual)}, "comments":
    {cell: text}}`` of ``student`` in a sandbox's scratch gradebook ``data`` (untrusted
    bytes, read in a temporary copy), for the ``assignments`` named."""
    from nbgrader.api import Gradebook, MissingEntry

    out = {}
    with tempfile.TemporaryDirectory(prefix="autograder-scratch-") as tmp:
        path = Path(tmp) / GRADEBOOK
        path.write_bytes(data)
        with Gradebook(f"sqlite:///{path}") as gb:
            for a in assignments:
                try:
                    sub = gb.find_submission(a, student)
                except MissingEntry:
                    continue
                for nb in sub.notebooks:
                    grades = {}
                    for g in nb.grades:
                        score = g.manual_score if g.manual_score is not None else g.auto_score
                        grades[str(g.name)] = (float(score or 0.0), bool(g.needs_manual_grade))
                    out[a, str(nb.name)] = {
                        "grades": grades,
                        "comments": {
                            str(c.name): (
                                None if c.auto_comment is None else str(c.auto_comment)[:20000]
                            )
                            for c in nb.comments
                        },
                    }
    return out


def merge_sandbox(root, job, result, issues, late_policy):
    """Take one sandbox's ``result`` for ``job`` into course directory ``root``.

    The student's grades and comments go into the real gradebook (scores clamped to its
    maxima, the submission time from the real ``submitted/`` folder, the late penalty of
    ``late_policy``, ``"mark"`` or ``"zero"``); the autograded notebooks that are valid
    notebooks of that student's exercises go into ``autograded/``; a notebook that had to
    be graded as blank replaces the submitted one (the original is kept under
    ``submitted_original/``). Every problem goes to ``issues``
    (:class:`autograder.course.issue_log.IssueLog`)."""
    from nbgrader.api import Gradebook, MissingEntry
    from nbgrader.utils import parse_utc
    from sqlalchemy.exc import SAWarning

    root = Path(root)
    student = job["student"]
    if result.get("error"):
        issues.record(
            student,
            "*",
            "*",
            "the sandbox that runs nbgrader for this "
            f"student failed ({result['error']}); the clean-room scores "
            "are recorded, there is no feedback notebook",
        )
    scratch = {}
    if result.get("gradebook"):
        try:
            scratch = read_scratch(result["gradebook"], student, job["assignments"])
        except Exception as exc:  # a submission that broke its scratch gradebook
            issues.record(
                student,
                "*",
                "*",
                "the scratch gradebook of this student's "
                f"nbgrader run could not be read ({type(exc).__name__}); "
                "in-kernel scores taken as 0: tampering or a crash",
            )
    for a, nb, reason in result.get("blanked", []):
        issues.record(student, a, nb, reason)
        src = root / "submitted" / student / a / f"{nb}.ipynb"
        keep = root / "submitted_original" / student / a
        keep.mkdir(parents=True, exist_ok=True)
        if src.exists():
            shutil.copy2(src, keep / src.name)
        nbformat.write(blank_notebook(root, a, nb, reason), str(src))
    for a, nb in result.get("ungraded", []):
        issues.record(student, a, nb, "could not be graded even as a blank notebook")
    with warnings.catch_warnings(), Gradebook(shared_db_url(root)) as gb:
        # nbgrader's add_submission trips SQLAlchemy's autoflush warning; harmless
        warnings.simplefilter("ignore", SAWarning)
        try:
            gb.find_student(student)
        except MissingEntry:
            gb.add_student(student)
        for a, parts in job["assignments"].items():
            _merge_grades(gb, a, student, parts, scratch, late_policy, parse_utc)
    for a, parts in job["assignments"].items():
        _keep_autograded(root, student, a, parts, result, issues)


def _merge_grades(gb, a, student, parts, scratch, late_policy, parse_utc):
    """The scratch grades of ``student``'s assignment ``a`` into gradebook ``gb``."""
    stamp = parts["files"].get("timestamp.txt")
    kwargs = {}
    if stamp:
        try:
            kwargs["timestamp"] = parse_utc(stamp.decode("utf-8").strip())
        except Exception:
            pass
    sub = gb.update_or_create_submission(a, student, **kwargs)
    late = (sub.total_seconds_late or 0) > 0
    for nb in sub.notebooks:
        got = scratch.get((a, nb.name), {"grades": {}, "comments": {}})
        for g in nb.grades:
            score, manual = got["grades"].get(g.name, (0.0, False))
            g.auto_score = min(max(score, 0.0), float(g.max_score))
            g.manual_score = None
            g.needs_manual_grade = manual
        for c in nb.comments:
            c.auto_comment = got["comments"].get(c.name)
    gb.db.commit()
    for nb in sub.notebooks:
        nb.late_submission_penalty = nb.score if late_policy == "zero" and late else None
    gb.db.commit()


def _keep_autograded(root, student, a, parts, result, issues):
    """Write ``student``'s autograded notebooks of assignment ``a`` that the sandbox
    returned and that are notebooks of that submission; name the others."""
    dest = root / "autograded" / student / a
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    if "timestamp.txt" in parts["files"]:
        (dest / "timestamp.txt").write_bytes(parts["files"]["timestamp.txt"])
    for name, data in result.get("autograded", {}).get(a, {}).items():
        if name not in parts["files"] or not name.endswith(".ipynb"):
            continue
        try:
            nb = nbformat.reads(data.decode("utf-8"), as_version=4)
        except Exception:
            issues.record(
                student,
                a,
                name[:-6],
                "the autograded notebook returned by the sandbox is not a notebook; no feedback",
            )
            continue
        nbformat.write(nb, str(dest / name))
