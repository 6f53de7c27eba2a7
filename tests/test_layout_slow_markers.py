"""Which tests ``make test-fast`` leaves out is written in the test files themselves.

A test that is slow carries ``@pytest.mark.slow`` (a whole file: ``pytestmark``; one case of
a parametrised test: ``pytest.param(..., marks=pytest.mark.slow)``), and ``-m "not slow"``
deselects it. A misspelt marker would deselect nothing without a word, so every marker the
test files use must be one that ``pyproject.toml`` registers or one of pytest's own. The
collection order of ``tests/conftest.py`` (``LONGEST_FIRST``) names files that exist.
"""

from __future__ import annotations

import ast
from pathlib import Path

import conftest
import tomllib

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent

#: pytest's own markers
BUILTIN = {"parametrize", "skip", "skipif", "xfail", "usefixtures", "filterwarnings"}


def registered_markers():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    lines = config["tool"]["pytest"]["ini_options"]["markers"]
    return {line.split(":", 1)[0].strip() for line in lines}


def markers_used(source):
    """Names ``X`` of every ``pytest.mark.X`` in ``source``."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "mark"
            and isinstance(node.value.value, ast.Name)
            and node.value.value.id == "pytest"
        ):
            names.add(node.attr)
    return names


def test_slow_is_a_registered_marker():
    assert "slow" in registered_markers()


def test_every_marker_of_the_test_files_is_registered_or_pytests_own():
    known = registered_markers() | BUILTIN
    unknown = {}
    for path in sorted(TESTS.rglob("*.py")):
        names = markers_used(path.read_text()) - known
        if names:
            unknown[str(path.relative_to(ROOT))] = sorted(names)
    assert not unknown, f"markers registered nowhere (a typo deselects nothing): {unknown}"


def test_markers_used_finds_decorators_params_and_module_marks():
    source = (
        "import pytest\npytestmark = [pytest.mark.slow]\n"
        "@pytest.mark.slwo\n@pytest.mark.parametrize('x', [pytest.param(1, marks="
        "pytest.mark.recompute)])\ndef test_x(x):\n    pass\n"
    )
    assert markers_used(source) == {"slow", "slwo", "parametrize", "recompute"}


def test_the_slow_tests_are_marked_in_their_files():
    """Slow tests are marked where they are written, and none by a list of node ids."""
    assert not hasattr(conftest, "slow_node_ids")
    assert not (TESTS / "slow_tests.txt").exists()
    marked = [p.name for p in TESTS.glob("test_*.py") if "slow" in markers_used(p.read_text())]
    assert marked


def test_longest_first_names_test_files_that_exist():
    missing = [name for name in conftest.LONGEST_FIRST if not (TESTS / name).is_file()]
    assert not missing, f"tests/conftest.py's LONGEST_FIRST names no such file: {missing}"
