"""The grades written into the instructor's own Canvas gradebook export.

Canvas imports a gradebook CSV by its columns: ``Student``, ``ID`` (Canvas's own user
id), ``SIS User ID``, ``SIS Login ID``, ``Section`` (some exports add ``Integration ID``),
then one column per assignment named ``<assignment name> (<Canvas assignment id>)``, then
read-only columns that Canvas computes (``Current Score``, ``Final Score``, assignment
group totals, ...) and ignores on import. A row whose ``ID`` is empty (``Points
Possible``, in some exports a posting-policy row) describes the columns. A column whose
name Canvas does not know becomes a new assignment, so the only safe file to upload is
the instructor's own export with the grades filled in. That is what this module writes:

* :func:`read_gradebook` reads the export (a byte-order mark is allowed);
* :func:`match_chapters` finds each chapter's column: a column matches a chapter when its
  name, without the trailing `` (<id>)``, equals the chapter's id (``rank``) or the title
  of one of its notebooks' book pages, in full or up to its first colon (``The rank
  bound``), compared without case, with ``_``
  and ``-`` read as spaces, runs of spaces as one and a leading "The" dropped. A chapter
  no column matches, or that matches two, and a column that matches two chapters, are
  errors that name them;
* :func:`match_students` finds each roster id's row: the row whose ``SIS User ID``
  equals it, else whose ``SIS Login ID`` does, else whose login's part before ``@``
  does (first exactly, then without case);
* :func:`fill_gradebook` writes each matched student's chapter score into the chapter's
  column and leaves every other cell as the export had it (a student the roster does not
  know keeps an empty cell; the read-only columns keep Canvas's old values, which its
  import ignores);
* :func:`canvas_from_template` does all of it from the grades CSV of ``autograder
  export`` and names, in one line, the graded students the gradebook has no row for.

Every cell is written through :mod:`autograder.csv_safe`.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

from .. import csv_safe

__all__ = [
    "CanvasGradebook",
    "canvas_from_template",
    "chapter_names",
    "fill_gradebook",
    "match_chapters",
    "match_students",
    "read_gradebook",
    "write_gradebook",
]

#: the identity columns a Canvas export always has
REQUIRED = ("Student", "ID", "SIS User ID", "SIS Login ID")
_ASSIGNMENT = re.compile(r"^(?P<name>.*\S)\s+\((?P<id>\d+)\)\s*$")


@dataclass
class CanvasGradebook:
    """A Canvas gradebook export.

    Attributes
    ----------
    header : list of str
        The column names, in order.
    rows : list of list of str
        Every row after the header, each as long as ``header``.
    """

    header: list
    rows: list

    def column(self, name):
        """Index of column ``name``; ValueError if there is none."""
        try:
            return self.header.index(name)
        except ValueError:
            raise ValueError(f"the Canvas gradebook has no column {name!r}") from None

    def is_student(self, row):
        """Whether ``row`` is a student's (its ``ID`` cell is not empty)."""
        return bool(row[self.column("ID")].strip())

    def assignments(self):
        """Dict column index -> (assignment name, Canvas assignment id) of every column
        named ``<name> (<digits>)``."""
        out = {}
        for i, name in enumerate(self.header):
            m = _ASSIGNMENT.match(name)
            if m:
                out[i] = (m.group("name"), m.group("id"))
        return out


def read_gradebook(path):
    """Read a Canvas gradebook export.

    Parameters
    ----------
    path : str or Path
        The CSV Canvas's gradebook exports (UTF-8, with or without a byte-order mark).

    Returns
    -------
    CanvasGradebook

    Raises
    ------
    ValueError
        If ``path`` is not a readable file, is empty, lacks one of :data:`REQUIRED`, has
        a column name twice or no assignment column.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"canvas_template must be a Canvas gradebook CSV file, got {path}")
    with path.open(newline="", encoding="utf-8-sig") as fh:
        table = [row for row in csv.reader(fh)]
    if not table:
        raise ValueError(f"canvas_template {path} is empty")
    header = [h.strip() for h in table[0]]
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise ValueError(
            f"canvas_template {path} is not a Canvas gradebook export: no column "
            + ", ".join(repr(c) for c in missing)
        )
    doubled = sorted({h for h in header if header.count(h) > 1})
    if doubled:
        raise ValueError(f"canvas_template {path} names columns twice: {doubled}")
    rows = [(row + [""] * len(header))[: len(header)] for row in table[1:] if any(row)]
    book = CanvasGradebook(header, rows)
    if not book.assignments():
        raise ValueError(
            f"canvas_template {path} has no assignment column (named like 'Rank bound "
            "(1234)'): create the chapters' assignments in Canvas, then export the gradebook"
        )
    return book


def _key(text):
    """A name as the matching rule compares it."""
    text = re.sub(r"[_\-\s]+", " ", str(text)).strip().casefold()
    return text[4:] if text.startswith("the ") else text


def chapter_names(assignments):
    """The names a Canvas assignment may carry for each chapter of ``assignments``: the
    chapter's id, and the title of every book page its notebooks belong to, in full and
    up to its first colon (``The rank bound: what ...`` -> ``The rank bound``).

    Parameters
    ----------
    assignments : list of str
        The term's chapter ids.

    Returns
    -------
    dict of str to list of str

    Raises
    ------
    ValueError
        If ``assignments`` is empty or holds something that is not a non-empty string.
    """
    from ..build import chapter_title
    from ..exercises import all_specs

    assignments = list(assignments) if not isinstance(assignments, str) else None
    if not assignments or any(not isinstance(a, str) or not a for a in assignments):
        raise ValueError(f"assignments must be a non-empty list of chapter ids, got {assignments}")
    names = {a: [a] for a in assignments}
    for spec in all_specs():
        if spec.ASSIGNMENT not in names:
            continue
        try:
            title = chapter_title(spec.CHAPTER)
        except (OSError, ValueError):  # a page without a title: its id still matches
            continue
        for name in (title, title.split(":", 1)[0].strip()):
            if name and name not in names[spec.ASSIGNMENT]:
                names[spec.ASSIGNMENT].append(name)
    return names


def match_chapters(book, names):
    """Each chapter's assignment column (the rule is in the module's docstring).

    Parameters
    ----------
    book : CanvasGradebook
    names : dict of str to list of str
        Chapter id -> the names it may carry (:func:`chapter_names`).

    Returns
    -------
    dict of str to int
        Chapter id -> column index.

    Raises
    ------
    ValueError
        If ``book`` or ``names`` is of the wrong type, a chapter matches no column or
        several, or a column matches several chapters; the message names them and lists
        the gradebook's assignment columns.
    """
    if not isinstance(book, CanvasGradebook):
        raise ValueError(f"book must be a CanvasGradebook, got {type(book).__name__}")
    if not isinstance(names, dict) or not names:
        raise ValueError("names must be a non-empty dict chapter id -> names")
    columns = book.assignments()
    found, problems = {}, []
    for chapter, aliases in names.items():
        keys = {_key(n) for n in aliases}
        hits = [i for i, (name, _) in columns.items() if _key(name) in keys]
        if len(hits) == 1:
            found[chapter] = hits[0]
        elif not hits:
            problems.append(f"{chapter} (no column named {' or '.join(map(repr, aliases))})")
        else:
            problems.append(f"{chapter} (several columns: {[book.header[i] for i in hits]})")
    for i in set(found.values()):
        both = sorted(c for c, j in found.items() if j == i)
        if len(both) > 1:
            problems.append(f"{' and '.join(both)} (one column: {book.header[i]!r})")
    if problems:
        raise ValueError(
            "chapters without exactly one Canvas assignment: "
            + "; ".join(problems)
            + ". A column matches a chapter when its name without ' (id)' is the "
            "chapter's id or page title (in full or up to its colon; case, '_', '-' and a "
            "leading 'The' ignored); "
            "rename the assignment in Canvas, or the column in the file keeping its "
            "' (id)'. Assignment columns: " + ", ".join(repr(book.header[i]) for i in columns)
        )
    return found


def match_students(book, student_ids):
    """The gradebook row of each roster id (the rule is in the module's docstring).

    Parameters
    ----------
    book : CanvasGradebook
    student_ids : iterable of str
        The roster's ids.

    Returns
    -------
    (dict of str to int, list of str)
        Student id -> row index in ``book.rows``; the ids no row matches, sorted.

    Raises
    ------
    ValueError
        If ``book`` is not a :class:`CanvasGradebook`, an id is not a non-empty string,
        or one row would take two ids or one id two rows.
    """
    if not isinstance(book, CanvasGradebook):
        raise ValueError(f"book must be a CanvasGradebook, got {type(book).__name__}")
    ids = list(student_ids)
    if any(not isinstance(s, str) or not s for s in ids):
        raise ValueError("student_ids must be non-empty strings")
    sis, login = book.column("SIS User ID"), book.column("SIS Login ID")
    students = [i for i, row in enumerate(book.rows) if book.is_student(row)]

    def keys(row):  # SIS User ID, SIS Login ID, the login's part before "@"
        user, log_in = row[sis].strip(), row[login].strip()
        return (user, log_in, log_in.split("@", 1)[0] if "@" in log_in else "")

    found, missing = {}, []
    for sid in ids:
        hit = None
        for fold in (str, str.casefold):
            for depth in range(3):
                rows = [
                    i
                    for i in students
                    if keys(book.rows[i])[depth] and fold(keys(book.rows[i])[depth]) == fold(sid)
                ]
                if len(rows) > 1:
                    raise ValueError(
                        f"student {sid!r} matches several rows of the Canvas gradebook: "
                        + ", ".join(repr(book.rows[i][0]) for i in rows)
                    )
                if rows:
                    hit = rows[0]
                    break
            if hit is not None:
                break
        if hit is None:
            missing.append(sid)
        else:
            found[sid] = hit
    taken = {}
    for sid, i in found.items():
        taken.setdefault(i, []).append(sid)
    clash = {i: s for i, s in taken.items() if len(s) > 1}
    if clash:
        raise ValueError(
            "one row of the Canvas gradebook matches several students: "
            + "; ".join(f"{book.rows[i][0]!r}: {', '.join(sorted(s))}" for i, s in clash.items())
        )
    return found, sorted(missing)


def _number(text):
    return f"{float(text):g}"


def fill_gradebook(book, scores, columns, rows_of):
    """A copy of ``book``'s rows with the grades in.

    Parameters
    ----------
    book : CanvasGradebook
    scores : dict of (str, str) to float
        (student id, chapter id) -> points.
    columns : dict of str to int
        Chapter id -> column index (:func:`match_chapters`).
    rows_of : dict of str to int
        Student id -> row index (:func:`match_students`).

    Returns
    -------
    list of list of str
        Every row of ``book``: a matched student's chapter cells hold the score (as
        ``%g``; a chapter without a score is left as it was), every other cell is
        unchanged.

    Raises
    ------
    ValueError
        If an argument is of the wrong type or an index is outside the gradebook.
    """
    if not isinstance(book, CanvasGradebook):
        raise ValueError(f"book must be a CanvasGradebook, got {type(book).__name__}")
    for name, value in (("scores", scores), ("columns", columns), ("rows_of", rows_of)):
        if not isinstance(value, dict):
            raise ValueError(f"{name} must be a dict, got {type(value).__name__}")
    if any(not 0 <= i < len(book.header) for i in columns.values()):
        raise ValueError("columns must be column indices of the gradebook")
    if any(not 0 <= i < len(book.rows) for i in rows_of.values()):
        raise ValueError("rows_of must be row indices of the gradebook")
    out = [list(row) for row in book.rows]
    for sid, i in rows_of.items():
        for chapter, j in columns.items():
            if (sid, chapter) in scores:
                out[i][j] = _number(scores[sid, chapter])
    return out


def write_gradebook(path, header, rows):
    """Write ``header`` and ``rows`` to ``path`` as CSV (every cell through
    :mod:`autograder.csv_safe`). Returns ``path``.

    Raises
    ------
    ValueError
        If a row's length differs from the header's.
    """
    if any(len(r) != len(header) for r in rows):
        raise ValueError("rows must be as long as the header")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv_safe.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


def canvas_from_template(grades_csv, template, path, log=print):
    """Write the grades of ``autograder export``'s CSV into the Canvas gradebook export
    ``template``, at ``path``.

    Parameters
    ----------
    grades_csv : str or Path
        The grades CSV (columns ``assignment``, ``student_id``, ``score``,
        ``max_score``); its chapters are the term's.
    template : str or Path
        The instructor's Canvas gradebook export (:func:`read_gradebook`).
    path : str or Path
        Where the file to import into Canvas goes.
    log : callable
        Given one line naming the graded students the gradebook has no row for, and one
        line per chapter whose ``Points Possible`` in Canvas differs from its notebooks'.

    Returns
    -------
    (Path, list of str)
        ``path`` and the ids of the graded students missing from the gradebook.

    Raises
    ------
    ValueError
        If the grades CSV lacks a column or has no row, or as :func:`read_gradebook`,
        :func:`match_chapters` and :func:`match_students` do.
    """
    with Path(grades_csv).open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    need = {"assignment", "student_id", "score", "max_score"}
    if not rows or not need <= set(rows[0]):
        raise ValueError(
            f"grades_csv {grades_csv} must be autograder's grades CSV with the columns "
            f"{sorted(need)} and at least one row"
        )
    book = read_gradebook(template)
    chapters = list(dict.fromkeys(r["assignment"] for r in rows))
    columns = match_chapters(book, chapter_names(chapters))
    scores = {(r["student_id"], r["assignment"]): float(r["score"] or 0) for r in rows}
    maxima = {r["assignment"]: float(r["max_score"] or 0) for r in rows}
    rows_of, missing = match_students(book, dict.fromkeys(r["student_id"] for r in rows))
    out = fill_gradebook(book, scores, columns, rows_of)
    write_gradebook(path, book.header, out)
    possible = [
        row for row in book.rows if not book.is_student(row) and row[0].strip() == "Points Possible"
    ]
    for chapter, j in columns.items():
        stated = possible[0][j].strip() if possible else ""
        try:
            differs = stated and float(stated) != maxima[chapter]
        except ValueError:
            differs = False
        if differs:
            log(
                f"Canvas gives {book.header[j]!r} {stated} points, the notebooks of "
                f"{chapter} {maxima[chapter]:g}: set the assignment's points in Canvas"
            )
    if missing:
        log(
            f"{len(missing)} graded student(s) have no row in the Canvas gradebook (no "
            f"SIS User ID or SIS Login ID equal to their id): {', '.join(missing)}"
        )
    return Path(path), missing
