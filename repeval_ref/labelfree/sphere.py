"""Intrinsic geometry of a representation: dimension, isotropy, alignment, uniformity.

Seed 003, section 5 ("Intrinsic geometry") and section 7 (the evaluation dashboard);
Wang and Isola (2020) for alignment and uniformity. The spectral quantities use the
eigenvalues :math:`\\lambda_1 \\ge \\dots \\ge \\lambda_d` of the *centred* covariance
(003 centres), streamed through a d x d matrix (:mod:`repeval_ref._streaming`); the
mean pairwise cosine needs only the sum of the unit rows. So all of them accept an
array, a ``numpy.memmap`` or an iterator of ``(n_b, d)`` batches. Uniformity needs
all pairs and is computed in row blocks (never an N x N matrix in memory).

Differences from 003's dashboard code: the average cosine is computed from
:math:`\\lVert\\sum_i u_i\\rVert^2` in :math:`O(Nd)` instead of an N x N similarity
matrix; the isotropy ratio takes the smallest of all ``d`` covariance eigenvalues
(zero when the covariance is rank deficient, e.g. ``N <= d``), not the smallest of the
``min(N, d)`` singular values.
"""
from __future__ import annotations

import numpy as np

from ._streaming import accumulate_moments, gram_eigenvalues, iter_batches
from .._validation import as_float_array, check_int, check_positive, check_same_length, unit_rows
from .relational import _unit_batch

__all__ = [
    "participation_ratio",
    "explained_variance_dimension",
    "isotropy_ratio",
    "mean_pairwise_cosine",
    "alignment",
    "uniformity",
]


def _cov_eigenvalues(X):
    mom = accumulate_moments(X, "X")
    lam = gram_eigenvalues(mom.gram(True))
    if not lam[0] > 0:
        raise ValueError("X is constant (its covariance is zero); the metric is undefined")
    return lam, mom.n


def participation_ratio(X):
    """Participation ratio of the covariance spectrum, an effective dimension.

    .. math:: d_{\\text{eff}} = \\frac{\\bigl(\\sum_i \\lambda_i\\bigr)^2}{\\sum_i \\lambda_i^2}
       = \\frac{(\\sum_i \\sigma_i^2)^2}{\\sum_i \\sigma_i^4},

    ``d`` when all eigenvalues are equal, 1 when one direction carries all the
    variance. Centred. Seed 003, section 5 ("Effective dimension").

    Parameters
    ----------
    X : array_like of shape (n, d), numpy.memmap, or iterator of (n_b, d) arrays

    Returns
    -------
    float
        In [1, d].
    """
    lam, _ = _cov_eigenvalues(X)
    return _pr_from_spectrum(lam)


def _pr_from_spectrum(lam):
    s = lam / lam[0]  # scale-free; avoids overflow of the squares
    return float(s.sum() ** 2 / np.sum(s * s))


def explained_variance_dimension(X, threshold=0.9):
    """Number of principal components needed to explain a share ``threshold`` of the variance.

    The smallest ``k`` with :math:`\\sum_{i \\le k} \\lambda_i \\ge \\text{threshold}
    \\sum_i \\lambda_i`; the comparison allows a relative rounding slack of 1e-12 (ten
    equal eigenvalues need exactly 9 components for 90 %). Centred. Seed 003, section
    5 (``dims_for_90pct_var``).

    Parameters
    ----------
    X : array_like of shape (n, d), numpy.memmap, or iterator of (n_b, d) arrays
    threshold : float, default 0.9
        In (0, 1].

    Returns
    -------
    int
    """
    threshold = check_positive(threshold, "threshold")
    if threshold > 1:
        raise ValueError(f"threshold must be <= 1, got {threshold}")
    lam, _ = _cov_eigenvalues(X)
    return _evd_from_spectrum(lam, threshold)


def _evd_from_spectrum(lam, threshold):
    share = np.cumsum(lam) / lam.sum()
    return int(np.argmax(share >= threshold - 1e-12)) + 1


def isotropy_ratio(X):
    """Smallest over largest eigenvalue of the covariance, :math:`\\lambda_d / \\lambda_1`.

    1 for perfectly isotropic features, 0 when some direction has no variance.
    Eigenvalues below :math:`d\\,\\epsilon\\,\\lambda_1` (the rounding level of the
    streamed d x d matrix) count as 0. Centred. Seed 003, section 5 ("Isotropy").

    Parameters
    ----------
    X : array_like of shape (n, d), numpy.memmap, or iterator of (n_b, d) arrays

    Returns
    -------
    float
        In [0, 1].
    """
    lam, _ = _cov_eigenvalues(X)
    return _isotropy_from_spectrum(lam)


def _isotropy_from_spectrum(lam):
    d = lam.shape[0]
    smallest = lam[-1] if lam[-1] > d * np.finfo(float).eps * lam[0] else 0.0
    return float(smallest / lam[0])


def mean_pairwise_cosine(X):
    """Average cosine similarity over all pairs of distinct rows, in O(N d).

    With unit rows :math:`u_i = x_i / \\lVert x_i \\rVert` and :math:`s = \\sum_i u_i`,

    .. math:: \\frac{1}{N(N-1)} \\sum_{i \\ne j} u_i^\\top u_j
       = \\frac{\\lVert s \\rVert^2 - N}{N (N - 1)},

    because :math:`\\lVert s \\rVert^2 = \\sum_{i,j} u_i^\\top u_j` and the ``N``
    diagonal terms are 1. High values (e.g. above 0.5) flag an anisotropic, cone-shaped
    representation. Not centred. Seed 003, section 5 (``avg_cosine_sim``, there
    computed from an N x N matrix).

    Parameters
    ----------
    X : array_like of shape (n, d), numpy.memmap, or iterator of (n_b, d) arrays
        ``n >= 2``, no zero row.

    Returns
    -------
    float
        In [-1/(N-1), 1].
    """
    s = None
    n = 0
    for u in iter_batches(X, "X", transform=_unit_batch("X")):
        part = u.sum(axis=0)
        s = part if s is None else s + part
        n += u.shape[0]
    if n < 2:
        raise ValueError(f"X needs at least 2 rows, got {n}")
    value = (float(s @ s) - n) / (n * (n - 1.0))
    return float(min(1.0, max(-1.0 / (n - 1), value)))


def alignment(X, Y, alpha=2.0):
    """Alignment of positive pairs (Wang and Isola 2020): mean distance of unit pairs.

    .. math:: \\mathcal L_{\\text{align}} = \\frac1N \\sum_i
       \\lVert u_i - v_i \\rVert_2^{\\alpha},
       \\quad u_i = \\frac{x_i}{\\lVert x_i\\rVert},\\; v_i = \\frac{y_i}{\\lVert y_i\\rVert},

    where row ``i`` of ``X`` and of ``Y`` embed two views of the same sample. Lower is
    better (0 when every pair coincides; at most :math:`2^{\\alpha}`). Seed 003,
    section 7.

    Parameters
    ----------
    X, Y : array_like of shape (n, d)
        Embeddings of the two views, in the same order; no zero row.
    alpha : float, default 2.0
        Exponent, ``> 0``.

    Returns
    -------
    float
    """
    X = as_float_array(X, "X", ndim=2)
    Y = as_float_array(Y, "Y", ndim=2)
    check_same_length(X=X, Y=Y)
    if X.shape[1] != Y.shape[1]:
        raise ValueError(f"X has {X.shape[1]} columns but Y has {Y.shape[1]}")
    alpha = check_positive(alpha, "alpha")
    diff = unit_rows(X, "X") - unit_rows(Y, "Y")
    return float(np.mean(np.linalg.norm(diff, axis=1) ** alpha))


def uniformity(X, t=2.0, block_size=None):
    """Uniformity (Wang and Isola 2020): log mean Gaussian potential over distinct pairs.

    .. math:: \\mathcal L_{\\text{uniform}} = \\log \\frac{2}{N(N-1)} \\sum_{i<j}
       e^{-t \\lVert u_i - u_j \\rVert_2^2},
       \\qquad \\lVert u_i - u_j \\rVert^2 = 2 - 2 u_i^\\top u_j,

    on unit rows :math:`u_i`. Lower (more negative) is more uniform; 0 for a collapse
    to one point. By Jensen's inequality it is at least :math:`-t(2 - 2\\bar c)`, with
    :math:`\\bar c \\ge -1/(N-1)` the mean pairwise cosine (:func:`mean_pairwise_cosine`);
    points spread evenly over the sphere in high dimension come close to :math:`-2t`.
    The sum runs over row blocks of ``block_size`` rows against all later rows with a
    running log-sum-exp, so nothing under- or overflows and no N x N matrix is held:
    memory is :math:`O(N d + \\text{block} \\times N)` (the unit rows are kept; the
    cost is :math:`O(N^2 d)`, so subsample very large sets). Not centred.
    Seed 003, section 7 (there with ``torch.pdist``).

    Parameters
    ----------
    X : array_like of shape (n, d) or numpy.memmap
        ``n >= 2``, no zero row.
    t : float, default 2.0
        Potential scale, ``> 0``.
    block_size : int, optional
        Rows per block (default: about 32 MB of similarities per block).

    Returns
    -------
    float
        In [-4t, 0].
    """
    t = check_positive(t, "t")
    if not isinstance(X, np.ndarray):
        X = as_float_array(X, "X", ndim=2, min_rows=2)
    elif X.ndim != 2 or X.shape[0] < 2:
        raise ValueError(f"X must be 2-dimensional with at least 2 rows, got shape {X.shape}")
    n = X.shape[0]
    if block_size is None:
        block_size = max(1, (4 * 2**20) // max(1, n))
    block_size = check_int(block_size, "block_size", minimum=1)
    # unit rows, streamed in row blocks (a float32 memmap stays mapped)
    U = np.concatenate(list(iter_batches(X, "X", transform=_unit_batch("X"))))
    total = -np.inf
    for lo in range(0, n - 1, block_size):
        hi = min(n - 1, lo + block_size)
        sims = U[lo:hi] @ U[lo + 1:].T  # row r of the block vs rows lo+1 .. n-1
        # keep only pairs (i, j) with j > i: column c corresponds to row lo + 1 + c
        rows = np.arange(lo, hi)[:, None]
        cols = np.arange(lo + 1, n)[None, :]
        expo = -t * (2.0 - 2.0 * sims)
        expo = np.where(cols > rows, expo, -np.inf)
        m = float(expo.max())
        block = m + np.log(np.exp(expo - m).sum())
        total = np.logaddexp(total, block)
    n_pairs = n * (n - 1) / 2.0
    return float(min(0.0, total - np.log(n_pairs)))
