"""The book's tooling lives in repeval_book, beside the reference package and above it.

repeval_ref (the formulas) must not import repeval_book (the glue helpers, interactive figures,
interview deck, exercise index and Sphinx extensions), and repeval_book must import without
the book extra where only the reference package is installed. The imports run in fresh
interpreters, so that modules this test session imported already cannot hide an import.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BOOK_MODULES = (
    "repeval_book",
    "repeval_book.glue",
    "repeval_book.interactive",
    "repeval_book.interview",
    "repeval_book.exercise_index",
    "repeval_book.sphinx_ext",
    "repeval_book.sphinx_generated_pages",
    "repeval_book.sphinx_deck",
    "repeval_book.phrasing",
    "repeval_book.suite_sentences",
    "repeval_book.bench_tables",
    "repeval_book.interview_deck",
    "repeval_book.glued_values",
)


def _python(code):
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1]


def test_the_reference_package_never_names_the_book_package():
    hits = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in sorted((ROOT / "repeval_ref").rglob("*.py"))
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if "repeval_book" in line
    ]
    assert hits == []


def test_importing_the_reference_package_and_its_cli_imports_no_book_tooling():
    loaded = _python(
        "import sys, repeval_ref, repeval_ref.cli; "
        "print([m for m in sys.modules if m.startswith('repeval_book')])"
    )
    assert loaded == "[]"


@pytest.mark.slow
def test_no_public_name_of_the_reference_package_comes_from_the_book_package():
    out = _python(
        "import sys, repeval_ref\n"
        "mods = {getattr(getattr(repeval_ref, n), '__module__', None) or "
        "getattr(getattr(repeval_ref, n), '__name__', '') for n in repeval_ref.__all__}\n"
        "print(sorted(m for m in mods if m.startswith('repeval_book')), "
        "[m for m in sys.modules if m.startswith('repeval_book')])"
    )
    assert out == "[] []"


def test_the_old_private_paths_are_gone():
    for old in (
        "repeval_ref._book",
        "repeval_ref._interview",
        "repeval_ref._exercises",
        "repeval_ref.interactive",
    ):
        assert (
            _python(f"import importlib.util; print(importlib.util.find_spec({old!r}))") == "None"
        ), old
    assert not (ROOT / "_ext").exists()


def test_the_book_package_imports_without_the_book_extra():
    # every third-party module only the book extra brings is made unimportable
    blocked = ("myst_nb", "myst_parser", "markdown_it", "plotly", "genanki", "sphinx", "yaml")
    code = (
        "import sys, importlib\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] in {blocked!r}:\n"
        "            raise ImportError(f'blocked: {name}')\n"
        "sys.meta_path.insert(0, Block())\n"
        f"for m in {BOOK_MODULES!r}:\n"
        "    importlib.import_module(m)\n"
        "try:\n"
        "    import plotly\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    assert _python(code) == "blocked: plotly"  # the block held, and every module imported


def test_the_distribution_and_the_book_config_carry_the_book_package():
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    yaml = pytest.importorskip("yaml")

    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"
    ]["find"]["include"]
    assert "repeval_book*" in include and "repeval_ref*" in include
    sphinx = yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]
    assert {"repeval_book.sphinx_ext", "repeval_book.sphinx_generated_pages"} <= set(
        sphinx["extra_extensions"]
    )
    assert "local_extensions" not in sphinx
    assert "-m repeval_book.interview " in (ROOT / "Makefile").read_text()
