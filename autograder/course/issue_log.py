"""The course's log of grading problems, ``grading_issues.csv``: appended, never re-read.

Each line names a student, an assignment, a notebook and a problem. A problem already
listed for the same student, assignment and notebook is not written again, so collecting
or grading twice does not double the log. The keys of the lines written are kept in
memory (read from the file once, when the log is first used), so recording a problem
costs the same whatever the log's length: a notebook with many broken cells is collected
in time linear in its findings.

At most :data:`MAX_PER_NOTEBOOK` distinct problems are listed for one student, assignment
and notebook; the rest are counted, and :meth:`IssueLog.flush` writes one line for them
(``... and 3,997 more problems with this notebook, not listed one by one``). Reading the
log through :meth:`IssueLog.rows` flushes first, and so does the end of the process.

Every cell goes through :func:`autograder.csv_safe.safe_cell`, so a student's file name
that starts with ``=`` cannot become a spreadsheet formula.
"""

from __future__ import annotations

import csv
import datetime as _dt
import threading
import weakref
from pathlib import Path

from ..csv_safe import safe_row, writer

__all__ = ["COLUMNS", "MAX_PER_NOTEBOOK", "MORE_PREFIX", "IssueLog"]

COLUMNS = ["time", "student_id", "assignment", "notebook", "problem"]
#: distinct problems listed for one (student, assignment, notebook); the rest are counted
MAX_PER_NOTEBOOK = 20
#: how the line that counts the problems not listed begins
MORE_PREFIX = "... and "


class _State:
    """What an :class:`IssueLog` keeps in memory (shared with its finaliser)."""

    def __init__(self, path):
        self.path = path
        self.lock = threading.RLock()
        self.seen = None  # (device, inode, size) of the file as last read or written
        self.keys = set()  # (student, assignment, notebook, problem), as written
        self.listed = {}  # (student, assignment, notebook) -> problems listed
        self.unlisted = {}  # (student, assignment, notebook) -> set of problems held back
        self.reported = {}  # (student, assignment, notebook) -> count last written


def _count_line(count):
    return (
        f"{MORE_PREFIX}{count:,} more problem{'s' if count != 1 else ''} with this "
        "notebook, not listed one by one"
    )


def _identity(path):
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size


def _append(state, cells):
    """Append one row (safe cells) to the file, with the header when it is new."""
    new = not state.path.exists()
    with state.path.open("a", newline="") as fh:
        w = writer(fh)
        if new:
            w.writerow(COLUMNS)
        w.writerow([_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), *cells])
    state.seen = _identity(state.path)


def _load(state):
    """Read the keys of the file once; again only when someone else changed it (another
    process appended, or the file was replaced or removed)."""
    now = _identity(state.path)
    if now == state.seen:
        return
    state.keys.clear()
    state.listed.clear()
    state.seen = now
    if now is None:
        return
    with state.path.open(newline="") as fh:
        for r in csv.DictReader(fh):
            key = tuple(r.get(c) or "" for c in COLUMNS[1:])
            state.keys.add(key)
            if not key[3].startswith(MORE_PREFIX):
                state.listed[key[:3]] = state.listed.get(key[:3], 0) + 1


def _flush(state):
    with state.lock:
        _load(state)
        for where, held in state.unlisted.items():
            if held and state.reported.get(where) != len(held):
                cells = [*where, _count_line(len(held))]
                key = tuple(safe_row(cells))
                if key not in state.keys:
                    state.keys.add(key)
                    _append(state, cells)
                state.reported[where] = len(held)


class IssueLog:
    """The problems of one course, appended to ``path`` (``grading_issues.csv``).

    Parameters
    ----------
    path : str or os.PathLike
        The CSV file; created with its header on the first problem.
    log : callable, optional
        Called with one line for each problem listed (the command's progress output).

    Raises
    ------
    ValueError
        If ``log`` is given and is not callable.
    """

    def __init__(self, path, log=None):
        if log is not None and not callable(log):
            raise ValueError(f"log must be callable, got {type(log).__name__}")
        self.path = Path(path)
        self.log = log
        self._state = _State(self.path)
        # the count of problems held back is written when the grader's process ends too
        weakref.finalize(self, _flush, self._state)

    def record(self, student, assignment, notebook, problem):
        """Append one problem, once; return True if it was listed.

        Parameters
        ----------
        student, assignment, notebook, problem : object
            Written as text (``"*"`` for all notebooks, ``"?"`` for one not recognised).

        Returns
        -------
        bool
            False when the same problem is listed already for the same student,
            assignment and notebook, or when that notebook has :data:`MAX_PER_NOTEBOOK`
            problems listed (the problem is then counted for :meth:`flush`).
        """
        cells = [str(student), str(assignment), str(notebook), str(problem)]
        key = tuple(safe_row(cells))
        state = self._state
        with state.lock:
            _load(state)
            if key in state.keys:
                return False
            where = key[:3]
            if state.listed.get(where, 0) >= MAX_PER_NOTEBOOK:
                state.unlisted.setdefault(where, set()).add(key[3])
                return False
            state.keys.add(key)
            state.listed[where] = state.listed.get(where, 0) + 1
            _append(state, cells)
        if self.log is not None:
            self.log(f"  ! {cells[0]}/{cells[1]}/{cells[2]}: {cells[3]}")
        return True

    def flush(self):
        """Write, for each notebook whose problems were held back, one line counting
        them (once per count)."""
        _flush(self._state)

    def rows(self):
        """Every line of the log as a dict (keys :data:`COLUMNS`), after :meth:`flush`."""
        self.flush()
        if not self.path.exists():
            return []
        with self.path.open(newline="") as fh:
            return list(csv.DictReader(fh))
