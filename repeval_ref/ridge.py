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

*Large or memory-mapped features.* The SVD needs float64 copies of the whole ``n x d``
design. When ``train_h`` is a read-only memory map, or holds more than
:data:`SVD_MAX_ENTRIES` entries, the same quantities come from the ``(d + K) x (d + K)``
float64 scatter of ``[H, T]`` accumulated over row blocks (means and scatters merged as
in Chan, Golub and LeVeque, 1979): its eigendecomposition ``H_c^T H_c = V diag(s^2) V^T``
gives ``s`` and ``V``, ``U^T T_c = diag(1/s) V^T (H_c^T T_c)``, and each block of rows
its own ``U = H_c V diag(1/s)``, from which every per-point quantity above follows in a
second pass; the probe's weights are ``W = V diag(1 / (s^2 + lam)) V^T H_c^T T_c``. The
features are read in their own dtype (float32 stays float32) and converted to float64
one block at a time. The results equal the SVD's up to rounding; the eigenvalues
``s_k^2`` of a float64 scatter are resolved to about ``max(n, d) * eps * s_1^2``, so this
route keeps the components with ``s_k^2`` above that level (the SVD's cut-off is
``max(n, d) * eps * s_1`` on ``s_k``), which matters only for ``lam = 0`` on
(nearly) rank-deficient features.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from ._blocks import is_read_only_map, release_pages, row_slices
from ._validation import (
    as_float_array,
    as_labels,
    check_bool,
    check_positive,
    check_same_width,
)

__all__ = ["ridge_probe", "ridge_loo", "loo_scores", "SVD_MAX_ENTRIES"]

#: An in-memory ``train_h`` with more entries than this takes the blocked route (module
#: docstring, "Large or memory-mapped features"); a read-only memory map always does.
SVD_MAX_ENTRIES = 2**25

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
    """Validated features (float32 and float64 kept as they are) and int64 labels."""
    H = as_float_array(train_h, "train_h", ndim=2, dtype=None)
    y = as_labels(train_y, "train_y", n=H.shape[0])
    return H, y


def _blocked(train_h, H):
    """Whether the blocked scatter route is taken for the validated features ``H``."""
    return is_read_only_map(train_h) or is_read_only_map(H) or H.size > SVD_MAX_ENTRIES


def _f64_blocks(X):
    """``(part, float64 block)`` pairs over the rows of ``X``, pages released after each."""
    for part in row_slices(X.shape[0], X.shape[1]):
        yield part, np.asarray(X[part], dtype=np.float64)
        release_pages(X)


def _joint_scatter(H, T, center):
    """Float64 means and scatter of ``[H, T]`` over row blocks.

    Returns ``(h_mean, t_mean, S, C)`` with ``S = A^T A`` and ``C = A^T R``, where
    ``A = H - 1 h_mean^T`` and ``R = T - 1 t_mean^T`` when ``center`` is True, and
    ``A = H``, ``R = T`` (means returned as zeros) otherwise.
    """
    from .labelfree import accumulate_moments

    d = H.shape[1]

    def joined():
        for part, block in _f64_blocks(H):
            yield np.hstack([block, T[part]])

    mom = accumulate_moments(joined(), "train_h")
    G = mom.gram(center)
    if center:
        return mom.mean[:d], mom.mean[d:], G[:d, :d], G[:d, d:]
    return np.zeros(d), np.zeros(T.shape[1]), G[:d, :d], G[:d, d:]


def _scatter_eig(S):
    """Eigenvalues (largest first, negative rounding set to 0) and eigenvectors of ``S``."""
    e, V = np.linalg.eigh(S)
    return np.clip(e[::-1], 0.0, None), V[:, ::-1]


def _kept(e, n, d):
    """Components of a float64 scatter's spectrum above its rounding level."""
    if not (e.size and e[0] > 0):
        return np.zeros(e.shape, dtype=bool)
    return e > max(n, d) * np.finfo(float).eps * e[0]


def _blocked_weights(H, T, lam, bias):
    """``(W, h_mean, t_mean)`` of the probe from the blocked scatter (module docstring)."""
    h_mean, t_mean, S, C = _joint_scatter(H, T, bias)
    e, V = _scatter_eig(S)
    if lam == 0.0:
        keep = _kept(e, H.shape[0], H.shape[1])
        V, e = V[:, keep], e[keep]
        W = V @ ((V.T @ C) / e[:, None])
    else:
        W = V @ ((V.T @ C) / (e + lam)[:, None])
    return W, h_mean, t_mean


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
    Ht = as_float_array(test_h, "test_h", ndim=2, dtype=None)
    check_same_width(Ht, H, "test_h", "train_h")
    lam = _check_lam(lam)
    bias = check_bool(bias, "bias")
    T = _targets(y, int(y.max()) + 1)
    if _blocked(train_h, H):
        W, h_mean, t_mean = _blocked_weights(H, T, lam, bias)
        out = np.empty((Ht.shape[0], T.shape[1]))
        for part, block in _f64_blocks(Ht):
            out[part] = (block - h_mean) @ W + t_mean
        return out
    H, Ht = np.asarray(H, dtype=np.float64), np.asarray(Ht, dtype=np.float64)
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


def _loo_residuals(loo, lam, lam_name="lams", offset=0):
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
        raise _leverage_error(offset + bad[0], lam, lam_name)
    resid = r0 + U @ (g[:, None] * UtT)
    return resid / one_minus[:, None]


def _leverage_error(i, lam, lam_name):
    return ValueError(
        f"training point {i} of train_h has leverage 1 at {lam_name} value {lam!r}: "
        "its leave-one-out residual divides by zero (use a positive lambda or more "
        "training points than features + 1)"
    )


def _loo_parts(U, s, UtT, Tc, n):
    """The lam-independent parts ``(U, U2, s, UtT, gap, r0)`` for the rows of ``U``."""
    U2 = U * U
    gap = 1.0 - 1.0 / n - U2.sum(axis=1)
    r0 = Tc - U @ UtT
    # a point whose leverage at lam = 0 is 1 up to rounding is interpolated exactly
    interpolated = gap <= _LEVERAGE_TOL
    gap[interpolated] = 0.0
    r0[interpolated] = 0.0
    return U, U2, s, UtT, gap, r0


def _prepare_loo(train_h, train_y):
    """Targets and the lam-independent parts of the leave-one-out residuals.

    Returns ``(T, blocks)``: ``blocks`` yields ``(offset, parts)`` for consecutive rows,
    ``parts`` as :func:`_loo_residuals` takes them (one block for the SVD route).
    """
    H, y = _check_train(train_h, train_y)
    T = _targets(y, int(y.max()) + 1)
    n = T.shape[0]
    if not _blocked(train_h, H):
        Tc = T - T.mean(axis=0)
        U, s = _centred_svd(np.asarray(H, dtype=np.float64))
        parts = _loo_parts(U, s, U.T @ Tc, Tc, n)
        return T, lambda: iter([(0, parts)])
    h_mean, t_mean, S, C = _joint_scatter(H, T, True)
    e, V = _scatter_eig(S)
    keep = _kept(e, n, H.shape[1])
    V, s = V[:, keep], np.sqrt(e[keep])
    UtT = (V.T @ C) / s[:, None]

    def blocks():
        for part, block in _f64_blocks(H):
            U = ((block - h_mean) @ V) / s
            yield part.start, _loo_parts(U, s, UtT, T[part] - t_mean, n)

    return T, blocks


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
    T, blocks = _prepare_loo(train_h, train_y)
    n, K = T.shape
    press = np.zeros(grid.shape[0])
    first_bad = {}  # lam index -> first training point of leverage 1
    for offset, loo in blocks():
        for j, lam in enumerate(grid):
            if j in first_bad:
                continue
            try:
                E = _loo_residuals(loo, float(lam), offset=offset)
            except ValueError:
                _, U2, s, _, gap, _ = loo
                g = lam / (s * s + lam) if lam > 0 else np.zeros_like(s)
                first_bad[j] = offset + int(np.flatnonzero(gap + U2 @ g <= 0)[0])
                continue
            press[j] += np.einsum("ij,ij->", E, E)
    if first_bad:
        j = min(first_bad)
        raise _leverage_error(first_bad[j], float(grid[j]), "lams")
    press /= n * K
    best = int(np.argmin(press))
    return float(grid[best]), press


def loo_scores(train_h, train_y, lam):
    """Exact leave-one-out class scores of the ridge probe with bias.

    Row ``i`` is ``t_i - e_(i)``: the scores :func:`ridge_probe` (``bias=True``)
    would give training point ``i`` if it were fitted on the other ``n - 1`` points,
    computed through the hat matrix (seed 001, "Exact leave-one-out").

    Parameters
    ----------
    train_h, train_y : array_like
        As for :func:`ridge_loo`: the (n, d) training features and their (n,) labels,
        ``K = max(train_y) + 1``.
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
    T, blocks = _prepare_loo(train_h, train_y)
    out = np.empty_like(T)
    for offset, loo in blocks():
        E = _loo_residuals(loo, lam, lam_name="lam", offset=offset)
        out[offset : offset + E.shape[0]] = T[offset : offset + E.shape[0]] - E
    return out
