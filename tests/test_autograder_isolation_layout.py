"""The isolation layer is one layer: one fork-server program, one client, one
confinement specification, one settings module, no module loaded by ``exec``.

Each rule is read from the sources of ``autograder/`` as they stand (their syntax trees,
not their text), so a second fork server, a second client class, an
``exec(compile(...))`` or a variable name spelled outside :mod:`autograder.settings`
fails here, whatever the file.
"""

import ast
from pathlib import Path

import pytest

from autograder import PACKAGE_DIR

#: the most lines of one module
MAX_LINES = 600
#: modules allowed past MAX_LINES, each with why
LONG_MODULES = {}
#: the one fork-server program, and the modules it loads by path (standard library only)
SERVER = "fork_server.py"
LOADED_BY_PATH = {
    "fork_children.py",
    "confine.py",
    "fork_role_cleanroom.py",
    "fork_role_sandbox.py",
    "fork_role_kernel.py",
}
#: the module that spells every ``AUTOGRADER_`` name, and the modules that still spell
#: one by hand, each with why (none of them is loaded by path: each can import settings)
SETTINGS = "settings.py"
NAMES_ELSEWHERE = {}


def _modules():
    return sorted(p for p in Path(PACKAGE_DIR).rglob("*.py") if "__pycache__" not in p.parts)


def _tree(path):
    return ast.parse(path.read_text(), str(path))


def _rel(path):
    return path.relative_to(PACKAGE_DIR).as_posix()


def _docstrings(tree):
    """The ids of the string nodes that are docstrings (a module's, class's, function's)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _is_main_guard(node):
    """``if __name__ == "__main__":`` at a module's top level."""
    test = node.test if isinstance(node, ast.If) else None
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    )


def test_exactly_one_fork_server_program():
    """Only ``fork_server.py`` is a program that serves fork requests: no other module of
    ``autograder/`` both runs as ``__main__`` and names the request loop, and the old
    programs are gone."""
    servers = []
    for path in _modules():
        tree = _tree(path)
        is_program = any(_is_main_guard(node) for node in tree.body)
        names = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        names |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        if is_program and ({"serve", "recv_fds", "fork"} & names):
            servers.append(_rel(path))
    assert servers == [SERVER]
    for old in ("cleanroom_fork_server.py", "sandbox_fork_server.py", "kernel_fork_server.py"):
        assert not (Path(PACKAGE_DIR) / old).exists(), old


def test_the_server_and_what_it_loads_import_nothing_of_the_grader():
    """The fork server and the modules it loads by path import the standard library only:
    no student-reachable process holds the grader's code."""
    import sys

    stdlib = set(sys.stdlib_module_names)
    for name in {SERVER} | LOADED_BY_PATH:
        for node in ast.walk(_tree(Path(PACKAGE_DIR) / name)):
            if isinstance(node, ast.ImportFrom):
                assert node.level == 0 and node.module.split(".")[0] in stdlib | {"__future__"}, (
                    name,
                    node.module,
                )
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    assert alias.name.split(".")[0] in stdlib, (name, alias.name)


def test_one_fork_client_class():
    """One class speaks to the fork server (it sends requests with ``send_fds``), and no
    module subclasses it."""
    clients, subclasses = [], []
    for path in _modules():
        tree = _tree(path)
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = {
                b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases
            }
            if "ForkServer" in bases:
                subclasses.append(f"{_rel(path)}:{node.name}")
            calls = {
                n.func.attr
                for n in ast.walk(node)
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            }
            if "send_fds" in calls:
                clients.append(f"{_rel(path)}:{node.name}")
    assert clients == ["fork_client.py:ForkServer"]
    assert subclasses == []


def test_no_module_is_loaded_by_exec_of_compile():
    """No ``exec(compile(...))`` anywhere in ``autograder/``: modules are loaded by
    importlib's file loader, and the few ``exec`` calls run code compiled from a text
    (an answer, a visible test) in a function of their own."""
    for path in _modules():
        for node in ast.walk(_tree(path)):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "exec"
                and node.args
            ):
                arg = node.args[0]
                assert not (
                    isinstance(arg, ast.Call)
                    and isinstance(arg.func, ast.Name)
                    and arg.func.id == "compile"
                ), _rel(path)
        assert "exec(compile(" not in path.read_text().replace(" ", ""), _rel(path)


def test_every_environment_variable_is_spelled_in_settings_only():
    """A string constant holding ``AUTOGRADER_`` (docstrings aside) appears only in
    :mod:`autograder.settings`, so every setting and switch has one definition."""
    found = {}
    for path in _modules():
        tree = _tree(path)
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and "AUTOGRADER_" in node.value
                and id(node) not in docs
            ):
                found.setdefault(_rel(path), []).append(node.value[:40])
    assert SETTINGS in found
    stray = {k: v for k, v in found.items() if k != SETTINGS and k not in NAMES_ELSEWHERE}
    assert not stray, stray


def test_one_confinement_specification():
    """Every confined child is started or forked through ``confine.make_spec``: the
    ``preexec_fn`` of a started one is ``confine.preexec`` and the fork server's roles
    call ``confine.apply``; no module calls ``preexec_fn=`` with anything else."""
    makers, appliers = set(), set()
    for path in _modules():
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.keyword) and node.arg == "preexec_fn":
                value = node.value
                assert (
                    isinstance(value, ast.Call)
                    and isinstance(value.func, ast.Attribute)
                    and value.func.attr == "preexec"
                ), _rel(path)
            if isinstance(node, ast.Attribute) and node.attr == "make_spec":
                makers.add(_rel(path))
            if isinstance(node, ast.Attribute) and node.attr == "apply":
                appliers.add(_rel(path))
    assert {"cleanroom_process.py", "sandbox.py"} <= makers
    assert {"fork_role_cleanroom.py", "fork_role_sandbox.py"} <= appliers


@pytest.mark.parametrize("path", _modules(), ids=_rel)
def test_no_module_is_longer_than_the_limit(path):
    lines = len(path.read_text().splitlines())
    if _rel(path) in LONG_MODULES:
        pytest.skip(f"{_rel(path)}: {LONG_MODULES[_rel(path)]}")
    assert lines <= MAX_LINES, f"{_rel(path)} has {lines} lines"
