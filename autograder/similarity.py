"""Similarity report: answers that resemble the reference or each other (informs only).

The reference package and the solutions ship with the course, so an answer may be a
pasted reference body, and two students may hand in one answer with renamed variables.
:func:`similarity_report` compares, notebook by notebook, every student's solution cells

* with the reference implementation of each function the notebook grades
  (``repeval_ref.<function>``, its source through :mod:`inspect`) and with the
  instructor's solution cell, and
* with every other student's solution cells of the same notebook,

using copydetect's fingerprints (tokenised code in which every name becomes one symbol,
k-grams of ``K_GRAM`` tokens, winnowing with a window of ``WINDOW``: the MOSS scheme of
Schleimer, Wilkerson and Aiken 2003). The release's stub (signature, docstring) is
boilerplate and never counts. A pair's similarity is the larger of the two shares of
fingerprinted tokens that the other document also holds; pairs at or above the
threshold (``DEFAULT_THRESHOLD`` unless given) are listed in ``similarity.csv`` and in
``similarity.html`` with the matching code highlighted side by side. Grades are never
touched: the report is for the instructor to read.

An answer may carry its code encoded (compressed, base64) and build it at run time. The
clean room records the source of what an answer compiles itself
(:attr:`autograder.cleanroom.CellVerdict.compiled`); ``autograde`` keeps it in
``RUNTIME_CODE_NAME`` (:func:`write_runtime_code`), and that code is fingerprinted with
the answer's cells, so a decoded copy is compared like a pasted one.
"""

from __future__ import annotations

import html
import inspect
import io
from pathlib import Path

import nbformat

from . import REPO_ROOT, csv_safe

#: a pair is listed when this share of one side's fingerprinted code is in the other
DEFAULT_THRESHOLD = 0.6
#: tokens per fingerprinted k-gram (copydetect's noise threshold) and winnowing window
K_GRAM = 20
WINDOW = 4
CSV_NAME = "similarity.csv"
HTML_NAME = "similarity.html"
#: the code each answer compiled at run time, written by ``autograde`` (JSON)
RUNTIME_CODE_NAME = "runtime_code.json"


def write_runtime_code(root, code):
    """Keep, in ``root/RUNTIME_CODE_NAME``, the code each answer compiled at run time.

    Parameters
    ----------
    root : path
        The course directory.
    code : dict
        ``(student, assignment, notebook) -> list of source texts``; replaces what the
        file held (the last grading run's record).

    Raises
    ------
    ValueError
        If ``code`` is not such a dict.
    """
    import json
    import os

    if not isinstance(code, dict) or not all(
        isinstance(k, tuple)
        and len(k) == 3
        and all(isinstance(p, str) for p in k)
        and isinstance(v, list)
        and all(isinstance(t, str) for t in v)
        for k, v in code.items()
    ):
        raise ValueError("code must map (student, assignment, notebook) to source texts")
    path = Path(root) / RUNTIME_CODE_NAME
    rows = [
        {"student": k[0], "assignment": k[1], "notebook": k[2], "sources": v}
        for k, v in sorted(code.items())
    ]
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    with open(tmp, "x", encoding="utf-8") as fh:
        json.dump(rows, fh)
    os.replace(tmp, path)
    return path


def read_runtime_code(root):
    """``(student, assignment, notebook) -> source text`` of what :func:`write_runtime_code`
    kept in ``root`` (empty when nothing was kept or the file is unreadable)."""
    import json

    path = Path(root) / RUNTIME_CODE_NAME
    if not path.is_file() or path.is_symlink():
        return {}
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
        return {
            (r["student"], r["assignment"], r["notebook"]): "\n\n".join(
                str(t) for t in r["sources"]
            )
            for r in rows
        }
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def _solution_source(nb):
    """The solution cells of a notebook, joined (solution markers removed)."""
    cells = [
        c.source
        for c in nb.cells
        if c.cell_type == "code" and c.get("metadata", {}).get("nbgrader", {}).get("solution")
    ]
    lines = [
        line
        for line in "\n\n".join(cells).splitlines()
        if "### BEGIN SOLUTION" not in line and "### END SOLUTION" not in line
    ]
    return "\n".join(lines)


def _fingerprint(name, code, boilerplate=()):
    from copydetect import CodeFingerprint

    return CodeFingerprint(
        f"{name}.py",
        K_GRAM,
        WINDOW,
        boilerplate=list(boilerplate),
        fp=io.StringIO(code),
        language="python",
    )


def _references(notebook):
    """(label, source) of the reference functions a notebook grades."""
    import repeval_ref

    from .exercises import all_specs

    spec = next((s for s in all_specs() if s.NAME == notebook), None)
    if spec is None:
        return []
    out = []
    for func in dict.fromkeys(c.split("/", 1)[0] for c in spec.HIDDEN):
        obj = getattr(repeval_ref, func, None)
        if obj is not None:
            try:
                out.append((f"reference repeval_ref.{func}", inspect.getsource(obj)))
            except (OSError, TypeError):
                pass
    return out


def compare_sources(a, b, boilerplate_code=""):
    """Similarity of two code texts: ``(score, share_a, share_b, slices_a, slices_b)``.

    ``share_a`` is the part of ``a``'s fingerprinted tokens found in ``b`` (and
    conversely); ``score = max(share_a, share_b)``; the slices locate the shared code
    in each text (copydetect's 2 x N arrays of character offsets).
    """
    from copydetect import compare_files

    boiler = _fingerprint("boilerplate", boilerplate_code).hashes if boilerplate_code else ()
    fa, fb = _fingerprint("a", a, boiler), _fingerprint("b", b, boiler)
    if not fa.hashes or not fb.hashes:
        return 0.0, 0.0, 0.0, None, None
    _, (share_a, share_b), (slices_a, slices_b) = compare_files(fa, fb)
    share_a, share_b = float(share_a), float(share_b)
    return max(share_a, share_b), share_a, share_b, slices_a, slices_b


def _submissions(root):
    """{(assignment, notebook): {student: source}} of every collected submission: its
    solution cells, followed by the code it compiled at run time when grading recorded
    some (:func:`read_runtime_code`)."""
    out = {}
    base = Path(root) / "submitted"
    if not base.exists():
        return out
    runtime = read_runtime_code(root)
    for path in sorted(base.glob("*/*/*.ipynb")):
        student, assignment = path.parts[-3], path.parts[-2]
        try:
            nb = nbformat.read(str(path), as_version=4)
        except Exception:
            continue
        source = _solution_source(nb)
        extra = runtime.get((student, assignment, path.stem))
        if extra:
            source += "\n\n# compiled at run time\n" + extra
        out.setdefault((assignment, path.stem), {})[student] = source
    return out


def similarity_report(root, threshold=DEFAULT_THRESHOLD, repo=REPO_ROOT):
    """Write ``similarity.csv`` and ``similarity.html`` into the course directory ``root``.

    Parameters
    ----------
    root : path
        The course directory (``submitted/``, ``exercises/`` and ``solutions/`` inside).
    threshold : float
        Pairs whose similarity is at least this are listed (0 < threshold <= 1).
    repo : path
        Unused except for its ``solutions/`` when the course has none.

    Returns
    -------
    (Path, Path, list of dict)
        The CSV, the HTML page and the listed pairs (most similar first).

    Raises
    ------
    ValueError
        If ``threshold`` is not in (0, 1].
    """
    threshold = float(threshold)
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must lie in (0, 1], got {threshold!r}")
    root = Path(root)
    pairs = []
    for (assignment, notebook), answers in sorted(_submissions(root).items()):
        stub_path = root / "exercises" / assignment / f"{notebook}.ipynb"
        stub = (
            _solution_source(nbformat.read(str(stub_path), as_version=4))
            if stub_path.exists()
            else ""
        )
        known = list(_references(notebook))
        sol = root / "solutions" / assignment / f"{notebook}.ipynb"
        if not sol.exists():
            sol = Path(repo) / "solutions" / assignment / f"{notebook}.ipynb"
        if sol.exists():
            known.append(
                ("instructor's solution", _solution_source(nbformat.read(str(sol), as_version=4)))
            )
        students = sorted(answers)
        candidates = [(s, label, code) for s in students for label, code in known]
        candidates += [
            (s, t, answers[t]) for i, s in enumerate(students) for t in students[i + 1 :]
        ]
        for student, other, other_code in candidates:
            mine = answers[student]
            score, share_a, share_b, sl_a, sl_b = compare_sources(mine, other_code, stub)
            if score >= threshold:
                pairs.append(
                    {
                        "assignment": assignment,
                        "notebook": notebook,
                        "student": student,
                        "other": other,
                        "similarity": round(score, 3),
                        "share_student": round(share_a, 3),
                        "share_other": round(share_b, 3),
                        "_code": (mine, other_code),
                        "_slices": (sl_a, sl_b),
                    }
                )
    pairs.sort(
        key=lambda p: (-p["similarity"], p["assignment"], p["notebook"], p["student"], p["other"])
    )
    csv_path = root / CSV_NAME
    with csv_path.open("w", newline="") as fh:
        w = csv_safe.writer(fh)
        w.writerow(
            [
                "assignment",
                "notebook",
                "student",
                "other",
                "similarity",
                "share_student",
                "share_other",
                "threshold",
            ]
        )
        for p in pairs:
            w.writerow(
                [
                    p["assignment"],
                    p["notebook"],
                    p["student"],
                    p["other"],
                    p["similarity"],
                    p["share_student"],
                    p["share_other"],
                    threshold,
                ]
            )
    html_path = root / HTML_NAME
    html_path.write_text(_page(pairs, threshold), encoding="utf-8")
    for p in pairs:
        p.pop("_code")
        p.pop("_slices")
    return csv_path, html_path, pairs


def _highlight(code, slices):
    from copydetect.utils import highlight_overlap

    if slices is None or len(slices[0]) == 0:
        return html.escape(code)
    text, _ = highlight_overlap(code, slices, "<mark>", "</mark>", escape_html=True)
    return text


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table.pairs { border-collapse: collapse; margin-bottom: 2em; }
table.pairs th, table.pairs td { border: 1px solid #bbb; padding: 0.3em 0.7em; text-align: left; }
table.pairs th { background: #eee; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.side { display: flex; gap: 1em; }
.side > div { flex: 1; min-width: 0; }
pre { background: #f7f7f7; border: 1px solid #ddd; padding: 0.6em; overflow-x: auto;
      font-size: 0.85em; }
mark { background: #ffd54f; }
"""


def _page(pairs, threshold):
    rows = "\n".join(
        f"<tr><td><a href='#pair{i}'>{i + 1}</a></td><td>{html.escape(p['assignment'])}/"
        f"{html.escape(p['notebook'])}</td><td>{html.escape(p['student'])}</td>"
        f"<td>{html.escape(p['other'])}</td><td class='num'>{p['similarity']:.2f}</td></tr>"
        for i, p in enumerate(pairs)
    )
    blocks = []
    for i, p in enumerate(pairs):
        (mine, other), (sl_a, sl_b) = p["_code"], p["_slices"]
        blocks.append(
            f"<h2 id='pair{i}'>{i + 1}. {html.escape(p['notebook'])}: "
            f"{html.escape(p['student'])} and {html.escape(p['other'])} "
            f"({p['similarity']:.2f})</h2>\n<div class='side'>"
            f"<div><h3>{html.escape(p['student'])} ({p['share_student']:.0%} shared)</h3>"
            f"<pre>{_highlight(mine, sl_a)}</pre></div>"
            f"<div><h3>{html.escape(p['other'])} ({p['share_other']:.0%} shared)</h3>"
            f"<pre>{_highlight(other, sl_b)}</pre></div></div>"
        )
    body = (
        f"<p>Every answer was compared with the reference implementation of its "
        f"function, the instructor's solution and every other answer to the same "
        f"notebook (copydetect fingerprints: names replaced by one symbol, k-grams of "
        f"{K_GRAM} tokens, winnowing window {WINDOW}; the release's stub does not "
        f"count). Listed: pairs in which at least {threshold:.0%} of one side's code "
        f"is also in the other. Shared code is <mark>highlighted</mark>. This report "
        f"informs; it changes no grade. A short function can be written alike by two "
        f"people independently: read the code before you conclude anything.</p>"
    )
    table = (
        "<table class='pairs'><tr><th>#</th><th>notebook</th><th>student</th>"
        "<th>compared with</th><th>similarity</th></tr>\n" + rows + "</table>"
        if pairs
        else "<p><strong>No pair reaches the threshold.</strong></p>"
    )
    return (
        f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>Similarity "
        f"report</title><style>{_STYLE}</style></head><body><h1>Similarity report "
        f"(threshold {threshold:g})</h1>{body}{table}{''.join(blocks)}</body></html>\n"
    )
