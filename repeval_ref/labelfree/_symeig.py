"""Eigenvalues of a large dense symmetric matrix in two stages: to a band, then LAPACK.

Book: ``book/rankme.md`` (the diffusion spectral entropy,
:func:`repeval_ref.diffusion_spectral_entropy`, of a 10,000-row subsample) and
``book/performance.md``.

LAPACK's one-stage route (``dsytrd`` inside ``eigh``/``eigvalsh``) reduces the matrix to
tridiagonal form with one matrix-vector product per column, so it streams the whole
trailing matrix from memory ``n`` times; at ``n = 10,000`` that is minutes on two
cores. Here the matrix is first reduced to a band of half-width ``b`` by blocked
Householder transformations, whose two-sided updates are matrix-matrix products
(level-3 BLAS), and the band's eigenvalues come from ``scipy.linalg.eig_banded``
(LAPACK ``?sbevd``: band to tridiagonal, then the tridiagonal eigenvalues). Both stages
are orthogonal similarity transforms, so the eigenvalues are those of the input up to
rounding (backward stable, like the one-stage route).

Step ``j`` (columns ``j .. j + b - 1``): the QR factorisation of the panel below the band,
``P = Q R`` with ``Q = I - V T V^T`` (compact WY form; ``T`` from the recurrence of
LAPACK's ``dlarft``), puts ``R`` in the band and zeros under it; the trailing block
``C`` becomes ``Q^T C Q = C - V Y^T - Y V^T`` with ``X = C V T``,
``Y = X - V (T^T V^T X) / 2``. Only the lower block triangle of ``C`` (row blocks of
``_ROWS`` rows on a grid fixed in absolute coordinates, diagonal blocks in full) is read
and written, which halves the products: about ``(4/3) n^3`` flops in all.

The row blocks of each update are shared among as many worker threads as the BLAS has
threads, each calling a one-thread BLAS (``threadpoolctl``): the many medium-sized
products of a step then never wait for one another, which matters most on a busy
machine, where a multi-threaded BLAS call waits for its slowest thread.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

__all__ = ["eigvalsh_two_stage"]

_BAND = 48   # half-width of the band: larger b speeds the products, slows ?sbevd
_ROWS = 256  # rows per block of the trailing-matrix updates


def _wy_factor(qr_raw, tau):
    """``V`` (unit lower trapezoidal) and upper triangular ``T``: ``H_1 ... H_k = I - V T V^T``."""
    k = tau.shape[0]
    V = np.tril(qr_raw[:, :k], -1)
    V[np.arange(k), np.arange(k)] = 1.0
    VtV = V.T @ V
    T = np.zeros((k, k))
    for i in range(k):
        T[i, i] = tau[i]
        if i:
            T[:i, i] = -tau[i] * (T[:i, :i] @ VtV[:i, i])
    return V, T


def _row_blocks(start, m, rows):
    """Block edges, in local coordinates of a trailing block that starts at ``start``."""
    first = (-start) % rows or rows
    return [0] + list(range(first, m, rows)) + [m] if first < m else [0, m]


def _reduce_panel(A, j, b, pool, workers):
    """One step: zero the panel ``A[j + b:, j:j + b]`` below the band, update the rest."""
    import scipy.linalg

    n = A.shape[0]
    s = j + b  # first row below the band
    (qr_raw, tau), _ = scipy.linalg.qr(A[s:, j:s], mode="raw", check_finite=False)
    V, T = _wy_factor(qr_raw, tau)
    kk, m = tau.shape[0], n - s
    A[s:, j:s] = 0.0
    A[s:s + kk, j:s] = np.triu(qr_raw[:kk, :])
    C = A[s:, s:]
    VT = V @ T
    edges = _row_blocks(s, m, _ROWS)
    blocks = list(zip(edges[:-1], edges[1:]))
    # block i goes to worker i % workers: the blocks grow along the triangle, so every
    # worker gets short and long ones

    def x_part(w):
        X = np.zeros((m, kk))
        for r0, r1 in blocks[w::workers]:
            X[r0:r1] += C[r0:r1, r0:r1] @ VT[r0:r1]  # diagonal block, held in full
            if r0:
                left = C[r0:r1, :r0]  # below the diagonal; its mirror image is not stored
                X[r0:r1] += left @ VT[:r0]
                X[:r0] += left.T @ VT[r0:r1]
        return X

    X = sum(pool.map(x_part, range(workers)))
    Y = X - 0.5 * (V @ (T.T @ (V.T @ X)))
    U, W = np.hstack([V, Y]), np.hstack([Y, V])

    def update(w):
        for r0, r1 in blocks[w::workers]:
            C[r0:r1, :r1] -= U[r0:r1] @ W[:r1].T

    list(pool.map(update, range(workers)))


def eigvalsh_two_stage(A, bandwidth=None, overwrite_a=False):
    """All eigenvalues of a real symmetric matrix, ascending, via a band reduction.

    Parameters
    ----------
    A : numpy.ndarray of shape (n, n)
        Symmetric. Only its lower triangle and the diagonal blocks of the grid of
        ``_ROWS`` rows (``[i, i + _ROWS)`` for ``i`` multiple of ``_ROWS``) are read,
        so the rest of the upper triangle may hold anything (tested with NaN); the
        diagonal blocks must be symmetric (not checked).
    bandwidth : int, optional
        Half-width ``b`` of the intermediate band (default ``_BAND``).
    overwrite_a : bool
        Work in ``A`` itself (it is destroyed) instead of a copy; this saves
        ``8 n^2`` bytes. ``A`` must then be a C-contiguous float64 array.

    Returns
    -------
    numpy.ndarray of shape (n,)
        The eigenvalues in ascending order.
    """
    import scipy.linalg

    A = np.asarray(A)
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] < 1:
        raise ValueError(f"A must be a non-empty square matrix, got shape {A.shape}")
    b = _BAND if bandwidth is None else int(bandwidth)
    if b < 1:
        raise ValueError(f"bandwidth must be >= 1, got {bandwidth}")
    if overwrite_a:
        if A.dtype != np.float64 or not A.flags.c_contiguous:
            raise ValueError("overwrite_a needs a C-contiguous float64 array")
    else:
        A = np.array(A, dtype=np.float64, order="C")
    n = A.shape[0]
    b = min(b, max(n - 1, 1))
    from threadpoolctl import threadpool_limits

    from .._parallel import pool_size

    workers = pool_size()
    with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(workers) as pool:
        for j in range(0, max(n - b - 1, 0), b):
            _reduce_panel(A, j, b, pool, workers)
    band = np.zeros((b + 1, n))
    for i in range(b + 1):
        band[i, :n - i] = np.diagonal(A, -i)
    return scipy.linalg.eig_banded(band, lower=True, eigvals_only=True, check_finite=False)
