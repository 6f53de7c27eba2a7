"""The tracked Python files pass ``ruff check`` and ``ruff format --check``.

The settings are those of ``[tool.ruff]`` in ``pyproject.toml`` (100-character lines);
``make lint`` runs the same two commands and CI runs it first. A failure shows ruff's own
report: the file, the line and the rule, or the lines the formatter would rewrite.
"""

import importlib.util
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _tracked_python_files():
    """The ``*.py`` files git tracks; None outside a git checkout (ruff then walks ROOT)."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--", "*.py"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    files = [name for name in out.decode().split("\0") if name]
    return [name for name in files if (ROOT / name).exists()]


def _ruff(*args):
    if importlib.util.find_spec("ruff") is None:
        pytest.fail("ruff is not installed: it comes with the dev extra (make venv)")
    files = _tracked_python_files()
    # --force-exclude: the exclusions of pyproject.toml hold for files named one by one too
    targets = ["--force-exclude", *files] if files else ["."]
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, *targets],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )


@pytest.mark.parametrize(
    "command",
    [("check", "--no-fix", "--output-format=concise"), ("format", "--check")],
    ids=["check", "format"],
)
def test_ruff(command):
    result = _ruff(*command)
    assert result.returncode == 0, (
        f"ruff {' '.join(command)} failed (run `make lint`; `.venv/bin/ruff format FILE` "
        f"formats a file):\n{result.stdout}{result.stderr}"
    )
