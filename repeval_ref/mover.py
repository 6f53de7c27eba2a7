"""An interval for a sum or difference of estimates from the intervals of its terms (MOVER).

Book: the attentive page (gains of a read-out over the random initialisation) and the
suite page (a 10-shot protocol against another), where only each accuracy's own interval
was kept, not the per-image answers a paired bootstrap would need.

The method of variance estimates recovery (Zou and Donner 2008; for a difference of two
proportions with Wilson intervals it is Newcombe's 1998 "method 10") builds the limits of
``D = sum_i w_i theta_i`` from the estimates ``theta_i`` and their intervals
``[l_i, u_i]``:

    L = D - sqrt( sum_{w_i > 0} w_i^2 (theta_i - l_i)^2 + sum_{w_i < 0} w_i^2 (u_i - theta_i)^2 )
    U = D + sqrt( sum_{w_i > 0} w_i^2 (u_i - theta_i)^2 + sum_{w_i < 0} w_i^2 (theta_i - l_i)^2 )

It assumes independent estimates. Two accuracies measured on the same images are usually
positively correlated, which makes the interval of their difference too wide rather than
too narrow; for sums with mixed signs over shared images it is an approximation.
"""

from __future__ import annotations

import numpy as np

from ._validation import as_finite_numbers

__all__ = ["mover_interval"]


def mover_interval(estimates, lows, highs, weights):
    """Estimate and interval of ``sum(weights * estimates)`` from each term's own interval.

    Parameters
    ----------
    estimates : array_like of float, shape (n,)
        The point estimates ``theta_i``.
    lows, highs : array_like of float, shape (n,)
        Their intervals, ``lows[i] <= estimates[i] <= highs[i]``.
    weights : array_like of float, shape (n,)
        The coefficients ``w_i`` (``[1, -1]`` for a difference B - A with B first).

    Returns
    -------
    tuple of float
        ``(D, L, U)`` as in the module docstring; ``L <= D <= U``.

    Raises
    ------
    ValueError
        Arrays of unequal length, empty, not 1-D or not finite, or an estimate outside its
        interval; the message names the argument.

    Examples
    --------
    >>> [round(v, 3) for v in mover_interval([0.5], [0.4], [0.7], [1.0])]
    [0.5, 0.4, 0.7]
    >>> d, lo, hi = mover_interval([0.7, 0.6], [0.66, 0.56], [0.74, 0.64], [1, -1])
    >>> round(d, 3), round(lo, 4), round(hi, 4)
    (0.1, 0.0434, 0.1566)
    """
    theta = as_finite_numbers(np.atleast_1d(estimates), "estimates")
    if theta.size == 0:
        raise ValueError("estimates must hold at least one estimate")
    lo, hi, w = (
        as_finite_numbers(np.atleast_1d(v), name, n=theta.size, what="entries (one per estimate)")
        for v, name in ((lows, "lows"), (highs, "highs"), (weights, "weights"))
    )
    if np.any(lo > theta):
        raise ValueError("lows must not exceed estimates")
    if np.any(hi < theta):
        raise ValueError("highs must not be below estimates")
    down = theta - lo
    up = hi - theta
    pos = w > 0
    d = float(np.sum(w * theta))
    lower = np.sqrt(np.sum(np.where(pos, (w * down) ** 2, (w * up) ** 2)))
    upper = np.sqrt(np.sum(np.where(pos, (w * up) ** 2, (w * down) ** 2)))
    return d, d - float(lower), d + float(upper)
