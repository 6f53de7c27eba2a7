"""Build the nbgrader source notebooks ``solutions/<assignment>/<name>.ipynb`` from specs.

Every notebook has the same layout, so that adding an exercise is writing one spec:

1. the statement (read-only Markdown): title, level, chapter link, points, the task;
2. the solution cell (the only cell a student edits);
3. the visible test cell (graded, read-only);
4. one hidden test cell per registered check: a comment naming what it tests, and between
   ``### BEGIN HIDDEN TESTS`` / ``### END HIDDEN TESTS`` a call of
   :func:`autograder.checks.grade`, which never raises and prints the findings.

Cell ids and nbgrader grade ids are derived from the exercise name, so rebuilding is
deterministic and a test can compare the committed notebooks with a fresh build.
"""

from __future__ import annotations

import re
import zlib
from pathlib import Path

import nbformat

from . import REPO_ROOT
from .checks import check_points, registry
from .exercises import all_specs, load

KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}


def _meta(grade_id, *, grade=False, solution=False, locked=False, points=None):
    meta = {
        "grade": grade,
        "grade_id": grade_id,
        "locked": locked,
        "schema_version": 3,
        "solution": solution,
    }
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


def _cell_id(text):
    """A valid nbformat cell id (at most 64 characters) derived from ``text``."""
    cid = re.sub(r"[^A-Za-z0-9-]+", "-", text)
    if len(cid) > 64:
        cid = f"{cid[:55]}-{zlib.crc32(cid.encode()):08x}"
    return cid


def _cell(kind, source, cid, meta):
    maker = nbformat.v4.new_markdown_cell if kind == "markdown" else nbformat.v4.new_code_cell
    cell = maker(source.strip("\n"))
    cell["id"] = cid
    cell["metadata"] = meta
    return cell


def hidden_cell_source(check_name):
    """Source of the hidden test cell that runs one registered check."""
    points, summary = registry()[check_name]
    return (
        f"# Hidden test ({points:g} point{'s' if points != 1 else ''}): {summary}.\n"
        "### BEGIN HIDDEN TESTS\n"
        "from autograder.checks import grade\n"
        f"grade({check_name!r}, {check_name.split('/', 1)[0]!r})\n"
        "### END HIDDEN TESTS"
    )


_FRONT_MATTER = re.compile(r"\A---\n.*?\n---\n", re.DOTALL)
_H1 = re.compile(r"^#\s+(.+?)\s*$", re.MULTILINE)


def chapter_title(chapter, root=REPO_ROOT):
    """The title (first level-1 heading) of the book page ``book/<chapter>.md``.

    Parameters
    ----------
    chapter : str
        The page's name, e.g. ``"knn"``.
    root : path-like
        The repository root.

    Returns
    -------
    str

    Raises
    ------
    ValueError
        If ``chapter`` is not a simple name, the page does not exist or has no
        level-1 heading.
    """
    if not isinstance(chapter, str) or not re.fullmatch(r"[A-Za-z0-9_-]+", chapter):
        raise ValueError(f"chapter must be a page name such as 'knn', got {chapter!r}")
    path = Path(root) / "book" / f"{chapter}.md"
    if not path.is_file():
        raise ValueError(f"chapter {chapter!r}: no page {path}")
    text = _FRONT_MATTER.sub("", path.read_text(encoding="utf-8"), count=1)
    m = _H1.search(text)
    if m is None:
        raise ValueError(f"chapter {chapter!r}: {path} has no level-1 heading")
    return m.group(1)


def chapter_link(chapter, root=REPO_ROOT):
    """Where a notebook's chapter link points: the published page
    ``<book_url>book/<chapter>.html`` (:func:`autograder.feedback.default_book_url`, from
    ``_config.yml``'s repository), else the page's source ``../../book/<chapter>.md``.

    Raises
    ------
    ValueError
        If ``chapter`` is not a simple page name.
    """
    from .feedback import default_book_url

    if not isinstance(chapter, str) or not re.fullmatch(r"[A-Za-z0-9_-]+", chapter):
        raise ValueError(f"chapter must be a page name such as 'knn', got {chapter!r}")
    url = default_book_url(root)
    return f"{url}book/{chapter}.html" if url else f"../../book/{chapter}.md"


def total_points(spec):
    return float(spec.VISIBLE_POINTS) + sum(check_points(c) for c in spec.HIDDEN)


def build_notebook(spec):
    """The nbgrader source notebook of one exercise spec (a NotebookNode)."""
    reg = registry()
    for name in spec.HIDDEN:
        if name not in reg:
            raise ValueError(f"{spec.NAME}: hidden check {name!r} is not registered")
    hidden_pts = sum(reg[c][0] for c in spec.HIDDEN)
    total = float(spec.VISIBLE_POINTS) + hidden_pts
    rows = "\n".join(f"| hidden | {reg[c][1]} | {reg[c][0]:g} |" for c in spec.HIDDEN)
    header = (
        f"# {spec.TITLE}\n\n"
        f"**Level:** {spec.LEVEL} · **Chapter:** [{chapter_title(spec.CHAPTER)}]"
        f"({chapter_link(spec.CHAPTER)}) · **Points:** {total:g} "
        f"({float(spec.VISIBLE_POINTS):g} visible, {hidden_pts:g} hidden)\n"
    )
    grading = (
        "## How this notebook is graded\n\n"
        "Write your code in the cell below the statement, replacing "
        "`raise NotImplementedError()`. Do not rename the function, and do not delete, "
        "move or copy cells. Run `make check NB=<this notebook>` (or "
        "`python -m autograder check <this notebook>`) before you submit. An answer that "
        "imports `repeval_ref` (the course's reference package) or `autograder` (the "
        "grader) scores 0 for this exercise: the grade is computed by running your cell "
        "on its own, in a separate process where neither package exists.\n\n"
        "| test | what it checks | points |\n| --- | --- | --- |\n"
        f"| visible | the cell below your code | {float(spec.VISIBLE_POINTS):g} |\n"
        f"{rows}\n\n"
        "The hidden tests draw fresh random inputs at grading time and compare your function "
        "with the course's reference implementation; the feedback explains every failure."
    )
    name = spec.NAME
    cells = [
        _cell(
            "markdown",
            header + "\n" + spec.STATEMENT.strip("\n") + "\n\n" + grading,
            f"{name}-statement",
            _meta(f"{name}_statement", locked=True),
        ),
        _cell("code", spec.SOLUTION, f"{name}-solution", _meta(f"{name}_solution", solution=True)),
        _cell(
            "markdown",
            "## Visible tests\n\nRun this cell while you work; it is worth "
            f"{float(spec.VISIBLE_POINTS):g} point(s).",
            f"{name}-visible-title",
            _meta(f"{name}_visible_title", locked=True),
        ),
        _cell(
            "code",
            spec.VISIBLE_TESTS,
            f"{name}-visible-tests",
            _meta(f"{name}_visible_tests", grade=True, locked=True, points=spec.VISIBLE_POINTS),
        ),
        _cell(
            "markdown",
            "## Hidden tests\n\nThese cells are filled in and run when your "
            "notebook is graded; running them now does nothing.",
            f"{name}-hidden-title",
            _meta(f"{name}_hidden_title", locked=True),
        ),
    ]
    for check in spec.HIDDEN:
        aspect = _aspect(name, check)
        cells.append(
            _cell(
                "code",
                hidden_cell_source(check),
                _cell_id(f"{name}-hidden-{aspect}"),
                _meta(f"{name}_hidden_{aspect}", grade=True, locked=True, points=reg[check][0]),
            )
        )
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata = {"kernelspec": dict(KERNELSPEC), "language_info": {"name": "python"}}
    nbformat.validate(nb)
    return nb


def _aspect(name, check):
    """The check's own aspect; prefixed by the function when a notebook has several."""
    func, rest = check.split("/", 1)
    return re.sub(r"[^A-Za-z0-9_]+", "_", rest if func == name else f"{func}_{rest}")


def grade_ids(spec):
    """Dict check name -> nbgrader grade id of its hidden test cell."""
    return {check: f"{spec.NAME}_hidden_{_aspect(spec.NAME, check)}" for check in spec.HIDDEN}


def notebook_path(spec, root=REPO_ROOT, directory="solutions"):
    return Path(root) / directory / spec.ASSIGNMENT / f"{spec.NAME}.ipynb"


def notebook_text(nb):
    return nbformat.writes(nb) + "\n"


def build_all(root=REPO_ROOT, names=None):
    """Write every (or the named) exercise's source notebook; return the written paths."""
    specs = [load(n) for n in names] if names else all_specs()
    written = []
    for spec in specs:
        path = notebook_path(spec, root)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = notebook_text(build_notebook(spec))
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        written.append(path)
    return written


def assignments():
    """Dict assignment -> list of exercise names, in book order."""
    out = {}
    for spec in all_specs():
        out.setdefault(spec.ASSIGNMENT, []).append(spec.NAME)
    return out


def solution_source(spec):
    """The spec's solution code with the nbgrader markers removed (runnable as is)."""
    return "\n".join(
        line
        for line in spec.SOLUTION.splitlines()
        if "### BEGIN SOLUTION" not in line and "### END SOLUTION" not in line
    )
