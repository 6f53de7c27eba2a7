"""Every chapter's Colab set-up installs every module the chapter imports.

Each chapter is read as the notebook Colab opens (jupytext), every import of its code
cells is found with Python's own parser, and each third-party module is traced to the
distribution that installs it in this environment (``importlib.metadata``, independent of
the extension's own table). That distribution must come from the set-up cell: the package
itself with its dependencies and the extras it installs, or a name the cell pip-installs.
Binder's files must install the data set the chapters read.
"""

import ast
import importlib.metadata as md
import re
import sys
from pathlib import Path

import jupytext
import pytest

from repeval_book import sphinx_ext as ext
from repeval_book.interview import toc_documents

ROOT = Path(__file__).resolve().parents[1]
FIRST_PARTY = {"repeval_ref", "repeval_book"}


def _canon(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(req):
    return _canon(re.split(r"[\s;<>=!~\[]", req.strip(), maxsplit=1)[0])


def _installed_by_package():
    """Distributions the set-up's ``pip install ./repo[extras]`` brings, with their dependencies."""
    import tomllib

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [r for r in meta["dependencies"] if "python_version < " not in r]
    for extra in ext.PACKAGE_EXTRAS:
        wanted += meta["optional-dependencies"][extra]
    return _closure(_requirement_name(r) for r in wanted)


def _closure(names):
    seen, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            reqs = md.requires(name) or []
        except md.PackageNotFoundError:
            continue
        todo += [_requirement_name(r) for r in reqs if "extra ==" not in r]
    return seen


def _imports(cells):
    found = set()
    for cell in cells:
        if cell.get("cell_type") != "code":
            continue
        src = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        src = "\n".join(ln for ln in src.splitlines() if not ln.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.Import):
                found.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    return found


def _chapters():
    out = []
    for doc in toc_documents(ROOT):
        path = ROOT / f"{doc}.md"
        text = path.read_text(encoding="utf-8")
        if "kernelspec:" in text.split("\n---", 1)[0] + text[:400]:
            out.append(doc)
    return out


CHAPTERS = _chapters()


def test_every_executed_chapter_is_checked():
    assert len(CHAPTERS) >= 15, CHAPTERS


@pytest.mark.parametrize("doc", CHAPTERS)
def test_colab_setup_installs_every_import(doc):
    nb = jupytext.read(ROOT / f"{doc}.md")
    cells = [dict(c) for c in nb.cells]
    requirements = ext.chapter_requirements(cells)
    source = ext.setup_cell_source("https://github.com/o/repo", requirements, doc)
    installed = _installed_by_package() | _closure(_requirement_name(r) for r in requirements)
    owners = md.packages_distributions()
    missing = []
    for module in sorted(_imports(cells)):
        if module in sys.stdlib_module_names or module in FIRST_PARTY:
            continue
        if module in ext.KERNEL_MODULES:
            continue
        dists = {_canon(d) for d in owners.get(module, [])}
        assert dists, f"{doc}: no installed distribution provides {module!r}"
        if not dists & installed:
            missing.append(f"{module} ({', '.join(sorted(dists))})")
    assert not missing, f"{doc}: the set-up cell installs nothing that provides {missing}"
    ast.parse(source)


@pytest.mark.parametrize("doc", CHAPTERS)
def test_chapters_that_read_fashion_mnist_install_it(doc):
    nb = jupytext.read(ROOT / f"{doc}.md")
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    if re.search(r"fashion|\bzoo\b|\bdatasets\b", code, re.IGNORECASE):
        assert ext.uses_fashion_mnist([dict(c) for c in nb.cells])


def test_binder_installs_fashion_mnist():
    apt = (ROOT / "apt.txt").read_text().split()
    assert "dataset-fashion-mnist" in apt
    from repeval_ref.datasets import fashion

    # the folder Debian's package installs is the one the package reads first
    assert fashion.DEBIAN_DIR == "/usr/share/datasets/fashion-mnist"
    assert fashion.DEBIAN_DIR in ext.setup_cell_source("https://github.com/o/r", [], "book/x", True)


def test_a_missing_pip_name_is_caught(monkeypatch):
    """The check has teeth: without ranx in the table, the retrieval chapter fails it."""
    monkeypatch.delitem(ext.EXTRA_PIP, "ranx")
    with pytest.raises(AssertionError, match="ranx"):
        test_colab_setup_installs_every_import("book/retrieval")
