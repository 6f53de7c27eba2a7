"""The package's floors: who may import whom, no import circle, and every module star-importable.

Floors, lowest first (a module may import its own floor and those below it):

    formulas and datasets (repeval_ref.*, repeval_ref.datasets)
    < repeval_ref.torch (evaluation code and architectures)
    < repeval_ref.zoo (the project's trained encoders)
    < repeval_ref.backbones (every model loader: torchvision, timm, zoo, local weights)
    < repeval_ref.cli (the commands: repeval report/compare/leaderboard/loop/zoo)

The graph is read from the source with ``ast``: module-level and function-level
imports alike, so a lazy import inside a function counts as much as one at the top.
"""

import ast
import importlib
import pathlib
import subprocess
import sys
import warnings

import pytest

import repeval_ref

PACKAGE_DIR = pathlib.Path(repeval_ref.__file__).parent

#: ``python -m`` entry points: they only run a module of a higher floor, and nothing
#: imports them.
ENTRY_POINTS = {
    "repeval_ref.zoo.__main__",
    "repeval_ref.cli.__main__",
    "repeval_ref.studies.__main__",
}

FLOORS = ["formulas", "torch", "zoo", "studies", "backbones", "cli"]


def _modules():
    """Dotted name -> path of every module of the package."""
    out = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _resolve(module, level, current, is_package):
    if level == 0:
        return module
    base = current.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _imports(name, path):
    """Modules of repeval_ref that ``name`` imports, anywhere in its source."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node.module, node.level, name, is_package)
            for a in node.names:
                sub = f"{base}.{a.name}"
                targets.append(sub if sub in MODULES else base)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and not node.args[0].value.startswith(".")
        ):
            targets = [node.args[0].value]
        for t in targets:
            while (
                t and t not in MODULES and "." in t
            ):  # `import repeval_ref.x.y as z` -> longest known prefix
                t = t.rsplit(".", 1)[0]
            if t in MODULES and t != name:
                found.add(t)
    return found


def _graph():
    return {
        name: _imports(name, path) for name, path in MODULES.items() if name not in ENTRY_POINTS
    }


def _floor(name):
    parts = name.split(".")
    top = parts[1] if len(parts) > 1 else ""
    if top in FLOORS[1:]:
        return FLOORS.index(top)
    return 0  # the formulas, the datasets and the package's own __init__


def test_the_graph_sees_the_known_edges():
    """The reader is not blind: module-level, function-level and relative imports are found."""
    g = _graph()
    assert "repeval_ref.torch.models" in g["repeval_ref.zoo.registry"]  # module level, relative
    assert "repeval_ref.zoo" in g["repeval_ref.backbones"]  # `from . import zoo`
    assert "repeval_ref.torch.extract" in g["repeval_ref.zoo.extraction"]  # inside a function
    assert "repeval_ref.datasets" in g["repeval_ref.cli._loop_data"]  # absolute, in a function
    assert "repeval_ref.cli.loop" in g["repeval_ref.cli"]  # the `repeval loop` dispatch


def test_no_import_cycle():
    g = _graph()
    state, stack = {}, []

    def visit(u):
        state[u] = "open"
        stack.append(u)
        for v in sorted(g.get(u, ())):
            if state.get(v) == "open":
                cycle = stack[stack.index(v) :] + [v]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if v not in state:
                visit(v)
        stack.pop()
        state[u] = "done"

    for u in sorted(g):
        if u not in state:
            visit(u)


@pytest.mark.slow
def test_torch_imports_neither_zoo_nor_loaders_nor_cli():
    bad = [
        (m, t)
        for m, targets in _graph().items()
        if m == "repeval_ref.torch" or m.startswith("repeval_ref.torch.")
        for t in targets
        if t.startswith(("repeval_ref.zoo", "repeval_ref.cli")) or t == "repeval_ref.backbones"
    ]
    assert bad == []


def test_every_import_goes_down_or_sideways():
    """The floors of the module docstring, for every module (not only those of torch)."""
    bad = [
        f"{m} ({FLOORS[_floor(m)]}) imports {t} ({FLOORS[_floor(t)]})"
        for m, targets in _graph().items()
        for t in sorted(targets)
        if _floor(t) > _floor(m)
    ]
    assert bad == []


@pytest.mark.slow
def test_import_torch_loads_no_loader_and_no_zoo():
    code = (
        "import repeval_ref.torch, sys; print(sorted(m for m in sys.modules "
        "if m.startswith('repeval_ref.zoo') or m == 'repeval_ref.backbones'))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_python_m_zoo_runs_the_zoo_command():
    from repeval_ref.cli.zoo import main as cli_zoo_main
    from repeval_ref.zoo.__main__ import main as zoo_main

    assert zoo_main is cli_zoo_main


def _star_importable():
    return sorted(n for n in MODULES if n not in ENTRY_POINTS and not n.endswith(".__main__"))


@pytest.mark.parametrize("name", _star_importable())
def test_star_import_works(name):
    """``from M import *`` for every module: each name of ``__all__`` exists (and warns not)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        namespace = {}
        exec(f"from {name} import *", namespace)  # noqa: S102 - the statement under test
    module = importlib.import_module(name)
    missing = [n for n in getattr(module, "__all__", ()) if n not in namespace]
    assert missing == []
