"""Book plumbing: hand computed numbers to the prose and keep plots readable.

Not part of the course's formulas. The chapters under ``book/`` compute their numbers
with the public functions of :mod:`repeval_ref` and pass them to the text with myst-nb's
``glue``; :func:`glue_all` does that for a whole mapping in one call, so that a chapter's
visible code is the computation and not a column of ``glue(...)`` lines. The palette
and marker cycle are the ones every figure of the book uses, chosen so that no figure
depends on colour alone and every colour stays distinct under the common forms of
colour-vision deficiency.
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = [
    "glue_all",
    "plain",
    "interval_verdict",
    "OKABE_ITO",
    "MARKERS",
    "LINESTYLES",
    "okabe_ito_cmap",
]

#: The eight colours of Okabe and Ito (2008), "Color Universal Design", in their usual
#: order (black first). They stay distinguishable for deuteranopia, protanopia and
#: tritanopia; the book pairs them with :data:`MARKERS` or :data:`LINESTYLES`.
OKABE_ITO = ("#000000", "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7")

#: Marker shapes in the order the book assigns them to classes or series.
MARKERS = ("o", "^", "s", "D", "v", "P", "X", "*", "<", ">")

#: Line styles in the order the book assigns them to series.
LINESTYLES = ("-", "--", ":", "-.")


def plain(value):
    """Return ``value`` as a plain Python scalar (or unchanged if it is a string).

    Parameters
    ----------
    value : str, bool, int, float or NumPy scalar / 0-d array
        The value to convert.

    Returns
    -------
    str, bool, int or float

    Raises
    ------
    ValueError
        If ``value`` is an array with more than one element, or not a number or string.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, np.ndarray):
        if value.size != 1:
            raise ValueError(f"value must be a scalar, got an array of shape {value.shape}")
        value = value.reshape(()).item()
    elif isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, (bool, numbers.Integral)):
        return bool(value) if isinstance(value, bool) else int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    raise ValueError(f"value must be a number or a string, got {type(value).__name__}")


def glue_all(mapping, prefix="", glue=None):
    """Glue every ``name: value`` of ``mapping`` for the prose, without displaying it.

    Parameters
    ----------
    mapping : dict of str to scalar or str
        Names (as the prose's ``{glue:text}`name``` roles spell them, without
        ``prefix``) and their values. NumPy scalars become plain Python numbers, so a
        format such as ``:.3f`` or ``:,d`` applies to them.
    prefix : str, default ""
        Prepended to every name (for example ``"p_"`` for the protocols chapter).
    glue : callable, optional
        The glue function, ``glue(name, value, display=False)``; defaults to
        :func:`myst_nb.glue`. Passing another callable lets the helper be tested
        without a notebook.

    Returns
    -------
    dict of str to scalar or str
        The glued names (with ``prefix``) and their plain values.

    Raises
    ------
    ValueError
        If ``mapping`` is not a dict, a name is not a non-empty identifier-like
        string, or a value is not a scalar number or string.
    """
    if not isinstance(mapping, dict):
        raise ValueError(f"mapping must be a dict, got {type(mapping).__name__}")
    if not isinstance(prefix, str):
        raise ValueError("prefix must be a string")
    if glue is None:
        from myst_nb import glue
    out = {}
    for name, value in mapping.items():
        if not isinstance(name, str) or not (prefix + name).replace("_", "a").isalnum():
            raise ValueError(f"mapping has an invalid name {name!r} (letters, digits, '_')")
        try:
            out[prefix + name] = plain(value)
        except ValueError as exc:
            raise ValueError(f"mapping[{name!r}]: {exc}") from None
    for name, value in out.items():
        glue(name, value, display=False)
    return out


def interval_verdict(lo, hi, predicted=None):
    """The verdict a sentence of the book reads for an effect measured by the interval ``[lo, hi]``.

    Parameters
    ----------
    lo, hi : float
        The interval's ends, finite, ``lo <= hi``.
    predicted : float, optional
        A published size and sign of the effect. Without it, the verdict is ``"shown"``
        when the interval excludes zero and ``"not shown at this scale"`` otherwise (the
        words of :func:`repeval_ref.uncertainty.paired_comparison`); with it, the verdict
        of :func:`repeval_ref.uncertainty.prediction_verdict` (``"shown"``,
        ``"opposite"``, ``"contradicted in size"`` or ``"not detected"``).

    Returns
    -------
    str

    Raises
    ------
    ValueError
        As :func:`repeval_ref.uncertainty.prediction_verdict` (a non-finite bound,
        ``lo > hi``, a zero or non-finite ``predicted``).
    """
    from repeval_ref.uncertainty import NOT_SHOWN, SHOWN, prediction_verdict

    if predicted is not None:
        return prediction_verdict(lo, hi, predicted)["verdict"]
    # checked by the same rules, with a placeholder prediction that plays no part
    out = prediction_verdict(lo, hi, 1.0)
    return SHOWN if (out["lo"] > 0 or out["hi"] < 0) else NOT_SHOWN


def okabe_ito_cmap(n):
    """A listed colormap of the first ``n`` Okabe–Ito colours after black.

    Parameters
    ----------
    n : int
        Number of classes, ``1 <= n <= 7``.

    Returns
    -------
    matplotlib.colors.ListedColormap

    Raises
    ------
    ValueError
        If ``n`` is not an integer between 1 and 7.
    """
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or not 1 <= n <= 7:
        raise ValueError(f"n must be an integer between 1 and 7, got {n!r}")
    from matplotlib.colors import ListedColormap

    return ListedColormap(list(OKABE_ITO[1 : 1 + int(n)]), name=f"okabe_ito_{int(n)}")
