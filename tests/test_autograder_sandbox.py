"""How the grader reads a student's sandbox (autograder/sandbox.py): never through a link.

The sandbox user owns everything inside its copy of the course, so it may replace any
file or folder there by a symbolic link to a file it cannot read itself (another
student's notebook, a secret of root's); the grader, reading as root, must not follow it.
The end-to-end attacks are in tests/test_autograder_cleanroom.py.
"""

import os
import re

import pytest

from autograder.sandbox import blank_with_reason, read_inside


def test_reads_regular_files_only_and_follows_no_link(tmp_path):
    top = tmp_path / "top"
    (top / "course" / "autograded" / "s" / "a").mkdir(parents=True)
    target = top / "course" / "autograded" / "s" / "a" / "nb.ipynb"
    target.write_bytes(b"{}")
    assert read_inside(top, "course", "autograded", "s", "a", "nb.ipynb") == b"{}"
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"root only")
    # a link as the file itself
    link = top / "course" / "autograded" / "s" / "a" / "link.ipynb"
    link.symlink_to(secret)
    assert read_inside(top, "course", "autograded", "s", "a", "link.ipynb") is None
    # a link as one of the folders on the way
    (tmp_path / "elsewhere" / "a").mkdir(parents=True)
    (tmp_path / "elsewhere" / "a" / "nb.ipynb").write_bytes(b"another student's")
    os.symlink(tmp_path / "elsewhere", top / "course" / "autograded" / "t")
    assert read_inside(top, "course", "autograded", "t", "a", "nb.ipynb") is None
    # not a regular file, missing, too big
    os.mkfifo(top / "course" / "fifo")
    assert read_inside(top, "course", "fifo") is None
    assert read_inside(top, "course", "missing.db") is None
    (top / "course" / "big").write_bytes(b"x" * 100)
    assert read_inside(top, "course", "big", limit=99) is None
    assert read_inside(top, "course", "big", limit=100) == b"x" * 100


def test_blank_notebook_names_the_reason_once():
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    once = blank_with_reason(nbformat.writes(nb).encode(), "The kernel crashed.")
    twice = blank_with_reason(once, "It crashed again.")
    cells = nbformat.reads(twice.decode(), as_version=4).cells
    notes = [c for c in cells if c.get("id") == "autograder-grading-note"]
    # the note's text is escaped Markdown: what a reader sees has the backslashes removed
    assert len(notes) == 1 and "It crashed again." in re.sub(r"\\(.)", r"\1", notes[0].source)
    assert "The kernel crashed" not in notes[0].source
    assert "zero points" in notes[0].source and cells[-1].source == "x = 1"


_SYNC_PROBE = """
import sys
from traitlets.config.loader import PyFileConfigLoader
from sqlalchemy import text
from nbgrader.api import Gradebook
from autograder import PACKAGE_DIR

PyFileConfigLoader("nbgrader_config.py", path=str(PACKAGE_DIR)).load_config()
with Gradebook("sqlite:///" + sys.argv[1]) as gb:
    gb.add_student("s")
    print(gb.db.execute(text("PRAGMA synchronous")).scalar())
"""


@pytest.mark.slow
@pytest.mark.parametrize("scratch", [False, True])
def test_only_a_sandbox_gradebook_skips_the_disk_wait(tmp_path, scratch):
    """nbgrader loading the course's config in a sandbox (its environment, from
    ``_env``) opens SQLite with synchronous = OFF (0); anywhere else SQLite's default
    FULL (2) stays, so the course's own gradebook waits for the disk as before."""
    import subprocess
    import sys

    from autograder.sandbox import SCRATCH_GRADEBOOK_ENV, _env

    env = {k: v for k, v in os.environ.items() if k != SCRATCH_GRADEBOOK_ENV}
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    if scratch:
        sandbox_env = _env(str(tmp_path), 5, 1, str(tmp_path))
        env[SCRATCH_GRADEBOOK_ENV] = sandbox_env[SCRATCH_GRADEBOOK_ENV]
    out = subprocess.run(
        [sys.executable, "-c", _SYNC_PROBE, str(tmp_path / "gb.db")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-1] == ("0" if scratch else "2")
