"""Eigenvalues of a large dense symmetric matrix in two stages: to a band, then LAPACK.

Book: ``book/rankme.md`` (the diffusion spectral entropy,
:func:`repeval_ref.diffusion_spectral_entropy`, of a 10,000-row subsample) and
``book/performance.md``.

LAPACK's one-stage route (``dsytrd`` inside ``eigh``/``eigvalsh``) reduces the matrix to
tridiagonal form with one matrix-vector product per column, so it streams the whole
trailing matrix from memory ``n`` times (level-2 BLAS, bound by memory). Here the matrix is first
reduced to a band of half-width ``b`` by blocked Householder transformations, whose two-sided
updates are matrix-matrix products (level-3 BLAS); the band goes to tridiagonal form by LAPACK's
``dsytrd_sb2st`` and the tridiagonal eigenvalues come from ``dsterf``
(:mod:`repeval_ref.labelfree._lapack`; ``scipy.linalg.eig_banded`` where that routine is missing).
All stages are orthogonal similarity transforms, so the eigenvalues are those of the input up to
rounding (backward stable, like the one-stage route).

Step ``j`` (columns ``j .. j + b - 1``): the QR factorisation of the panel below the band,
``P = Q R`` with ``Q = I - V T V^T`` (compact WY form; ``T`` by one triangular solve,
see :func:`_wy_factor`), puts ``R`` in the band and zeros under it; the trailing block
``C`` becomes ``Q^T C Q = C - V Y^T - Y V^T`` with ``X = C V T``,
``Y = X - V (T^T V^T X) / 2``. Only the lower block triangle of ``C`` (row blocks of
``_ROWS`` rows on a grid fixed in absolute coordinates, diagonal blocks in full) is read
and written, which halves the products: about ``(4/3) n^3`` flops in all.

The row blocks of each update are shared among as many worker threads as the BLAS has
threads, each calling a one-thread BLAS (``threadpoolctl``): the many medium-sized
products of a step then never wait for one another (a multi-threaded BLAS call waits for
its slowest thread). The products
accumulate in place (``beta = 1``, :func:`repeval_ref.labelfree._lapack.gemm_add`), the
two products of each tile below the diagonal run while the tile is in cache, and the
next panel's columns are updated first so that its QR factorisation runs on one worker
while the others finish the update (look-ahead). The benchmark row ``dse``
(``python -m benchmarks.run --rows dse``) times the diffusion spectral entropy, which
uses this route, against the dense one-stage route.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ._lapack import band_to_tridiagonal, gemm_add

__all__ = ["eigvalsh_two_stage"]

_BAND = 48  # half-width of the band: larger b speeds the products, slows the band stage
_ROWS = 256  # rows per block of the trailing-matrix updates
_COLS = 1024  # columns per tile of the products below the diagonal (a 2 MB tile)


def _wy_factor(qr_raw, tau):
    """``V`` (unit lower trapezoidal) and upper triangular ``T``: ``H_1 ... H_k = I - V T V^T``.

    ``T`` is the inverse of ``triu(V^T V, 1) + diag(1 / tau)`` (for compact WY,
    ``T^{-1} + T^{-T} = V^T V``), one triangular solve; where some ``tau`` is 0 (a
    column already zero below the diagonal, ``H_i = I``) it comes from ``dlarft``'s
    column recurrence instead.
    """
    import scipy.linalg

    k = tau.shape[0]
    V = np.ascontiguousarray(np.tril(qr_raw[:, :k], -1))
    V[np.arange(k), np.arange(k)] = 1.0
    VtV = V.T @ V
    if np.all(tau != 0):
        Tinv = np.triu(VtV, 1)
        Tinv[np.arange(k), np.arange(k)] = 1.0 / tau
        return V, scipy.linalg.solve_triangular(Tinv, np.eye(k), check_finite=False)
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


def _factor_panel(A, j, b):
    """QR of the panel ``A[j + b:, j:j + b]``: ``R`` goes into the band, zeros below it.

    Returns the compact WY factors ``(V, T)`` of the panel's orthogonal factor.
    """
    import scipy.linalg

    s = j + b  # first row below the band
    (qr_raw, tau), _ = scipy.linalg.qr(A[s:, j:s], mode="raw", check_finite=False)
    V, T = _wy_factor(qr_raw, tau)
    kk = tau.shape[0]
    A[s:, j:s] = 0.0
    A[s : s + kk, j:s] = np.triu(qr_raw[:kk, :])
    return V, T


def _add(C, A, B, alpha=1.0, trans_a=False, trans_b=False):
    """``C += alpha op(A) op(B)`` in place: one BLAS call, or NumPy where that declines."""
    if not gemm_add(C, A, B, alpha=alpha, trans_a=trans_a, trans_b=trans_b):
        C += alpha * ((A.T if trans_a else A) @ (B.T if trans_b else B))


def _trailing_product(C, VT, blocks, pool, workers):
    """``C @ VT`` from the lower block triangle of the symmetric ``C`` (diagonal blocks full).

    Each worker takes every ``workers``-th row block ``R = [r0, r1)`` (the blocks grow
    along the triangle, so every worker gets short and long ones) and adds
    ``C[R, R] @ VT[R]`` and ``C[R, :r0] @ VT[:r0]`` to rows ``R`` of its own sum and
    ``C[R, :r0]^T @ VT[R]`` to rows ``:r0`` (the mirror image, which is not stored).
    """
    m, kk = VT.shape

    def part(w):
        X = np.zeros((m, kk))
        for r0, r1 in blocks[w::workers]:
            _add(X[r0:r1], C[r0:r1, r0:r1], VT[r0:r1])  # diagonal block, held in full
            for c0 in range(0, r0, _COLS):  # below the diagonal, in tiles that stay in cache
                c1 = min(r0, c0 + _COLS)
                tile = C[r0:r1, c0:c1]
                _add(X[r0:r1], tile, VT[c0:c1])
                _add(X[c0:c1], tile, VT[r0:r1], trans_a=True)
        return X

    return sum(pool.map(part, range(workers)))


def _update_factors(V, T, X, pool, workers):
    """``U = [V, Y]`` and ``W = [Y, V]`` with ``Y = X - V (T^T V^T X) / 2``, rows split among the
    workers."""
    m, kk = V.shape
    M = 0.5 * (T.T @ (V.T @ X))
    U, W = np.empty((m, 2 * kk)), np.empty((m, 2 * kk))

    def rows(part):
        r0, r1 = part
        Y = X[r0:r1] - V[r0:r1] @ M
        U[r0:r1, :kk], U[r0:r1, kk:] = V[r0:r1], Y
        W[r0:r1, :kk], W[r0:r1, kk:] = Y, V[r0:r1]

    edges = np.linspace(0, m, workers + 1).astype(int)
    list(pool.map(rows, zip(edges[:-1], edges[1:])))
    return U, W


def _reduce_to_band(A, b, pool, workers):
    """Zero everything below the band of half-width ``b``, panel by panel, in place.

    Step ``j`` updates the trailing block ``C = A[s:, s:]`` (``s = j + b``) by
    ``C - U W^T``. With look-ahead: the next panel's columns are updated first, and
    its QR factorisation runs on one worker while the others update the rest of ``C``.
    """
    n = A.shape[0]
    starts = list(range(0, max(n - b - 1, 0), b))
    if not starts:
        return
    factors = _factor_panel(A, 0, b)
    for step, j in enumerate(starts):
        V, T = factors
        s = j + b
        m = n - s
        C = A[s:, s:]
        edges = _row_blocks(s, m, _ROWS)
        blocks = list(zip(edges[:-1], edges[1:]))
        X = _trailing_product(C, V @ T, blocks, pool, workers)
        U, W = _update_factors(V, T, X, pool, workers)
        ahead = step + 1 < len(starts)
        strip = min(b, m) if ahead else 0
        if ahead:  # the next panel's columns first, then its QR beside the rest
            _add(C[:, :strip], U, W[:strip], alpha=-1.0, trans_b=True)
            pending = pool.submit(_factor_panel, A, s, b)

        def update(block, C=C, U=U, W=W, strip=strip):
            r0, r1 = block
            if r1 > strip:
                _add(C[r0:r1, strip:r1], U[r0:r1], W[strip:r1], alpha=-1.0, trans_b=True)

        # long blocks (at the bottom) first, taken by whichever worker is free
        list(pool.map(update, blocks[::-1]))
        if ahead:
            factors = pending.result()


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
        _reduce_to_band(A, b, pool, workers)
    band = np.zeros((b + 1, n))
    for i in range(b + 1):
        band[i, : n - i] = np.diagonal(A, -i)
    return _band_eigvalsh(band)


def _band_eigvalsh(band):
    """Eigenvalues (ascending) of a symmetric band matrix in LAPACK's lower layout.

    Band to tridiagonal by ``dsytrd_sb2st`` where the loaded LAPACK has it
    (:func:`repeval_ref.labelfree._lapack.band_to_tridiagonal`), then the
    tridiagonal eigenvalues by ``dsterf`` (root-free QL/QR); otherwise
    ``scipy.linalg.eig_banded`` (``dsbtrd``, then the same ``dsterf``).
    """
    import scipy.linalg
    import scipy.linalg.lapack

    if band.shape[1] > band.shape[0] - 1 >= 1:
        tri = band_to_tridiagonal(band)
        if tri is not None:
            w, info = scipy.linalg.lapack.dsterf(*tri, overwrite_d=True, overwrite_e=True)
            if info == 0:
                return w
    return scipy.linalg.eig_banded(band, lower=True, eigvals_only=True, check_finite=False)
