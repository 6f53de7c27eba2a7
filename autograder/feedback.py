"""Feedback pages that reveal no hidden test and typeset maths without a network.

* :class:`ScrubTestTracebacks` (an nbgrader preprocessor, run by ``generate_feedback``
  after ``ClearHiddenTests``) reduces every error in a test cell to its last line, so a
  traceback can never quote a hidden test's source. The hidden tests call
  :func:`autograder.checks.grade`, which never raises, so this is a second safety net.
* :func:`make_maths_offline` rewrites a generated feedback page: nbgrader's template loads
  MathJax 2 from a CDN; the page instead loads MathJax 3 (``tex-svg.js``, which embeds
  its fonts) from a local copy, taken from the ``sphinx-mathjax-offline`` package that
  the book's tool chain installs. :func:`make_feedback_offline` keeps ONE copy per
  course, ``feedback/mathjax-tex-svg.js``, that every page loads by a relative path
  (2 MB once instead of once per student and assignment).
* :func:`make_feedback_offline` also points the statement's chapter link
  (``../../book/<chapter>.md``, right inside ``exercises/``) at the built book
  (``_build/html/book/<chapter>.html`` of the repository, or ``book_url``), and styles
  the Markdown tables (the grading table of each statement) with borders and padding.
"""
from __future__ import annotations

import os
import re
import shutil
import sysconfig
from pathlib import Path

from nbgrader import utils
from nbgrader.preprocessors import NbGraderPreprocessor

MATHJAX_FILE = "mathjax-tex-svg.js"

_CDN_BLOCK = re.compile(r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->",
                        re.S)
_ANY_CDN_SCRIPT = re.compile(r"<script[^>]+src=\"https?://[^\"]*mathjax[^\"]*\"[^>]*>\s*</script>",
                             re.I | re.S)

OFFLINE_MATHJAX = f"""<!-- MathJax 3, loaded from a local copy (autograder.feedback) -->
<script>
window.MathJax = {{
  tex: {{inlineMath: [['$', '$'], ['\\\\(', '\\\\)']],
        displayMath: [['$$', '$$'], ['\\\\[', '\\\\]']], processEscapes: true}},
  svg: {{fontCache: 'global'}}
}};
</script>
<script src="{MATHJAX_FILE}"></script>"""


class ScrubTestTracebacks(NbGraderPreprocessor):
    """Keep only ``ename: evalue`` of errors raised in graded test cells."""

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "code" and utils.is_grade(cell) and not utils.is_solution(cell):
            for out in cell.get("outputs", []):
                if out.get("output_type") == "error":
                    out["traceback"] = [f"{out.get('ename', 'Error')}: {out.get('evalue', '')}"]
        return cell, resources


def mathjax_source():
    """Path of the offline MathJax 3 bundle, or None if it is not installed."""
    candidates = [Path(sysconfig.get_paths()["purelib"])]
    try:
        import sphinx_mathjax_offline  # noqa: F401
        candidates.append(Path(sphinx_mathjax_offline.__file__).resolve().parents[1])
    except ImportError:
        pass
    for base in candidates:
        path = base / "sphinx-mathjax-offline" / "static" / "mathjax" / "tex-svg.js"
        if path.is_file():
            return path
    return None


def _copy_mathjax(folder):
    """Put the MathJax bundle into ``folder`` (once); return its path or None."""
    src = mathjax_source()
    if src is None:
        return None
    target = Path(folder) / MATHJAX_FILE
    if not target.exists() or target.stat().st_size != src.stat().st_size:
        shutil.copyfile(src, target)
    return target


def make_maths_offline(html_path, mathjax_dir=None):
    """Replace the CDN MathJax of one feedback page by a local copy; return True if done.

    The copy lives in ``mathjax_dir`` (default: the page's folder) and the page loads it
    by a relative path.
    """
    html_path = Path(html_path)
    folder = Path(mathjax_dir) if mathjax_dir is not None else html_path.parent
    rel = os.path.relpath(folder / MATHJAX_FILE, html_path.parent).replace(os.sep, "/")
    text = html_path.read_text(encoding="utf-8")
    script = OFFLINE_MATHJAX.replace(f'src="{MATHJAX_FILE}"', f'src="{rel}"')
    new, n = _CDN_BLOCK.subn(lambda m: script, text)
    new, n2 = _ANY_CDN_SCRIPT.subn("", new)
    _copy_mathjax(folder)
    if new != text:
        html_path.write_text(new, encoding="utf-8")
    return bool(n or n2)


_CHAPTER_LINK = re.compile(r'href="(?:\.\./)+book/([A-Za-z0-9_-]+)\.md(#[^"]*)?"')

TABLE_STYLE = """<style id="autograder-tables">
.rendered_html table, .text_cell_render table { border-collapse: collapse; margin: 0.6em 0; }
.rendered_html th, .rendered_html td, .text_cell_render th, .text_cell_render td {
  border: 1px solid #bbb; padding: 0.3em 0.8em; text-align: left; }
.rendered_html th, .text_cell_render th { background: #f0f0f0; }
.rendered_html tr:nth-child(even) td, .text_cell_render tr:nth-child(even) td {
  background: #fafafa; }
</style>"""


def link_chapters(html_path, book_root=None, book_url=None):
    """Point the page's ``../../book/<chapter>.md`` links at the built book: a relative
    path to ``book_root/book/<chapter>.html`` (the repository's ``_build/html``), or
    ``book_url/book/<chapter>.html`` for a published book. Returns the links changed."""
    html_path = Path(html_path)
    text = html_path.read_text(encoding="utf-8")

    def target(m):
        page = f"book/{m.group(1)}.html"
        if book_url:
            where = book_url.rstrip("/") + "/" + page
        else:
            where = os.path.relpath(Path(book_root) / page, html_path.parent).replace(os.sep, "/")
        return f'href="{where}{m.group(2) or ""}"'

    new, n = _CHAPTER_LINK.subn(target, text)
    if 'id="autograder-tables"' not in new and "</head>" in new:
        new = new.replace("</head>", TABLE_STYLE + "\n</head>", 1)
    if new != text:
        html_path.write_text(new, encoding="utf-8")
    return n


def make_feedback_offline(feedback_dir, book_root=None, book_url=None):
    """Post-process every feedback page under ``feedback_dir``: one shared MathJax copy
    (``feedback_dir/mathjax-tex-svg.js``; copies inside student folders are removed),
    chapter links to the built book, styled tables. Returns the pages whose maths changed.
    """
    from . import REPO_ROOT

    feedback_dir = Path(feedback_dir)
    book_root = Path(book_root) if book_root is not None else REPO_ROOT / "_build" / "html"
    changed = []
    for page in sorted(feedback_dir.glob("*/*/*.html")):
        stray = page.parent / MATHJAX_FILE
        if stray.exists():
            stray.unlink()
        if make_maths_offline(page, mathjax_dir=feedback_dir):
            changed.append(page)
        link_chapters(page, book_root=book_root, book_url=book_url)
    return changed
