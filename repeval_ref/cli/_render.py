"""Rendering: terminal and Markdown tables, plots, verdict lines, and files written whole.

Every output file is first written under a temporary name in its folder and then
renamed (:func:`write_files`), so an interrupted or failed run leaves no half-written
file behind; the files are created with the user's umask, as any program's are.
Every Markdown table goes through :func:`md_table`, which escapes its cells.
"""

from __future__ import annotations

import html
import os
import secrets
from pathlib import Path

import numpy as np

from ._evaluate import KNN_TAU
from ._label_free_section import LABEL_FREE_NAMES


def _new_temp_file(outdir, name):
    """A new, empty temporary file beside ``outdir / name``: ``(fd, path)``.

    Created by ``os.open`` with mode 0o666, which the kernel reduces by the process's
    umask (``tempfile.mkstemp`` would give 0o600 whatever the umask), and with
    ``O_EXCL``, so an existing file is never reused.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp = outdir / f".{name}.{secrets.token_hex(8)}.tmp"
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name for {outdir / name}")


def write_files(outdir, contents):
    """Write ``{name: str or bytes}`` into ``outdir``: all to temporary files first, then renamed.

    The files get the permissions the user's umask allows (0644 under umask 022).
    Raises OSError (from the file system) before any final name is touched if a
    temporary file cannot be written.
    """
    outdir = Path(outdir)
    if not isinstance(contents, dict) or not all(
        isinstance(k, str) and k and "/" not in k for k in contents
    ):
        raise ValueError("contents must map plain file names to str or bytes")
    outdir.mkdir(parents=True, exist_ok=True)
    staged = []
    try:
        for name, data in contents.items():
            fd, tmp = _new_temp_file(outdir, name)
            staged.append((tmp, outdir / name))
            with os.fdopen(fd, "wb") as fh:
                fh.write(data.encode() if isinstance(data, str) else data)
    except BaseException:
        for tmp, _ in staged:
            with _quiet():
                os.unlink(tmp)
        raise
    for tmp, final in staged:
        os.replace(tmp, final)
    return [final for _, final in staged]


class _quiet:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return exc[0] is not None and issubclass(exc[0], OSError)


def figure_bytes(fig, fmt="png", tight=False):
    """The figure encoded as ``fmt`` (PNG by default).

    ``tight=True`` grows or trims the canvas to the drawn artists plus a small margin
    (``bbox_inches="tight"``), so that no label is cut at the figure's edge.
    """
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=110, **({"bbox_inches": "tight"} if tight else {}))
    return buf.getvalue()


class _Figures:
    """``subplots`` on :class:`matplotlib.figure.Figure`, without pyplot.

    The command never shows a window, and touching pyplot's global backend would switch
    off inline figures when the commands are called from a notebook.
    """

    @staticmethod
    def subplots(nrows=1, ncols=1, *, figsize=None, **kw):
        from matplotlib.figure import Figure

        fig = Figure(figsize=figsize)
        return fig, fig.subplots(nrows, ncols, **kw)

    @staticmethod
    def close(fig):
        pass


def _pyplot():
    return _Figures


def place_labels_inside(fig, ax, pad_px=2.0):
    """Keep every annotation of ``ax`` inside the axes.

    Each label is first put on the side of its point that faces the centre of the
    axes (``ha``/``va`` chosen by position); after a draw, a label that still crosses
    an edge is shifted back inside, and one wider than the axes is shortened with an
    ellipsis. Call it after the layout is final (``tight_layout``).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Annotation

    if ax not in fig.axes:
        raise ValueError("ax must be an axes of fig")
    labels = [t for t in ax.texts if isinstance(t, Annotation)]
    to_axes = ax.transData + ax.transAxes.inverted()
    for t in labels:
        fx, fy = to_axes.transform(t.xy)
        t.set_horizontalalignment("right" if fx > 0.5 else "left")
        t.set_verticalalignment("top" if fy > 0.5 else "bottom")
        t.set_position((-3 if fx > 0.5 else 3, -3 if fy > 0.5 else 3))
    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = ax.get_window_extent(renderer)
    points_per_px = 72.0 / fig.dpi
    for t in labels:
        ext = t.get_window_extent(renderer)
        while ext.width > box.width - 2 * pad_px and len(t.get_text()) > 1:
            t.set_text(t.get_text()[:-2] + "…")
            ext = t.get_window_extent(renderer)
        dx = max(0.0, box.x0 + pad_px - ext.x0) - max(0.0, ext.x1 - (box.x1 - pad_px))
        dy = max(0.0, box.y0 + pad_px - ext.y0) - max(0.0, ext.y1 - (box.y1 - pad_px))
        if dx or dy:
            ox, oy = t.get_position()
            t.set_position((ox + dx * points_per_px, oy + dy * points_per_px))


def report_plots(spectrum, knn_curve, lowshot):
    """The report's three PNG plots as ``{file name: bytes}``."""
    plt = _pyplot()
    files = {}
    s = np.sqrt(spectrum)
    d = s.size
    s = s[s > np.sqrt(d * np.finfo(float).eps) * s[0]]  # drop rounding residues of zero values
    fig, ax = plt.subplots(figsize=(5, 3.6))
    ax.loglog(np.arange(1, s.size + 1), s, marker=".", lw=1)
    hi = int(np.floor(0.9 * d))
    if hi > 10:
        ax.axvspan(10, hi, color="0.9", zorder=0, label="alpha-ReQ fit range")
        ax.legend(loc="lower left", fontsize=8)
    ax.set_xlabel("index i")
    ax.set_ylabel(r"singular value $\sigma_i$ (centred)")
    ax.set_title("Singular-value spectrum of TRAIN")
    fig.tight_layout()
    files["spectrum.png"] = figure_bytes(fig)

    fig, ax = plt.subplots(figsize=(5, 3.6))
    ks = [e["k"] for e in knn_curve]
    acc = np.array([e["accuracy"] for e in knn_curve])
    lo = np.array([e["wilson95"][0] for e in knn_curve])
    hi = np.array([e["wilson95"][1] for e in knn_curve])
    ax.errorbar(ks, acc, yerr=[acc - lo, hi - acc], marker="o", capsize=3)
    ax.set_xscale("log")
    ax.set_xlabel("k (neighbours)")
    ax.set_ylabel("test accuracy (95% Wilson)")
    ax.set_title(f"Weighted k-NN, tau = {KNN_TAU}")
    fig.tight_layout()
    files["knn_vs_k.png"] = figure_bytes(fig)

    fig, ax = plt.subplots(figsize=(5, 3.6))
    done = [e for e in lowshot if e.get("mean") is not None]
    if done:
        ax.errorbar(
            [e["shots"] for e in done],
            [e["mean"] for e in done],
            yerr=[e["std"] for e in done],
            marker="o",
            capsize=3,
        )
    ax.set_xscale("log")
    ax.set_xlabel("labelled examples per class")
    ax.set_ylabel("accuracy (mean ± std over draws)")
    ax.set_title("Low-shot nearest class mean")
    fig.tight_layout()
    files["lowshot.png"] = figure_bytes(fig)
    return files


# ----------------------------------------------------------------------------- tables


def fmt(v, digits=4):
    if v is None:
        return "n/a"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    return f"{v:.{digits}g}" if abs(v) >= 1e4 or (v != 0 and abs(v) < 1e-3) else f"{v:.{digits}f}"


def acc_text(e):
    lo, hi = e["wilson95"]
    return f"{100 * e['accuracy']:.2f}%  [{100 * lo:.2f}, {100 * hi:.2f}]"


#: widest terminal table, in characters; wider tables wrap the text of their widest columns
TABLE_WIDTH = 100
#: the fewest characters a column of a terminal table narrows to, and a shortened word keeps
MIN_COLUMN = 8


def abbreviate(word, width):
    """``word`` shortened to ``width`` characters: its head and its tail around a ``~``.

    The terminal tables shorten a name this way only when the table would not fit
    otherwise; the written files always hold it whole. A word of at most ``width``
    characters is returned as it is.

    Parameters
    ----------
    word : str
    width : int, >= 3

    Returns
    -------
    str
        ``word[:head] + "~" + word[-tail:]`` with ``tail = (width - 1) // 3`` and ``head =
        width - 1 - tail``, or ``word``.
    """
    if not isinstance(word, str):
        raise ValueError(f"word must be a string, got {type(word).__name__}")
    if not isinstance(width, int) or isinstance(width, bool) or width < 3:
        raise ValueError(f"width must be an integer >= 3, got {width!r}")
    if len(word) <= width:
        return word
    tail = (width - 1) // 3
    return word[: width - 1 - tail] + "~" + word[len(word) - tail :]


def _column_widths(natural, floor, width, gap):
    """Column widths summing (with the gaps) to at most ``width``: the widest shrink first."""
    widths = list(natural)
    while sum(widths) + gap * (len(widths) - 1) > width:
        i = max(range(len(widths)), key=lambda j: (widths[j] - floor[j], widths[j]))
        if widths[i] <= floor[i]:
            break
        widths[i] -= 1
    return widths


def _word_floors(cells, cap):
    """Per column, the width below which it cannot narrow: its longest word, at most ``cap``."""
    floors = []
    for i in range(len(cells[0])):
        natural = max(len(r[i]) for r in cells)
        longest = max(len(w) for r in cells for w in r[i].split() or [""])
        floors.append(min(natural, max(MIN_COLUMN, min(longest, cap))))
    return floors


def table(rows, headers, width=TABLE_WIDTH):
    """A plain-text table, left-aligned, at most ``width`` characters wide.

    A table wider than ``width`` first wraps its long headers, then narrows its widest
    columns and wraps their cells onto several lines, between words: a word (an encoder
    or a task name) is never cut. When the longest words alone do not fit, the longest
    are shortened by :func:`abbreviate` (head ``~`` tail, no shorter than
    :data:`MIN_COLUMN`); when even that does not fit, the last columns are left out and
    a line after the table names them. The written files keep every cell whole.

    Parameters
    ----------
    rows : list of list
        Cells, each printed with ``str``; as many per row as ``headers``.
    headers : list of str
    width : int
        The widest line wanted, at least :data:`MIN_COLUMN`.

    Returns
    -------
    str
    """
    import textwrap

    if any(len(r) != len(headers) for r in rows):
        raise ValueError("rows must have as many cells as headers")
    if not isinstance(width, int) or width < MIN_COLUMN:
        raise ValueError(f"width must be an integer >= {MIN_COLUMN}, got {width!r}")
    gap = 2
    cells = [[str(c) for c in r] for r in [headers] + rows]
    left_out = []
    cap = max(len(w) for r in cells for c in r for w in c.split() or [""])
    while sum(_word_floors(cells, cap)) + gap * (len(cells[0]) - 1) > width:
        if cap > MIN_COLUMN:
            cap -= 1
        elif len(cells[0]) > 1:
            left_out.insert(0, cells[0][-1])
            cells = [r[:-1] for r in cells]
        else:
            break
    cells = [[" ".join(abbreviate(w, max(cap, 3)) for w in c.split(" ")) for c in r] for r in cells]
    natural = [max(len(r[i]) for r in cells) for i in range(len(cells[0]))]
    floor = _word_floors(cells, cap)
    hdr_floor = [
        min(natural[i], max(MIN_COLUMN, max(map(len, h.split() or [""]))))
        for i, h in enumerate(cells[0])
    ]
    body = [max([len(r[i]) for r in cells[1:]] + [f]) for i, f in enumerate(hdr_floor)]
    widths = _column_widths(natural, [max(a, b) for a, b in zip(body, floor)], width, gap)
    widths = _column_widths(widths, floor, width, gap)  # headers wrap first, then the cells

    def lines(row):
        parts = [
            textwrap.wrap(c, w, break_long_words=False, break_on_hyphens=False) or [""]
            if len(c) > w
            else [c]
            for c, w in zip(row, widths)
        ]
        height = max(map(len, parts))
        return [
            "  ".join((p[k] if k < len(p) else "").ljust(w) for p, w in zip(parts, widths)).rstrip()
            for k in range(height)
        ]

    out = lines(cells[0]) + ["  ".join("-" * w for w in widths)]
    for r in cells[1:]:
        out += lines(r)
    if left_out:
        out.append(_wrap(f"(left out here, in the written files: {', '.join(left_out)})", width))
    return "\n".join(out)


def md_cell(value):
    """``value`` as the text of one Markdown table cell.

    Line breaks become spaces, and backslashes and pipes are escaped, so the cell
    can neither end its row nor split into two cells.
    """
    text = " ".join(str(value).splitlines())
    return text.replace("\\", "\\\\").replace("|", "\\|")


def md_table(rows, headers):
    """A Markdown (GFM) table, every header and cell escaped by :func:`md_cell`."""
    if any(len(r) != len(headers) for r in rows):
        raise ValueError("rows must have as many cells as headers")

    def line(cells):
        return "| " + " | ".join(md_cell(c) for c in cells) + " |"

    return "\n".join(
        [line(headers), "|" + "|".join("---" for _ in headers) + "|"] + [line(r) for r in rows]
    )


#: the heading of an accuracy table with low-shot rows: it says what each kind of spread is
ACCURACY_HEADER = "test accuracy [95% Wilson interval]; low-shot: mean ± std over draws"

#: what the spread of a low-shot figure is, wherever it stands beside Wilson intervals
LOWSHOT_SPREAD = "mean ± std over draws of the support set, not an interval"


def lowshot_text(e, plus="±", percent="%"):
    """A low-shot entry as ``95.60% ± 1.66 (std over 10 draws)``, or why it was skipped."""
    if e["mean"] is None:
        return f"skipped: {e['note']}"
    return (
        f"{100 * e['mean']:.2f}{percent} {plus} {100 * e['std']:.2f} (std over {e['draws']} draws)"
    )


def headline_rows(knn, probe, low_shot, plus="±"):
    """Rows ``[protocol, result]`` of the headline k-NN entries, the probe and the low-shot entries.

    The report and the loop's summary print these same rows, so equal numbers read equal.
    """
    rows = [[f"weighted k-NN (k={e['k']}, tau={KNN_TAU})", acc_text(e)] for e in knn]
    dropped = probe["dropped_constant_features"]
    extra = f"; {dropped} constant features dropped" if dropped else ""
    rows.append(
        [
            f"linear probe (C={fmt(probe['best_C'], 3)}, chosen on a split of TRAIN{extra})",
            acc_text(probe),
        ]
    )
    rows += [
        [f"low-shot nearest class mean, {e['shots']}-shot", lowshot_text(e, plus)] for e in low_shot
    ]
    return rows


def report_rows(rep, plus="±"):
    """The report's accuracy rows and label-free rows (``[metric, value, convention]``)."""
    knn = rep["knn"]["headline"]
    acc_rows = headline_rows(knn, rep["linear_probe"], rep["low_shot"], plus)
    r = rep["ridge_probe"]
    acc_rows.insert(
        len(knn) + 1,
        [f"ridge probe (lambda={fmt(r['best_lambda'], 3)}, exact leave-one-out)", acc_text(r)],
    )
    lf_rows = []
    for name, e in rep["label_free"].items():
        val = fmt(e["value"])
        if e.get("std") is not None:
            val += f" {plus} {fmt(e['std'])}"
        lf_rows.append([LABEL_FREE_NAMES.get(name, (name,))[0], val, e.get("note", "")])
    return acc_rows, lf_rows


def verdict_lines(verdicts):
    """One line per verdict that fired, each with its rule; a closing line if none fired."""
    fired = [v for v in verdicts if v["fired"]]
    if not fired:
        names = list(dict.fromkeys(v["name"].replace("_", " ") for v in verdicts))
        return [f"no warnings (rules checked: {', '.join(names)})"]
    return [f"- {v['message']}. Rule: {v['rule']}." for v in fired]


def plain_tree(v):
    """``v`` with NumPy values, paths and non-finite floats made JSON-safe, recursively.

    Dicts, lists and tuples are walked; NumPy arrays become lists, NumPy scalars Python
    numbers, paths text, and NaN or infinite floats None.
    """
    if isinstance(v, dict):
        return {k: plain_tree(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain_tree(x) for x in v]
    if isinstance(v, np.ndarray):
        return plain_tree(v.tolist())
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not np.isfinite(v):
        return None
    if isinstance(v, Path):
        return str(v)
    return v


def json_default(obj):
    """``default`` of :func:`json.dumps` for the commands' results: NumPy values and paths."""
    if isinstance(obj, (np.ndarray, np.generic, Path)):
        return plain_tree(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def html_table(rows, headers, caption=None, row_headers=False):
    """An HTML table, every cell escaped, in a horizontally scrolling ``div.wide``.

    Parameters
    ----------
    rows : list of list
    headers : list of str
        Column headers (``<th scope="col">``).
    caption : str, optional
        The table's ``<caption>``.
    row_headers : bool
        Whether each row's first cell is its header (``<th scope="row">``).

    Returns
    -------
    str
    """
    if any(len(r) != len(headers) for r in rows):
        raise ValueError("rows must have as many cells as headers")
    head = "".join(f'<th scope="col">{html.escape(str(h))}</th>' for h in headers)
    body = []
    for r in rows:
        first = (
            f'<th scope="row">{html.escape(str(r[0]))}</th>'
            if row_headers
            else f"<td>{html.escape(str(r[0]))}</td>"
        )
        body.append(
            "<tr>" + first + "".join(f"<td>{html.escape(str(c))}</td>" for c in r[1:]) + "</tr>"
        )
    cap = "" if caption is None else f"<caption>{html.escape(caption)}</caption>"
    return (
        f'<div class="wide"><table>{cap}<thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _wrap(text, width=88):
    """``text`` filled to ``width`` columns, broken between words only (a name is never cut)."""
    import textwrap

    return textwrap.fill(text, width=width, break_long_words=False, break_on_hyphens=False)
