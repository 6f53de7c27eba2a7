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

The exact floor needs an exact rank, and real features are almost always of full rank even
when their spectrum is dominated by a few directions (a small effective rank). The soft
version, :func:`soft_rank_floor`, replaces the rank by the energy left in the spectrum's
tail and pays for it with a bound ``B`` on the probe's weights: with ``Hc`` and ``Yc`` the
column-centred ``H`` and ``Y``, for every ``k`` and every probe with ``||W||_F <= B``::

    ||Y - H W - 1 b^T||_F  >=  sqrt( sum_{j > k} sigma_j(Yc)^2 )  -  sigma_{k+1}(Hc) * B

(and the same with ``||W||_2 <= B`` and ``sigma_{k+1}(Hc)`` replaced by the tail energy
``sqrt(sum_{j > k} sigma_j(Hc)^2)``). :func:`norm_constrained_residual` computes the best
residual under the same weight budget, the quantity the soft floor bounds.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.optimize

from ._validation import as_float_array, as_labels, check_int, check_positive

__all__ = ["rank_bound", "soft_rank_floor", "norm_constrained_residual"]

_NORMS = ("frobenius", "spectral")


def _one_hot_problem(H, y, n_classes):
    """Validated ``H`` (float64, n x d), labels ``y`` (int64, n) and one-hot ``Y`` (n x K)."""
    H = as_float_array(H, "H")
    n_classes = check_int(n_classes, "n_classes", minimum=1)
    y = as_labels(y, "y", n=H.shape[0], n_classes=n_classes)
    Y = np.zeros((H.shape[0], n_classes))
    Y[np.arange(H.shape[0]), y] = 1.0
    return H, y, Y


def _above_rounding(s, shape):
    """Mask of the singular values ``s`` (descending) of a matrix of ``shape`` that count
    as nonzero: those above ``max(shape) * eps * s[0]``, as in ``numpy.linalg.matrix_rank``."""
    return s > max(shape) * np.finfo(float).eps * (s[0] if s.size else 0.0)


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
    H, y, Y = _one_hot_problem(H, y, n_classes)
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


def _centred_problem(H, y, n_classes):
    """Validated, column-centred ``H`` (float64) and one-hot ``Y`` (n x K)."""
    H, _, Y = _one_hot_problem(H, y, n_classes)
    return H - H.mean(axis=0), Y - Y.mean(axis=0)


def soft_rank_floor(H, y, n_classes, weight_norm, norm="frobenius"):
    """Lower bound on the least-squares error of every affine probe with bounded weights.

    For the column-centred features ``Hc`` and one-hot targets ``Yc`` and every
    ``k = 0 .. K - 1``, any probe ``P = H W + 1 b^T`` with ``||W|| <= weight_norm`` has

    ``||Y - P||_F >= sqrt(T_k) - t_k * weight_norm``,  ``T_k = sum_{j > k} sigma_j(Yc)^2``,

    where ``t_k = sigma_{k+1}(Hc)`` when the weights are bounded in Frobenius norm, and
    ``t_k = sqrt(sum_{j > k} sigma_j(Hc)^2)`` (the energy of the spectrum's tail) when they
    are bounded in spectral norm. The floor is the largest of the squared, clipped bounds.
    It needs no exact rank: features of full rank whose spectrum falls off after a few
    directions (a small effective rank) still get a positive floor when the weight budget
    is modest. When ``Hc`` has exact rank ``k`` the ``k``-th term is the Eckart-Young tail
    ``T_k`` of ``Yc`` whatever the budget, at least the floor of :func:`rank_bound`.
    Singular values of ``Hc`` below ``max(n, d) * eps`` times the largest count as zero.

    Parameters
    ----------
    H, y, n_classes
        As for :func:`rank_bound`: the (n, d) representations, their labels in
        ``0 .. n_classes - 1`` and the number of classes ``K >= 1``.
    weight_norm : float
        The budget ``B >= 0`` on the probe's weight matrix ``W`` (shape ``(d, K)``); the
        bias is free.
    norm : {"frobenius", "spectral"}, default "frobenius"
        Which norm of ``W`` the budget bounds.

    Returns
    -------
    floor : float
        ``max_k max(0, sqrt(T_k) - t_k * B)^2``, a lower bound on
        ``||Y - H W - 1 b^T||_F^2`` for every admissible ``W`` and every ``b``.
    per_k : numpy.ndarray of float64, shape (K,)
        The squared, clipped bound for each ``k = 0 .. K - 1`` (the last is 0).

    Raises
    ------
    ValueError
        Empty ``H``, NaN/inf, mismatched lengths, ``n_classes < 1``, labels outside
        ``0 .. n_classes - 1``, a negative or non-finite ``weight_norm``, or an unknown
        ``norm``.

    Notes
    -----
    Book ``book/rank.md``, "A soft version for effective rank" (the theorem and its proof).
    """
    Hc, Yc = _centred_problem(H, y, n_classes)
    weight_norm = check_positive(weight_norm, "weight_norm", allow_zero=True)
    if norm not in _NORMS:
        raise ValueError(f"norm must be one of {_NORMS}, got {norm!r}")
    K = Yc.shape[1]
    sy2 = np.sort(np.linalg.svd(Yc, compute_uv=False) ** 2)[::-1]
    tail_y = np.array([sy2[k:].sum() for k in range(K)])  # T_k, k = 0 .. K-1
    sh = np.linalg.svd(Hc, compute_uv=False)
    # values at rounding level count as zero, as in numpy.linalg.matrix_rank
    sh[~_above_rounding(sh, Hc.shape)] = 0.0
    sh = np.concatenate([sh, np.zeros(max(0, K - sh.size))])  # sigma_1 .. sigma_m, padded
    if norm == "frobenius":
        t = sh[:K]  # sigma_{k+1}(Hc)
    else:
        t = np.sqrt(np.array([np.sum(sh[k:] ** 2) for k in range(K)]))
    per_k = np.clip(np.sqrt(tail_y) - t * weight_norm, 0.0, None) ** 2
    per_k[tail_y <= 0] = 0.0
    return float(per_k.max()), per_k


def norm_constrained_residual(H, y, n_classes, weight_norm):
    """Best least-squares error of an affine probe whose weights have ``||W||_F <= B``.

    Computes ``min ||Y - H W - 1 b^T||_F^2`` over ``b`` free and ``||W||_F <= weight_norm``.
    The free bias centres both sides; the constrained problem is then solved through the
    SVD of the centred features: if the minimum-norm least-squares solution fits the
    budget it is the answer, otherwise the solution is the ridge fit whose penalty makes
    ``||W||_F`` equal to the budget (found by Brent's method on that penalty). Singular
    values below ``max(n, d) * eps`` times the largest count as zero.

    Parameters
    ----------
    H : array_like of shape (n, d)
        Representations.
    y : array_like of int, shape (n,)
        Labels in ``0 .. n_classes - 1``.
    n_classes : int
        Number of classes ``K >= 1``.
    weight_norm : float
        The budget ``B >= 0`` on ``||W||_F``.

    Returns
    -------
    residual : float
        The constrained minimum of the squared Frobenius error.
    norm_used : float
        ``||W||_F`` of the minimiser (at most ``weight_norm``).

    Raises
    ------
    ValueError
        As :func:`soft_rank_floor`, without the ``norm`` argument.

    Notes
    -----
    Book ``book/rank.md``, "A soft version for effective rank": the quantity that
    :func:`soft_rank_floor` bounds from below.
    """
    Hc, Yc = _centred_problem(H, y, n_classes)
    B = check_positive(weight_norm, "weight_norm", allow_zero=True)
    U, s, _ = np.linalg.svd(Hc, full_matrices=False)
    keep = _above_rounding(s, Hc.shape)
    U, s = U[:, keep], s[keep]
    C = U.T @ Yc  # coordinates of Yc along the left vectors
    c2 = np.sum(C**2, axis=1)
    total = float(np.sum(Yc**2))
    if s.size == 0:
        return total, 0.0

    def weight_norm_at(lam):  # ||W||_F of the ridge fit with penalty lam
        return float(np.sqrt(np.sum((s / (s**2 + lam)) ** 2 * c2)))

    def residual_at(lam):
        shrink = s**2 / (s**2 + lam)
        return float(total - np.sum((2 * shrink - shrink**2) * c2))

    if weight_norm_at(0.0) <= B:
        return residual_at(0.0), weight_norm_at(0.0)
    if B == 0.0:
        return total, 0.0
    hi = float(np.sqrt(np.sum(s**2 * c2))) / B  # there the norm is at most B
    lam = scipy.optimize.brentq(
        lambda lam_: weight_norm_at(lam_) - B,
        0.0,
        hi,
        xtol=1e-14 * hi,
        rtol=4 * np.finfo(float).eps,
        maxiter=500,
    )
    return residual_at(lam), weight_norm_at(lam)
