"""Book plumbing: the index of graded exercise notebooks, read from the notebooks.

Not part of the course's formulas. Every notebook under ``exercises/`` opens with a
statement cell of the form ``**Level:** <level> · **Chapter:** [<title>](<link>) · **Points:**
...``, where the link is the published page ``.../book/<x>.html`` or the source
``../../book/<x>.md``. :func:`exercise_index` reads the level and the chapter from that cell
and the points from nbgrader's cell metadata (the ``points`` of every graded cell, split
into the visible tests a student runs and the hidden ones run at grading), so the
students' index in ``book/exercises.md`` cannot drift from the notebooks.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

__all__ = ["exercise_index"]

_LEVEL = re.compile(r"\*\*Level:\*\*\s*([^·*\n]+?)\s*(?:·|$)", re.MULTILINE)
_CHAPTER = re.compile(
    r"\*\*Chapter:\*\*\s*\[([^\]]+)\]\((?:[^)\s]*/)?book/([A-Za-z0-9_-]+)\.(?:md|html)(?:#[^)]*)?\)"
)
_TITLE = re.compile(r"^#\s+(.+?)\s*$", re.MULTILINE)


def _source(cell):
    src = cell.get("source", "")
    return src if isinstance(src, str) else "".join(src)


def exercise_index(root):
    """One row per graded notebook under ``root/exercises``, sorted by path.

    The rows of ``book/exercises.md`` are then put in the book's order of chapters.

    Parameters
    ----------
    root : str or path-like
        The repository root.

    Returns
    -------
    list of dict
        Keys ``path`` (relative to ``root``, POSIX), ``title``, ``level``,
        ``chapter_doc`` (the chapter's document name, e.g. ``"book/knn"``),
        ``chapter_title`` (the link text), ``points``, ``visible_points``,
        ``hidden_points`` (floats; ``points`` is their sum) and ``command``
        (``make check NB=<path>``).

    Raises
    ------
    ValueError
        If ``root`` has no ``exercises`` folder, or a notebook lacks the statement's
        level or chapter link, or has no graded cell.
    """
    root = Path(root)
    folder = root / "exercises"
    if not folder.is_dir():
        raise ValueError(f"root must contain an exercises/ folder, got {str(root)!r}")
    rows = []
    for path in sorted(folder.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        nb = json.loads(path.read_text(encoding="utf-8"))
        cells = nb.get("cells", [])
        text = "\n".join(_source(c) for c in cells if c.get("cell_type") == "markdown")
        rel = path.relative_to(root).as_posix()
        level, chapter, title = _LEVEL.search(text), _CHAPTER.search(text), _TITLE.search(text)
        if not (level and chapter):
            raise ValueError(f"{rel}: the statement names no level or no chapter link")
        visible = hidden = 0.0
        for cell in cells:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if not meta.get("grade"):
                continue
            pts = float(meta.get("points", 0))
            if "hidden" in meta.get("grade_id", ""):
                hidden += pts
            else:
                visible += pts
        if visible + hidden == 0:
            raise ValueError(f"{rel}: no graded cell with points")
        rows.append(
            {
                "path": rel,
                "title": title.group(1) if title else path.stem,
                "level": level.group(1).strip(),
                "chapter_title": chapter.group(1),
                "chapter_doc": f"book/{chapter.group(2)}",
                "points": visible + hidden,
                "visible_points": visible,
                "hidden_points": hidden,
                "command": f"make check NB={rel}",
            }
        )
    return rows
