"""Least-squares (ridge) probe and its exact leave-one-out error.

Book: page ``book/invariances.md`` (least-squares probe, exact leave-one-out); seed 001,
sections "Least-squares probe" and "Exact leave-one-out for closed-form probes".

The probe maps frozen features ``h`` to one-vs-rest targets ``t`` in ``{-1, 1}^K``
(+1 in the column of the true class, -1 elsewhere) by regularised least squares,
solved in closed form. With an unpenalised bias the design is ``Z = [1, H]`` and the
penalty ``P = diag(0, lam I_d)``; without a bias ``Z = H`` and ``P = lam I_d``::

    B = (Z^T Z + P)^{-1} Z^T T,        scores(h) = [1, h^T] B   (or h^T B).

Implementation notes
--------------------
*With a bias*, eliminating the unpenalised intercept from the normal equations gives
the equivalent centred form (``hbar``, ``tbar`` are the training column means,
``H_c = H - 1 hbar^T``, ``T_c = T - 1 tbar^T``)::

    W  = (H_c^T H_c + lam I)^{-1} H_c^T T_c,     b0 = tbar - W^T hbar,
    scores(h) = b0 + W^T h,

which is what is computed, through the thin SVD of ``H_c`` (better conditioned
than forming ``Z^T Z``). At
``lam = 0`` the inverse becomes the minimum-norm least-squares solution of
``H_c W = T_c`` (``scipy.linalg.lstsq``), the limit of the ridge solution as
``lam -> 0`` and the solution scikit-learn's ``LinearRegression`` returns, so that
rank-deficient designs (``n <= d``, duplicated features) still work.

*Hat matrix with an unpenalised intercept.* Write ``H_c = U S V^T`` (thin SVD,
singular values ``s_k > 0`` kept). Because ``1^T H_c = 0``, the fitted values of the
centred form are ``1 tbar^T + H_c W``, so the hat matrix ``𝓗`` (with ``𝓗 T`` the fitted
training scores) is::

    𝓗 = 1 1^T / n + H_c (H_c^T H_c + lam I)^{-1} H_c^T
      = 1 1^T / n + U diag(f) U^T,          f_k = s_k^2 / (s_k^2 + lam),

and in particular ``𝓗_ii = 1/n + sum_k U_ik^2 f_k`` and, using ``U^T 1 = 0``,
``T - 𝓗 T = T_c - U diag(f) U^T T_c``. The leave-one-out residual of training
point ``i`` follows from the Sherman-Morrison formula (the penalty does not depend on
the data)::

    e_(i) = (t_i - (𝓗 T)_i) / (1 - 𝓗_ii),
    PRESS(lam) = (1 / (n K)) sum_i ||e_(i)||^2.

One SVD serves the whole grid of ``lam``; each ``lam`` then costs two matrix products
of size ``n x r x K`` (``r`` the rank), and no ``n x n`` matrix is ever formed.
"""
from __future__ import annotations

import numpy as np
import scipy.linalg

from ._validation import as_float_array, as_labels, check_bool, check_positive, check_same_width

__all__ = ["ridge_probe", "ridge_loo", "loo_scores"]

# A missing leverage at lam = 0 (1 - 1/n - sum_k U_ik^2) below this is treated as 0:
# the point is interpolated (leverage 1). Rounding error in it is of order
# rank * 1e-16, far below.
_LEVERAGE_TOL = 1e-10


def _targets(y, K):
    """One-vs-rest targets in {-1, 1}: +1 in the column of the true class."""
    T = -np.ones((y.shape[0], K))
    T[np.arange(y.shape[0]), y] = 1.0
    return T


def _check_train(train_h, train_y):
    H = as_float_array(train_h, "train_h", ndim=2)
    y = as_labels(train_y, "train_y", n=H.shape[0])
    return H, y


def _check_lam(lam, name="lam"):
    return check_positive(lam, name, allow_zero=True)


def ridge_probe(train_h, train_y, test_h, lam, bias=True):
    """Class scores of the least-squares probe to ``{-1, 1}^K`` targets.

    Implements seed 001 "Least-squares probe": ``B = (Z^T Z + P)^{-1} Z^T T`` with
    ``Z = [1, H]``, ``P = diag(0, lam I)`` (unpenalised intercept) when ``bias`` is
    True, and ``Z = H``, ``P = lam I`` otherwise; the scores are ``[1, h^T] B``
    (``h^T B`` without bias). ``lam = 0`` is plain least squares, solved with the
    minimum-norm least-squares solution (matches scikit-learn ``LinearRegression``
    also for rank-deficient designs).

    Parameters
    ----------
    train_h : array_like of shape (n, d)
        Training features.
    train_y : array_like of int, shape (n,)
        Training labels in ``0 .. K-1``; ``K = max(train_y) + 1``.
    test_h : array_like of shape (m, d)
        Features to score.
    lam : float
        Ridge penalty, ``>= 0``.
    bias : bool, default True
        Fit an unpenalised intercept.

    Returns
    -------
    numpy.ndarray of float64, shape (m, K)
        Class scores; the predicted class is the argmax of each row.

    Raises
    ------
    ValueError
        Wrong ndim, empty arrays, mismatched lengths or feature dimensions, NaN/inf,
        negative labels, or ``lam < 0`` (or not finite).
    TypeError
        Non-numeric arrays or a ``bias`` that is not a bool.

    Notes
    -----
    Book ``book/invariances.md`` (least-squares probe); seed 001, "Least-squares probe".
    """
    H, y = _check_train(train_h, train_y)
    Ht = as_float_array(test_h, "test_h", ndim=2)
    check_same_width(Ht, H, "test_h", "train_h")
    lam = _check_lam(lam)
    bias = check_bool(bias, "bias")
    T = _targets(y, int(y.max()) + 1)
    if bias:
        h_mean, t_mean = H.mean(axis=0), T.mean(axis=0)
        A, R = H - h_mean, T - t_mean
    else:
        A, R = H, T
    if lam == 0.0:
        # singular values below max(n, d) * eps * s_max count as zero (as in
        # scikit-learn's LinearRegression and in the leave-one-out code below)
        W = scipy.linalg.lstsq(A, R, cond=max(A.shape) * np.finfo(float).eps)[0]
    else:
        # W = V diag(s / (s^2 + lam)) U^T R from the thin SVD A = U S V^T. Solving the
        # normal equations (A^T A + lam I) W = A^T R instead squares the condition
        # number: for n <= d and lam = 1e-12 its scores were off by 0.5.
        U, sv, Vt = scipy.linalg.svd(A, full_matrices=False, check_finite=False)
        W = Vt.T @ ((sv / (sv * sv + lam))[:, None] * (U.T @ R))
    if bias:
        return (Ht - h_mean) @ W + t_mean
    return Ht @ W


def _centred_svd(H):
    """Thin SVD of the column-centred features, keeping the nonzero singular values."""
    Hc = H - H.mean(axis=0)
    U, s, _ = scipy.linalg.svd(Hc, full_matrices=False, check_finite=False)
    if s.size and s[0] > 0:
        keep = s > max(Hc.shape) * np.finfo(float).eps * s[0]
    else:
        keep = np.zeros(s.shape, dtype=bool)
    return U[:, keep], s[keep]


def _loo_residuals(loo, lam, lam_name="lams"):
    """Leave-one-out residuals e_(i) (n, K) of the ridge probe with bias at one lam.

    With ``g_k = lam / (s_k^2 + lam)`` (``1 - f_k``), both parts of
    ``e_(i) = (t_i - (𝓗 T)_i) / (1 - 𝓗_ii)`` are sums without cancellation::

        1 - 𝓗_ii        = gap_i + sum_k U_ik^2 g_k,
        t_i - (𝓗 T)_i   = r0_i  + (U diag(g) U^T T_c)_i,

    where ``gap_i = 1 - 1/n - sum_k U_ik^2`` and ``r0 = T_c - U U^T T_c`` are the
    missing leverage and the residual of the unpenalised fit (both exactly 0 for a
    point the features interpolate, e.g. every point when ``n <= d + 1``). Writing
    ``1 - (1/n + sum_k U_ik^2 f_k)`` instead would lose every digit when ``lam`` is
    small against ``s_k^2``: a leverage of ``1 - 1e-12`` would count as 1.
    """
    U, U2, s, UtT, gap, r0 = loo
    s2 = s * s
    g = lam / (s2 + lam) if lam > 0 else np.zeros_like(s2)
    one_minus = gap + U2 @ g
    bad = np.flatnonzero(one_minus <= 0)
    if bad.size:
        raise ValueError(
            f"training point {bad[0]} of train_h has leverage 1 at {lam_name} value {lam!r}: "
            "its leave-one-out residual divides by zero (use a positive lambda or more "
            "training points than features + 1)"
        )
    resid = r0 + U @ (g[:, None] * UtT)
    return resid / one_minus[:, None]


def _prepare_loo(train_h, train_y):
    """Targets and the lam-independent parts of the leave-one-out residuals."""
    H, y = _check_train(train_h, train_y)
    T = _targets(y, int(y.max()) + 1)
    Tc = T - T.mean(axis=0)
    U, s = _centred_svd(H)
    U2 = U * U
    UtT = U.T @ Tc
    n = T.shape[0]
    gap = 1.0 - 1.0 / n - U2.sum(axis=1)
    r0 = Tc - U @ UtT
    # a point whose leverage at lam = 0 is 1 up to rounding is interpolated exactly
    interpolated = gap <= _LEVERAGE_TOL
    gap[interpolated] = 0.0
    r0[interpolated] = 0.0
    return T, (U, U2, s, UtT, gap, r0)


def ridge_loo(train_h, train_y, lams):
    """Select the ridge penalty by exact leave-one-out error (PRESS).

    For the probe :func:`ridge_probe` with ``bias=True``, computes for every ``lam``
    in ``lams``::

        PRESS(lam) = (1 / (n K)) sum_i ||e_(i)||^2,
        e_(i) = (t_i - (𝓗 T)_i) / (1 - 𝓗_ii),
        𝓗 = 1 1^T / n + H_c (H_c^T H_c + lam I)^{-1} H_c^T,

    through one thin SVD of the centred training features (see the module docstring
    for the derivation). Seed 001, "Exact leave-one-out for closed-form probes".

    Parameters
    ----------
    train_h : array_like of shape (n, d)
        Training features.
    train_y : array_like of int, shape (n,)
        Training labels; ``K = max(train_y) + 1``.
    lams : array_like of shape (L,)
        Candidate penalties, each finite and ``>= 0``; at least one.

    Returns
    -------
    best_lam : float
        The first ``lam`` (in the order given) of minimal PRESS.
    press : numpy.ndarray of float64, shape (L,)
        PRESS for each ``lam``.

    Raises
    ------
    ValueError
        If a training point has leverage 1 for some ``lam`` (e.g. ``lam = 0`` with
        ``n <= d + 1``), since its leave-one-out residual would divide by zero; an
        empty or negative (or non-finite) ``lams``; bad ``train_h``/``train_y`` as in
        :func:`ridge_probe`.

    Notes
    -----
    Book ``book/invariances.md`` (exact leave-one-out); seed 001, "Exact leave-one-out
    for closed-form probes".
    """
    grid = as_float_array(lams, "lams", ndim=1)
    if np.any(grid < 0):
        raise ValueError(f"lams must all be >= 0, got smallest {grid.min()}")
    T, loo = _prepare_loo(train_h, train_y)
    n, K = T.shape
    press = np.empty(grid.shape[0])
    for j, lam in enumerate(grid):
        E = _loo_residuals(loo, float(lam))
        press[j] = np.einsum("ij,ij->", E, E) / (n * K)
    best = int(np.argmin(press))
    return float(grid[best]), press


def loo_scores(train_h, train_y, lam):
    """Exact leave-one-out class scores of the ridge probe with bias.

    Row ``i`` is ``t_i - e_(i)``: the scores :func:`ridge_probe` (``bias=True``)
    would give training point ``i`` if it were fitted on the other ``n - 1`` points,
    computed through the hat matrix (seed 001, "Exact leave-one-out").

    Parameters
    ----------
    train_h : array_like of shape (n, d)
        Training features.
    train_y : array_like of int, shape (n,)
        Training labels; ``K = max(train_y) + 1``.
    lam : float
        Ridge penalty, ``>= 0``.

    Returns
    -------
    numpy.ndarray of float64, shape (n, K)
        Leave-one-out scores.

    Notes
    -----
    Book ``book/invariances.md`` (exact leave-one-out); seed 001.
    ``K`` is taken from the full training set: if a class has a single training point,
    the refit without it still has ``K`` columns (a column of -1 targets), which is
    what the hat-matrix identity describes.
    """
    lam = _check_lam(lam)
    T, loo = _prepare_loo(train_h, train_y)
    E = _loo_residuals(loo, lam, lam_name="lam")
    return T - E
