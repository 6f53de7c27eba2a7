"""The instructor's term: the chapters assigned, their due dates, the late policy, the
book's address (``term.json``), and the submission times compared with the due dates.

Times are aware UTC datetimes throughout; lateness is always said in hours
(:func:`late_text`), in the exports and on the feedback pages alike.
"""

from __future__ import annotations

import csv
import datetime as _dt
import json
import shutil
from pathlib import Path

from ..nbgrader_run import GRADEBOOK, gradebook_url, shared_db_url
from .records import Term, TermEntry, late_hours_text

__all__ = [
    "LATE_POLICIES",
    "NOT_SUBMITTED",
    "TERM_FILE",
    "book_url",
    "due_dates",
    "fmt_time",
    "late_text",
    "parse_due",
    "read_submission_times",
    "read_term",
    "roster",
    "set_up_term",
    "term_record",
    "utc",
]

#: the instructor's choices for the term: assigned chapters, due dates, late policy
TERM_FILE = "term.json"
#: late policies: "mark" records lateness (nbgrader's penalty "none"); "zero" gives a late
#: submission 0 points (nbgrader's LateSubmissionPlugin penalty "zero")
LATE_POLICIES = {"mark": "none", "zero": "zero"}
#: the flag of a chapter a student never handed in
NOT_SUBMITTED = "nothing was submitted for this chapter: it scores 0"


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


def utc(seconds):
    """The aware UTC datetime of a POSIX time ``seconds``."""
    return _dt.datetime.fromtimestamp(seconds, _dt.timezone.utc)


def fmt_time(when):
    """``when`` (an aware datetime) as nbgrader's ``timestamp.txt`` writes it, in UTC."""
    return when.astimezone(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")


def late_text(timestamp, duedate):
    """``late by 3.25 h`` when the submission time is after the due date, else ``""``:
    always in hours with two decimals (36 s), in the exports and on the feedback page.
    Either time missing or not a date gives ``""``."""
    if not timestamp or not duedate:
        return ""
    try:
        delay = (parse_due(timestamp) - parse_due(duedate)).total_seconds()
    except ValueError:
        return ""
    return late_hours_text(delay)


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


def read_term(root):
    """The term's choices of course directory ``root`` (``term.json``): ``{"assignments":
    {name: {"due": text or None}}, "late_policy": "mark" | "zero", "book_url": address or
    None}``; empty before :func:`set_up_term`."""
    path = Path(root) / TERM_FILE
    if not path.exists():
        return {}
    return json.loads(path.read_text())


def term_record(root, chapters=None):
    """The term of course directory ``root`` as a :class:`autograder.course.records.Term`
    (``term.json``); before any setup, ``chapters`` (default none) with no due dates and
    the policy ``mark``."""
    data = read_term(root)
    if not data:
        return Term(tuple(TermEntry(c) for c in (chapters or [])))
    return Term(
        tuple(
            TermEntry(
                a,
                parse_due(v["due"]) if v.get("due") else None,
                v.get("policy") or None,
            )
            for a, v in data.get("assignments", {}).items()
        ),
        data.get("late_policy", "mark"),
        data.get("book_url"),
    )


def due_dates(term):
    """Dict assignment -> aware UTC due date of ``term`` (:func:`read_term`); assignments
    without one are left out."""
    if not isinstance(term, dict):
        raise ValueError(f"term must be the dict of read_term, got {type(term).__name__}")
    return {a: parse_due(v["due"]) for a, v in term.get("assignments", {}).items() if v.get("due")}


def book_url(term, repo):
    """Where the feedback pages send students to read a chapter: the ``book_url`` of
    ``term``, else the GitHub Pages address of repository ``repo``
    (:func:`autograder.feedback.default_book_url`)."""
    from ..feedback import default_book_url

    return term.get("book_url") or default_book_url(repo)


def roster(root):
    """Student ids in the gradebook of course directory ``root``, sorted (none without a
    gradebook)."""
    from nbgrader.api import Gradebook

    if not (Path(root) / GRADEBOOK).exists():
        return []
    with Gradebook(gradebook_url(root)) as gb:
        return sorted(st.id for st in gb.students)


def set_up_term(
    root,
    repo,
    run,
    assignments=None,
    due=None,
    late_policy=None,
    book=None,
    policies=None,
    replace=False,
):
    """Create course directory ``root`` for the chapters ``assignments`` of ``repo``,
    register them with their due dates in its gradebook and write ``term.json``.

    Parameters
    ----------
    root, repo : Path
        The course directory (created if needed) and the repository holding
        ``solutions/``.
    run : callable
        ``run(*nbgrader_args)`` runs nbgrader on ``root`` and returns the finished
        process (:meth:`autograder.course.Course.nbgrader`).
    assignments, due, late_policy, book, policies, replace :
        As :meth:`autograder.course.Course.setup` takes them (``book`` is its
        ``book_url``). Without ``replace``, the chapters named are added to the term or
        updated, and every other chapter keeps its due date and policy; with it, the
        chapters named are the whole term. What is not given is kept from ``term.json``.

    Returns
    -------
    list of str
        The assigned chapters, sorted.

    Raises
    ------
    ValueError
        If an assignment is not a folder of ``solutions/``, a due date names an
        assignment that is not assigned or is not a date, or the late policy is unknown.
    RuntimeError
        If nbgrader cannot generate the release.
    """
    root, repo = Path(root), Path(repo)
    available = sorted(p.name for p in (repo / "solutions").iterdir() if p.is_dir())
    term = read_term(root)
    if replace and not assignments:
        raise ValueError("assignments: replacing the term needs the chapters of the new term")
    old_entries = {} if replace else dict(term.get("assignments", {}))
    named = [str(a) for a in assignments or []]
    if not old_entries and not named:
        named = available
    assignments = sorted(dict.fromkeys([*old_entries, *named]))
    unknown = [a for a in assignments if a not in available]
    if unknown or not assignments:
        raise ValueError(
            f"assignments: unknown chapter(s) {unknown or '(none given)'}; "
            f"choose from {', '.join(available)}"
        )
    old_due = {a: v.get("due") for a, v in old_entries.items()}
    policies = {
        **{a: v.get("policy") for a, v in old_entries.items() if v.get("policy")},
        **{str(k): v for k, v in (policies or {}).items()},
    }
    stray = sorted(set(policies) - set(assignments))
    if stray:
        raise ValueError(
            f"policies: {', '.join(stray)} is not among the assigned chapters "
            f"({', '.join(assignments)})"
        )
    for a, p in policies.items():
        if p not in LATE_POLICIES:
            raise ValueError(
                f"policies: {a}={p!r}; a late policy is one of {sorted(LATE_POLICIES)}"
            )
    due = {
        **{a: d for a, d in old_due.items() if a in assignments and d},
        **{str(k): v for k, v in (due or {}).items()},
    }
    stray = sorted(set(due) - set(assignments))
    if stray:
        raise ValueError(
            f"due: {', '.join(stray)} is not among the assigned chapters ({', '.join(assignments)})"
        )
    due = {a: fmt_time(parse_due(d)) for a, d in due.items() if d}
    late_policy = late_policy or term.get("late_policy", "mark")
    if late_policy not in LATE_POLICIES:
        raise ValueError(f"late_policy must be one of {sorted(LATE_POLICIES)}, got {late_policy!r}")
    from ..feedback import check_book_url, default_book_url

    book = book or term.get("book_url") or default_book_url(repo)
    if book is not None:
        book = check_book_url(book)
    root.mkdir(parents=True, exist_ok=True)
    src = root / "solutions"
    if src.exists():
        shutil.rmtree(src)
    src.mkdir()
    for a in assignments:
        shutil.copytree(repo / "solutions" / a, src / a)
    stale = root / "exercises"
    if stale.exists():
        for folder in stale.iterdir():
            if folder.is_dir() and folder.name not in assignments:
                shutil.rmtree(folder)
    proc = run("generate_assignment", "*", "--force")
    if proc.returncode != 0:
        raise RuntimeError("nbgrader generate_assignment failed:\n" + proc.stdout + proc.stderr)
    _register_assignments(root, assignments, due)
    _drop_unassigned(root, assignments)
    (root / TERM_FILE).write_text(
        json.dumps(
            {
                "assignments": {
                    a: {"due": due.get(a), **({"policy": policies[a]} if a in policies else {})}
                    for a in assignments
                },
                "late_policy": late_policy,
                "book_url": book,
            },
            indent=2,
        )
        + "\n"
    )
    return assignments


def _register_assignments(root, assignments, due):
    """Create or update each assignment in the gradebook, with its due date (or none).

    What ``nbgrader db assignment add NAME [--duedate=...]`` does, in one gradebook
    connection instead of one nbgrader process per chapter."""
    from nbgrader.api import Gradebook

    with Gradebook(shared_db_url(root)) as gb:
        for a in assignments:
            gb.update_or_create_assignment(a, duedate=due.get(a))


def _drop_unassigned(root, assignments):
    """Remove from the gradebook the assignments of an earlier setup that are no
    longer given (and have no submission), so that no export has rows for them."""
    from nbgrader.api import Gradebook

    if not (root / GRADEBOOK).exists():
        return
    with Gradebook(gradebook_url(root)) as gb:
        for assignment in list(gb.assignments):
            if assignment.name not in assignments and not assignment.submissions:
                gb.remove_assignment(assignment.name)
