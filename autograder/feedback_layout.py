"""Feedback pages a student can read on any screen.

nbgrader's feedback template shows every finding in a preformatted block that scrolls
sideways (Bootstrap's ``pre``), so the second half of a long finding sits off-screen, and
its summary at the top names every graded cell "Test cell". :func:`make_readable` adds a
style sheet after the page's own (:data:`READABLE_STYLE`: preformatted text wraps, no box
scrolls sideways, the prompts give their width back on a phone) and names each graded cell
by what it tests (:func:`cell_labels`: the check's summary, the text of the statement's
grading table). It runs on a page that :func:`autograder.feedback.secure_page` has
already cleaned, and adds only the grader's own markup: the labels are escaped.
"""

from __future__ import annotations

import html as _html
import re
from pathlib import Path

__all__ = ["READABLE_STYLE", "VIEWPORT", "cell_labels", "make_readable"]

#: nbgrader's label of every graded cell in a page's summary
_TOC_ENTRY = re.compile(r'<a href="#([A-Za-z0-9_.-]+)">Test cell</a>')
_CELL_HEADING = re.compile(r"(Grade cell: )<code>([A-Za-z0-9_.-]+)</code>")

#: what keeps a feedback page within the window: every preformatted block (a finding, an
#: error, the student's code) wraps its long lines instead of scrolling sideways, and the
#: prompts give their width back on a narrow screen
#: a phone lays the page out at its own width (without it, at 980 px, shrunk to fit)
VIEWPORT = '<meta name="viewport" content="width=device-width, initial-scale=1">'

READABLE_STYLE = """<style id="autograder-readable">
pre, div.output_area pre, div.input_area pre, .highlight pre {
  white-space: pre-wrap; overflow-wrap: anywhere; word-break: normal;
  overflow-x: visible; max-width: 100%; }
div.output_wrapper, div.output, div.output_area, div.output_subarea, div.input_area,
div.panel-body, div.inner_cell { overflow-x: visible; max-width: 100%; min-width: 0; }
div.nbgrader_cell .panel-heading { height: auto; min-height: 37px; overflow: hidden; }
.rendered_html table, .text_cell_render table { max-width: 100%; }
.rendered_html td, .rendered_html th { overflow-wrap: break-word; }
#toc li { overflow-wrap: anywhere; }
img { max-width: 100%; height: auto; }
@media (max-width: 600px) {
  div.prompt { min-width: 0; }
  .container { padding-left: 6px; padding-right: 6px; }
  div.panel-body { padding: 0.4em 0.2em; }
}
</style>"""


def cell_labels(notebook):
    """What each graded cell of exercise ``notebook`` tests, by its nbgrader grade id:
    the visible-test cell and, for each hidden check, the check's summary (the text of
    the statement's grading table). An unknown exercise has no labels.

    Parameters
    ----------
    notebook : str
        The exercise's name (the notebook's file name without ``.ipynb``).

    Returns
    -------
    dict of str to str

    Raises
    ------
    ValueError
        If ``notebook`` is not a non-empty string.
    """
    if not isinstance(notebook, str) or not notebook:
        raise ValueError(f"notebook must be an exercise name, got {notebook!r}")
    from .build import grade_ids
    from .checks import registry
    from .exercises import load

    try:
        spec = load(notebook)
    except (ImportError, KeyError, ValueError, AttributeError):
        return {}
    reg = registry()
    labels = {f"{spec.NAME}_visible_tests": "visible tests (the cell below your code)"}
    for check, grade_id in grade_ids(spec).items():
        if check in reg:
            labels[grade_id] = reg[check][1]
    return labels


def make_readable(html_path, labels=None):
    """Make one feedback page readable at any width: :data:`VIEWPORT` and
    :data:`READABLE_STYLE` last in its ``<head>`` (after every style it overrides), and
    each graded cell named by what it tests, in the summary at the top (nbgrader writes
    "Test cell" for every one) and in the cell's heading.

    Parameters
    ----------
    html_path : str or Path
        A feedback page, ``.../<notebook>.html``.
    labels : dict of str to str, optional
        Grade id -> name; default :func:`cell_labels` of the page's notebook. A cell
        without a label keeps its grade id, with underscores read as spaces.

    Returns
    -------
    bool
        Whether the page changed.

    Raises
    ------
    ValueError
        If ``labels`` is given and is not a dict.
    """
    html_path = Path(html_path)
    if labels is None:
        labels = cell_labels(html_path.stem)
    if not isinstance(labels, dict):
        raise ValueError(f"labels must be a dict grade id -> name, got {type(labels).__name__}")
    page = html_path.read_text(encoding="utf-8")

    def name(grade_id):
        return _html.escape(labels.get(grade_id) or grade_id.replace("_", " "), quote=False)

    new = _TOC_ENTRY.sub(lambda m: f'<a href="#{m.group(1)}">{name(m.group(1))}</a>', page)
    new = _CELL_HEADING.sub(
        lambda m: f"{m.group(1)}{name(m.group(2))} <code>{m.group(2)}</code>", new
    )
    if 'id="autograder-readable"' not in new and "</head>" in new:
        new = new.replace("</head>", VIEWPORT + "\n" + READABLE_STYLE + "\n</head>", 1)
    if new != page:
        html_path.write_text(new, encoding="utf-8")
    return new != page
