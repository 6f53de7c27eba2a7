"""The typed records the course's steps pass to one another: the term (:class:`TermEntry`,
:class:`Term`), the class (:class:`RosterEntry`) and the grades (:class:`Grade`).

A grade keeps the raw score the grader recorded and the submission time; the late policy
and the due date are the term's current ones, applied when a grade is read
(:attr:`Grade.score`), so that the exports and the feedback pages follow a changed due
date or policy without grading again.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field

__all__ = ["LATE_POLICIES", "Grade", "RosterEntry", "Term", "TermEntry", "late_hours_text"]

#: late policies: "mark" keeps a late notebook's points and reports the lateness; "zero"
#: gives a late notebook 0 points
LATE_POLICIES = ("mark", "zero")


def _check_policy(policy, name="policy"):
    if policy not in LATE_POLICIES:
        raise ValueError(f"{name} must be one of {list(LATE_POLICIES)}, got {policy!r}")
    return policy


def _check_time(when, name):
    if when is not None and (not isinstance(when, _dt.datetime) or when.tzinfo is None):
        raise ValueError(f"{name} must be an aware datetime or None, got {when!r}")
    return when


def late_hours_text(seconds):
    """``late by 3.25 h`` for a positive delay of ``seconds``, else ``""`` (always hours,
    two decimals, at least 0.01 h)."""
    if seconds is None or seconds <= 0:
        return ""
    return f"late by {max(seconds / 3600, 0.01):.2f} h"


@dataclass(frozen=True)
class TermEntry:
    """One assigned chapter: its name, its due date (aware UTC datetime or None) and its
    own late policy (None: the term's)."""

    chapter: str
    due: _dt.datetime | None = None
    policy: str | None = None

    def __post_init__(self):
        if not isinstance(self.chapter, str) or not self.chapter:
            raise ValueError(f"chapter must be a non-empty string, got {self.chapter!r}")
        _check_time(self.due, "due")
        if self.policy is not None:
            _check_policy(self.policy)


@dataclass(frozen=True)
class Term:
    """The term: its chapters (sorted by name), the default late policy and the book's
    address the feedback pages link."""

    entries: tuple = ()
    late_policy: str = "mark"
    book_url: str | None = None

    def __post_init__(self):
        entries = tuple(sorted(self.entries, key=lambda e: e.chapter))
        if any(not isinstance(e, TermEntry) for e in entries):
            raise ValueError("entries must be TermEntry records")
        names = [e.chapter for e in entries]
        if len(set(names)) != len(names):
            raise ValueError(f"entries: a chapter is given twice in {names}")
        object.__setattr__(self, "entries", entries)
        _check_policy(self.late_policy, "late_policy")

    @property
    def chapters(self):
        """The chapters' names, sorted."""
        return [e.chapter for e in self.entries]

    def entry(self, chapter):
        """The :class:`TermEntry` of ``chapter``, or None if it is not assigned."""
        return next((e for e in self.entries if e.chapter == chapter), None)

    def due(self, chapter):
        """The due date of ``chapter`` (None: none, or not assigned)."""
        e = self.entry(chapter)
        return e.due if e else None

    def policy(self, chapter):
        """The late policy that applies to ``chapter``: its own, else the term's."""
        e = self.entry(chapter)
        return (e.policy if e and e.policy else None) or self.late_policy


@dataclass(frozen=True)
class RosterEntry:
    """One student of the class, as nbgrader's roster CSV names them."""

    id: str
    first_name: str = ""
    last_name: str = ""
    email: str = ""

    def __post_init__(self):
        if not isinstance(self.id, str) or not self.id.strip() or self.id != self.id.strip():
            raise ValueError(f"id must be a non-empty string without outer spaces, got {self.id!r}")

    @property
    def name(self):
        """``Last, First`` (Canvas's order), else the id."""
        return f"{self.last_name}, {self.first_name}".strip(", ") or self.id


@dataclass(frozen=True)
class Grade:
    """One student's grade of one notebook.

    ``raw_score`` is what the grader recorded (0 for a notebook never graded);
    ``submitted`` the stored submission time; ``due`` and ``policy`` the term's current
    ones. :attr:`score` is the score after the late policy.
    """

    student: str
    assignment: str
    notebook: str
    raw_score: float
    max_score: float
    submitted: _dt.datetime | None = None
    due: _dt.datetime | None = None
    policy: str = "mark"
    graded: bool = field(default=True)

    def __post_init__(self):
        for name in ("student", "assignment", "notebook"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ValueError(f"{name} must be a non-empty string")
        for name in ("raw_score", "max_score"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value != value or value < 0:
                raise ValueError(f"{name} must be a number >= 0, got {value!r}")
        _check_time(self.submitted, "submitted")
        _check_time(self.due, "due")
        _check_policy(self.policy)

    @property
    def late_seconds(self):
        """Seconds past the due date (0 when on time or either time is unknown)."""
        if self.submitted is None or self.due is None:
            return 0.0
        return max((self.submitted - self.due).total_seconds(), 0.0)

    @property
    def late(self):
        """``late by 3.25 h`` or ``""``."""
        return late_hours_text(self.late_seconds)

    @property
    def penalty(self):
        """The points the late policy takes away."""
        return self.raw_score if (self.policy == "zero" and self.late_seconds > 0) else 0.0

    @property
    def score(self):
        """The score after the late policy."""
        return self.raw_score - self.penalty
