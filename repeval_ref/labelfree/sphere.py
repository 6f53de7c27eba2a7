"""Label-free metrics on the unit sphere: mean pairwise cosine, alignment, uniformity, spread.

Book: ``book/rankme.md`` (label-free checks); seed 003, section 5 ("Intrinsic
geometry") and section 7 (the evaluation dashboard); Wang and Isola (2020) for
alignment and uniformity; seed 000 ("Measuring a representation without labels") for
the per-coordinate spread of unit embeddings. Every metric here looks only at the
directions :math:`u_i = x_i / \\lVert x_i \\rVert` of the rows (no centring).

The mean pairwise cosine needs only the sum of the unit rows, so it accepts an array,
a ``numpy.memmap`` or an iterator of ``(n_b, d)`` batches and is computed in
:math:`O(Nd)` from :math:`\\lVert\\sum_i u_i\\rVert^2` (003's dashboard builds an
N x N similarity matrix). Uniformity needs all pairs and is computed in row blocks
(never an N x N matrix in memory). :func:`unit_row_transform` and
:func:`unit_moments` give the unit rows and their moments batch by batch, for
Self-Cluster (:mod:`repeval_ref.labelfree.relational`) and the one-pass summary.
"""

from __future__ import annotations

import numpy as np

from .._validation import as_float_array, check_int, check_positive, check_same_length, unit_rows
from ._streaming import accumulate_moments, iter_batches

__all__ = [
    "unit_row_transform",
    "unit_moments",
    "mean_pairwise_cosine_of_sum",
    "mean_pairwise_cosine",
    "alignment",
    "uniformity",
    "unit_coordinate_std",
]


def unit_row_transform(name="X"):
    """A batch transform (for :func:`~repeval_ref.labelfree._streaming.iter_batches`) to unit rows.

    Parameters
    ----------
    name : str, default "X"
        Argument name used in error messages.

    Returns
    -------
    callable
        ``transform(batch, start)``: the rows of ``batch`` divided by their Euclidean
        norms; a zero row raises ``ValueError`` naming its index in the whole input
        (``start`` is the index of the batch's first row).
    """

    def transform(batch, start):
        norms = np.linalg.norm(batch, axis=1, keepdims=True)
        bad = np.flatnonzero(norms[:, 0] == 0)
        if bad.size:
            raise ValueError(
                f"{name} has a zero vector at row {start + bad[0]}; it cannot be unit-normalised"
            )
        return batch / norms

    return transform


def unit_moments(X, name="X"):
    """Float64 mean and centred scatter of the unit-normalised rows of ``X``, streamed.

    Their uncentred Gram matrix gives Self-Cluster, their sum (``n * mean``) the mean
    pairwise cosine (:func:`mean_pairwise_cosine_of_sum`).

    Parameters
    ----------
    X : array_like of shape (n, d), numpy.memmap, or iterator of (n_b, d) arrays
        Features; no zero row.
    name : str, default "X"
        Argument name used in error messages.

    Returns
    -------
    repeval_ref.labelfree._streaming.Moments
    """
    return accumulate_moments(X, name, transform=unit_row_transform(name))


def mean_pairwise_cosine_of_sum(unit_sum, n):
    """Average cosine over the pairs of distinct unit rows, from their sum ``s``.

    .. math:: \\frac{1}{N(N-1)} \\sum_{i \ne j} u_i^\\top u_j
       = \\frac{\\lVert s \\rVert^2 - N}{N (N - 1)},

    clipped to its range :math:`[-1/(N-1), 1]` (rounding can step out of it).

    Parameters
    ----------
    unit_sum : array_like of shape (d,)
        :math:`s = \\sum_i u_i` over the ``n`` unit rows.
    n : int
        Number of rows, ``>= 2``.

    Returns
    -------
    float
        In [-1/(N-1), 1].
    """
    s = as_float_array(unit_sum, "unit_sum", ndim=1)
    n = check_int(n, "n", minimum=2)
    value = (float(s @ s) - n) / (n * (n - 1.0))
    return float(min(1.0, max(-1.0 / (n - 1), value)))


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
    for u in iter_batches(X, "X", transform=unit_row_transform("X")):
        part = u.sum(axis=0)
        s = part if s is None else s + part
        n += u.shape[0]
    if n < 2:
        raise ValueError(f"X needs at least 2 rows, got {n}")
    return mean_pairwise_cosine_of_sum(s, n)


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
    U = np.concatenate(list(iter_batches(X, "X", transform=unit_row_transform("X"))))
    total = -np.inf
    for lo in range(0, n - 1, block_size):
        hi = min(n - 1, lo + block_size)
        sims = U[lo:hi] @ U[lo + 1 :].T  # row r of the block vs rows lo+1 .. n-1
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


def unit_coordinate_std(Z):
    """Standard deviation of every coordinate of the unit-normalised embeddings.

    Each row is divided by its Euclidean norm, then the population standard deviation
    (``ddof=0``) of each column is taken. If all rows point the same way (complete
    collapse) every value is 0; for directions spread uniformly on the sphere each is
    close to :math:`1/\\sqrt{d}`. Seed 000, "Measuring a representation without
    labels" (the per-coordinate spread of unit embeddings as a collapse check). Book
    ``book/rankme.md``.

    Parameters
    ----------
    Z : array_like of shape (n, d)
        Embeddings, no zero row.

    Returns
    -------
    numpy.ndarray of float64, shape (d,)
        Each coordinate's spread over the unit rows, in [0, 1].
    """
    Z = as_float_array(Z, "Z", ndim=2)
    norms = np.linalg.norm(Z, axis=1)
    if np.any(norms == 0):
        raise ValueError(
            f"Z has a zero row (row {int(np.flatnonzero(norms == 0)[0])}); it cannot be normalised"
        )
    return np.std(Z / norms[:, None], axis=0)
