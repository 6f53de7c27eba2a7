"""Feedback pages that reveal no hidden test and typeset maths without a network.

* :class:`ScrubTestTracebacks` (an nbgrader preprocessor, run by ``generate_feedback``
  after ``ClearHiddenTests``) reduces every error in a test cell to its last line, so a
  traceback can never quote a hidden test's source. The hidden tests call
  :func:`autograder.checks.grade`, which never raises, so this is a second safety net.
* :func:`make_maths_offline` rewrites a generated feedback page: nbgrader's template loads
  MathJax 2 from a CDN; the page instead loads MathJax 3 (``tex-svg.js``, which embeds
  its fonts) from a copy placed next to it, taken from the ``sphinx-mathjax-offline``
  package that the book's tool chain installs.
"""
from __future__ import annotations

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


def make_maths_offline(html_path):
    """Replace the CDN MathJax of one feedback page by the local copy; return True if done."""
    html_path = Path(html_path)
    text = html_path.read_text(encoding="utf-8")
    new, n = _CDN_BLOCK.subn(lambda m: OFFLINE_MATHJAX, text)
    new, n2 = _ANY_CDN_SCRIPT.subn("", new)
    src = mathjax_source()
    if src is not None:
        target = html_path.parent / MATHJAX_FILE
        if not target.exists() or target.stat().st_size != src.stat().st_size:
            shutil.copyfile(src, target)
    if new != text:
        html_path.write_text(new, encoding="utf-8")
    return bool(n or n2)


def make_feedback_offline(feedback_dir):
    """Post-process every feedback page under ``feedback_dir``; return the pages changed."""
    changed = []
    for page in sorted(Path(feedback_dir).glob("*/*/*.html")):
        if make_maths_offline(page):
            changed.append(page)
    return changed
