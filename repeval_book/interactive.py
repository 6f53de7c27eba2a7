"""Book plumbing: interactive figures made of precomputed frames, with no kernel and no network.

Not part of the course's formulas. A chapter computes one Plotly figure for every combination
of a few control values (a geometry, a protocol, a k; a gain and a seed; ...) with the
public functions of :mod:`repeval_ref`, and :func:`frame_figure` turns that grid of frames
into one piece of HTML: a row of controls (buttons for a handful of names, a slider for
numbers) above a Plotly plot, and a short note under it. Moving a control swaps in the
precomputed frame with ``Plotly.react``; nothing is computed in the browser and nothing is
fetched. Identical frames are stored once, so a control that does not matter for some
settings (k for a linear probe) costs nothing.

Where plotly.js comes from:

* in the built book (``plotly_js="book"``, chosen automatically while Jupyter Book executes
  the chapters, see :mod:`repeval_book.sphinx_ext`) the HTML carries no script: the book's Sphinx
  extension copies the ``plotly.min.js`` that the ``plotly`` Python package ships into
  ``_build/html/_static/plotly/`` and adds it to exactly the pages that show such a figure;
* anywhere else (a notebook on Binder or Colab, ``plotly_js="inline"``) the same
  ``plotly.min.js`` is written into the output itself, so the figure works offline there too.

Never a CDN. The browser test (``tests/test_book_browser.py``) moves every control of every
such figure and checks that the plot changes and that the page requests nothing outside the
book.
"""

from __future__ import annotations

import html
import itertools
import json
import numbers
import os
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["InteractiveFigure", "frame_figure", "decision_plane", "plotly_js_path", "BOOK_ENV"]

#: Environment variable the book's Sphinx extension sets while the chapters execute; when it is
#: "1", :func:`frame_figure` leaves plotly.js to the page (``plotly_js="auto"``).
BOOK_ENV = "REPEVAL_BOOK_BUILD"

_KINDS = ("buttons", "slider", "select")


def plotly_js_path() -> Path:
    """Path of the ``plotly.min.js`` bundled with the installed ``plotly`` package.

    Returns
    -------
    pathlib.Path
        The file the book copies into ``_static/plotly/`` and the inline mode embeds.

    Raises
    ------
    ValueError
        If the ``plotly`` package is installed without its bundled JavaScript.
    """
    import plotly

    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    if not path.is_file():
        raise ValueError(f"plotly {plotly.__version__} has no bundled plotly.min.js at {path}")
    return path


class InteractiveFigure:
    """HTML of an interactive figure; Jupyter and myst-nb display it through ``_repr_html_``.

    Attributes
    ----------
    html : str
        The complete HTML fragment (controls, plot container, data and script).
    n_frames : int
        Number of distinct frames stored (after identical frames were merged).
    keys : list of tuple
        Every combination of control values, in the order of the controls.
    """

    def __init__(self, html_text: str, n_frames: int, keys: list[tuple]):
        self.html = html_text
        self.n_frames = n_frames
        self.keys = keys

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:
        return f"InteractiveFigure({len(self.keys)} settings, {self.n_frames} distinct frames)"


def _frame_json(frame, name: str) -> dict:
    """One frame as plain JSON types: ``{"data": [...], "layout": {...}, "note": str}``."""
    import plotly.graph_objects as go
    from plotly.utils import PlotlyJSONEncoder

    if isinstance(frame, go.Figure):
        frame = {"figure": frame}
    if not isinstance(frame, Mapping):
        raise ValueError(
            f"frames[{name}] must be a plotly Figure or a mapping, got {type(frame).__name__}"
        )
    unknown = set(frame) - {"figure", "data", "layout", "note"}
    if unknown:
        raise ValueError(f"frames[{name}] has unknown keys {sorted(unknown)}")
    if "figure" in frame:
        if "data" in frame or "layout" in frame:
            raise ValueError(f"frames[{name}]: give either 'figure' or 'data'/'layout', not both")
        fig = frame["figure"]
        if not isinstance(fig, go.Figure):
            raise ValueError(f"frames[{name}]['figure'] must be a plotly Figure")
        spec = fig.to_plotly_json()
        data, layout = spec.get("data", []), spec.get("layout", {})
    else:
        data, layout = frame.get("data", []), frame.get("layout", {})
        if not isinstance(data, Sequence) or isinstance(data, (str, bytes)):
            raise ValueError(f"frames[{name}]['data'] must be a list of traces")
        if not isinstance(layout, Mapping):
            raise ValueError(f"frames[{name}]['layout'] must be a mapping")
    note = frame.get("note", "")
    if not isinstance(note, str):
        raise ValueError(f"frames[{name}]['note'] must be a string (HTML)")
    # through plotly's encoder: NumPy arrays and scalars become lists and numbers
    return json.loads(
        json.dumps(
            {"data": list(data), "layout": dict(layout), "note": note}, cls=PlotlyJSONEncoder
        )
    )


def _check_controls(controls) -> list[tuple[str, list, str]]:
    if isinstance(controls, Mapping):
        controls = list(controls.items())
    if not isinstance(controls, Sequence) or isinstance(controls, (str, bytes)) or not controls:
        raise ValueError(
            "controls must be a non-empty sequence of (name, values[, kind]) "
            "or a mapping name -> values"
        )
    out, names = [], set()
    for item in controls:
        if (
            not isinstance(item, Sequence)
            or isinstance(item, (str, bytes))
            or len(item) not in (2, 3)
        ):
            raise ValueError(
                f"controls: each entry is (name, values) or (name, values, kind), got {item!r}"
            )
        name, values = item[0], item[1]
        if not isinstance(name, str) or not name:
            raise ValueError(f"controls: a control name must be a non-empty string, got {name!r}")
        if name in names:
            raise ValueError(f"controls: the name {name!r} appears twice")
        names.add(name)
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
            raise ValueError(f"controls: {name!r} needs a non-empty sequence of values")
        values = [v.item() if hasattr(v, "item") else v for v in values]
        if len(set(values)) != len(values):
            raise ValueError(f"controls: {name!r} has repeated values {values}")
        numeric = all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in values)
        kind = (
            item[2] if len(item) == 3 else ("slider" if numeric and len(values) > 2 else "buttons")
        )
        if kind not in _KINDS:
            raise ValueError(f"controls: kind of {name!r} must be one of {_KINDS}, got {kind!r}")
        out.append((name, values, kind))
    return out


def _control_html(fig_id: str, index: int, name: str, values: list, kind: str, start: int) -> str:
    cid = f"{fig_id}-c{index}"
    label = html.escape(name)
    if kind == "slider":
        return (
            f'<label for="{cid}">{label} '
            f'<input type="range" id="{cid}" data-control="{index}" min="0" '
            f'max="{len(values) - 1}" '
            f'step="1" value="{start}" aria-valuetext="{html.escape(str(values[start]))}">'
            f'<output for="{cid}" id="{cid}-out">{html.escape(str(values[start]))}</output></label>'
        )
    if kind == "select":
        options = "".join(
            f'<option value="{i}"{" selected" if i == start else ""}>{html.escape(str(v))}</option>'
            for i, v in enumerate(values)
        )
        return (
            f'<label for="{cid}">{label} <select id="{cid}" data-control="{index}">'
            f"{options}</select></label>"
        )
    buttons = "".join(
        f'<label><input type="radio" name="{cid}" value="{i}" data-control="{index}"'
        f"{' checked' if i == start else ''}> {html.escape(str(v))}</label>"
        for i, v in enumerate(values)
    )
    return (
        f'<fieldset class="repeval-control" role="radiogroup" aria-label="{label}">'
        f'<legend class="visually-hidden">{label}</legend><span aria-hidden="true">{label}:</span> '
        f"{buttons}</fieldset>"
    )


_SCRIPT = """
(function () {
  "use strict";
  var root = document.getElementById(%(id)s);
  var spec = JSON.parse(document.getElementById(%(data_id)s).textContent);
  var plot = root.querySelector(".repeval-plot");
  var note = root.querySelector(".repeval-note");
  var state = spec.start.slice();
  function show() {
    var key = state.join(",");
    var frame = spec.frames[spec.index[key]];
    root.dataset.frame = key;
    note.innerHTML = frame.note;
    // kept on the element so that a test (or another script) can wait for the redraw
    root.repevalPending = window.Plotly.react(plot, frame.data, frame.layout, spec.config);
    return root.repevalPending;
  }
  function hook() {
    root.querySelectorAll("[data-control]").forEach(function (el) {
      var i = Number(el.dataset.control);
      var ev = el.type === "range" ? "input" : "change";
      el.addEventListener(ev, function () {
        state[i] = Number(el.value);
        if (el.type === "range") {
          var text = String(spec.values[i][state[i]]);
          el.setAttribute("aria-valuetext", text);
          var out = document.getElementById(el.id + "-out");
          if (out) out.textContent = text;
        }
        show();
      });
    });
  }
  var t0 = Date.now();
  (function start() {
    if (window.Plotly && window.Plotly.react) {
      hook();
      show().then(function () { root.dataset.ready = "1"; });
    } else if (Date.now() - t0 < 30000) {
      setTimeout(start, 50);
    } else {
      note.textContent = "This figure needs plotly.js, which did not load.";
    }
  })();
})();
"""


def frame_figure(
    frames: Mapping,
    controls,
    *,
    alt: str,
    start: Mapping | None = None,
    height: int = 460,
    plotly_js: str = "auto",
    fig_id: str | None = None,
) -> InteractiveFigure:
    """Turn a grid of precomputed Plotly frames into one interactive HTML figure.

    Parameters
    ----------
    frames : mapping tuple -> frame
        One entry for every combination of control values, keyed by the tuple of values in
        the order of ``controls`` (a single control may use the bare value as key). A frame
        is a ``plotly.graph_objects.Figure``, or a mapping with ``"figure"`` (a Figure) or
        ``"data"`` (list of trace dicts) and ``"layout"`` (dict), and optionally ``"note"``
        (an HTML string shown under the plot, e.g. the effective rank of this setting).
        Identical frames are stored once.
    controls : sequence of (name, values) or (name, values, kind), or mapping name -> values
        The controls, in display order. ``kind`` is ``"buttons"`` (radio buttons),
        ``"slider"`` (a range input over the values in order) or ``"select"``; by default
        numbers (more than two of them) get a slider, anything else buttons.
    alt : str
        Text alternative of the figure for screen readers (what it shows and how to use it).
    start : mapping name -> value, optional
        The setting shown first; by default the first value of every control.
    height : int, default 460
        Height of the plot in CSS pixels (the width follows the page column).
    plotly_js : {"auto", "book", "inline"}
        ``"book"``: no script included (the book page loads ``_static/plotly/plotly.min.js``);
        ``"inline"``: the bundled plotly.js is embedded in the HTML; ``"auto"``: ``"book"``
        while the book is being built (environment variable :data:`BOOK_ENV` is ``"1"``),
        else ``"inline"``.
    fig_id : str, optional
        HTML id of the figure (letters, digits, ``-`` and ``_``); random by default.

    Returns
    -------
    InteractiveFigure
        Displayed by Jupyter/myst-nb as HTML.

    Examples
    --------
    Two controls, a replay of a noisy comparison at several true gains and seeds (any number of
    controls works the same way)::

        frames = {}
        for gain, seed in itertools.product(gains, seeds):
            diffs = replay(gain, seed)                       # computed with repeval_ref
            fig = go.Figure(go.Histogram(x=diffs))
            frames[(gain, seed)] = {"figure": fig, "note": f"95 % interval: {lo:.3f} to {hi:.3f}"}
        frame_figure(frames, [("true gain", gains), ("seed", seeds)], alt="...")

    Raises
    ------
    ValueError
        If ``controls`` is malformed, ``frames`` misses a combination or has extra keys or a
        malformed frame, ``alt`` is empty, ``start`` names an unknown control or value,
        ``height`` is not a positive integer, ``plotly_js`` is not one of the three modes, or
        ``fig_id`` has other characters.
    """
    ctrl = _check_controls(controls)
    if not isinstance(alt, str) or not alt.strip():
        raise ValueError("alt must be a non-empty description of the figure")
    if isinstance(height, bool) or not isinstance(height, numbers.Integral) or height <= 0:
        raise ValueError(f"height must be a positive integer (CSS pixels), got {height!r}")
    if plotly_js not in ("auto", "book", "inline"):
        raise ValueError(f"plotly_js must be 'auto', 'book' or 'inline', got {plotly_js!r}")
    if plotly_js == "auto":
        plotly_js = "book" if os.environ.get(BOOK_ENV) == "1" else "inline"
    if fig_id is None:
        fig_id = "repeval-fig-" + uuid.uuid4().hex[:10]
    if (
        not isinstance(fig_id, str)
        or not fig_id
        or not all(c.isalnum() or c in "-_" for c in fig_id)
    ):
        raise ValueError(f"fig_id must be letters, digits, '-' or '_', got {fig_id!r}")
    if not isinstance(frames, Mapping):
        raise ValueError("frames must be a mapping from tuples of control values to frames")

    names = [c[0] for c in ctrl]
    if len(ctrl) == 1:
        frames = {(k if isinstance(k, tuple) else (k,)): v for k, v in frames.items()}
    keys = list(itertools.product(*(c[1] for c in ctrl)))
    missing = [k for k in keys if k not in frames]
    if missing:
        raise ValueError(
            f"frames has no frame for {dict(zip(names, missing[0]))} "
            f"({len(missing)} of {len(keys)} combinations missing)"
        )
    extra = set(frames) - set(keys)
    if extra:
        raise ValueError(
            f"frames has keys that match no combination of control values: "
            f"{sorted(map(repr, extra))[:3]}"
        )

    start_idx = [0] * len(ctrl)
    for name, value in (start or {}).items():
        if name not in names:
            raise ValueError(f"start names an unknown control {name!r}; controls are {names}")
        i = names.index(name)
        if value not in ctrl[i][1]:
            raise ValueError(f"start: {value!r} is not a value of control {name!r}")
        start_idx[i] = ctrl[i][1].index(value)

    payloads, seen, index = [], {}, {}
    for key in keys:
        frame = _frame_json(frames[key], repr(key))
        frame["layout"].setdefault("height", int(height))
        frame["layout"].setdefault("autosize", True)
        text = json.dumps(frame, sort_keys=True)
        if text not in seen:
            seen[text] = len(payloads)
            payloads.append(frame)
        index[",".join(str(c[1].index(v)) for c, v in zip(ctrl, key))] = seen[text]

    spec = {
        "frames": payloads,
        "index": index,
        "start": start_idx,
        "values": [[str(v) for v in c[1]] for c in ctrl],
        "config": {"responsive": True, "displayModeBar": False, "scrollZoom": False},
    }
    data_id = f"{fig_id}-data"
    # inside <script type="application/json"> only "</" could end the element early
    data_text = json.dumps(spec, separators=(",", ":")).replace("</", "<\\/")
    controls_html = "".join(
        _control_html(fig_id, i, n, v, k, start_idx[i]) for i, (n, v, k) in enumerate(ctrl)
    )
    library = ""
    if plotly_js == "inline":
        # hide an AMD loader (classic Jupyter's require.js) so that plotly.js sets window.Plotly
        library = (
            "<script>window.__repevalDefine = window.define; window.define = undefined;</script>"
            f"<script>{plotly_js_path().read_text(encoding='utf-8')}</script>"
            "<script>window.define = window.__repevalDefine;</script>"
        )
    script = _SCRIPT % {"id": json.dumps(fig_id), "data_id": json.dumps(data_id)}
    out = (
        f'<div class="repeval-interactive" id="{fig_id}" data-controls="{len(ctrl)}">'
        f'<div class="repeval-controls">{controls_html}</div>'
        f'<div class="repeval-plot" role="img" aria-label="{html.escape(alt.strip())}" '
        f'style="height:{int(height)}px"></div>'
        f'<div class="repeval-note" aria-live="polite"></div>'
        f"<noscript>{html.escape(alt.strip())} (The interactive version needs "
        "JavaScript.)</noscript>"
        f"</div>"
        f"{library}"
        f'<script type="application/json" id="{data_id}">{data_text}</script>'
        f"<script>{script}</script>"
    )
    return InteractiveFigure(out, len(payloads), keys)


_SYMBOLS = ("circle", "triangle-up", "square", "diamond", "triangle-down", "cross", "x", "star")


def decision_plane(
    x,
    y,
    regions,
    points,
    labels,
    *,
    colours,
    title: str = "",
    note: str = "",
    class_names=None,
    opacity: float = 0.25,
    decimals: int = 3,
) -> dict:
    """One frame for :func:`frame_figure`: a classifier's regions shaded over the plane, with
    points.

    Parameters
    ----------
    x : array of shape (n_x,)
        Increasing grid coordinates along the horizontal axis.
    y : array of shape (n_y,)
        Increasing grid coordinates along the vertical axis.
    regions : int array of shape (n_y, n_x)
        Predicted class (0 .. C-1) at every grid point, row ``i`` at height ``y[i]``.
    points : array of shape (n, 2)
        Points drawn over the regions (e.g. the training set).
    labels : int array of shape (n,)
        Class of every point, in 0 .. C-1.
    colours : sequence of str
        One CSS colour per class (at least C); classes also get distinct marker shapes, so the
        figure does not rely on colour alone.
    title, note : str
        Plot title and the HTML note shown under the plot for this frame.
    class_names : sequence of str, optional
        Legend names; ``"class 0"``, ``"class 1"``, ... by default.
    opacity : float, default 0.25
        Opacity of the shaded regions, in (0, 1].
    decimals : int, default 3
        Coordinates are rounded to this many decimals (keeps the page small).

    Returns
    -------
    dict
        ``{"data": [...], "layout": {...}, "note": note}``.

    Raises
    ------
    ValueError
        If shapes disagree, grids are not increasing, a label or region is outside
        0 .. len(colours)-1, or ``opacity`` is not in (0, 1].
    """
    import numpy as np

    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    regions = np.asarray(regions)
    points = np.asarray(points, dtype=float)
    labels = np.asarray(labels)
    for name, g in (("x", x), ("y", y)):
        if g.ndim != 1 or g.size < 2 or not np.all(np.isfinite(g)) or np.any(np.diff(g) <= 0):
            raise ValueError(f"{name} must be an increasing 1-D grid of at least 2 finite values")
    if regions.shape != (y.size, x.size):
        raise ValueError(
            f"regions must have shape (len(y), len(x)) = {(y.size, x.size)}, got {regions.shape}"
        )
    if points.ndim != 2 or points.shape[1] != 2 or not np.all(np.isfinite(points)):
        raise ValueError(f"points must be a finite array of shape (n, 2), got {points.shape}")
    if labels.shape != (points.shape[0],):
        raise ValueError(f"labels must have shape ({points.shape[0]},), got {labels.shape}")
    n_classes = len(colours)
    for name, a in (("labels", labels), ("regions", regions)):
        if a.size and (
            not np.issubdtype(a.dtype, np.integer) or a.min() < 0 or a.max() >= n_classes
        ):
            raise ValueError(
                f"{name} must be integers in 0 .. {n_classes - 1} (one colour per class)"
            )
    if not (0 < opacity <= 1):
        raise ValueError(f"opacity must be in (0, 1], got {opacity}")
    names = (
        list(class_names) if class_names is not None else [f"class {c}" for c in range(n_classes)]
    )
    if len(names) < n_classes:
        raise ValueError("class_names needs one name per colour")
    # a stepwise colour scale: value c in [0, C-1] maps to colours[c]
    scale = []
    for c, colour in enumerate(colours):
        lo, hi = c / n_classes, (c + 1) / n_classes
        scale += [[lo, colour], [hi, colour]]
    data = [
        {
            "type": "heatmap",
            "x": np.round(x, decimals).tolist(),
            "y": np.round(y, decimals).tolist(),
            "z": regions.astype(int).tolist(),
            "zmin": -0.5,
            "zmax": n_classes - 0.5,
            "colorscale": scale,
            "opacity": opacity,
            "showscale": False,
            "hoverinfo": "skip",
        }
    ]
    for c in range(n_classes):
        sel = points[labels == c]
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": names[c],
                "x": np.round(sel[:, 0], decimals).tolist(),
                "y": np.round(sel[:, 1], decimals).tolist(),
                "marker": {
                    "color": colours[c],
                    "symbol": _SYMBOLS[c % len(_SYMBOLS)],
                    "size": 6,
                    "line": {"width": 0.5, "color": "#ffffff"},
                },
                "hoverinfo": "skip",
            }
        )
    layout = {
        "title": {"text": title, "font": {"size": 14}},  # "<br>" breaks a long title
        "xaxis": {
            "range": [float(x[0]), float(x[-1])],
            "title": {"text": "feature 1"},
            "zeroline": False,
        },
        "yaxis": {
            "range": [float(y[0]), float(y[-1])],
            "title": {"text": "feature 2"},
            "zeroline": False,
        },
        "legend": {"orientation": "h", "y": -0.18},
        "margin": {"l": 50, "r": 10, "t": 60, "b": 40},
        "plot_bgcolor": "#ffffff",
        "paper_bgcolor": "#ffffff",
    }
    return {"data": data, "layout": layout, "note": note}
