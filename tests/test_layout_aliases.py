"""No module of repeval_ref is an alias of another one.

The package was never released, so no name is kept for an old caller. Read with ``ast``,
every module under ``repeval_ref/`` must hold code of its own:

* it does not replace itself in ``sys.modules`` (``sys.modules[__name__] = other``);
* apart from its docstring, ``__all__`` and warnings, it is not a list of imports of
  another module's names (a package's ``__init__`` may gather its own submodules' names,
  which is its public interface, not an alias);
* a module-level ``__getattr__``, if any, warns of nothing: it may load a name lazily,
  never forward a deprecated one.

And no file of the repository tells its reader to run, with ``python -m``, a module of
the package that is not there.
"""

from __future__ import annotations

import ast
import pathlib
import re
import subprocess

import pytest

import repeval_ref

PACKAGE_DIR = pathlib.Path(repeval_ref.__file__).parent
ROOT = pathlib.Path(__file__).resolve().parents[1]


def _module_name(path):
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _absolute(node, name, is_package):
    """The absolute module name of an ``ImportFrom`` node of module ``name``."""
    if not node.level:
        return node.module or ""
    base = name.split(".") if is_package else name.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _is_warning(stmt):
    """``warnings.warn(...)`` or ``warn(...)`` as a statement of its own."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    func = stmt.value.func
    return (isinstance(func, ast.Attribute) and func.attr == "warn") or (
        isinstance(func, ast.Name) and func.id == "warn"
    )


def _assigns_sys_modules(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if (
                    isinstance(t, ast.Subscript)
                    and isinstance(t.value, ast.Attribute)
                    and t.value.attr == "modules"
                    and isinstance(t.value.value, ast.Name)
                    and t.value.value.id == "sys"
                ):
                    return True
    return False


def _only_reexports(tree, name, is_package):
    """True if the module's statements are imports of another module's names and nothing else."""
    body = list(tree.body)
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]
    imports_from_package = []
    for stmt in body:
        if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
            continue
        if isinstance(stmt, ast.Import):
            if any(a.name.split(".")[0] == "repeval_ref" for a in stmt.names):
                imports_from_package.extend(a.name for a in stmt.names)
            continue
        if isinstance(stmt, ast.ImportFrom):
            source = _absolute(stmt, name, is_package)
            if source.split(".")[0] == "repeval_ref":
                # `from . import sub` in a package names its submodule `package.sub`
                imports_from_package.extend(
                    [f"{source}.{a.name}" for a in stmt.names] if source == name else [source]
                )
            continue
        if isinstance(stmt, ast.Assign) and all(
            isinstance(t, ast.Name) and t.id == "__all__" for t in stmt.targets
        ):
            continue
        if _is_warning(stmt):
            continue
        return False  # a definition, a statement: code of its own
    if not imports_from_package:
        return False  # an empty module or one that imports only outside libraries
    if is_package:
        # a package's __init__ may gather the names of its own submodules
        return any(not src.startswith(name + ".") for src in imports_from_package)
    return True


def _deprecating_getattr(tree):
    """True if a module-level ``__getattr__`` warns (forwards an old name to a new home)."""
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "__getattr__":
            for node in ast.walk(stmt):
                if isinstance(node, ast.Name) and "Deprecat" in node.id:
                    return True
                if isinstance(node, ast.Attribute) and node.attr == "warn":
                    return True
                if isinstance(node, ast.ImportFrom) and "deprecat" in (node.module or "").lower():
                    return True
                if isinstance(node, ast.Name) and node.id == "warn":
                    return True
    return False


def alias_reasons(source, name, is_package=False):
    """Why the module ``name`` of text ``source`` is an alias; an empty list if it is not.

    Parameters
    ----------
    source : str
        The module's Python source.
    name : str
        Its dotted name (``repeval_ref.x``), to resolve relative imports.
    is_package : bool
        Whether it is a package's ``__init__``.

    Returns
    -------
    list of str
        One short reason per rule the module breaks.
    """
    tree = ast.parse(source)
    reasons = []
    if _assigns_sys_modules(tree):
        reasons.append("replaces itself in sys.modules")
    if _only_reexports(tree, name, is_package):
        reasons.append("only imports names of another module")
    if _deprecating_getattr(tree):
        reasons.append("has a module __getattr__ that warns of a moved name")
    if name.rsplit(".", 1)[-1].lower().lstrip("_").startswith("deprecat"):
        reasons.append("is named for deprecated names")
    return reasons


def _package_modules():
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        yield path, _module_name(path), path.name == "__init__.py"


def test_no_module_of_the_package_is_an_alias():
    offenders = []
    for path, name, is_package in _package_modules():
        for why in alias_reasons(path.read_text(encoding="utf-8"), name, is_package):
            offenders.append(f"{path.relative_to(PACKAGE_DIR.parent)}: {why}")
    assert offenders == [], "\n".join(offenders)


def test_the_package_has_modules_to_check():
    names = {name for _, name, _ in _package_modules()}
    assert {"repeval_ref", "repeval_ref.knn", "repeval_ref.torch", "repeval_ref.labelfree"} <= names


# The detector must be able to fail: the forms an alias takes are caught, real modules pass.

SYS_MODULES_ALIAS = '''"""Old name."""
import sys
import warnings

from . import cka as _m

warnings.warn("old name", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _m
'''

REEXPORT_ALIAS = '''"""Old name of another module."""
from .cka import linear_cka, rbf_cka

__all__ = ["linear_cka", "rbf_cka"]
'''

PACKAGE_REEXPORTING_ANOTHER_PACKAGE = '''"""Old package name."""
from repeval_ref.labelfree import rankme
'''

GETATTR_FORWARD = '''"""Real code, plus a hook."""
def f(x):
    return x


def __getattr__(name):
    from ._deprecated import moved_attribute

    return moved_attribute(__name__, name)
'''

GETATTR_WARNING = '''"""Real code, plus a hook."""
import warnings


def __getattr__(name):
    warnings.warn(f"{name} moved", DeprecationWarning)
    return 1
'''

LAZY_GETATTR = '''"""A package that loads its names lazily."""
import importlib

_EXPORTS = {"f": "m"}


def __getattr__(name):
    return getattr(importlib.import_module("." + _EXPORTS[name], __name__), name)
'''

PACKAGE_OF_ITS_OWN_SUBMODULES = '''"""A package's interface."""
from . import spectral, sphere
from .spectral import rankme
from .sphere import alignment

__all__ = ["alignment", "rankme"]
'''


@pytest.mark.parametrize(
    "source, name, is_package, expected",
    [
        (SYS_MODULES_ALIAS, "repeval_ref.similarity", False, "replaces itself in sys.modules"),
        (REEXPORT_ALIAS, "repeval_ref.similarity", False, "only imports names of another module"),
        (
            PACKAGE_REEXPORTING_ANOTHER_PACKAGE,
            "repeval_ref.geometry",
            True,
            "only imports names of another module",
        ),
        (
            GETATTR_FORWARD,
            "repeval_ref.torch.models",
            False,
            "has a module __getattr__ that warns of a moved name",
        ),
        (
            GETATTR_WARNING,
            "repeval_ref.torch",
            True,
            "has a module __getattr__ that warns of a moved name",
        ),
        ("", "repeval_ref.torch._deprecated", False, "is named for deprecated names"),
    ],
)
def test_each_form_of_alias_is_caught(source, name, is_package, expected):
    assert expected in alias_reasons(source, name, is_package)


@pytest.mark.parametrize(
    "source, name, is_package",
    [
        (LAZY_GETATTR, "repeval_ref", True),
        (PACKAGE_OF_ITS_OWN_SUBMODULES, "repeval_ref.labelfree", True),
        (
            '"""Entry point."""\nimport sys\n\nfrom ..cli.zoo import main\n\n'
            'if __name__ == "__main__":\n    sys.exit(main())\n',
            "repeval_ref.zoo.__main__",
            False,
        ),
        ('"""Only outside libraries."""\nimport numpy as np\n', "repeval_ref.x", False),
    ],
)
def test_modules_with_code_of_their_own_pass(source, name, is_package):
    assert alias_reasons(source, name, is_package) == []


# ------------------------------------------------------------- python -m of a real module

#: ``python -m`` and a dotted name under the package, in prose or in an argument list
#: (``"-m", "<name>"``); a name followed by a dot is a string being put together, not a name.
PYTHON_M = re.compile(
    r"""python3? -m (repeval_ref(?:\.\w+)*)\b(?!\.)|["']-m["'],\s*["'](repeval_ref(?:\.\w+)*)["']"""
)


def runnable(module):
    """Whether ``python -m module`` finds a module of this checkout to run."""
    path = PACKAGE_DIR.parent.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__main__.py").is_file()


def _tracked_text_files():
    try:
        proc = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, timeout=60, check=True
        )
    except (OSError, subprocess.SubprocessError):
        pytest.skip("git cannot list the tracked files here")
    for name in sorted(n for n in proc.stdout.decode("utf-8", "surrogateescape").split("\0") if n):
        try:
            yield name, (ROOT / name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue  # deleted in the working tree, or not text


def test_every_python_m_names_a_module_that_runs():
    offenders = []
    for name, text in _tracked_text_files():
        for i, line in enumerate(text.splitlines(), 1):
            for match in PYTHON_M.finditer(line):
                module = match.group(1) or match.group(2)
                if not runnable(module):
                    offenders.append(f"{name}:{i}: python -m {module}")
    assert offenders == [], "\n".join(offenders)


def test_runnable_tells_modules_from_missing_ones():
    assert (
        runnable("repeval_ref.zoo") and runnable("repeval_ref.cli") and runnable("repeval_ref.knn")
    )
    assert not runnable("repeval_ref.no_such_module") and not runnable("repeval_ref.torch")
    found = [
        m.group(1) or m.group(2)
        for m in PYTHON_M.finditer(
            'run python -m repeval_ref.zoo table, or [sys.executable, "-m", "repeval_ref.cli", '
            '"loop"]'
        )
    ]
    assert found == ["repeval_ref.zoo", "repeval_ref.cli"]
    assert not PYTHON_M.search('prog = "python -m repeval_ref." + name')
