"""Running nbgrader on a course directory, and where its gradebook is.

Every step runs nbgrader as a child process (``python -m nbgrader ...``) with the course's
configuration (``autograder/nbgrader_config.py``, found through ``JUPYTER_CONFIG_PATH``)
and ``--CourseDirectory.root`` set to the course directory, so a crash in nbgrader or in a
kernel can never take the command down with it. :func:`release` generates the student
release of the repository's chapters that way.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import quote

from . import PACKAGE_DIR, REPO_ROOT
from .settings import CELL_TIMEOUT_ENV, COURSE_ROOT_ENV

__all__ = [
    "GRADEBOOK",
    "GRADEBOOK_BUSY_TIMEOUT",
    "exercise_index",
    "gradebook_url",
    "nbgrader_env",
    "release",
    "run_nbgrader",
    "shared_db_url",
]

GRADEBOOK = "gradebook.db"
#: seconds an nbgrader process waits for the gradebook while another one writes to it
#: (SQLite's busy timeout; the default of 5 s is too short for parallel grading)
GRADEBOOK_BUSY_TIMEOUT = 300


def nbgrader_env(timeout=None, extra=None):
    """The environment of an nbgrader process: this one's, with the course's nbgrader
    configuration first on ``JUPYTER_CONFIG_PATH``, this interpreter's scripts first on
    ``PATH``, the per-cell ``timeout`` (seconds) as ``$AUTOGRADER_CELL_TIMEOUT`` when
    given, and ``extra`` over it all."""
    env = dict(os.environ)
    paths = [str(PACKAGE_DIR)] + [
        p for p in env.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep) if p
    ]
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(paths)
    # nbgrader calls the `alembic` script of its environment: put that on PATH
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    if timeout is not None:
        env[CELL_TIMEOUT_ENV] = str(int(timeout))
    env.pop(COURSE_ROOT_ENV, None)
    env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    if extra:
        env.update(extra)
    return env


def run_nbgrader(root, *args, timeout=None, env_extra=None, log=None):
    """Run ``python -m nbgrader <args>`` on course directory ``root``.

    Parameters
    ----------
    root : path
        The course directory (nbgrader's ``CourseDirectory.root``, and the working folder).
    *args
        nbgrader's arguments.
    timeout : int, optional
        Per-cell execution limit in seconds (:func:`nbgrader_env`).
    env_extra : dict, optional
        More environment variables.
    log : callable, optional
        Given one line naming the command and its exit status.

    Returns
    -------
    subprocess.CompletedProcess
        With text ``stdout`` and ``stderr``; a failing nbgrader is not an exception here.
    """
    cmd = [
        sys.executable,
        "-m",
        "nbgrader",
        *map(str, args),
        f"--CourseDirectory.root={Path(root).resolve()}",
    ]
    proc = subprocess.run(
        cmd, cwd=str(root), env=nbgrader_env(timeout, env_extra), capture_output=True, text=True
    )
    if log is not None:
        log(f"$ nbgrader {' '.join(map(str, args))}  (exit {proc.returncode})")
    return proc


def gradebook_url(root):
    """nbgrader's URL of the gradebook of course directory ``root``, for one reader or
    writer at a time (``sqlite:///<root>/gradebook.db``)."""
    return f"sqlite:///{Path(root) / GRADEBOOK}"


def shared_db_url(root):
    """URL of the gradebook of course directory ``root`` for processes that write to it at
    the same time.

    The same file as :func:`gradebook_url`, with a long SQLite busy timeout (``?timeout=``,
    read by SQLAlchemy's pysqlite dialect) so that a process waits for the lock instead of
    failing with "database is locked"."""
    path = quote(str(Path(root) / GRADEBOOK), safe="/")
    return f"sqlite:///{path}?timeout={GRADEBOOK_BUSY_TIMEOUT}"


def exercise_index(repo):
    """Map exercise name -> assignment, from the source notebooks in ``repo/solutions``."""
    index = {}
    for nb in sorted((Path(repo) / "solutions").glob("*/*.ipynb")):
        index[nb.stem] = nb.parent.name
    return index


def release(repo=REPO_ROOT, dest=None, log=print):
    """Generate the student release of every assignment from ``repo/solutions``.

    nbgrader runs in a temporary course directory (so that no gradebook or checkpoint
    lands in the repository); the generated ``exercises/<assignment>/`` folders then
    replace those in ``dest`` (default ``repo/exercises``).

    Returns
    -------
    list of Path
        The written notebooks.

    Raises
    ------
    ValueError
        If ``repo`` has no ``solutions/`` folder.
    RuntimeError
        If nbgrader fails, with its output.
    """
    repo = Path(repo)
    if not (repo / "solutions").is_dir():
        raise ValueError(f"repo: no solutions/ folder in {repo}")
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
