"""Row 5: the book, built from an empty cache and rebuilt with nothing changed.

The book sources (``_config.yml``, ``_toc.yml``, ``book/``, ``references.bib`` and the
other top-level files the configuration names) are copied into a temporary directory,
so that the repository's ``_build`` is never touched. The build command is the one of
``make book``. The first build executes every chapter (empty Jupyter cache); the second
finds every notebook cached and only re-renders.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from ._harness import REPO

_SKIP = {
    "_build",
    ".git",
    ".venv",
    "node_modules",
    "benchmarks",
    "tests",
    "course",
    "exercises",
    "solutions",
    "autograder",
    "repeval_ref",
    "repeval_book",
    "repeval_ref.egg-info",
    ".pytest_cache",
    ".hypothesis",
    "__pycache__",
}


def copy_sources(dest):
    """Copy what ``jupyter-book build .`` reads into ``dest`` (not the build outputs)."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for p in REPO.iterdir():
        if p.name in _SKIP or p.name.startswith("."):
            continue
        if p.is_dir():
            shutil.copytree(p, dest / p.name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(p, dest / p.name)
    # The Performance appendix reads the committed results files (never the harness).
    for rel in ("benchmarks/results.json", "benchmarks/gpu/results_h200.json"):
        if (REPO / rel).exists():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, dest / rel)
    return str(dest)


def _jb():
    exe = Path(sys.executable).with_name("jupyter-book")
    return str(exe) if exe.exists() else "jupyter-book"


def build(src, clean, timeout):
    """One measured ``jupyter-book build`` of ``src`` (``clean``: drop ``_build`` first)."""
    if clean:
        shutil.rmtree(Path(src) / "_build", ignore_errors=True)

    def work():
        proc = subprocess.run(
            [_jb(), "build", src, "--warningiserror", "--nitpick", "--keep-going"],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        tail = (proc.stdout + proc.stderr)[-1500:]
        return {"returncode": proc.returncode, "log_tail": tail if proc.returncode else ""}

    return work
