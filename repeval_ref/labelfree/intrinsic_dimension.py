"""Intrinsic dimension from nearest neighbours: the TwoNN estimate and its batched form.

Book: ``book/rankme.md`` ("The manifold metric: TwoNN"); seed 000 ("Measuring a
representation without labels"); seed 002, section 3.3 and appendix B.2.

* :func:`two_nn_id` estimates the intrinsic dimension of the point cloud from the
  ratio of each point's second to first nearest-neighbour distance (Facco et al. 2017).
* :func:`two_nn_id_batched` is 002's version at scale: the neighbour search is an
  :math:`O(N^2 d)` computation, so 002 computes the estimate on batches of ``N_b``
  samples and averages the per-batch estimates, reporting the spread across batches as
  the estimation noise.
* :func:`unique_row_order` finds the distinct rows (TwoNN needs distinct points) in the
  order of ``np.unique(X, axis=0)`` without sorting a copy of ``X``.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from sklearn.neighbors import NearestNeighbors

from .._blocks import release_pages, row_slices
from .._validation import as_float_array, check_int, check_rng
from ._streaming import is_batch_iterator, iter_batches

__all__ = ["two_nn_id", "two_nn_id_batched", "TwoNNBatched", "unique_row_order"]


def _column(X, rows, j):
    """``X[rows, j]`` gathered a block of rows at a time (pages released after each)."""
    out = np.empty(rows.shape[0], dtype=X.dtype)
    for part in row_slices(rows.shape[0], X.shape[1], X.itemsize):
        out[part] = X[rows[part], j]
        release_pages(X)
    return out


def unique_row_order(X):
    """Indices of the distinct rows of ``X``, in the order of ``np.unique(X, axis=0)``.

    ``X[unique_row_order(X)]`` equals ``np.unique(X, axis=0)``: one row of each group of
    equal rows (the first in the sort), the rows in increasing lexicographic order of
    their values (``-0.0`` equals ``0.0``). The rows are sorted one column at a time, a
    column being read only for rows still tied with another on every earlier column, so
    memory is ``O(n)`` besides one block of rows, and a memory-mapped ``X`` is never
    copied.

    Parameters
    ----------
    X : array_like of shape (n, d)
        Finite values; a float32 or float64 array (or memory map) is read as it is.

    Returns
    -------
    numpy.ndarray of intp, shape (n_distinct,)
    """
    X = as_float_array(X, "X", ndim=2, dtype=None)
    n = X.shape[0]
    order = np.arange(n)
    start = np.zeros(n, dtype=bool)  # first position of each group of tied rows
    start[0] = True
    for j in range(X.shape[1]):
        gid = np.cumsum(start) - 1
        active = np.bincount(gid)[gid] > 1
        if not active.any():
            break
        pos = np.flatnonzero(active)
        vals = _column(X, order[pos], j) + X.dtype.type(0)  # -0.0 + 0.0 is 0.0
        sub = np.lexsort((vals, gid[pos]))  # groups stay where they are, sorted inside
        order[pos] = order[pos][sub]
        vals, g = vals[sub], gid[pos][sub]
        start[pos[1:]] |= (vals[1:] != vals[:-1]) & (g[1:] == g[:-1])
    return order[start]


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


TwoNNBatched = namedtuple("TwoNNBatched", ["mean", "std", "estimates"])
TwoNNBatched.__doc__ = """Result of :func:`two_nn_id_batched`.

mean : float
    Average of the per-batch TwoNN estimates.
std : float or None
    Their sample standard deviation (``ddof=1``); ``None`` with a single batch.
estimates : numpy.ndarray of shape (n_batches,)
    The per-batch estimates.
"""


def two_nn_id_batched(X, batch_size=2000, rng=None, rows=None):
    """TwoNN intrinsic dimension averaged over disjoint random batches (as in 002).

    The rows are shuffled with ``rng`` and cut into
    :math:`B = \\max(1, \\lfloor N / N_b \\rfloor)` disjoint batches of
    :math:`\\lfloor N/B \\rfloor` or :math:`\\lceil N/B \\rceil` rows (every row is used
    once; each batch has at least ``N_b`` rows unless ``N < N_b``). On each batch
    :math:`\\hat d_b = n_b / \\sum_{i \\in b} \\log(r_{2,i} / r_{1,i})` with
    neighbours searched *within the batch*
    (:func:`two_nn_id`); the result is the mean of the
    :math:`\\hat d_b` and their standard deviation across batches.

    Smaller batches make the neighbours farther apart, which changes the scale at
    which the dimension is measured: compare models with the same ``batch_size``.
    Cost :math:`O(N N_b d)` instead of :math:`O(N^2 d)`. When ``X`` is an iterator,
    each batch it yields is used as one TwoNN batch (no shuffling; ``batch_size`` and
    ``rng`` are ignored). Not centred (distances only). Seed 002, sections 3.3 and B.2.

    Parameters
    ----------
    X : array_like of shape (n, d), numpy.memmap, or iterator of (n_b, d) arrays
        Points; every batch needs at least 3 rows and no duplicate points.
    batch_size : int, default 2000
        ``N_b``, ``>= 3``.
    rng : numpy.random.Generator or int, optional
        Source of the shuffle.
    rows : array_like of int, shape (m,), optional
        Use the points ``X[rows]`` (for example the distinct rows,
        :func:`unique_row_order`), each batch gathered on its own, so that ``X[rows]``
        is never copied whole; the result equals that of ``two_nn_id_batched(X[rows])``.
        Only with an array ``X``.

    Returns
    -------
    TwoNNBatched
        ``(mean, std, estimates)``; ``std`` is ``None`` when there is one batch.
    """
    if is_batch_iterator(X):
        if rows is not None:
            raise ValueError("rows selects rows of an array; X is an iterator of batches")
        estimates = [two_nn_id(b) for b in iter_batches(X, "X")]
    else:
        batch_size = check_int(batch_size, "batch_size", minimum=3)
        rng = check_rng(rng)
        if not isinstance(X, np.ndarray):
            X = as_float_array(X, "X", ndim=2)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-dimensional, got shape {X.shape}")
        if rows is None:
            index = np.arange(X.shape[0])
        else:
            index = np.asarray(rows)
            if index.ndim != 1 or not (np.issubdtype(index.dtype, np.integer) or index.size == 0):
                raise ValueError(f"rows must be a 1-D array of row indices, got {index!r}")
            if index.size and (index.min() < 0 or index.max() >= X.shape[0]):
                raise ValueError(f"rows must lie in 0 .. {X.shape[0] - 1} (the rows of X)")
        n = index.shape[0]
        if n < 3:
            raise ValueError(f"X needs at least 3 rows, got {n}")
        n_batches = max(1, n // batch_size)
        perm = rng.permutation(n)
        estimates = []
        for part in np.array_split(perm, n_batches):
            batch = np.asarray(X[index[np.sort(part)]])
            release_pages(X)
            estimates.append(two_nn_id(as_float_array(batch, "X", ndim=2)))
    est = np.asarray(estimates, dtype=float)
    std = float(np.std(est, ddof=1)) if est.shape[0] > 1 else None
    return TwoNNBatched(float(est.mean()), std, est)
