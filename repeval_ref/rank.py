"""How much of a one-hot target a least-squares probe on a rank-r representation can fit.

Book: chapter ``book/rank.md``; seed 000, section "What a linear probe can and cannot
read" (the theorem "A linear probe is limited by the rank of the representation" and
its proof).

With ``H`` the ``n x d`` representation matrix of rank ``r`` and ``Y`` the ``n x K``
one-hot label matrix (``n_c`` rows in class ``c``), every affine probe's predictions
``P = H W + 1 b^T`` have rank at most ``r + 1``. Since ``Y^T Y = diag(n_1, ..., n_K)``,
the squared singular values of ``Y`` are the class counts, and by Eckart-Young::

    ||Y - P||_F^2  >=  sum_{j > r+1} sigma_j(Y)^2
                    =  sum of the K - r - 1 smallest class counts   (0 if r + 1 >= K).

:func:`rank_bound` returns both sides for the best least-squares probe: the residual
``min_{W, b} ||Y - H W - 1 b^T||_F^2`` (bias unpenalised) and the floor.
"""
from __future__ import annotations

import numpy as np
import scipy.linalg

from ._validation import as_float_array, as_labels, check_int

__all__ = ["rank_bound"]


def rank_bound(H, y, n_classes):
    """Least-squares residual of the best affine probe and the rank floor below it.

    Parameters
    ----------
    H : array_like of shape (n, d)
        Representations, one row per labelled example.
    y : array_like of int, shape (n,)
        Labels in ``0 .. n_classes - 1``.
    n_classes : int
        Number of classes ``K >= 1`` (columns of the one-hot target); classes with no
        example count as ``n_c = 0``.

    Returns
    -------
    residual : float
        ``min_{W, b} ||Y - H W - 1 b^T||_F^2``, solved by ``scipy.linalg.lstsq`` on the
        column-centred ``H`` and ``Y`` (equivalent to the design ``[1, H]`` with an
        unpenalised bias), singular values below ``max(n, d) * eps`` times the
        largest counting as zero (as in scikit-learn's ``LinearRegression``).
    floor : int
        Sum of the ``K - r - 1`` smallest class counts, ``r = numpy.linalg.matrix_rank(H)``
        (default tolerance); 0 when ``r + 1 >= K``. In exact arithmetic
        ``residual >= floor``; in floating point the residual may fall short of an
        attained floor by rounding error (about ``1e-12`` relative).

    Raises
    ------
    ValueError
        Empty ``H``, NaN/inf, mismatched lengths, ``n_classes < 1`` or labels outside
        ``0 .. n_classes - 1``.

    Notes
    -----
    Book ``book/rank.md``; seed 000, "A linear probe is limited by the rank of the
    representation".
    """
    H = as_float_array(H, "H")
    n_classes = check_int(n_classes, "n_classes", minimum=1)
    y = as_labels(y, "y", n=H.shape[0], n_classes=n_classes)
    n = H.shape[0]

    Y = np.zeros((n, n_classes))
    Y[np.arange(n), y] = 1.0
    # The best unpenalised bias centres both sides, so the residual is that of the
    # least-squares fit of the centred Y by the centred H. Solving it on the design
    # [1, H] instead makes lstsq's rank cut-off compare H with the column of ones:
    # features of scale 1e-20 then count as zero, and at 1e20 the ones column is lost
    # (a residual above the bias-only fit). Exactly constant columns are set to exactly
    # zero, and the centred H is divided by its largest entry (no residual changes).
    Yc = Y - Y.mean(axis=0)
    Hc = H - H.mean(axis=0)
    Hc[:, np.ptp(H, axis=0) == 0] = 0.0
    top = float(np.max(np.abs(Hc)))
    if top > 0:
        Hc /= top
        # singular values below max(n, d) * eps * s_max count as zero, as in
        # scikit-learn's LinearRegression and in ridge_probe
        coef, *_ = scipy.linalg.lstsq(Hc, Yc, cond=max(Hc.shape) * np.finfo(float).eps)
        Yc = Yc - Hc @ coef
    residual = float(np.sum(Yc**2))

    r = int(np.linalg.matrix_rank(H))
    counts = np.bincount(y, minlength=n_classes)
    n_small = n_classes - r - 1
    floor = int(np.sort(counts)[:n_small].sum()) if n_small > 0 else 0
    return residual, floor
