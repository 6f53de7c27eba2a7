"""Two protocols on the same task: which pairs of encoders they separate in opposite directions.

Book: the suite page, "The same task under two protocols".

A suite scores ``m`` encoders on one task's test images under two protocols (a k-NN vote
and a linear probe, say) and tests every one of the ``P = m (m - 1) / 2`` pairs of
encoders under each, with a paired interval on the gap and a p-value corrected for the
``P`` comparisons of that protocol. This module reads those tests:

* :func:`separation_signs`: per pair, ``+1`` when the protocol separates the pair with B
  ahead (corrected p below ``alpha`` *and* an interval on the gap entirely above 0),
  ``-1`` when it separates them with A ahead, ``0`` when it does not separate them.
* :func:`protocol_flips`: the pairs the two protocols separate in opposite directions.
* :func:`tau_range`: the range of Kendall's tau between the two protocols' orders that
  the separations allow. A pair both protocols separate adds its fixed sign product; a
  pair either leaves unseparated may go either way. If every separation is right (for two
  Holm-corrected families at level ``alpha`` each, with probability at least
  ``1 - 2 alpha``), the tau of the true accuracies (no two exactly equal) lies in the range,
  so it is a conservative interval. It needs only the committed tests, not the per-image
  answers that a bootstrap over test images would resample.

Every function takes plain arrays and returns arrays or numbers.
"""

from __future__ import annotations

import numpy as np

from ._validation import as_finite_numbers, check_probability_level

__all__ = ["separation_signs", "protocol_flips", "tau_range"]


def _signs(x, name, n=None):
    s = as_finite_numbers(x, name, n=n, what="entries (one per pair)")
    if not np.all(np.isin(s, (-1.0, 0.0, 1.0))):
        raise ValueError(f"{name} must hold only -1, 0 and +1")
    return s.astype(np.int8)


def separation_signs(lo, hi, p_adjusted, alpha=0.05):
    """Which way a protocol separates each pair of encoders, or ``0`` where it does not.

    Parameters
    ----------
    lo, hi : array_like of float, shape (P,)
        Interval on each pair's gap (B minus A), ``lo <= hi``.
    p_adjusted : array_like of float, shape (P,)
        Each pair's p-value after the correction for the ``P`` comparisons, in [0, 1].
    alpha : float, default 0.05
        Level of the corrected test, in (0, 1).

    Returns
    -------
    numpy.ndarray of int8, shape (P,)
        ``+1`` where ``p_adjusted < alpha`` and ``lo > 0``, ``-1`` where
        ``p_adjusted < alpha`` and ``hi < 0``, else ``0``.

    Raises
    ------
    ValueError
        Arrays of unequal length, not 1-D, not finite, ``lo > hi`` anywhere, a p-value
        outside [0, 1], or ``alpha`` outside (0, 1); the message names the argument.
    """
    lo = as_finite_numbers(lo, "lo")
    hi = as_finite_numbers(hi, "hi", n=lo.size, what="entries (one per pair)")
    p = as_finite_numbers(p_adjusted, "p_adjusted", n=lo.size, what="entries (one per pair)")
    alpha = check_probability_level(alpha, "alpha")
    if np.any(lo > hi):
        raise ValueError("lo must be <= hi for every pair")
    if np.any((p < 0) | (p > 1)):
        raise ValueError("p_adjusted must lie in [0, 1]")
    significant = p < alpha
    out = np.zeros(lo.size, dtype=np.int8)
    out[significant & (lo > 0)] = 1
    out[significant & (hi < 0)] = -1
    return out


def protocol_flips(sign_a, sign_b):
    """Indices of the pairs that two protocols separate in opposite directions.

    Parameters
    ----------
    sign_a, sign_b : array_like of {-1, 0, +1}, shape (P,)
        :func:`separation_signs` of the two protocols, pair for pair in the same order.

    Returns
    -------
    numpy.ndarray of int, shape (F,)
        The ``p`` with ``sign_a[p] * sign_b[p] == -1``, ascending.

    Raises
    ------
    ValueError
        Unequal lengths, not 1-D, or a value other than -1, 0 and +1.
    """
    a = _signs(sign_a, "sign_a")
    b = _signs(sign_b, "sign_b", a.size)
    return np.flatnonzero(a.astype(np.int64) * b == -1)


def tau_range(sign_a, sign_b):
    """Lowest and highest Kendall's tau between two orders that the separations allow.

    A pair separated by both protocols contributes ``sign_a * sign_b``; a pair that either
    protocol leaves unseparated contributes ``+1`` or ``-1`` as its unknown order decides.
    With ``P`` pairs, ``fixed`` the sum over the pairs both separate and ``free`` the
    number of others, the tau over ``P`` untied pairs (``sum of products / P``) ranges over
    ``[(fixed - free) / P, (fixed + free) / P]``. Sign patterns that no order produces are
    not excluded, so the range is, if anything, too wide.

    Parameters
    ----------
    sign_a, sign_b : array_like of {-1, 0, +1}, shape (P,)
        :func:`separation_signs` of the two protocols, pair for pair in the same order,
        ``P >= 1``.

    Returns
    -------
    tuple of float
        ``(low, high)``, both in [-1, 1].

    Raises
    ------
    ValueError
        Unequal or zero lengths, not 1-D, or a value other than -1, 0 and +1.
    """
    a = _signs(sign_a, "sign_a")
    b = _signs(sign_b, "sign_b", a.size)
    if a.size == 0:
        raise ValueError("sign_a must hold at least one pair")
    both = (a != 0) & (b != 0)
    fixed = float(np.sum(a[both].astype(np.int64) * b[both]))
    free = float(np.count_nonzero(~both))
    return (fixed - free) / a.size, (fixed + free) / a.size
