"""Relational label-free metrics: Self-Cluster and diffusion spectral entropy (DSE).

Book: ``book/rankme.md`` (label-free checks); seed 002, section 3.2 ("Relational
metrics"). Both start from pairwise relations between samples, an N x N object; here

* :func:`self_cluster` never forms it: it uses
  :math:`\\lVert \\tilde X \\tilde X^\\top \\rVert_F = \\lVert \\tilde X^\\top \\tilde X \\rVert_F`
  and accumulates the d x d matrix :math:`\\tilde X^\\top \\tilde X` over row batches
  (002's reformulation, :func:`~repeval_ref.labelfree.sphere.unit_moments`), so ``X``
  may be a ``numpy.memmap`` or an iterator of batches;
* :func:`diffusion_spectral_entropy` forms an ``n_sub x n_sub`` kernel on a uniform
  random subsample of the rows (002 uses ``n_sub = 10000``) and takes all its
  eigenvalues, at that size by a two-stage reduction
  (:mod:`repeval_ref.labelfree._symeig`).
"""

from __future__ import annotations

import numpy as np

from .._validation import as_float_array, check_int, check_positive, check_rng
from ._streaming import is_batch_iterator, iter_batches
from ._symeig import eigvalsh_two_stage
from .sphere import unit_moments

__all__ = ["self_cluster", "self_cluster_of_gram", "diffusion_spectral_entropy"]

#: kernels up to this size go to LAPACK's one-stage ``eigvalsh`` (fast while the matrix
#: is small); larger ones to the two-stage band reduction, much faster at 10,000 rows
_DENSE_MAX = 2000


def self_cluster(X):
    """Self-Cluster score (Tsitsulin et al. 2023) in 002's normalisation, without N x N.

    With the rows of ``X`` scaled to unit length (:math:`\\tilde X`, N x d) and
    :math:`F = \\lVert \\tilde X \\tilde X^\\top \\rVert_F^2 = \\lVert \\tilde X^\\top \\tilde X
    \\rVert_F^2`,

    .. math:: \\text{Self-Cluster} = \\frac{F - \\mathbb E[F]}{\\max F - \\mathbb E[F]}
       = \\frac{d\\,F - N(d + N - 1)}{(d - 1)(N - 1) N},

    where :math:`\\max F = N^2` (all rows equal: collapse to one point) and
    :math:`\\mathbb E[F] = N + N(N-1)/d` for rows drawn uniformly on the sphere
    (:math:`\\mathbb E[(u^\\top v)^2] = 1/d`). So the score is 1 for a collapse and
    fluctuates around 0 (it can be slightly negative) for uniform points. Its minimum
    is :math:`-1/(\\max(N, d) - 1)`, because :math:`F \\ge \\max(N, N^2/d)` (the
    frame potential bound); orthogonal rows reach it when ``N <= d``.

    002 writes the Frobenius norm without the square, but its normalising constants
    :math:`N^2` and :math:`N + N(N-1)/d` are those of the *squared* norm; the squared
    norm is used here, which makes the two stated end points (1 and 0) exact.

    No centring (rows are only normalised). Memory :math:`O(d^2)`: the d x d matrix
    :math:`\\tilde X^\\top \\tilde X` is accumulated over row batches. Seed 002,
    section 3.2.

    Parameters
    ----------
    X : array_like of shape (n, d), numpy.memmap, or iterator of (n_b, d) arrays
        Features; ``n >= 2``, ``d >= 2``, no zero row.

    Returns
    -------
    float
    """
    mom = unit_moments(X, "X")
    n, d = mom.n, mom.d
    if n < 2:
        raise ValueError(f"X needs at least 2 rows, got {n}")
    if d < 2:
        raise ValueError("X needs at least 2 columns (with d = 1 every unit row is +-1)")
    return self_cluster_of_gram(mom.gram(False), n)


def self_cluster_of_gram(gram, n):
    """Self-Cluster from the d x d Gram matrix :math:`\\tilde X^\\top \\tilde X` of ``n`` unit rows.

    .. math:: F = \\lVert \\tilde X^\\top \\tilde X \\rVert_F^2, \\qquad
       \\text{Self-Cluster} = \\frac{d\\,F - N(d + N - 1)}{(d - 1)(N - 1) N};

    see :func:`self_cluster` for the normalisation. Seed 002, section 3.2.

    Parameters
    ----------
    gram : array_like of shape (d, d)
        Uncentred Gram matrix of the unit-normalised rows, ``d >= 2``.
    n : int
        Number of rows, ``>= 2``.

    Returns
    -------
    float
        1 for a collapse to one direction, about 0 for rows spread uniformly on the
        sphere, at least :math:`-1/(\\max(N, d) - 1)`.
    """
    G = as_float_array(gram, "gram", ndim=2, min_rows=2)
    if G.shape[0] != G.shape[1]:
        raise ValueError(f"gram must be square, got shape {G.shape}")
    n = check_int(n, "n", minimum=2)
    d = G.shape[0]
    F = float(np.sum(G * G))
    return float((d * F - n * (d + n - 1)) / ((d - 1) * (n - 1) * n))


def _subsample(X, n_sub, rng, name="X"):
    """A uniform sample of ``min(N, n_sub)`` rows without replacement, in row order.

    Arrays and memory maps are indexed directly (only the chosen rows are read). An
    iterator is read once: every row receives an independent uniform key and the
    ``n_sub`` smallest keys are kept, which is a uniform sample without replacement
    in memory ``O(n_sub * d)``.
    """
    if not is_batch_iterator(X):
        if not isinstance(X, np.ndarray):
            X = as_float_array(X, name, ndim=2)
        if X.ndim != 2:
            raise ValueError(f"{name} must be 2-dimensional, got shape {X.shape}")
        n = X.shape[0]
        if n <= n_sub:
            return as_float_array(np.asarray(X), name, ndim=2, min_rows=2)
        idx = np.sort(rng.choice(n, size=n_sub, replace=False))
        return as_float_array(np.asarray(X[idx]), name, ndim=2)
    kept = None
    keys = None
    for batch in iter_batches(X, name):
        k = rng.random(batch.shape[0])
        if kept is None:
            kept, keys = batch, k
        else:
            kept = np.concatenate([kept, batch])
            keys = np.concatenate([keys, k])
        if keys.shape[0] > n_sub:
            sel = np.argpartition(keys, n_sub - 1)[:n_sub]
            sel.sort()
            kept, keys = kept[sel], keys[sel]
    return kept


def diffusion_spectral_entropy(X, sigma, t=1, n_sub=10000, rng=None, base=2.0):
    """Diffusion spectral entropy (DSE) of Liao et al. (2024), on a row subsample.

    Definition implemented (that of Liao et al.'s reference code, which 002 uses):

    1. If ``X`` has more than ``n_sub`` rows, keep a uniform random subset of
       ``n_sub`` rows without replacement (002: ``n_sub = 10000``).
    2. Gaussian kernel :math:`G_{ij} = \\exp(-\\lVert x_i - x_j \\rVert^2 / (2\\sigma^2))`
       (the factor :math:`1/(\\sigma\\sqrt{2\\pi})` of 002 cancels in step 3).
    3. Diffusion operator :math:`P = D^{-1} G`, :math:`D = \\operatorname{diag}(G\\mathbf 1)`;
       its eigenvalues are those of the symmetric
       :math:`D^{-1/2} G D^{-1/2}`, which are computed (they lie in [-1, 1], the
       largest is 1).
    4. :math:`p_i = |\\mu_i|^t / \\sum_j |\\mu_j|^t` over the eigenvalues
       :math:`\\mu_i`, and :math:`\\text{DSE} = -\\sum_i p_i \\log_{b} p_i`
       (``0 log 0 = 0``; base ``b = 2`` by default, bits, as in Liao et al.).

    DSE lies between 0 and :math:`\\log_b n`. Large ``sigma`` (all points within one
    bandwidth) makes :math:`G \\approx \\mathbf 1\\mathbf 1^\\top` and the entropy small;
    small ``sigma`` makes :math:`P \\approx I` and the entropy close to
    :math:`\\log_b n`. Larger ``t`` damps small eigenvalues (noise). Expanding the
    kernel for unit-norm rows links DSE to Self-Cluster (002, section 3.2). Time
    :math:`O(n_{sub}^2 d + n_{sub}^3)`: the squared distances come from products of the
    centred subsample, one triangle of the kernel is built by row blocks on worker
    threads, and above ``_DENSE_MAX`` rows the eigenvalues come from a reduction to a
    band by level-3 products followed by LAPACK's band solver
    (:func:`repeval_ref.labelfree._symeig.eigvalsh_two_stage`; the same eigenvalues as
    ``scipy.linalg.eigvalsh`` up to rounding, tested). The value is exact in that
    sense (no approximation beyond floating point); all the eigenvalues are computed,
    since the top ones with the exact trace :math:`\\sum_i \\mu_i^t` bound the tail's share
    of the entropy only loosely. The time depends on ``n_sub`` and ``d``, not on ``sigma``
    or the spectrum; row ``dse`` of ``benchmarks/results.json`` records it at
    ``n_sub = 10000`` (``python -m benchmarks.run --rows dse``). A smaller ``n_sub`` is
    faster, but the entropy grows with the subsample, so compare values only at one
    ``n_sub``.
    Memory: one ``n_sub x n_sub`` float64 matrix (800 MB at ``n_sub = 10000``; only
    its lower triangle and diagonal blocks are written), worked on in place, plus the
    subsample.

    Not centred (distances are translation invariant anyway). Seed 002, section 3.2.

    Parameters
    ----------
    X : array_like of shape (n, d), numpy.memmap, or iterator of (n_b, d) arrays
        Features; ``n >= 2``.
    sigma : float
        Kernel bandwidth, ``> 0``, in the units of ``X`` (Liao et al. use 10 for their
        embeddings; a common data-driven choice is the median pairwise distance).
    t : int, default 1
        Diffusion time, ``>= 1``.
    n_sub : int, default 10000
        Largest number of rows used, ``>= 2``.
    rng : numpy.random.Generator or int, optional
        Source of the subsample (only used when ``n > n_sub``).
    base : float, default 2.0
        Base of the logarithm, ``> 0`` and not 1.

    Returns
    -------
    float
    """
    sigma = check_positive(sigma, "sigma")
    t = check_int(t, "t", minimum=1)
    n_sub = check_int(n_sub, "n_sub", minimum=2)
    rng = check_rng(rng)
    base = check_positive(base, "base")
    if base == 1.0:
        raise ValueError("base must not be 1")
    Xs = _subsample(X, n_sub, rng)
    if Xs.shape[0] < 2:
        raise ValueError(f"X needs at least 2 rows, got {Xs.shape[0]}")
    mu = np.abs(_normalised_kernel_eigvals(Xs, sigma))
    w = mu**t
    p = w / w.sum()
    p = p[p > 0]
    return float(-(p * np.log(p)).sum() / np.log(base))


def _fresh_matrix(n):
    """An uninitialised C-ordered ``n x n`` float64 array in private anonymous memory.

    Not ``np.empty``: numpy asks the kernel for transparent huge pages for large
    arrays, and where the kernel then compacts memory on each fault (THP ``defrag``
    set to ``madvise``), the first touch of a large array is several times slower than
    in 4 kB pages, and the reduction that follows runs no faster on huge pages.
    """
    import mmap

    nbytes = max(8 * n * n, 1)
    try:
        buf = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    except (AttributeError, OSError, ValueError):  # pragma: no cover - not a POSIX mmap
        return np.empty((n, n))
    if hasattr(mmap, "MADV_NOHUGEPAGE"):
        buf.madvise(mmap.MADV_NOHUGEPAGE)
    return np.frombuffer(buf, dtype=np.float64, count=n * n).reshape(n, n)


def _kernel_lower(Xs, sigma):
    """``D^{-1/2} G D^{-1/2}`` for the Gaussian kernel ``G`` of the rows of ``Xs``, one triangle.

    Row blocks of :data:`repeval_ref.labelfree._symeig._ROWS` rows, on the grid that the band
    reduction reads, are filled by as many worker threads as the BLAS has threads (each
    with a one-thread BLAS): block ``[r0, r1)`` gets its columns ``0 .. r1 - 1``, i.e.
    the lower triangle and the diagonal block in full, from one product of the centred
    rows (centring keeps the cancellation in ``|x_i|^2 + |x_j|^2 - 2 x_i^T x_j`` small;
    distances do not change), then the kernel in place. The strict upper triangle
    outside the diagonal blocks is never written: every entry stands for its mirror
    image, so the operator is exactly symmetric, and each diagonal block is made
    exactly symmetric from its lower triangle. Row sums add each block's rows and, for
    the rows above it, its columns.

    Returns
    -------
    numpy.ndarray of shape (n, n)
        Valid in the lower triangle and in the diagonal blocks of the grid.
    """
    from concurrent.futures import ThreadPoolExecutor

    from threadpoolctl import threadpool_limits

    from .._parallel import pool_size
    from ._symeig import _COLS, _ROWS

    Xc = Xs - Xs.mean(axis=0)
    sq = np.einsum("ij,ij->i", Xc, Xc)
    n = Xc.shape[0]
    G = _fresh_matrix(n)
    blocks = [(r0, min(n, r0 + _ROWS)) for r0 in range(0, n, _ROWS)]
    # long blocks (near the bottom) first, so that the workers finish together
    blocks.reverse()
    scale = -1.0 / (2.0 * sigma * sigma)

    def symmetric_diagonal(g, r0, r1):
        d = g[:, r0:r1]
        d[...] = np.tril(d) + np.tril(d, -1).T

    def fill(block):
        r0, r1 = block
        g = G[r0:r1, :r1]
        # in column tiles of _COLS, so that the product and the element-wise passes that
        # follow it stay in the cache
        for c0 in range(0, r1, _COLS):
            c1 = min(r1, c0 + _COLS)
            t = g[:, c0:c1]
            np.matmul(Xc[r0:r1], Xc[c0:c1].T, out=t)
            t *= -2.0
            t += sq[r0:r1, None]
            t += sq[None, c0:c1]
            np.maximum(t, 0.0, out=t)
            t *= scale
            np.exp(t, out=t)
        i = np.arange(r1 - r0)
        g[i, r0 + i] = 1.0  # exp(0): a row's distance to itself is 0
        symmetric_diagonal(g, r0, r1)  # the two sums of squares were added in either order
        return g.sum(axis=1), g[:, :r0].sum(axis=0)

    def normalise(block):
        r0, r1 = block
        g = G[r0:r1, :r1]
        g *= inv_root[r0:r1, None]
        g *= inv_root[None, :r1]
        symmetric_diagonal(g, r0, r1)

    with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(pool_size()) as pool:
        sums = list(pool.map(fill, blocks))
        row_sums = np.zeros(n)
        for (r0, r1), (own, above) in zip(blocks, sums):
            row_sums[r0:r1] += own
            row_sums[:r0] += above
        inv_root = 1.0 / np.sqrt(row_sums)  # row sums >= 1 (the diagonal is 1)
        list(pool.map(normalise, blocks))
    return G


def _normalised_kernel_eigvals(Xs, sigma):
    """Eigenvalues of ``D^{-1/2} G D^{-1/2}`` for the Gaussian kernel ``G`` of the rows of ``Xs``.

    The matrix is built in one ``n x n`` float64 buffer (:func:`_kernel_lower`, one
    triangle) and its eigenvalues computed in place.
    """
    import scipy.linalg

    G = _kernel_lower(Xs, sigma)
    if G.shape[0] <= _DENSE_MAX:
        # G.T is the same buffer in Fortran order, whose upper triangle is G's lower one:
        # LAPACK works on it in place, without a copy
        return scipy.linalg.eigvalsh(G.T, lower=False, overwrite_a=True, check_finite=False)
    return eigvalsh_two_stage(G, overwrite_a=True)
