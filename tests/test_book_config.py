"""The book's build configuration and the conventions every chapter follows.

These checks read files only (no build): `_config.yml`, `_toc.yml`, the Makefile's `book`
and `test` targets, `.ci/run`, and the chapters' MyST sources. The built pages themselves
are checked in a browser by `test_book_browser.py`.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[1]
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
TOC = yaml.safe_load((ROOT / "_toc.yml").read_text())
# The chapters of part 1, in reading order, with the exercises each one links to.
PART1 = ["book/protocols", "book/invariances", "book/batchnorm", "book/rank", "book/knn"]
# the exercises folder of each chapter (the invariances page continues the protocols chapter)
EXERCISE_DIR = {"book/invariances": "protocols"}


def toc_files() -> list[str]:
    files = [TOC["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                files.append(entry["file"])
            walk(entry.get("sections"))

    for part in TOC.get("parts", []):
        walk(part.get("chapters"))
    walk(TOC.get("chapters"))
    return [str(Path(f).with_suffix("")) for f in files]


def source(doc: str) -> Path:
    for ext in (".md", ".ipynb"):
        path = ROOT / f"{doc}{ext}"
        if path.exists():
            return path
    raise AssertionError(f"{doc} is listed in _toc.yml but has no .md or .ipynb source")


# --------------------------------------------------------------------------- configuration
def test_execution_is_cached_inside_build_and_fails_on_errors():
    execute = CONFIG["execute"]
    assert execute["execute_notebooks"] == "cache"
    cache = execute.get("cache", "")
    # "" is myst-nb's default, <outdir>/../.jupyter_cache = _build/.jupyter_cache
    assert cache == "" or Path(cache).parts[0] == "_build", cache
    assert execute.get("allow_errors") is False
    assert execute.get("raise_on_error") is True
    gitignore = (ROOT / ".gitignore").read_text().split()
    assert "_build/" in gitignore or "/_build/" in gitignore or "_build" in gitignore


def test_extensions_are_configured_and_importable():
    exts = CONFIG["sphinx"]["extra_extensions"]
    for ext in ("sphinx_proof", "sphinx_exercise", "sphinx_design", "sphinx-mathjax-offline"):
        assert ext in exts, f"{ext} missing from sphinx.extra_extensions"
        importlib.import_module(ext)
    # the offline extension must not be overridden by a CDN MathJax path
    assert "mathjax_path" not in CONFIG["sphinx"].get("config", {})


def test_launch_buttons_point_at_a_known_forge():
    repo = CONFIG["repository"]["url"]
    assert re.match(r"https://(github\.com|gitlab\.com|bitbucket\.org)/[\w.-]+/[\w.-]+$", repo), (
        "a repository URL outside GitHub/GitLab/Bitbucket needs repository_provider"
    )
    buttons = CONFIG["launch_buttons"]
    assert buttons["colab_url"].startswith("https://colab.research.google.com")
    assert buttons["binderhub_url"].startswith("https://")


def test_make_book_is_strict_and_make_test_builds_the_book():
    makefile = (ROOT / "Makefile").read_text()
    book = re.search(r"^book:.*\n((?:\t.*\n?)+)", makefile, re.M)
    assert book, "Makefile has no book target"
    recipe = book.group(1)
    assert "jupyter-book build ." in recipe
    for flag in ("--warningiserror", "--nitpick", "--keep-going"):
        assert flag in recipe, f"make book lacks {flag}"
    test = re.search(r"^test:(.*)$", makefile, re.M)
    assert test and "book" in test.group(1).split(), "make test must depend on the book"


def test_ci_installs_chromium_and_refuses_to_skip_the_browser_test():
    ci = (ROOT / ".ci" / "run").read_text()
    # chromium (and npm for axe-core) are installed with apt-get when missing
    assert re.search(r'PKGS="\$PKGS chromium"', ci) and "apt-get install -y $PKGS" in ci
    assert "/usr/bin/chromium" in ci
    assert re.search(r"REPEVAL_REQUIRE_BROWSER=1", ci)
    assert ci.rstrip().endswith("make test")


# --------------------------------------------------------------------------- table of contents
def test_toc_starts_with_part_one_in_order():
    files = toc_files()
    assert files[0] == "book/intro"
    positions = [files.index(doc) for doc in PART1]
    assert positions == sorted(positions), f"part 1 chapters out of order: {files}"


@pytest.mark.parametrize("doc", toc_files())
def test_every_page_is_a_myst_notebook_or_page(doc):
    text = source(doc).read_text()
    if "```{code-cell}" in text:
        header = re.match(r"---\n(.*?)\n---\n", text, re.S)
        assert header, f"{doc}: code cells but no jupytext front matter"
        meta = yaml.safe_load(header.group(1))
        assert meta["kernelspec"]["name"] == "python3"
        assert meta["jupytext"]["text_representation"]["format_name"] == "myst"


# --------------------------------------------------------------------------- chapter conventions
def _chapter(doc: str) -> str:
    text = source(doc).read_text()
    if "Placeholder: this chapter is being written" in text:
        pytest.skip(f"{doc} is still a placeholder")
    return text


@pytest.mark.parametrize("doc", ["book/intro"] + PART1)
def test_chapter_conventions(doc):
    text = _chapter(doc)
    name = Path(doc).name
    assert re.search(r"^#+ What to remember\s*$", text, re.M), f"{doc}: no 'What to remember'"
    boxes = len(re.findall(r"^:{3,}\{dropdown\}|^`{3,}\{dropdown\}|^:{3,}\{solution\}", text, re.M))
    assert boxes >= 3, f"{doc}: {boxes} collapsible interview answers, need at least 3"
    others = {Path(d).name for d in ["book/intro"] + PART1} - {name}
    refs = set(re.findall(r"\{doc\}`(?:[^`<]*<)?([\w/.-]+?)>?`", text))
    assert refs & others, f"{doc}: no cross-reference to another chapter"
    assert "{glue:text}" in text or "{glue}" in text, f"{doc}: no glued number"
    assert "```{code-cell}" in text, f"{doc}: no executed code"
    if doc != "book/intro":
        folder = EXERCISE_DIR.get(doc, name)
        assert f"exercises/{folder}/" in text, f"{doc}: no link to its exercises"


def test_protocols_links_its_two_exercises_and_states_two_theorems():
    # the protocols chapter and its companion page on invariances and leave-one-out
    text = _chapter("book/protocols") + _chapter("book/invariances")
    assert "{doc}`invariances`" in _chapter("book/protocols")
    assert "{doc}`protocols`" in _chapter("book/invariances")
    for nb in ("linear_probe_done_right", "ridge_loo"):
        assert f"exercises/protocols/{nb}.ipynb" in text
    assert len(re.findall(r"^:{3,}\{prf:theorem\}", text, re.M)) >= 2
    assert len(re.findall(r"^:{3,}\{prf:proof\}", text, re.M)) >= 2
