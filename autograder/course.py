"""The instructor pipeline around nbgrader: release, roster, collect, autograde, feedback, export.

Every step runs nbgrader as a child process (``python -m nbgrader ...``) with the course's
configuration (``autograder/nbgrader_config.py``, found through ``JUPYTER_CONFIG_PATH``)
and ``--CourseDirectory.root`` set to the course directory, so a crash in nbgrader or in a
kernel can never take the command down with it.

Robustness (what :meth:`Course.collect` and :meth:`Course.autograde` add to nbgrader):

* a submitted file that is not valid notebook JSON, that cannot be matched to an exercise,
  or that is missing is replaced by the blank release notebook with a Markdown cell at the
  top explaining why; it is graded (zero) like any other, and the problem is logged in
  ``<course>/grading_issues.csv`` and shown in the feedback;
* a renamed notebook is matched to its exercise through the nbgrader cell ids it carries;
* nbgrader runs once per student, in a throwaway copy of the course that holds only that
  student's submission and a scratch gradebook (:mod:`autograder.sandbox`; as root, under
  a user id of its own that cannot reach the real course); the grader merges the results
  into the real gradebook itself. If one notebook brings nbgrader down (a kernel that
  dies, e.g. ``os._exit``, or one that cannot be interrupted), the submission is re-graded
  notebook by notebook in the same copy, and a notebook that fails again is graded as
  blank with the reason stated. The other students are never affected;
* the recorded scores are the clean-room verifier's (:mod:`autograder.cleanroom`);
* ``autograde(workers=N)`` grades N students at a time on this machine and
  ``autograde(scheduler=ADDRESS)`` sends one task per student to a Dask cluster; the
  grades are the same either way;
* an infinite loop costs one cell: the per-cell timeout (``--timeout``) interrupts it.
"""

from __future__ import annotations

import csv
import datetime as _dt
import json
import numbers
import os
import secrets
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import warnings
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

import nbformat

from . import PACKAGE_DIR, REPO_ROOT, confine, csv_safe
from .issue_log import IssueLog
from .safe_files import (
    MAX_FILE_BYTES,
    Refused,
    open_regular,
    open_zip,
    read_regular,
    walk_regular,
    zip_members,
)

ISSUES_FILE = "grading_issues.csv"
#: the instructor's choices for the term: assigned chapters, due dates, late policy
TERM_FILE = "term.json"
#: late policies: "mark" records lateness (nbgrader's penalty "none"); "zero" gives a late
#: submission 0 points (nbgrader's LateSubmissionPlugin penalty "zero")
LATE_POLICIES = {"mark": "none", "zero": "zero"}
SEED_LOG = "grading_seeds.log"
GRADEBOOK = "gradebook.db"
#: seconds an nbgrader process waits for the gradebook while another one writes to it
#: (SQLite's busy timeout; the default of 5 s is too short for parallel grading)
GRADEBOOK_BUSY_TIMEOUT = 300


def _nbgrader_env(timeout=None, extra=None):
    env = dict(os.environ)
    paths = [str(PACKAGE_DIR)] + [
        p for p in env.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep) if p
    ]
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(paths)
    # nbgrader calls the `alembic` script of its environment: put that on PATH
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    if timeout is not None:
        env["AUTOGRADER_CELL_TIMEOUT"] = str(int(timeout))
    env.pop("AUTOGRADER_COURSE_ROOT", None)
    env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    if extra:
        env.update(extra)
    return env


def _check_workers(workers):
    """Return ``workers`` if it is an integer >= 1, else raise ValueError."""
    if isinstance(workers, bool) or not isinstance(workers, numbers.Integral) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    return int(workers)


#: notebooks per grading process from which its clean-room children are forked from a
#: warm server (:func:`autograder.cleanroom_process.start_fork_server`): the server's own
#: imports cost about what three children started from nothing do
_FORK_FROM = 3


def scheduler_config(scheduler, tls=None, insecure=False):
    """Dask settings under which the grader connects to ``scheduler``; raises ValueError
    before anything is graded when the connection would not be authenticated.

    A Dask scheduler runs whatever a client that reaches it submits, as the user its
    workers run as. A ``tcp://`` scheduler accepts any client, so it is refused unless
    ``insecure`` is given (a cluster that no student code can reach). A ``tls://`` one
    needs ``tls = {"ca_file": ..., "cert": ..., "key": ...}``: the certificate authority
    that signed the cluster's certificates, and this grader's certificate and key (paths;
    the scheduler must require client certificates, ``distributed.comm.tls`` on its
    side). The key file must be readable by its owner only: confined student code runs
    under a user id of its own (as root), which then cannot read it.

    Returns
    -------
    dict
        Dask configuration (``distributed.comm.*``) to set while the client connects; empty
        without a scheduler or for an accepted ``tcp://`` one.
    """
    if scheduler is None:
        if tls:
            raise ValueError("tls: credentials were given without a scheduler address")
        return {}
    if not str(scheduler).startswith("tls://"):
        if insecure:
            return {}
        raise ValueError(
            f"scheduler {scheduler!r}: a Dask scheduler reached without TLS authenticates "
            "no one, and any process that reaches its port runs code on the cluster; use a "
            "tls:// address with credentials (--tls-ca-file, --tls-cert, --tls-key), or "
            "--insecure-scheduler for a cluster that no student code can reach"
        )
    tls = dict(tls or {})
    missing = [k for k in ("ca_file", "cert", "key") if not tls.get(k)]
    if missing:
        raise ValueError(
            f"scheduler {scheduler!r}: tls needs {', '.join(missing)} "
            "(--tls-ca-file, --tls-cert, --tls-key)"
        )
    for k in ("ca_file", "cert", "key"):
        if not Path(tls[k]).is_file():
            raise ValueError(f"tls {k}: no such file: {tls[k]}")
    mode = Path(tls["key"]).stat().st_mode
    if mode & 0o077:
        raise ValueError(
            f"tls key {tls['key']} is readable by other users (mode "
            f"{mode & 0o777:o}); make it readable by its owner only "
            "(chmod 600), so that no sandboxed code can read it"
        )
    return {
        "distributed.comm.require-encryption": True,
        "distributed.comm.tls.ca-file": str(Path(tls["ca_file"]).resolve()),
        "distributed.comm.tls.client.cert": str(Path(tls["cert"]).resolve()),
        "distributed.comm.tls.client.key": str(Path(tls["key"]).resolve()),
    }


def _dask_settings(config):
    """A context in which Dask's configuration holds ``config`` (nothing without it)."""
    import contextlib

    if not config:
        return contextlib.nullcontext()
    import dask

    return dask.config.set(config)


def cleanroom_limits(timeout, exercise):
    """The clean room's limits for one notebook of ``exercise`` graded with the per-cell
    timeout ``timeout`` (seconds).

    Each call of the answer gets 80 % of a cell's time (the check then stops first and
    says why), its top level a cell's time, and the whole notebook the budget its kernel
    has (:data:`autograder.sandbox_limits.NOTEBOOK_BASE_S` plus the cell timeout for each cell
    the clean room runs: the answer's top level, the visible tests and each hidden check),
    past which the child is stopped and every check not yet scored scores 0 with that
    reason.

    Returns
    -------
    dict
        ``{"call_s", "start_s", "total_s"}`` over
        :data:`autograder.cleanroom_process.DEFAULT_LIMITS`.

    Raises
    ------
    ValueError
        If ``timeout`` is not a positive number or ``exercise`` is not an exercise.
    """
    from .exercises import EXERCISES, load
    from .sandbox_limits import NOTEBOOK_BASE_S

    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) or not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if exercise not in EXERCISES:
        raise ValueError(f"exercise must be one of the course's exercises, got {exercise!r}")
    cells = 2 + len(load(exercise).HIDDEN)
    return {
        "call_s": max(1.0, 0.8 * timeout),
        "start_s": float(timeout),
        "total_s": float(NOTEBOOK_BASE_S + timeout * cells),
    }


def noticed_message(noticed):
    """The ``grading_issues.csv`` line for what an answer tried beyond its clean room
    (:attr:`autograder.cleanroom.CellVerdict.noticed`)."""
    return (
        "in the clean room the answer tried to "
        + "; ".join(noticed)
        + " (an answer to the exercise has no reason to: look for an attempt on the "
        "reference package, the course, the grader or the network)"
    )


def _verify_one(exercise, nb, seed, limits, hide=()):
    """Clean-room verdicts of one notebook (module level, so that a worker process of
    :meth:`Course.verify` can run it from plain, picklable arguments); ``hide``: folders
    the answer must not see (the course).

    The reference's side of the checks runs on one BLAS/OpenMP thread, as the answer's
    side does in its clean-room child: the checks' problems are small (a logistic
    regression of 150 rows), on which a second thread only spins against the other
    workers (one logistic-regression fit of the linear-probe checks took 82 ms with two
    threads and 17 ms with one on a busy 2-core machine), and both sides then take the
    same arithmetic path.

    Never raises: whatever goes wrong while one notebook is verified (the child broke
    the protocol, grading it raised, its clean room could not start) scores that
    notebook 0 with the reason (:func:`autograder.cleanroom.failed_verdicts`), and the
    other notebooks are graded as usual."""
    from threadpoolctl import threadpool_limits

    from .checks._framework import CheckTimeout
    from .cleanroom import failed_verdicts, verify_notebook
    from .exercises import load

    spec = load(exercise)
    try:
        with threadpool_limits(limits=1):
            return verify_notebook(spec, nb, seed, limits, hide)
    except (Exception, CheckTimeout) as exc:  # contained: this notebook alone scores 0
        return failed_verdicts(
            spec,
            f"grading this notebook stopped on an error in the "
            f"grader ({type(exc).__name__}: {str(exc)[:300]})",
        )


def run_nbgrader(root, *args, timeout=None, env_extra=None, log=None):
    """Run ``python -m nbgrader <args>`` on course directory ``root``; return the process."""
    cmd = [
        sys.executable,
        "-m",
        "nbgrader",
        *map(str, args),
        f"--CourseDirectory.root={Path(root).resolve()}",
    ]
    proc = subprocess.run(
        cmd, cwd=str(root), env=_nbgrader_env(timeout, env_extra), capture_output=True, text=True
    )
    if log is not None:
        log(f"$ nbgrader {' '.join(map(str, args))}  (exit {proc.returncode})")
    return proc


def parse_due(text):
    """A due date as an aware UTC datetime; ``text`` like ``2026-03-01 23:59`` (UTC unless
    it names an offset, e.g. ``2026-03-01T23:59+01:00``). Raises ValueError naming it."""
    from dateutil import parser as _parser

    try:
        when = _parser.parse(str(text))
    except (ValueError, OverflowError, TypeError):
        raise ValueError(f"due date {text!r} is not a date (use YYYY-MM-DD HH:MM)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.timezone.utc)
    return when.astimezone(_dt.timezone.utc)


#: the flag of a chapter a student never handed in
NOT_SUBMITTED = "nothing was submitted for this chapter: it scores 0"


def read_submission_times(path):
    """Submission times stated by the instructor, from a CSV file (an LMS export).

    Parameters
    ----------
    path : str or os.PathLike
        A CSV file with a header naming a ``student`` (or ``id``) column and a
        ``timestamp`` (or ``submitted_at``) column, and optionally an ``assignment``
        column; times as :func:`parse_due` reads them (UTC unless an offset is given).

    Returns
    -------
    dict
        ``{(student, assignment or None): datetime}``.

    Raises
    ------
    ValueError
        Naming the file and the line, for a missing column, an empty student or a time
        that is not a date.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"times file not found: {path}")
    out = {}
    with path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        cols = {c.strip().lower(): c for c in reader.fieldnames or []}
        who = cols.get("student") or cols.get("id")
        when = cols.get("timestamp") or cols.get("submitted_at")
        if who is None or when is None:
            raise ValueError(
                f"times file {path}: the header must name a student (or id) "
                f"and a timestamp (or submitted_at) column, got "
                f"{reader.fieldnames}"
            )
        for line, row in enumerate(reader, start=2):
            student = (row.get(who) or "").strip()
            if not student:
                raise ValueError(f"times file {path}, line {line}: no student id")
            try:
                stamp = parse_due(row.get(when) or "")
            except ValueError:
                raise ValueError(
                    f"times file {path}, line {line}: {row.get(when)!r} is not a date"
                ) from None
            a = (row.get(cols["assignment"]) or "").strip() if "assignment" in cols else ""
            out[student, a or None] = stamp
    return out


def _utc(seconds):
    return _dt.datetime.fromtimestamp(seconds, _dt.timezone.utc)


def _fmt_time(when):
    return when.astimezone(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")


def _exercise_index(repo):
    """Map exercise name -> assignment, from the source notebooks in ``repo/solutions``."""
    index = {}
    for nb in sorted((Path(repo) / "solutions").glob("*/*.ipynb")):
        index[nb.stem] = nb.parent.name
    return index


# --------------------------------------------------------------------------- release
def release(repo=REPO_ROOT, dest=None, log=print):
    """Generate the student release of every assignment from ``repo/solutions``.

    nbgrader runs in a temporary course directory (so that no gradebook or checkpoint
    lands in the repository); the generated ``exercises/<assignment>/`` folders then
    replace those in ``dest`` (default ``repo/exercises``). Returns the written paths.
    """
    repo = Path(repo)
    dest = Path(dest) if dest is not None else repo / "exercises"
    with tempfile.TemporaryDirectory(prefix="autograder-release-") as tmp:
        shutil.copytree(repo / "solutions", Path(tmp) / "solutions")
        proc = run_nbgrader(tmp, "generate_assignment", "*", "--no-db", "--force", log=log)
        if proc.returncode != 0:
            raise RuntimeError("nbgrader generate_assignment failed:\n" + proc.stdout + proc.stderr)
        written = []
        for folder in sorted((Path(tmp) / "exercises").iterdir()):
            target = dest / folder.name
            target.mkdir(parents=True, exist_ok=True)
            for stale in target.glob("*.ipynb"):
                if not (folder / stale.name).exists():
                    stale.unlink()
            for nb in sorted(folder.glob("*.ipynb")):
                text = nb.read_text()
                out = target / nb.name
                if not out.exists() or out.read_text() != text:
                    out.write_text(text)
                written.append(out)
    return written


# --------------------------------------------------------------------------- course
class Course:
    """A grading course directory (nbgrader layout) for one class.

    Parameters
    ----------
    root : path
        The course directory (created if needed). ``solutions/`` is copied into it from
        ``repo`` by :meth:`setup`.
    repo : path
        The repository holding ``solutions/`` and ``exercises/``.
    timeout : int
        Per-cell execution limit in seconds while grading.
    """

    def __init__(self, root, repo=REPO_ROOT, timeout=60, log=print):
        self.submission_times, self.submitted_at = {}, None
        self.root = Path(root).resolve()
        self.repo = Path(repo).resolve()
        self.timeout = int(timeout)
        self.log = log

    # -- helpers
    def nbgrader(self, *args, env_extra=None):
        if args and args[0] == "autograde":  # the term's late policy
            policy = LATE_POLICIES[self.term().get("late_policy", "mark")]
            args = (*args, f"--LateSubmissionPlugin.penalty_method={policy}")
        return run_nbgrader(
            self.root, *args, timeout=self.timeout, env_extra=env_extra, log=self.log
        )

    def assignments(self):
        return sorted(p.name for p in (self.root / "solutions").iterdir() if p.is_dir())

    def exercise_index(self):
        return _exercise_index(self.root)

    @property
    def issue_log(self):
        """This course's :class:`autograder.issue_log.IssueLog` (``grading_issues.csv``)."""
        if getattr(self, "_issue_log", None) is None:
            self._issue_log = IssueLog(self.root / ISSUES_FILE, log=lambda line: self.log(line))
        return self._issue_log

    def record_issue(self, student, assignment, notebook, problem):
        """Append a problem to ``grading_issues.csv`` (once: a problem already listed for
        the same student, assignment and notebook is not repeated; past
        :data:`autograder.issue_log.MAX_PER_NOTEBOOK` for one notebook they are counted
        in one line). Returns True if the problem was listed."""
        return self.issue_log.record(student, assignment, notebook, problem)

    def issues(self):
        """Every line of ``grading_issues.csv`` as a dict."""
        return self.issue_log.rows()

    # -- the term
    def term(self):
        """The term's choices (``term.json``): ``{"assignments": {name: {"due": text or
        None}}, "late_policy": "mark" | "zero", "book_url": address or None}``; empty
        before :meth:`setup`."""
        path = self.root / TERM_FILE
        if not path.exists():
            return {}
        return json.loads(path.read_text())

    def due_dates(self):
        """Dict assignment -> aware UTC due date (assignments without one are left out)."""
        return {
            a: parse_due(v["due"])
            for a, v in self.term().get("assignments", {}).items()
            if v.get("due")
        }

    # -- setup
    def setup(self, assignments=None, due=None, late_policy=None, book_url=None):
        """Create the course directory and register the term's assignments in its gradebook.

        Parameters
        ----------
        assignments : list of str, optional
            The chapters (assignment folders of ``solutions/``) given this term. Default:
            those of an earlier ``setup`` of this course (``term.json``), else all.
        due : dict, optional
            Assignment -> due date (text such as ``"2026-03-01 23:59"``, UTC unless an
            offset is given); recorded in the gradebook, where nbgrader compares it with
            each submission's timestamp.
        late_policy : {"mark", "zero"}, optional
            ``"mark"`` (default) marks late submissions in the exports and keeps their
            points; ``"zero"`` gives them 0 (nbgrader's late penalty "zero").
        book_url : str, optional
            Where students read the book: the feedback pages link each statement's
            chapter there. Default: as set up before, else the GitHub Pages address of
            the repository (:func:`autograder.feedback.default_book_url`), where
            ``make publish`` puts it.

        Returns
        -------
        list of str
            The registered assignments.

        Raises
        ------
        ValueError
            If an assignment is not a folder of ``solutions/``, a due date names an
            assignment that is not assigned or is not a date, or the late policy is unknown.
        """
        available = sorted(p.name for p in (self.repo / "solutions").iterdir() if p.is_dir())
        term = self.term()
        if assignments is None:
            assignments = list(term.get("assignments", {})) or available
        assignments = sorted(dict.fromkeys(str(a) for a in assignments))
        unknown = [a for a in assignments if a not in available]
        if unknown or not assignments:
            raise ValueError(
                f"assignments: unknown chapter(s) {unknown or '(none given)'}; "
                f"choose from {', '.join(available)}"
            )
        old_due = {a: v.get("due") for a, v in term.get("assignments", {}).items()}
        due = {
            **{a: d for a, d in old_due.items() if a in assignments and d},
            **{str(k): v for k, v in (due or {}).items()},
        }
        stray = sorted(set(due) - set(assignments))
        if stray:
            raise ValueError(
                f"due: {', '.join(stray)} is not among the assigned chapters "
                f"({', '.join(assignments)})"
            )
        due = {a: _fmt_time(parse_due(d)) for a, d in due.items() if d}
        late_policy = late_policy or term.get("late_policy", "mark")
        if late_policy not in LATE_POLICIES:
            raise ValueError(
                f"late_policy must be one of {sorted(LATE_POLICIES)}, got {late_policy!r}"
            )
        from .feedback import check_book_url, default_book_url

        book_url = book_url or term.get("book_url") or default_book_url(self.repo)
        if book_url is not None:
            book_url = check_book_url(book_url)
        self.root.mkdir(parents=True, exist_ok=True)
        src = self.root / "solutions"
        if src.exists():
            shutil.rmtree(src)
        src.mkdir()
        for a in assignments:
            shutil.copytree(self.repo / "solutions" / a, src / a)
        stale = self.root / "exercises"
        if stale.exists():
            for folder in stale.iterdir():
                if folder.is_dir() and folder.name not in assignments:
                    shutil.rmtree(folder)
        proc = self.nbgrader("generate_assignment", "*", "--force")
        if proc.returncode != 0:
            raise RuntimeError("nbgrader generate_assignment failed:\n" + proc.stdout + proc.stderr)
        self._register_assignments(assignments, due)
        self._drop_unassigned(assignments)
        (self.root / TERM_FILE).write_text(
            json.dumps(
                {
                    "assignments": {a: {"due": due.get(a)} for a in assignments},
                    "late_policy": late_policy,
                    "book_url": book_url,
                },
                indent=2,
            )
            + "\n"
        )
        return self.assignments()

    def _register_assignments(self, assignments, due):
        """Create or update each assignment in the gradebook, with its due date (or none).

        What ``nbgrader db assignment add NAME [--duedate=...]`` does, in one gradebook
        session instead of one nbgrader process per chapter (each costs about 1.5 s of
        start-up)."""
        from nbgrader.api import Gradebook

        with Gradebook(self.shared_db_url()) as gb:
            for a in assignments:
                gb.update_or_create_assignment(a, duedate=due.get(a))

    def _drop_unassigned(self, assignments):
        """Remove from the gradebook the assignments of an earlier setup that are no
        longer given (and have no submission), so that no export has rows for them."""
        from nbgrader.api import Gradebook

        if not (self.root / GRADEBOOK).exists():
            return
        with Gradebook(f"sqlite:///{self.root / GRADEBOOK}") as gb:
            for assignment in list(gb.assignments):
                if assignment.name not in assignments and not assignment.submissions:
                    gb.remove_assignment(assignment.name)

    def roster(self):
        """Student ids in the gradebook (imported with :meth:`import_roster`), sorted."""
        from nbgrader.api import Gradebook

        if not (self.root / GRADEBOOK).exists():
            return []
        with Gradebook(f"sqlite:///{self.root / GRADEBOOK}") as gb:
            return sorted(st.id for st in gb.students)

    # -- roster
    def import_roster(self, csv_path):
        """Add every student of a CSV (columns id, first_name, last_name, email) at once."""
        proc = self.nbgrader("db", "student", "import", str(Path(csv_path).resolve()))
        if proc.returncode != 0:
            raise RuntimeError("nbgrader db student import failed:\n" + proc.stdout + proc.stderr)
        return proc

    # -- collect
    @staticmethod
    def _add_note(nb, text):
        """Insert a Markdown note at the top of a notebook (shown in the feedback); the
        text is plain text, escaped (:func:`autograder.feedback.note_markdown`)."""
        from .feedback import note_markdown

        note = nbformat.v4.new_markdown_cell(note_markdown(text))
        note["id"] = "autograder-grading-note"
        nb.cells = [c for c in nb.cells if c.get("id") != "autograder-grading-note"]
        nb.cells.insert(0, note)

    def _blank(self, assignment, notebook, reason):
        nb = nbformat.read(
            str(self.root / "exercises" / assignment / f"{notebook}.ipynb"), as_version=4
        )
        self._add_note(
            nb,
            reason + " This notebook was therefore graded as the blank "
            "exercise (zero points). Ask your instructor if you think this is wrong.",
        )
        return nb

    def _restore_deleted_cells(self, nb, assignment, notebook):
        """Put back read-only cells (statement, tests) that a student deleted.

        nbgrader restores the *contents* of read-only cells but not deleted cells, which
        would then simply be missing from the grade. Tests belong to the instructor, so a
        deleted one is re-inserted after the cell that precedes it in the release; the
        student's own code still decides whether it passes. Returns the restored grade ids.
        """
        release = nbformat.read(
            str(self.root / "exercises" / assignment / f"{notebook}.ipynb"), as_version=4
        )
        gid = lambda c: c.get("metadata", {}).get("nbgrader", {}).get("grade_id")  # noqa: E731
        present = {gid(c) for c in nb.cells}
        restored = []
        for i, cell in enumerate(release.cells):
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if not meta.get("locked") or gid(cell) in present:
                continue
            pos = len(nb.cells)
            for prev in reversed(release.cells[:i]):
                ids = [gid(c) for c in nb.cells]
                if gid(prev) in ids:
                    pos = ids.index(gid(prev)) + 1
                    break
            else:
                pos = 0
            nb.cells.insert(pos, cell)
            present.add(gid(cell))
            restored.append(gid(cell))
        return restored

    @staticmethod
    def _identify(nb, index):
        """Exercise name of a notebook, from the nbgrader grade ids of its cells."""
        votes = {}
        for cell in nb.get("cells", []):
            gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
            for name in index:
                if gid.startswith(name + "_"):
                    votes[name] = votes.get(name, 0) + 1
        return max(votes, key=votes.get) if votes else None

    def _student_files(self, entry, refused):
        """(name, bytes, arrived, claimed) of every .ipynb of one student's folder or zip
        file, one at a time (a generator: only the file being handed over is in memory);
        the (name, reason) of each file refused is appended to ``refused``. ``arrived`` is
        when the file (the zip file) reached this machine, its inode change time, which no
        tool of the student's sets; ``claimed`` is the time the file carries (its
        modification time, the zip entry's date), which the student controls. Both are
        aware datetimes. Only regular files are read, never through a link and at most
        :data:`autograder.safe_files.MAX_FILE_BYTES` each; a zip file is read only when
        it has at most :data:`~autograder.safe_files.MAX_ZIP_MEMBERS` members whose
        notebooks unpack to at most :data:`~autograder.safe_files.MAX_ZIP_BYTES`
        (:mod:`autograder.safe_files`). Raises :class:`~autograder.safe_files.Refused`
        for a zip file that is not read, or not read to its end."""

        def kept(name):  # editor and archiver leftovers are not submissions
            parts = Path(name).parts
            return ".ipynb_checkpoints" not in parts and (not parts or parts[0] != "__MACOSX")

        if entry.is_dir():
            paths, bad = walk_regular(entry, ".ipynb")
            refused += [
                (str(p.relative_to(entry)), why) for p, why in bad if kept(p.relative_to(entry))
            ]
            for rel in (p.relative_to(entry) for p in paths):
                if not kept(rel):
                    continue
                try:
                    data, st = read_regular(rel, top=entry, full_stat=True)
                except Refused as why:
                    refused.append((str(rel), str(why)))
                    continue
                yield rel.name, data, _utc(st.st_ctime), _utc(st.st_mtime)
        elif entry.suffix == ".zip":
            fh, zst = open_regular(entry, 16 * MAX_FILE_BYTES)
            try:
                with fh, open_zip(fh) as zf:
                    for info, data, why in zip_members(zf, ".ipynb"):
                        if not kept(info.filename):
                            continue
                        if why is not None:
                            refused.append((info.filename, why))
                            continue
                        yield (
                            Path(info.filename).name,
                            data,
                            _utc(zst.st_ctime),
                            _dt.datetime(*info.date_time, tzinfo=_dt.timezone.utc),
                        )
            except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError) as exc:
                raise Refused(f"is not a readable zip file ({type(exc).__name__})") from None

    @staticmethod
    def _stated_timestamp(entry, assignment):
        """The submission time a folder states in nbgrader's ``timestamp.txt`` (what
        ``nbgrader submit`` writes): ``<entry>/<assignment>/timestamp.txt``, else one at
        the top of the folder; None without either (a link or anything but a small regular
        file is not read)."""
        if not entry.is_dir() or entry.is_symlink():
            return None
        for stamp in (Path(assignment, "timestamp.txt"), Path("timestamp.txt")):
            if os.path.lexists(entry / stamp):
                try:
                    text = read_regular(stamp, 4096, top=entry)[0].decode("utf-8").strip()
                    return parse_due(text)
                except (Refused, UnicodeDecodeError, ValueError):
                    return None
        return None

    def _roster_problem(self, student, roster):
        """Why a submission folder cannot be matched to the roster, or None if it can."""
        if not roster or student in roster:
            return None
        close = [r for r in roster if r.lower() == student.lower()]
        if close:
            return (
                f"the folder {student!r} is not on the roster, but {close[0]!r} is (the "
                f"case differs): not graded. Rename it to {close[0]!r} and collect "
                "again."
            )
        return (
            f"the folder {student!r} matches no student id of the roster: not graded. "
            "Fix the folder name or add the student to the roster, then collect again."
        )

    def collect(self, folder, times=None, submitted_at=None, require_roster=False):
        """Copy a folder of submissions into ``submitted/<student>/<assignment>/``.

        The submission time nbgrader compares with the due date comes from the
        instructor's side only: the row of ``times`` (a CSV file such as an LMS export,
        :func:`read_submission_times`), else ``submitted_at`` (one time for everyone),
        else when the files reached this machine (their inode change time). A
        ``timestamp.txt``, a file's modification time or a zip entry's date are written by
        the student's tools and never used; one earlier than the time used by more than an
        hour gets a line in ``grading_issues.csv``.

        Without a roster every folder name is taken as a student id: each one gets a line
        in ``grading_issues.csv`` saying so (a typo then becomes a student of its own), and
        with ``require_roster`` collecting refuses to start (ValueError).

        ``folder`` holds one entry per student, named by the student id: a directory of
        notebooks (any nesting) or a ``.zip`` file. Each notebook is matched to its
        exercise by its nbgrader cell ids, so renamed files are found; a notebook that is
        not valid JSON is matched by file name if possible. Every exercise of an assignment
        the student submitted anything for gets a notebook: a missing or unreadable one
        becomes the blank release with an explanation. Returns ``{student: [assignments]}``.
        """
        folder = Path(folder)
        self.submission_times = read_submission_times(times) if times is not None else {}
        self.submitted_at = parse_due(submitted_at) if submitted_at is not None else None
        if times is None and submitted_at is None:
            self.log(
                "submission times: when each file reached this machine (no --times "
                "file or --submitted-at given); if the folder was copied here after "
                "the due date, give the LMS's times with --times"
            )
        index = self.exercise_index()
        everything = _exercise_index(self.repo)  # every chapter, assigned or not
        roster = set(self.roster())
        if require_roster and not roster:
            raise ValueError(
                "require_roster: the course has no roster; import one first "
                "(autograder roster students.csv)"
            )
        if not roster:
            self.log(
                "no roster: every folder name is taken as a student id (import one "
                "with `autograder roster`, or pass --require-roster to refuse)"
            )
        collected = {}
        for entry in sorted(folder.iterdir()):
            if entry.name.startswith("."):
                continue
            student = entry.stem if entry.suffix == ".zip" else entry.name
            why = self._roster_problem(student, roster)
            if why:
                self.record_issue(student, "*", "*", why)
                continue
            if not roster:
                self.record_issue(
                    student,
                    "*",
                    "*",
                    "graded without a roster: the folder "
                    f"name {student!r} is taken as the student id unchecked",
                )
            if entry.is_symlink() or not (entry.is_dir() or entry.suffix == ".zip"):
                what = (
                    "a symbolic link" if entry.is_symlink() else "neither a folder nor a zip file"
                )
                self.record_issue(student, "*", "*", f"{entry.name} is {what}: not collected")
                continue
            try:
                collected_now = self._collect_one(entry, student, index, everything)
            except Exception as exc:  # one bad submission never stops the others
                self.record_issue(
                    student,
                    "*",
                    "*",
                    "collecting this submission failed "
                    f"({type(exc).__name__}: {str(exc)[:200]}): not collected",
                )
                continue
            collected[student] = collected_now
        self.issue_log.flush()
        return collected

    def _collect_one(self, entry, student, index, everything):
        """Collect one student's folder or zip file; returns the assignments written."""
        found = {}  # exercise -> notebook node
        problems = {}  # exercise -> reason
        times = {}  # assignment -> latest arrival
        claims = {}  # assignment -> latest time the files carry
        refused = []
        try:
            for fname, data, when, claim in self._student_files(entry, refused):
                self._take_file(
                    student,
                    index,
                    everything,
                    fname,
                    data,
                    when,
                    claim,
                    found,
                    problems,
                    times,
                    claims,
                )
        except Refused as why:  # a zip file not read (to its end): nothing of it is kept
            self.record_issue(student, "*", "*", f"{entry.name} {why}")
            for taken in (found, problems, times, claims):
                taken.clear()
            refused = []
        for name, why in refused:
            ex = Path(name).stem if Path(name).stem in index else None
            self.record_issue(student, index[ex] if ex else "?", ex or name, f"{name} {why}")
            if ex and ex not in found:  # graded as the blank release, with the reason
                problems.setdefault(ex, f"Your file {name} {why}.")
        assignments = sorted({index[e] for e in list(found) + list(problems)})
        for a in assignments:
            dest = self.root / "submitted" / student / a
            if dest.exists():
                shutil.rmtree(dest)
            dest.mkdir(parents=True)
            # nbgrader compares this time with the due date: one the instructor states,
            # else the arrival of the files here; never a time inside the submission
            when = (
                self.submission_times.get((student, a))
                or self.submission_times.get((student, None))
                or self.submitted_at
                or times.get(a)
                or _dt.datetime.now(_dt.timezone.utc)
            )
            claim = self._stated_timestamp(entry, a) or claims.get(a)
            if claim is not None and claim < when - _dt.timedelta(hours=1):
                self.record_issue(
                    student,
                    a,
                    "*",
                    f"the submission carries the time {_fmt_time(claim)} "
                    f"(its timestamp.txt, file or zip-entry dates), earlier than when it "
                    f"reached the grader, {_fmt_time(when)}; times inside a submission are "
                    "not trusted, so it is graded as submitted at the later time",
                )
            (dest / "timestamp.txt").write_text(_fmt_time(when))
            for ex in sorted(e for e, aa in index.items() if aa == a):
                if ex in found:
                    nbformat.write(found[ex], str(dest / f"{ex}.ipynb"))
                    continue
                reason = problems.get(ex, "No notebook for this exercise was submitted.")
                self.record_issue(student, a, ex, reason)
                nbformat.write(self._blank(a, ex, reason), str(dest / f"{ex}.ipynb"))
        return assignments

    def _take_file(
        self, student, index, everything, fname, data, when, claim, found, problems, times, claims
    ):
        """Take one notebook file of a student's submission: its exercise into ``found``
        (a notebook node) or ``problems`` (why it is graded as blank), its times into
        ``times`` and ``claims``, and what is wrong with it into the issue log."""
        try:
            nb = nbformat.reads(data.decode("utf-8"), as_version=4)
        except Exception as exc:  # invalid JSON, wrong encoding, not a notebook
            ex = Path(fname).stem if Path(fname).stem in index else None
            if ex is None:
                self.record_issue(
                    student, "?", fname, f"unreadable file ignored ({type(exc).__name__})"
                )
                return
            problems[ex] = (
                f"Your file {fname} could not be read as a notebook "
                f"({type(exc).__name__}: {str(exc).splitlines()[0][:160]})."
            )
            return
        ex = self._identify(nb, index) or (Path(fname).stem if Path(fname).stem in index else None)
        if ex is None:
            other = self._identify(nb, everything)
            if other is not None:
                self.record_issue(
                    student,
                    everything[other],
                    other,
                    f"{fname} belongs to the chapter "
                    f"{everything[other]}, which is not assigned this "
                    "term; ignored",
                )
                return
            self.record_issue(
                student, "?", fname, "not recognised as any exercise notebook; ignored"
            )
            return
        times[index[ex]] = max(times.get(index[ex], when), when)
        claims[index[ex]] = max(claims.get(index[ex], claim), claim)
        notes = []
        if fname != f"{ex}.ipynb":
            self.record_issue(student, index[ex], ex, f"submitted as {fname}; graded as {ex}.ipynb")
            notes.append(f"Your file {fname} was recognised as {ex}.ipynb and graded as such.")
        if ex in found:
            self.record_issue(
                student, index[ex], ex, f"several files for this exercise; used {fname}"
            )
        restored = self._restore_deleted_cells(nb, index[ex], ex)
        if restored:
            self.record_issue(
                student,
                index[ex],
                ex,
                "deleted read-only cell(s) restored from the release: " + ", ".join(restored),
            )
            notes.append(
                "Read-only cells were missing from your notebook and were "
                "put back from the release before grading: " + ", ".join(restored) + "."
            )
        for line in _solution_syntax_errors(nb):
            self.record_issue(student, index[ex], ex, line)
        if notes:
            self._add_note(nb, " ".join(notes))
        found[ex] = nb
        problems.pop(ex, None)

    # -- autograde
    def submissions(self):
        out = []
        base = self.root / "submitted"
        if base.exists():
            for sdir in sorted(p for p in base.iterdir() if p.is_dir()):
                for adir in sorted(p for p in sdir.iterdir() if p.is_dir()):
                    out.append((sdir.name, adir.name))
        return out

    def students(self):
        """Ids of the students with a folder under ``submitted/``, sorted."""
        base = self.root / "submitted"
        if not base.exists():
            return []
        return sorted(p.name for p in base.iterdir() if p.is_dir())

    def shared_db_url(self):
        """URL of the course's gradebook for processes that write to it at the same time.

        The same file as nbgrader's default (``sqlite:///<root>/gradebook.db``), with a
        long SQLite busy timeout (``?timeout=``, read by SQLAlchemy's pysqlite dialect)
        so that a process waits for the lock instead of failing with "database is locked".
        """
        path = quote(str(self.root / GRADEBOOK), safe="/")
        return f"sqlite:///{path}?timeout={GRADEBOOK_BUSY_TIMEOUT}"

    def autograde(self, seed=None, workers=1, scheduler=None, tls=None, insecure_scheduler=False):
        """Autograde every collected submission; returns the grading seed.

        Each student's notebooks are run by nbgrader in a throwaway course of their own
        (:mod:`autograder.sandbox`: a copy holding only that student's submission and a
        gradebook without students, under its own user id when the grader is root); the
        grader merges the results into the real gradebook and ``autograded/`` folder, and
        the clean-room verifier (:meth:`verify`) then records its scores over nbgrader's.

        Parameters
        ----------
        seed : int, optional
            Grading seed (default: drawn at random). It is logged in ``grading_seeds.log``
            and reaches the hidden checks through ``$AUTOGRADER_SEED``, so a run can be
            reproduced exactly.
        workers : int
            Number of students graded at the same time on this machine (and threads of
            the clean-room verifier). The grades are the same for any number.
        scheduler : str, optional
            Address of a Dask distributed scheduler (``tls://host:8786``): one task per
            student is submitted there instead (the workers need the project installed;
            a task receives and returns plain data, no shared file system is needed).
        tls : dict, optional
            The grader's credentials for a ``tls://`` scheduler: ``{"ca_file": ...,
            "cert": ..., "key": ...}`` (paths; the key readable by its owner only), see
            :func:`scheduler_config`.
        insecure_scheduler : bool
            Accept a scheduler without authentication (``tcp://``): only for a cluster
            that no student code can reach.

        Returns
        -------
        int
            The grading seed.

        Raises
        ------
        ValueError
            If ``workers`` is not an integer >= 1, ``scheduler`` is not a non-empty
            string, or its credentials are missing or readable by others.
        """
        workers = _check_workers(workers)
        if scheduler is not None and (not isinstance(scheduler, str) or not scheduler.strip()):
            raise ValueError(
                f"scheduler must be an address such as tls://host:8786, got {scheduler!r}"
            )
        dask_config = scheduler_config(scheduler, tls, insecure_scheduler)
        if seed is None:
            seed = secrets.randbits(32)
        seed = int(seed)
        with (self.root / SEED_LOG).open("a") as fh:
            fh.write(
                f"{_dt.datetime.now(_dt.timezone.utc).isoformat(timespec='seconds')} "
                f"autograde seed {seed}\n"
            )
        self.log(f"grading seed {seed}")
        gaps = confine.protection_gaps()
        for gap in gaps:
            self.log(f"WARNING: {gap}")
        # the answers as submitted, read before any student code runs
        answers = self._answers()
        template = self._template_gradebook()
        jobs = [self._sandbox_job(s, template, seed) for s in self.students()]
        # one warm process starts every student's nbgrader run with its kernel server
        # (autograder.sandbox_fork_server) once the class has a few notebooks to grade
        notebooks = sum(
            name.endswith(".ipynb")
            for job in jobs
            for parts in job["assignments"].values()
            for name in parts["files"]
        )
        for job in jobs:
            job["fork_server"] = notebooks >= _FORK_FROM
        if scheduler is None and notebooks >= _FORK_FROM:
            from .sandbox import start_sandbox_server

            start_sandbox_server()  # its imports overlap the rest of the set-up
        with _dask_settings(dask_config):
            results = self._run_sandboxes(jobs, workers, scheduler)
        for job in jobs:  # every student graded with less than full confinement is named
            res = results[job["student"]]
            why = list(gaps)
            if not res.get("confined") and not res.get("error") and not gaps:
                why.append(
                    "nbgrader's run of these notebooks (their kernel) had no user id, "
                    "private folders or network cut of its own: the process that ran "
                    "it, a Dask worker for instance, was not root"
                )
            if why:
                self.record_issue(
                    job["student"], "*", "*", "graded without full confinement: " + "; ".join(why)
                )
        with (self.root / "autograde.log").open("w") as fh:
            for job in jobs:
                res = results[job["student"]]
                fh.write(
                    f"===== student {job['student']}: "
                    f"{'confined' if res.get('confined') else 'not confined'}\n"
                )
                fh.write(res.get("log", ""))
        for job in jobs:
            self._merge_sandbox(job, results[job["student"]])
            # a notebook whose nbgrader run crashed or went past its time limit is graded
            # as the blank release with the reason (its feedback says so), in the clean
            # room too: it scores 0, whatever its functions would have scored there
            res = results[job["student"]]
            for a, nb, *why in [*res.get("blanked", []), *res.get("ungraded", [])]:
                if (job["student"], a, nb) in answers:
                    answers[job["student"], a, nb] = self._blank(
                        a, nb, why[0] if why else "Its grading run failed."
                    )
        self.verify(answers, seed, workers=workers)
        return seed

    # -- one sandbox per student
    def _template_gradebook(self):
        """Bytes of a copy of the gradebook with every student removed (the assignments,
        their notebooks, cells and due dates stay): the scratch gradebook of a sandbox."""
        from nbgrader.api import Gradebook

        with tempfile.TemporaryDirectory(prefix="autograder-template-") as tmp:
            path = Path(tmp) / GRADEBOOK
            src = sqlite3.connect(str(self.root / GRADEBOOK))
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

    def _sandbox_job(self, student, template, seed):
        """The plain-data job of :func:`autograder.sandbox.grade_in_sandbox` for one student."""
        from .sandbox import SANDBOX_LIMITS

        assignments = {}
        for adir in sorted(p for p in (self.root / "submitted" / student).iterdir() if p.is_dir()):
            a = adir.name
            files = {
                p.name: p.read_bytes()
                for p in sorted(adir.iterdir())
                if p.is_file() and (p.suffix == ".ipynb" or p.name == "timestamp.txt")
            }
            src = self.root / "solutions" / a
            source = (
                {
                    str(p.relative_to(src)): p.read_bytes()
                    for p in sorted(src.rglob("*"))
                    if p.is_file() and p.suffix != ".ipynb" and ".ipynb_checkpoints" not in p.parts
                }
                if src.is_dir()
                else {}
            )
            rel = self.root / "exercises" / a
            release = {p.stem: p.read_bytes() for p in sorted(rel.glob("*.ipynb"))}
            assignments[a] = {"files": files, "source": source, "release": release}
        return {
            "student": student,
            "assignments": assignments,
            "gradebook": template,
            "seed": int(seed),
            "timeout": self.timeout,
            "late_policy": LATE_POLICIES[self.term().get("late_policy", "mark")],
            "hide": [str(self.root)],
            "limits": dict(SANDBOX_LIMITS),
        }

    def _run_sandboxes(self, jobs, workers, scheduler):
        """student -> result of :func:`autograder.sandbox.grade_in_sandbox`, run here with
        ``workers`` at a time or on the Dask scheduler ``scheduler``; a task that fails
        becomes a result with nothing graded (the verifier still scores the answers)."""
        from .sandbox import grade_in_sandbox

        def failed(job, exc):
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

        results = {}
        if scheduler is None:

            def one(job):
                try:
                    return grade_in_sandbox(job)
                except Exception as exc:  # the sandbox itself broke: this student only
                    return failed(job, exc)

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
                    results[job["student"]] = failed(job, exc)
        return results

    def _read_scratch(self, data, student, assignments):
        """(assignment, notebook) -> {"grades": {cell: (score, needs manual)}, "comments":
        {cell: text}} of ``student`` in a sandbox's scratch gradebook (untrusted bytes)."""
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

    def _merge_sandbox(self, job, result):
        """Take one sandbox's results into the real course: the student's grades and
        comments (scores clamped to the real gradebook's maxima, the submission time from
        the real ``submitted/`` folder), the autograded notebooks that are valid notebooks
        of that student's exercises, and the notebooks that had to be graded as blank."""
        from nbgrader.api import Gradebook, MissingEntry
        from nbgrader.utils import parse_utc
        from sqlalchemy.exc import SAWarning

        student = job["student"]
        if result.get("error"):
            self.record_issue(
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
                scratch = self._read_scratch(result["gradebook"], student, job["assignments"])
            except Exception as exc:  # a submission that broke its scratch gradebook
                self.record_issue(
                    student,
                    "*",
                    "*",
                    "the scratch gradebook of this student's "
                    f"nbgrader run could not be read ({type(exc).__name__}); "
                    "in-kernel scores taken as 0: tampering or a crash",
                )
        for a, nb, reason in result.get("blanked", []):
            self.record_issue(student, a, nb, reason)
            src = self.root / "submitted" / student / a / f"{nb}.ipynb"
            keep = self.root / "submitted_original" / student / a
            keep.mkdir(parents=True, exist_ok=True)
            if src.exists():
                shutil.copy2(src, keep / src.name)
            nbformat.write(self._blank(a, nb, reason), str(src))
        for a, nb in result.get("ungraded", []):
            self.record_issue(student, a, nb, "could not be graded even as a blank notebook")
        policy = self.term().get("late_policy", "mark")
        with warnings.catch_warnings(), Gradebook(self.shared_db_url()) as gb:
            # nbgrader's add_submission trips SQLAlchemy's autoflush warning; harmless
            warnings.simplefilter("ignore", SAWarning)
            try:
                gb.find_student(student)
            except MissingEntry:
                gb.add_student(student)
            for a, parts in job["assignments"].items():
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
                    nb.late_submission_penalty = nb.score if policy == "zero" and late else None
                gb.db.commit()
        for a, parts in job["assignments"].items():
            dest = self.root / "autograded" / student / a
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
                    self.record_issue(
                        student,
                        a,
                        name[:-6],
                        "the autograded notebook "
                        "returned by the sandbox is not a notebook; no feedback",
                    )
                    continue
                nbformat.write(nb, str(dest / name))

    def _answers(self):
        """(student, assignment, notebook) -> the submitted notebook, for the verifier."""
        out = {}
        for student, assignment in self.submissions():
            for path in sorted((self.root / "submitted" / student / assignment).glob("*.ipynb")):
                try:
                    out[student, assignment, path.stem] = nbformat.read(str(path), as_version=4)
                except Exception:  # collect already replaced unreadable files
                    continue
        return out

    def verify(self, answers, seed, workers=1):
        """Grade every answer in the clean room (:mod:`autograder.cleanroom`) and record
        its scores in the gradebook. The hidden tests are scored only here (the kernel of
        a graded submission runs none, :data:`autograder.checks.KERNEL_ENV`; a check that
        cannot be verified scores 0), and their findings become those cells' output in the
        autograded notebooks, which the feedback shows. The visible tests ran in the kernel
        too: a notebook where the two scores of that cell differ gets a line in
        ``grading_issues.csv``, as does an answer that imports the reference or the
        grader. Returns the verdicts by key.

        With ``workers > 1`` the notebooks are verified by that many worker processes
        (not threads: the checks swap ``sys.stdout`` and the warnings filters while they
        run, process-wide state that two threads of checks would corrupt; a benchmark
        lost its own output that way). The verdicts do not depend on the number of
        workers (tested). The answers' own work runs in the clean-room children either way.
        """
        from nbgrader.api import Gradebook, MissingEntry

        from .cleanroom import (
            imports_reference,
            likely_cause,
            runtime_code_message,
            solution_source,
        )
        from .cleanroom_process import start_fork_server
        from .exercises import EXERCISES
        from .similarity import write_runtime_code

        workers = _check_workers(workers)
        hide = (str(self.root),)
        keys = [k for k in sorted(answers) if k[2] in EXERCISES]
        limits = {ex: cleanroom_limits(self.timeout, ex) for ex in {k[2] for k in keys}}
        if workers == 1 or len(keys) < 2:
            if len(keys) >= _FORK_FROM:
                start_fork_server()
            verdicts = {
                key: _verify_one(key[2], answers[key], seed, limits[key[2]], hide) for key in keys
            }
        else:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            # spawned, not forked: the grader may hold threads (and their locks) here; each
            # worker forks its clean-room children from a warm server of its own
            n = min(workers, len(keys))
            with ProcessPoolExecutor(
                max_workers=n,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=start_fork_server if len(keys) >= _FORK_FROM * n else None,
            ) as pool:
                futures = {
                    key: pool.submit(_verify_one, key[2], answers[key], seed, limits[key[2]], hide)
                    for key in keys
                }
                verdicts, lost = {}, []
                for key in keys:
                    try:
                        verdicts[key] = futures[key].result()
                    except Exception as exc:  # a worker died (the pool is then broken)
                        lost.append((key, exc))
            for key, exc in lost:  # verified again here, one at a time
                self.log(
                    f"clean-room worker failed on {'/'.join(key)} "
                    f"({type(exc).__name__}: {exc}); verified in the grader's process"
                )
                verdicts[key] = _verify_one(key[2], answers[key], seed, limits[key[2]], hide)
            verdicts = {key: verdicts[key] for key in keys}
        policy = self.term().get("late_policy", "mark")
        runtime_code = {}
        for (student, assignment, notebook), cells in verdicts.items():
            noticed = next((v.noticed for v in cells if v.noticed), [])
            if noticed:
                self.record_issue(student, assignment, notebook, noticed_message(noticed))
            failure = next((v.failure for v in cells if v.failure), "")
            if failure:
                self.record_issue(
                    student,
                    assignment,
                    notebook,
                    "the clean-room "
                    f"verification of this notebook failed: {failure}; every "
                    "test of it scores 0",
                )
            compiled = next((v.compiled for v in cells if v.compiled), [])
            said = runtime_code_message(
                solution_source(answers[student, assignment, notebook]), compiled
            )
            if said:
                self.record_issue(student, assignment, notebook, said)
            if compiled:
                runtime_code[student, assignment, notebook] = [
                    c["source"] for c in compiled if c.get("source")
                ]
            if imports_reference(cells):
                self.record_issue(
                    student,
                    assignment,
                    notebook,
                    "the answer imports the "
                    "course's reference package or the grader: every cell "
                    "scores 0",
                )
        write_runtime_code(self.root, runtime_code)
        with Gradebook(self.shared_db_url()) as gb:
            for (student, assignment, notebook), cells in verdicts.items():
                kernel_total = verifier_total = top = 0.0
                changed, flagged = [], []
                for v in cells:
                    hidden = not v.grade_id.endswith("_visible_tests")
                    if v.points is None and not hidden:
                        continue  # the visible tests did run in the kernel: its score stands
                    points = 0.0 if v.points is None else float(v.points)
                    try:
                        grade = gb.find_grade(v.grade_id, notebook, assignment, student)
                    except MissingEntry:
                        continue
                    kernel = (
                        float(grade.auto_score or 0.0)
                        if grade.manual_score is None
                        else float(grade.manual_score)
                    )
                    if abs(kernel - points) > 1e-9:
                        changed.append(f"{v.grade_id} {kernel:g} -> {points:g}")
                        grade.auto_score = points
                        grade.manual_score = None
                    if hidden:  # the kernel ran no hidden test (KERNEL_ENV): nothing to compare
                        continue
                    kernel_total += kernel
                    verifier_total += points
                    top += v.max_points
                    if abs(kernel - points) > 1e-9:
                        flagged.append(f"{v.grade_id} {kernel:g} -> {points:g}")
                if not changed:
                    self._name_tampering(student, assignment, notebook, answers, cells, flagged)
                    continue
                gb.db.commit()
                try:
                    nb = gb.find_submission_notebook(notebook, assignment, student)
                    # late under "zero": the penalty is the new score (a late notebook
                    # whose in-kernel score was 0 had a penalty of 0 until now)
                    if policy == "zero" and (nb.assignment.total_seconds_late or 0) > 0:
                        nb.late_submission_penalty = nb.score
                        gb.db.commit()
                except MissingEntry:
                    pass
                if self._name_tampering(student, assignment, notebook, answers, cells, flagged):
                    continue
                cause = likely_cause(
                    answers[student, assignment, notebook], cells, kernel_total, verifier_total
                )
                self.record_issue(
                    student,
                    assignment,
                    notebook,
                    f"in-kernel (nbgrader) score {kernel_total:g} / {top:g} of the visible "
                    f"tests, clean-room score {verifier_total:g} / {top:g}: the clean-room "
                    f"score is recorded ({'; '.join(flagged)}); likely cause: {cause}",
                )
        self._write_findings(verdicts)
        return verdicts

    def _name_tampering(self, student, assignment, notebook, answers, cells, flagged):
        """Record the line of an answer whose source reaches into the kernel that runs the
        tests (:func:`autograder.cleanroom.tampering`) when no score difference of the
        visible tests names it (no hidden test runs in the kernel, so such an answer
        changes nothing there; it is named all the same). Returns True when the caller
        has nothing more to say: no difference to report, or an import of the reference,
        which has its own line."""
        from .cleanroom import imports_reference, tampering

        if imports_reference(cells):
            return True
        if flagged:
            return False
        hits = tampering(answers[student, assignment, notebook])
        if hits:
            got = sum(0.0 if v.points is None else float(v.points) for v in cells)
            top = sum(float(v.max_points) for v in cells)
            self.record_issue(
                student,
                assignment,
                notebook,
                f"the answer reaches into the kernel that runs the tests ({', '.join(hits)}): "
                f"tampering; no test it could change runs there, and the clean-room score "
                f"{got:g} / {top:g} is recorded",
            )
        return True

    def _write_findings(self, verdicts):
        """Put the clean room's findings into the autograded notebooks, as the output of
        each hidden test cell (where the kernel only printed
        :data:`autograder.checks.KERNEL_NOTE`), so the feedback shows what was recorded."""
        for (student, assignment, notebook), cells in verdicts.items():
            path = self.root / "autograded" / student / assignment / f"{notebook}.ipynb"
            if not path.is_file() or path.is_symlink():
                continue
            try:
                nb = nbformat.read(str(path), as_version=4)
            except Exception:
                continue
            by_id = {v.grade_id: v for v in cells if not v.grade_id.endswith("_visible_tests")}
            for cell in nb.cells:
                v = by_id.get(cell.get("metadata", {}).get("nbgrader", {}).get("grade_id"))
                if v is None or cell.cell_type != "code":
                    continue
                points = 0.0 if v.points is None else float(v.points)
                cell.outputs = [
                    nbformat.v4.new_output("stream", name="stdout", text=v.message + "\n"),
                    nbformat.v4.new_output(
                        "execute_result",
                        data={"text/plain": repr(points)},
                        execution_count=cell.get("execution_count"),
                    ),
                ]
            nbformat.write(nb, str(path))

    # -- feedback
    def feedback(self):
        """Generate feedback HTML for every graded submission, maths typeset offline."""
        from .feedback import make_feedback_offline, mark_submission

        proc = self.nbgrader("generate_feedback", "*", "--force")
        if proc.returncode != 0:
            self.log(proc.stdout + proc.stderr)
        make_feedback_offline(self.root / "feedback", book_url=self.book_url())
        pages = sorted((self.root / "feedback").glob("*/*/*.html"))
        when = self._submission_lines()
        for page in pages:
            line = when.get((page.parent.parent.name, page.parent.name))
            if line:
                mark_submission(page, line)
        return pages

    def book_url(self):
        """Where the feedback pages send students to read a chapter: the ``book_url`` of
        the course (:meth:`setup`), else the GitHub Pages address of the repository."""
        from .feedback import default_book_url

        return self.term().get("book_url") or default_book_url(self.repo)

    def _submission_lines(self):
        """(student, assignment) -> the line about its submission time for the feedback
        page: when it was submitted, the due date, and ``late by 3.25 h`` (the exports'
        wording) with what the late policy does, or ``on time``."""
        from nbgrader.api import Gradebook

        if not (self.root / GRADEBOOK).exists():
            return {}
        zero = self.term().get("late_policy", "mark") == "zero"
        out = {}
        with Gradebook(f"sqlite:///{self.root / GRADEBOOK}") as gb:
            for assignment in gb.assignments:
                for sub in assignment.submissions:
                    if sub.timestamp is None:
                        continue
                    stamp = f"{sub.timestamp:%Y-%m-%d %H:%M} UTC"
                    if assignment.duedate is None:
                        out[sub.student.id, assignment.name] = f"Submitted {stamp}."
                        continue
                    due = f"{assignment.duedate:%Y-%m-%d %H:%M} UTC"
                    late = _late_text(str(sub.timestamp), str(assignment.duedate))
                    if late:
                        late = (
                            late[0].upper()
                            + late[1:]
                            + (
                                ": the late policy gives this notebook 0 points."
                                if zero
                                else ": the points are kept and the lateness is reported."
                            )
                        )
                    out[sub.student.id, assignment.name] = f"Submitted {stamp}, due {due}. " + (
                        late or "On time."
                    )
        return out

    # -- export
    def export(self, path):
        """Write the grades of the assigned chapters in three layouts; return their paths.

        * ``path``: nbgrader's CSV (one row per student and assignment, with its
          ``timestamp``, ``duedate`` and ``late_submission_penalty``), with columns added:
          ``late`` (``late by 2.50 h`` or empty, always in hours), ``flags`` (the problems of
          ``grading_issues.csv`` for that student and assignment), and the student's
          ``student_total``, ``student_max`` and ``student_percent`` over the term;
        * ``<name>_by_notebook.csv``: one row per student and notebook, with its issues;
        * ``<name>_canvas.csv``: Canvas's gradebook layout, one row per student and one
          column per assignment (a ``Points Possible`` row first), with the term's total
          in Canvas's read-only ``Final Points`` / ``Final Score`` columns.
        """
        path = Path(path).resolve()
        path.parent.mkdir(parents=True, exist_ok=True)
        proc = self.nbgrader("export", f"--to={path}")
        if proc.returncode != 0 or not path.exists():
            raise RuntimeError("nbgrader export failed:\n" + proc.stdout + proc.stderr)
        rows = self._annotate_export(path)
        detail = path.with_name(path.stem + "_by_notebook.csv")
        self._export_by_notebook(detail)
        canvas = path.with_name(path.stem + "_canvas.csv")
        self._export_canvas(rows, canvas)
        return path, detail, canvas

    def _flags(self):
        """(student, assignment) -> the problems recorded for it, in order, once each."""
        flags = {}
        for row in self.issues():
            problems = flags.setdefault((row["student_id"], row["assignment"]), [])
            text = (
                f"{row['notebook']}: {row['problem']}"
                if row["notebook"] not in ("*", "?")
                else row["problem"]
            )
            if text not in problems:
                problems.append(text)
        return flags

    def _annotate_export(self, path):
        with path.open(newline="") as fh:
            rows = list(csv.DictReader(fh))
        assigned = set(self.assignments())
        rows = [r for r in rows if r["assignment"] in assigned]
        for r in rows:  # a chapter never handed in is flagged like a missing notebook
            if not (self.root / "submitted" / r["student_id"] / r["assignment"]).is_dir():
                self.record_issue(r["student_id"], r["assignment"], "*", NOT_SUBMITTED)
        flags = self._flags()
        totals = {}
        for r in rows:
            t = totals.setdefault(r["student_id"], [0.0, 0.0])
            t[0] += float(r["score"] or 0)
            t[1] += float(r["max_score"] or 0)
        for r in rows:
            r["late"] = _late_text(r.get("timestamp"), r.get("duedate"))
            r["flags"] = " | ".join(flags.get((r["student_id"], r["assignment"]), []))
            got, top = totals[r["student_id"]]
            r["student_total"] = f"{got:g}"
            r["student_max"] = f"{top:g}"
            r["student_percent"] = f"{100.0 * got / top:.1f}" if top else ""
        fields = (
            list(rows[0])
            if rows
            else [
                "assignment",
                "student_id",
                "score",
                "max_score",
                "late",
                "flags",
                "student_total",
                "student_max",
                "student_percent",
            ]
        )
        with path.open("w", newline="") as fh:
            w = csv_safe.dict_writer(fh, fields)
            w.writeheader()
            w.writerows(rows)
        return rows

    def _export_canvas(self, rows, path):
        assignments = self.assignments()
        people, scores, maxima = {}, {}, {}
        for r in rows:
            sid = r["student_id"]
            last, first = r.get("last_name") or "", r.get("first_name") or ""
            people[sid] = f"{last}, {first}".strip(", ") or sid
            scores[sid, r["assignment"]] = float(r["score"] or 0)
            maxima[r["assignment"]] = float(r["max_score"] or 0)
        head = [
            "Student",
            "ID",
            "SIS User ID",
            "SIS Login ID",
            "Section",
            *assignments,
            "Final Points",
            "Final Score",
        ]
        top = sum(maxima.get(a, 0.0) for a in assignments)
        with path.open("w", newline="") as fh:
            w = csv_safe.writer(fh)
            w.writerow(head)
            w.writerow(
                [
                    "Points Possible",
                    "",
                    "",
                    "",
                    "",
                    *[f"{maxima.get(a, 0.0):g}" for a in assignments],
                    f"{top:g}",
                    "100",
                ]
            )
            for sid in sorted(people):
                got = sum(scores.get((sid, a), 0.0) for a in assignments)
                w.writerow(
                    [
                        people[sid],
                        "",
                        sid,
                        sid,
                        "",
                        *[f"{scores.get((sid, a), 0.0):g}" for a in assignments],
                        f"{got:g}",
                        f"{100.0 * got / top:.1f}" if top else "",
                    ]
                )
        return path

    def _export_by_notebook(self, path):
        from nbgrader.api import Gradebook, MissingEntry

        url = f"sqlite:///{self.root / GRADEBOOK}"
        issues = {}
        for row in self.issues():
            issues.setdefault((row["student_id"], row["notebook"]), []).append(row["problem"])
        assigned = set(self.assignments())
        with Gradebook(url) as gb, path.open("w", newline="") as fh:
            w = csv_safe.writer(fh)
            w.writerow(["student_id", "assignment", "notebook", "score", "max_score", "issues"])
            for assignment in gb.assignments:
                if assignment.name not in assigned:
                    continue
                for student in gb.students:
                    for nb in assignment.notebooks:
                        try:
                            sub = gb.find_submission_notebook(nb.name, assignment.name, student.id)
                            score = sub.score
                        except MissingEntry:
                            score = 0.0
                        w.writerow(
                            [
                                student.id,
                                assignment.name,
                                nb.name,
                                f"{score:g}",
                                f"{nb.max_score:g}",
                                " | ".join(issues.get((student.id, nb.name), [])),
                            ]
                        )
        return path


def _late_text(timestamp, duedate):
    """``late by 3.25 h`` when the submission time is after the due date, else ``""``:
    always in hours with two decimals (36 s), in the exports and on the feedback page."""
    if not timestamp or not duedate:
        return ""
    try:
        delay = (parse_due(timestamp) - parse_due(duedate)).total_seconds()
    except ValueError:
        return ""
    if delay <= 0:
        return ""
    return f"late by {max(delay / 3600, 0.01):.2f} h"


def _solution_syntax_errors(nb):
    """One line per solution cell of ``nb`` that does not compile (magics allowed)."""
    from IPython.core.inputtransformer2 import TransformerManager

    out = []
    cells = [
        c
        for c in nb.cells
        if c.cell_type == "code" and c.get("metadata", {}).get("nbgrader", {}).get("solution")
    ]
    for i, cell in enumerate(cells, 1):
        try:
            compile(TransformerManager().transform_cell(cell.source), f"<cell {i}>", "exec")
        except SyntaxError as exc:
            out.append(
                f"syntax error in solution cell {i}, line {exc.lineno}: {exc.msg} "
                "(the notebook does not run; graded as it is)"
            )
    return out


def summary_table(csv_path):
    """Rows of an exported grades CSV as dicts (helper for the command line and tests)."""
    with open(csv_path, newline="") as fh:
        return list(csv.DictReader(fh))
