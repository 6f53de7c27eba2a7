"""Label-free measures of a representation: effective rank (RankMe) and TwoNN dimension.

Both take a feature matrix and no labels. They are the checks the book recommends for
a run where no labelled data exist yet (seed 000, "Measuring a representation without
labels"; seed 002, section 3, spectral and manifold metrics).

* :func:`rankme` summarises the singular-value spectrum by the exponential of its
  entropy. It counts how many directions carry the spread of the features, so it
  falls when the representation collapses.
* :func:`two_nn_id` estimates the intrinsic dimension of the point cloud from the
  ratio of each point's second to first nearest-neighbour distance.

The private helper :func:`_singular_values` is shared with other spectral metrics
(stable rank, NE-sum, power-law fits) that take the same spectrum.
"""
from __future__ import annotations

import numpy as np
from sklearn.neighbors import NearestNeighbors

from .._validation import as_float_array, check_positive

__all__ = ["rankme", "rankme_normalized", "two_nn_id"]


def _singular_values(Z, *, center=False):
    """Return the singular values of ``Z`` (optionally column-centred), largest first.

    Parameters
    ----------
    Z : numpy.ndarray of shape (n, d)
        Already validated, finite float array (not modified).
    center : bool
        If True, subtract the column means before the decomposition, so that the
        spectrum describes the covariance of the features rather than their second
        moment about the origin. A column that is exactly constant becomes exactly
        zero (rounding in its mean would otherwise leave residues of order 1e-17).

    Returns
    -------
    numpy.ndarray of shape (min(n, d),)
        Non-negative singular values in decreasing order; all zero for a zero matrix.

    Notes
    -----
    The matrix is divided by its largest absolute entry before the SVD and the
    singular values are multiplied back, which avoids overflow and underflow for
    features of extreme magnitude.
    """
    if center:
        constant = np.ptp(Z, axis=0) == 0
        Z = Z - Z.mean(axis=0, keepdims=True)
        Z[:, constant] = 0.0
    scale = float(np.max(np.abs(Z))) if Z.size else 0.0
    if scale == 0.0:
        return np.zeros(min(Z.shape))
    return scale * np.linalg.svd(Z / scale, compute_uv=False)


def _check_center(center):
    if not isinstance(center, (bool, np.bool_)):
        raise TypeError(f"center must be True or False, got {center!r}")
    return bool(center)


def rankme(Z, center=False, eps=1e-7):
    """Effective rank of a feature matrix (RankMe, Garrido et al. 2023).

    With singular values :math:`\\sigma_1 \\ge \\dots \\ge \\sigma_m` of ``Z``,
    :math:`m = \\min(n, d)`, the normalised shares are

    .. math:: p_i = \\frac{\\sigma_i}{\\sum_j \\sigma_j} + \\epsilon,

    and the effective rank is :math:`\\exp\\bigl(-\\sum_i p_i \\log p_i\\bigr)`.
    Equal non-zero singular values in ``r`` directions give ``r`` (up to the tiny
    :math:`\\epsilon`); one dominant direction gives a value near 1.

    Book ``book/rankme.md`` (seed 000, "Measuring a representation without
    labels"; seed 002, section 3.1). Garrido et al. take the embeddings as
    they are (``center=False``, the default); the course's simulation centres them
    first (``center=True``). State the convention when you compare numbers.

    Parameters
    ----------
    Z : array_like of shape (n, d), numpy.memmap, or iterator of (n_b, d) arrays
        Features, one row per sample. A memory map or an iterator of row batches is
        streamed through the d x d Gram matrix (memory independent of ``n``): its
        first ``min(n, d)`` eigenvalues are kept and those below
        ``d * eps_machine * lambda_1`` (the Gram matrix's rounding level) are taken as
        zero, so the value matches the SVD of the array to about 1e-10 relative.
    center : bool, default False
        Subtract the column means before the SVD. Makes the value invariant to a
        translation of all features.
    eps : float, default 1e-7
        Small non-negative constant added to every share to keep the logarithm
        finite; ``eps=0`` gives the exact spectral entropy (``0 log 0 = 0``).

    Returns
    -------
    float
        The effective rank, between about 1 and ``min(n, d)``.

    Raises
    ------
    ValueError
        If ``Z`` is not a finite 2-D array, if ``eps < 0``, or if all singular
        values are zero (an all-zero matrix, or constant columns with
        ``center=True``).
    """
    center = _check_center(center)
    eps = check_positive(eps, "eps", allow_zero=True)
    sigma, _ = _spectrum_any(Z, center)
    return _rankme_from_sigma(sigma, center, eps)


def _rankme_from_sigma(sigma, center, eps):
    """Exponential of the entropy of the shares ``sigma / sum(sigma) + eps``."""
    total = float(sigma.sum())
    if not total > 0:
        raise ValueError(
            "Z has all singular values zero"
            + (" after centring (every column is constant)" if center else " (Z is all zeros)")
            + "; the effective rank is undefined"
        )
    p = sigma / total + eps
    # 0 * log 0 is taken as 0 (only reachable with eps == 0).
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return float(np.exp(-terms.sum()))


def _spectrum_any(Z, center):
    """Singular values of ``Z`` (largest first, ``min(n, d)`` of them) and its width ``d``.

    An in-memory array goes through an SVD of the matrix; a ``numpy.memmap`` or an
    iterator of row batches through the eigenvalues of the streamed float64 d x d
    Gram matrix (:mod:`repeval_ref._streaming`), so ``N`` may exceed the memory. See
    :func:`_sigma_from_gram` for how the Gram route is made to match the SVD.
    """
    from ._streaming import accumulate_moments, gram_eigenvalues, is_batch_iterator

    if is_batch_iterator(Z) or isinstance(Z, np.memmap):
        mom = accumulate_moments(Z, "Z")
        return _sigma_from_gram(gram_eigenvalues(mom.gram(center)), mom.n), mom.d
    Z = as_float_array(Z, "Z", ndim=2)
    return _singular_values(Z, center=center), Z.shape[1]


def _sigma_from_gram(lam, n):
    """Singular values from the eigenvalues of a d x d Gram matrix of ``n`` rows.

    Parameters
    ----------
    lam : numpy.ndarray of shape (d,)
        Eigenvalues of :math:`Z^\\top Z` (or of the centred scatter), largest first,
        non-negative.
    n : int
        Number of rows of ``Z``.

    Returns
    -------
    numpy.ndarray of shape (min(n, d),)
        :math:`\\sqrt{\\lambda_i}` for the first ``min(n, d)`` eigenvalues (an SVD of
        ``Z`` has only that many), with eigenvalues below :math:`d\\,\\epsilon\\,
        \\lambda_1` set to zero: that is the rounding level of the Gram matrix, and a
        zero singular value of ``Z`` would otherwise come out near
        :math:`\\sqrt{d\\,\\epsilon}\\,\\sigma_1` (about 1e-7 relative), which is the size
        of RankMe's ``eps`` and would shift the value in the 7th digit.
    """
    d = lam.shape[0]
    lam = np.array(lam[:min(int(n), d)], dtype=float)
    if lam.size and lam[0] > 0:
        lam[lam < d * np.finfo(float).eps * lam[0]] = 0.0
    return np.sqrt(lam)


def rankme_normalized(Z, center=False, eps=1e-7):
    """RankMe divided by the feature dimension, :math:`\\text{RankMe}^\\star = \\text{RankMe}/d`.

    Seed 002, section 4.1 divides RankMe (and NE-sum, kappa) by the representation
    dimension ``d`` (the number of columns, not ``min(N, d)``) to compare encoders of
    different widths. See :func:`rankme` for the parameters, the centring convention
    and the streamed inputs (``numpy.memmap`` or an iterator of batches). Book
    ``book/rankme.md``.

    With ``eps=0`` the value lies in (0, 1]. With ``eps > 0`` it can exceed 1
    slightly, because every share is raised by ``eps``: its largest value, reached
    by ``d`` equal non-zero singular values (``n >= d``), is
    :math:`(1/d + \\epsilon)^{-(1 + d\\epsilon)} / d \\approx 1 + d\\epsilon(\\ln d - 1)`,
    for example 1.00014 for ``d = 300`` and the default ``eps = 1e-7``.

    Parameters
    ----------
    Z : array_like of shape (n, d), numpy.memmap, or iterator of (n_b, d) arrays
        Features, one row per sample.
    center : bool, default False
        Subtract the column means first.
    eps : float, default 1e-7
        Added to every share, ``>= 0``.

    Returns
    -------
    float
        ``rankme(Z, center, eps) / d``; in (0, 1] for ``eps=0``, at most
        :math:`(1/d + \\epsilon)^{-(1 + d\\epsilon)} / d` otherwise.
    """
    center = _check_center(center)
    eps = check_positive(eps, "eps", allow_zero=True)
    sigma, d = _spectrum_any(Z, center)
    return _rankme_from_sigma(sigma, center, eps) / d


def _two_nearest_distances(X):
    """Distances from each row of ``X`` to its first and second nearest other rows.

    Uses scikit-learn's neighbour search (a tree or a chunked brute-force pass), so no
    n x n distance matrix is held in memory. A row is not its own neighbour, but an
    exact copy of it is (at distance 0).

    The brute-force search computes squared distances as ``|x|^2 - 2 x.y + |y|^2``,
    which loses most digits for close points far from the origin (features with a
    large common offset), and can even round a small distance to 0. So the points are
    centred and divided by their largest entry first (no ratio of distances changes),
    the two distances of the neighbours it finds are recomputed from the coordinate
    differences, and when the rounding of the expansion (about ``eps * max |x|^2``)
    exceeds ``1e-8`` times the smallest squared distance found, the search is redone
    with a ball tree, which works with coordinate differences throughout (exact, but
    slower in high dimension).

    Returns
    -------
    r1, r2 : numpy.ndarray of shape (n,)
    """
    Xc = X - X.mean(axis=0)
    top = float(np.max(np.abs(Xc)))
    if top > 0:  # the ratios r2 / r1 do not change; squares neither under- nor overflow
        Xc /= top

    def search(**kw):
        nn = NearestNeighbors(n_neighbors=2, **kw).fit(Xc)
        _, idx = nn.kneighbors()  # X=None: each fitted point, excluding itself
        d1 = np.linalg.norm(Xc - Xc[idx[:, 0]], axis=1)
        d2 = np.linalg.norm(Xc - Xc[idx[:, 1]], axis=1)
        return np.minimum(d1, d2), np.maximum(d1, d2)

    r1, r2 = search()
    big = float(np.max(np.einsum("ij,ij->i", Xc, Xc)))
    closest = float(np.min(r1))  # recomputed exactly: 0 only for a true duplicate
    if closest > 0 and np.finfo(np.float64).eps * big > 1e-8 * closest**2:
        r1, r2 = search(algorithm="ball_tree")
    return r1, r2


def two_nn_id(X):
    """Intrinsic dimension by the TwoNN maximum-likelihood estimate (Facco et al. 2017).

    For each point let :math:`r_1, r_2` be the Euclidean distances to its first and
    second nearest neighbours (the point itself excluded) and
    :math:`\\mu_i = r_{2,i} / r_{1,i}`. On a locally uniform ``d``-dimensional
    manifold :math:`\\mu` follows a Pareto law with shape ``d``, whose
    maximum-likelihood estimate is

    .. math:: \\hat d = \\frac{N}{\\sum_{i=1}^{N} \\log \\mu_i}.

    All points are used (no discarded fraction). The unbiased variant
    :math:`(N-1)/\\sum_i \\log \\mu_i` differs by the factor :math:`(N-1)/N`.

    Book ``book/rankme.md`` (label-free checks; seed 002, section 3.3, manifold
    metrics).

    Parameters
    ----------
    X : array_like of shape (n, d)
        Points, one per row; ``n >= 3``.

    Returns
    -------
    float
        The estimated intrinsic dimension.

    Raises
    ------
    ValueError
        If ``X`` has fewer than 3 rows, holds NaN/inf, contains duplicate points
        (a zero nearest-neighbour distance makes the ratio undefined), or if every
        ratio equals 1 (the sum of logarithms is zero).
    """
    X = as_float_array(X, "X", ndim=2, min_rows=3)
    r1, r2 = _two_nearest_distances(X)
    n_dup = int(np.count_nonzero(r1 == 0))
    if n_dup:
        raise ValueError(
            f"X contains duplicate points ({n_dup} rows have a copy at distance 0); "
            "remove duplicates before estimating the TwoNN dimension"
        )
    log_mu = np.log(r2) - np.log(r1)
    total = float(log_mu.sum())
    if not total > 0:
        raise ValueError(
            "X gives a zero sum of log(r2/r1) (every point is as far from its second "
            "as from its first neighbour); the TwoNN dimension is undefined"
        )
    return float(X.shape[0] / total)
