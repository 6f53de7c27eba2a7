"""Every test file is named after what it tests, so that a module's tests are found by its name.

The rule, for ``tests/test_<name>.py``:

* ``<name>`` is a module's path inside its package with ``_`` for each dot and without the
  leading underscores of private names, the package ``repeval_ref`` left out
  (``repeval_ref/torch/knn.py`` -> ``test_torch_knn.py``, ``repeval_ref/_validation.py`` ->
  ``test_validation.py``, ``benchmarks/gpu/run_gpu.py`` -> ``test_benchmarks_gpu_run_gpu.py``;
  a package's ``__init__.py`` gives the package's own name: ``test_zoo.py``);
* or such a module name followed by ``_<aspect>`` when one module's tests are split by what
  they check (``test_knn_tiles.py``, ``test_cli_consistency.py``);
* or a name in one of the documented areas below, which test something other than one module.

The code the test files share lives in the package ``tests/helpers/`` and is imported as
``from helpers.<module> import ...`` (pytest puts ``tests/`` on the path): no test file
changes ``sys.path`` to reach it.
"""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent

#: packages whose modules have tests named after them, and the prefix of those names
PACKAGES = {"repeval_ref": "", "benchmarks": "benchmarks_"}

#: prefixes of the test files that test an area rather than one module
AREAS = {
    "autograder_": "the grading package autograder/ and its end-to-end classes",
    "book_": "the Jupyter Book (book/) and its plumbing package repeval_book/",
    "layout_": "the repository's layout: imports, names, aliases, the tests themselves",
    "helpers_": "the test helpers: test_helpers_<module>.py tests tests/helpers/<module>.py",
}

#: single files that test something other than a module, and what
EXCEPTIONS = {
    "test_properties.py": "Hypothesis property tests across the formula functions of repeval_ref",
    "test_environment.py": "environment.yml, pyproject.toml and constraints.txt agree",
    "test_publishing.py": "licences, the book's footer, CITATION.cff and third-party notices",
}


def module_names():
    """The names test files may carry, one per module and package of :data:`PACKAGES`."""
    names = set()
    for package, prefix in PACKAGES.items():
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT / package).with_suffix("").parts)
            if parts[-1] in ("__init__", "__main__"):
                parts = parts[:-1]
            name = (prefix + "_".join(part.lstrip("_") for part in parts)).rstrip("_")
            if name:  # repeval_ref/__init__.py itself: its names are tested in their modules
                names.add(name)
    return names


def misnamed(file_names, modules, helpers):
    """The test file names of ``file_names`` that break the rule of this module."""
    wrong = []
    for file_name in file_names:
        stem = file_name[len("test_") : -len(".py")]
        if file_name in EXCEPTIONS:
            continue
        if stem.startswith("helpers_"):
            if stem[len("helpers_") :] not in helpers:
                wrong.append(file_name)
            continue
        if any(stem.startswith(area) for area in AREAS):
            continue
        if not any(stem == m or stem.startswith(m + "_") for m in modules):
            wrong.append(file_name)
    return wrong


def test_module_names_cover_the_packages():
    names = module_names()
    assert {
        "knn",
        "cka",
        "uncertainty",
        "torch_knn",
        "cli_suite",
        "validation",
        "labelfree_spectral",
        "zoo",
        "benchmarks",
        "benchmarks_gpu_run_gpu",
    } <= names
    assert "repeval_ref" not in names and "" not in names


def test_every_test_file_is_named_after_a_module_or_a_documented_area():
    helpers = {p.stem for p in (TESTS / "helpers").glob("*.py") if p.stem != "__init__"}
    files = sorted(p.name for p in TESTS.glob("test_*.py"))
    wrong = misnamed(files, module_names(), helpers)
    assert not wrong, (
        f"test files named after no module of {sorted(PACKAGES)} and in no documented area "
        f"({sorted(AREAS)}): {wrong}; name each test_<module>.py or test_<module>_<aspect>.py "
        "(tests/test_layout_test_names.py states the rule)"
    )


def test_the_rule_refuses_old_and_unknown_names():
    modules = {"knn", "uncertainty", "torch_knn", "cka"}
    helpers = {"reproduce"}
    names = [
        "test_noise.py",
        "test_similarity.py",
        "test_knnx.py",
        "test_torch.py",
        "test_helpers_nothing.py",
        "test_knn.py",
        "test_knn_tiles.py",
        "test_torch_knn.py",
        "test_helpers_reproduce.py",
        "test_book_prose.py",
        "test_properties.py",
    ]
    assert misnamed(names, modules, helpers) == [
        "test_noise.py",
        "test_similarity.py",
        "test_knnx.py",
        "test_torch.py",
        "test_helpers_nothing.py",
    ]


def test_every_exception_names_a_file_that_exists():
    assert all((TESTS / name).is_file() for name in EXCEPTIONS)


def test_no_test_file_changes_sys_path():
    changes = re.compile(r"^\s*sys\.path\.(insert|append)\(", re.M)
    found = [
        str(p.relative_to(ROOT))
        for p in sorted(TESTS.rglob("*.py"))
        if changes.search(p.read_text())
    ]
    assert not found, f"import helpers as helpers.<module> instead of changing sys.path: {found}"
