"""Rendering: terminal and Markdown tables, plots, verdict lines, and files written whole.

Every output file is first written under a temporary name in its folder and then
renamed (:func:`write_files`), so an interrupted or failed run leaves no half-written
file behind.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from ._evaluate import KNN_TAU, LABEL_FREE_NAMES, ZERO_ROWS_SHORT


def write_files(outdir, contents):
    """Write ``{name: str or bytes}`` into ``outdir``: all to temporary files first, then renamed.

    Raises OSError (from the file system) before any final name is touched if a
    temporary file cannot be written.
    """
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    staged = []
    try:
        for name, data in contents.items():
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=outdir)
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


def figure_bytes(fig, fmt="png"):
    """The figure encoded as ``fmt`` (PNG by default)."""
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=110)
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
    if knn_curve:
        ks = [e["k"] for e in knn_curve]
        acc = np.array([e["accuracy"] for e in knn_curve])
        lo = np.array([e["wilson95"][0] for e in knn_curve])
        hi = np.array([e["wilson95"][1] for e in knn_curve])
        ax.errorbar(ks, acc, yerr=[acc - lo, hi - acc], marker="o", capsize=3)
        ax.set_xscale("log")
    else:
        ax.text(0.5, 0.5, "skipped: zero feature rows\n(cosine similarity undefined)",
                ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("k (neighbours)")
    ax.set_ylabel("test accuracy (95% Wilson)")
    ax.set_title(f"Weighted k-NN, tau = {KNN_TAU}")
    fig.tight_layout()
    files["knn_vs_k.png"] = figure_bytes(fig)

    fig, ax = plt.subplots(figsize=(5, 3.6))
    done = [e for e in lowshot if e.get("mean") is not None]
    if done:
        ax.errorbar([e["shots"] for e in done], [e["mean"] for e in done],
                    yerr=[e["std"] for e in done], marker="o", capsize=3)
    ax.set_xscale("log")
    ax.set_xlabel("labelled examples per class")
    ax.set_ylabel("accuracy (mean +- std over draws)")
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


def table(rows, headers):
    widths = [max(len(str(r[i])) for r in [headers] + rows) for i in range(len(headers))]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    sep = "  ".join("-" * w for w in widths)
    body = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join([line, sep] + body)


def md_table(rows, headers):
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def report_rows(rep):
    acc_rows = []
    if rep["knn"].get("skipped"):
        acc_rows.append([f"weighted k-NN (tau={KNN_TAU})", f"skipped: {ZERO_ROWS_SHORT}"])
    for e in rep["knn"]["headline"]:
        acc_rows.append([f"weighted k-NN (k={e['k']}, tau={KNN_TAU})", acc_text(e)])
    p = rep["linear_probe"]
    dropped = p["dropped_constant_features"]
    extra = f"; {dropped} constant features dropped" if dropped else ""
    acc_rows.append([f"linear probe (C={fmt(p['best_C'], 3)}, chosen on a split of TRAIN{extra})",
                     acc_text(p)])
    r = rep["ridge_probe"]
    acc_rows.append([f"ridge probe (lambda={fmt(r['best_lambda'], 3)}, exact leave-one-out)", acc_text(r)])
    for e in rep["low_shot"]:
        if e["mean"] is None:
            acc_rows.append([f"low-shot nearest class mean, {e['shots']}-shot", f"skipped: {e['note']}"])
        else:
            acc_rows.append([f"low-shot nearest class mean, {e['shots']}-shot ({e['draws']} draws)",
                             f"{100 * e['mean']:.2f}% +- {100 * e['std']:.2f}"])
    lf_rows = []
    for name, e in rep["label_free"].items():
        val = fmt(e["value"])
        if e.get("std") is not None:
            val += f" +- {fmt(e['std'])}"
        lf_rows.append([LABEL_FREE_NAMES.get(name, (name,))[0], val, e.get("note", "")])
    return acc_rows, lf_rows


def verdict_lines(verdicts):
    """One line per verdict that fired, each with its rule; a closing line if none fired."""
    fired = [v for v in verdicts if v["fired"]]
    if not fired:
        names = list(dict.fromkeys(v["name"].replace("_", " ") for v in verdicts))
        return [f"no warnings (rules checked: {', '.join(names)})"]
    return [f"- {v['message']}. Rule: {v['rule']}." for v in fired]



def _wrap(text, width=88):
    import textwrap

    return textwrap.fill(text, width=width)
