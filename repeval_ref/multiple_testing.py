"""Corrections of p-values for many comparisons at once (pairs of encoders in a leaderboard).

Book: the practitioners' page (``book/practitioners.md``), "Many encoders". With ``m``
pairwise tests at level ``alpha``, about ``alpha * m`` of them reject by chance even
when no encoder differs from another. Two standard corrections:

* **Holm** (1979), step-down Bonferroni: controls the family-wise error rate, the
  chance of *any* false rejection. With the p-values sorted, ``p_(1) <= ... <= p_(m)``,
  the adjusted values are ``max_{j <= i} min(1, (m - j + 1) p_(j))``.
* **Benjamini-Hochberg** (1995): controls the false discovery rate, the expected share
  of false rejections among the rejections; less strict. Computed by
  :func:`scipy.stats.false_discovery_control`.

A pair is called different when its *adjusted* p-value is below ``alpha``.
"""

from __future__ import annotations

import numpy as np

from ._validation import as_float_array

__all__ = ["holm", "benjamini_hochberg", "adjust_pvalues", "CORRECTIONS"]

#: option name -> name in words
CORRECTIONS = {
    "holm": "Holm (step-down Bonferroni; family-wise error rate)",
    "bh": "Benjamini-Hochberg (false discovery rate)",
}


def _pvalues(p):
    p = as_float_array(p, "p", ndim=1)
    if np.any((p < 0) | (p > 1)):
        raise ValueError("p must hold probabilities in [0, 1]")
    return p


def holm(p):
    """Holm-adjusted p-values, in the order given.

    Parameters
    ----------
    p : array_like of float, shape (m,)
        p-values in ``[0, 1]``, ``m >= 1``.

    Returns
    -------
    numpy.ndarray of float64, shape (m,)
        ``max_{j <= rank(i)} min(1, (m - j + 1) p_(j))``; reject where ``< alpha``.
    """
    p = _pvalues(p)
    m = p.size
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(scaled)
    return adjusted


def benjamini_hochberg(p):
    """Benjamini-Hochberg adjusted p-values (``scipy.stats.false_discovery_control``).

    Parameters
    ----------
    p : array_like of float, shape (m,)

    Returns
    -------
    numpy.ndarray of float64, shape (m,)
    """
    from scipy.stats import false_discovery_control

    return np.asarray(false_discovery_control(_pvalues(p), method="bh"), dtype=np.float64)


def adjust_pvalues(p, method="holm"):
    """Adjusted p-values by ``method`` (``"holm"`` or ``"bh"``)."""
    if method == "holm":
        return holm(p)
    if method == "bh":
        return benjamini_hochberg(p)
    raise ValueError(f"method must be one of {', '.join(CORRECTIONS)}, got {method!r}")
