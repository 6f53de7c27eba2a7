"""What the grader does to a submitted notebook before nbgrader sees it: tell which
exercise it is, put back the read-only cells a student deleted, list the solution cells
that do not compile, and replace a notebook that cannot be graded by the blank release
with a note that says why.

A note is a Markdown cell at the top of the notebook (id ``autograder-grading-note``),
shown in the feedback; its text is plain text, escaped
(:func:`autograder.feedback.note_markdown`).
"""

from __future__ import annotations

from pathlib import Path

import nbformat

__all__ = [
    "NOTE_ID",
    "add_note",
    "answered_cells",
    "blank_notebook",
    "defined_functions",
    "identify",
    "restore_deleted_cells",
    "solution_syntax_errors",
    "solution_syntax_failures",
]

#: the cell id of the grader's note at the top of a notebook
NOTE_ID = "autograder-grading-note"


def _grade_id(cell):
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def add_note(nb, text, cell_id=NOTE_ID):
    """Insert the note ``text`` (plain text) at the top of notebook ``nb``, as the
    Markdown cell of id ``cell_id``, in place of any cell of that id already there.

    Raises
    ------
    ValueError
        If ``text`` or ``cell_id`` is not a non-empty string.
    """
    from ..feedback import note_markdown

    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"text must be a non-empty note, got {text!r:.80}")
    if not isinstance(cell_id, str) or not cell_id:
        raise ValueError(f"cell_id must be a non-empty cell id, got {cell_id!r}")
    note = nbformat.v4.new_markdown_cell(note_markdown(text))
    note["id"] = cell_id
    nb.cells = [c for c in nb.cells if c.get("id") != cell_id]
    nb.cells.insert(0, note)


def blank_notebook(root, assignment, notebook, reason):
    """The release notebook ``exercises/<assignment>/<notebook>.ipynb`` of course directory
    ``root`` with a note: ``reason``, and that it was graded as the blank exercise."""
    path = Path(root) / "exercises" / assignment / f"{notebook}.ipynb"
    nb = nbformat.read(str(path), as_version=4)
    add_note(
        nb,
        reason + " This notebook was therefore graded as the blank "
        "exercise (zero points). Ask your instructor if you think this is wrong.",
    )
    return nb


def restore_deleted_cells(nb, release):
    """Put back into notebook ``nb`` the read-only cells (statement, tests) of its release
    notebook ``release`` that a student deleted.

    nbgrader restores the *contents* of read-only cells but not deleted cells, which
    would then simply be missing from the grade. Tests belong to the instructor, so a
    deleted one is re-inserted after the cell that precedes it in the release; the
    student's own code still decides whether it passes.

    Returns
    -------
    list of str
        The grade ids restored, in release order.
    """
    present = {_grade_id(c) for c in nb.cells}
    restored = []
    for i, cell in enumerate(release.cells):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if not meta.get("locked") or _grade_id(cell) in present:
            continue
        pos = len(nb.cells)
        for prev in reversed(release.cells[:i]):
            ids = [_grade_id(c) for c in nb.cells]
            if _grade_id(prev) in ids:
                pos = ids.index(_grade_id(prev)) + 1
                break
        else:
            pos = 0
        nb.cells.insert(pos, cell)
        present.add(_grade_id(cell))
        restored.append(_grade_id(cell))
    return restored


def identify(nb, index):
    """The exercise of ``index`` (names) that notebook ``nb`` answers, by the nbgrader
    grade ids of its cells (``<exercise>_...``; the most cells win), or None."""
    votes = {}
    for cell in nb.get("cells", []):
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
        for name in index:
            if gid.startswith(name + "_"):
                votes[name] = votes.get(name, 0) + 1
    return max(votes, key=votes.get) if votes else None


def answered_cells(nb, release):
    """How many solution cells of notebook ``nb`` hold an answer: a cell whose grade id is a
    solution cell of its release notebook ``release`` and whose source (blank lines and
    surrounding spaces aside) differs from the release's stub.

    Raises
    ------
    ValueError
        If ``nb`` or ``release`` is not a notebook (no ``cells``).
    """
    for name, value in (("nb", nb), ("release", release)):
        if not hasattr(value, "get") or not isinstance(value.get("cells"), list):
            raise ValueError(
                f"{name} must be a notebook node with cells, got {type(value).__name__}"
            )

    def text(cell):
        return "\n".join(line.rstrip() for line in cell.get("source", "").strip().splitlines())

    stubs = {
        _grade_id(c): text(c)
        for c in release["cells"]
        if c.get("metadata", {}).get("nbgrader", {}).get("solution")
    }
    return sum(
        1
        for c in nb["cells"]
        if c.get("metadata", {}).get("nbgrader", {}).get("solution")
        and _grade_id(c) in stubs
        and text(c) != stubs[_grade_id(c)]
    )


def defined_functions(nb):
    """The names of the functions (``def`` and ``async def``) defined at the top level of
    the code cells of notebook ``nb``, in order, once each; a cell that does not compile
    is skipped (IPython magics allowed).

    Raises
    ------
    ValueError
        If ``nb`` is not a notebook (no ``cells``).
    """
    import ast

    from IPython.core.inputtransformer2 import TransformerManager

    if not hasattr(nb, "get") or not isinstance(nb.get("cells"), list):
        raise ValueError(f"nb must be a notebook node with cells, got {type(nb).__name__}")
    names = []
    for cell in nb["cells"]:
        if cell.get("cell_type") != "code":
            continue
        try:
            tree = ast.parse(TransformerManager().transform_cell(cell.get("source", "")))
        except (SyntaxError, ValueError):
            continue
        names += [
            n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        ]
    return list(dict.fromkeys(names))


def solution_syntax_failures(nb):
    """``(i, error)`` for each solution cell ``i`` (counted from 1 among the solution cells
    of ``nb``) whose source does not compile, IPython magics allowed; ``error`` is the
    :class:`SyntaxError`."""
    from IPython.core.inputtransformer2 import TransformerManager

    cells = [
        c
        for c in nb.cells
        if c.cell_type == "code" and c.get("metadata", {}).get("nbgrader", {}).get("solution")
    ]
    out = []
    for i, cell in enumerate(cells, 1):
        try:
            compile(
                TransformerManager().transform_cell(cell.source), f"<solution cell {i}>", "exec"
            )
        except SyntaxError as exc:
            out.append((i, exc))
    return out


def solution_syntax_errors(nb):
    """One line per solution cell of ``nb`` that does not compile (magics allowed)."""
    return [
        f"syntax error in solution cell {i}, line {exc.lineno}: {exc.msg} "
        "(the notebook does not run; graded as it is)"
        for i, exc in solution_syntax_failures(nb)
    ]
