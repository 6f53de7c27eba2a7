"""`autograder roster` says how many students the course has and how many the file added."""

import csv
import os
import sys
from pathlib import Path

import pytest

from autograder import cli


def _write(path, ids):
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "first_name", "last_name", "email"])
        for s in ids:
            w.writerow([s, s.title(), "Student", f"{s}@example.org"])


@pytest.mark.slow
def test_roster_prints_its_count(tmp_path, capsys, monkeypatch):
    from nbgrader.api import Gradebook

    # nbgrader creates a gradebook with alembic's command, found next to this Python
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"])

    course = tmp_path / "course"
    course.mkdir()
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}"):
        pass  # an empty gradebook: the command then skips setting up the chapters
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    _write(first, ["ann", "ben", "cal"])
    _write(second, ["cal", "dee"])  # one already there
    assert cli.main(["--course", str(course), "roster", str(first)]) == 0
    assert f"roster: 3 students in the course, 3 new from {first}" in capsys.readouterr().out
    assert cli.main(["--course", str(course), "roster", str(second)]) == 0
    assert f"roster: 4 students in the course, 1 new from {second}" in capsys.readouterr().out
