"""No file of the repository tells the history of its own development.

Docstrings, comments, pages and data files state what holds now; how the project got there
belongs in the commit messages. A tracked file (outside ``.git``) must not name an issue
of the tracker by its number, nor a work session by its rank or as the present one.
The test lists every offending file and line, so that whoever fixes one sees them all.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: An issue named by its number, with or without ``#``, in the singular or the plural.
ISSUE_NUMBER = re.compile(r"\bissues?\s*#\s*\d+|\bissues?\s+\d+", re.IGNORECASE)
#: A work session named by its rank (in words or digits) or as this, the previous, the next one.
_ORDINALS = (
    "first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|"
    "twelfth|thirteenth|fourteenth|fifteenth|\\d+(?:st|nd|rd|th)"
)
WORK_SESSION = re.compile(
    rf"\b(?:{_ORDINALS}|this|previous|last|next|earlier|later)\s+sessions?\b", re.IGNORECASE
)

#: Folders never scanned even when no git is at hand to list the tracked files.
_UNTRACKED = {
    ".git",
    ".venv",
    "_build",
    "__pycache__",
    ".pytest_cache",
    ".hypothesis",
    "node_modules",
}


def _tracked_files():
    """The repository's tracked files (all files outside build folders without git)."""
    try:
        proc = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, timeout=60, check=True
        )
        names = [n for n in proc.stdout.decode("utf-8", "surrogateescape").split("\0") if n]
    except (OSError, subprocess.SubprocessError):
        names = [
            str(p.relative_to(ROOT))
            for p in ROOT.rglob("*")
            if p.is_file() and not _UNTRACKED & set(p.relative_to(ROOT).parts)
        ]
    return sorted(names)


def _text(path):
    """The file's text, or None for a binary file (NUL bytes or not UTF-8)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None  # deleted in the working tree, or not a regular file
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def history_lines(text):
    """The lines of ``text`` that name an issue number or a work session.

    Parameters
    ----------
    text : str

    Returns
    -------
    list of (int, str)
        ``(line number, stripped line)`` of each offending line, in order.
    """
    return [
        (i, line.strip())
        for i, line in enumerate(text.splitlines(), 1)
        if ISSUE_NUMBER.search(line) or WORK_SESSION.search(line)
    ]


def test_no_tracked_file_names_an_issue_number_or_a_work_session():
    offenders = []
    for name in _tracked_files():
        text = _text(ROOT / name)
        if text is None:
            continue
        offenders += [f"{name}:{i}: {line[:160]}" for i, line in history_lines(text)]
    files = sorted({o.split(":", 1)[0] for o in offenders})
    assert offenders == [], (
        f"{len(offenders)} lines in {len(files)} files tell the project's "
        "history:\n" + "\n".join(offenders)
    )


def test_the_scan_sees_the_repository():
    names = set(_tracked_files())
    assert {"README.md", "Makefile", "repeval_ref/knn.py", "tests/conftest.py"} <= names


# The patterns must be able to fail; the samples are put together at run time so that this
# file does not name an issue or a session itself.
def _issue(n, form="issue {}"):
    return form.format(n)


def _session(before, after=""):
    return f"{before} " + "session" + after


@pytest.mark.parametrize(
    "line",
    [
        "a docstring of " + _issue(26) + " says so",
        _issue(26, "Issue {}'s floor"),
        _issue(26, "see issue #{}"),
        _issue(26, "see issue#{}"),
        "scored by the clean room (" + _issue(30) + ")",
        _issue(25, "issues {} and 30"),
        "Measured (" + _session("eighth") + ") on the machine",
        "as the " + _session("8th") + " found",
        _session("This") + " ran on another machine",
        "the " + _session("previous", "s") + " cut it",
    ],
)
def test_history_is_found(line):
    assert history_lines("first line\n" + line + "\n") == [(2, line.strip())]


@pytest.mark.parametrize(
    "line",
    [
        '"grading_issues": 3',
        "3 issues were reported by the checks",
        "the issue of leakage between splits",
        "a session of its own, so the process group can be killed",
        "modules this test session imported already",
        '@pytest.fixture(scope="session")',
        "issue_log.py writes one line per problem",
    ],
)
def test_ordinary_words_pass(line):
    assert history_lines(line) == []
