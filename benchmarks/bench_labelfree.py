"""Row 4: label-free spectral metrics streamed from a memory-mapped float32 ``.npy``.

The streamed side is ``repeval_ref.alpha_req`` given ``np.load(path, mmap_mode="r")``:
it accumulates the 768 x 768 float64 scatter matrix over row blocks (memory ``O(d^2)``
plus one block) and fits the power law to its eigenvalues. The naive side loads the
rows into memory and takes the singular values of the centred float64 matrix with
``numpy.linalg.svd`` (memory grows with ``N``), then does the same fit.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def make_memmap(tmp, n, d, seed=0, chunk=50000):
    """An ``(n, d)`` float32 ``.npy`` with a power-law spectrum, written in chunks."""
    path = str(Path(tmp) / "features.npy")
    rng = np.random.default_rng(seed)
    scales = (np.arange(1, d + 1) ** -0.6).astype(np.float32)  # alpha = 1.2 for variances
    X = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, d))
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        block = rng.standard_normal((hi - lo, d), dtype=np.float32)
        block *= scales
        X[lo:hi] = block
    X.flush()
    del X
    return path


def _fit(lam, lo=10, hi_frac=0.9):
    d = lam.shape[0]
    hi = int(np.floor(hi_frac * d))
    sel = lam[lo - 1 : hi]
    logi = np.log(np.arange(lo, hi + 1, dtype=float))
    return float(-np.polyfit(logi, np.log(sel), 1)[0])


def streamed(path, n_rows):
    from repeval_ref.labelfree.spectral import alpha_req

    X = np.load(path, mmap_mode="r")[:n_rows]

    def work():
        return {"alpha": alpha_req(X)}

    return work


def naive_svd(path, n_rows):
    X = np.load(path, mmap_mode="r")

    def work():
        A = np.array(X[:n_rows], dtype=np.float64)  # the whole matrix in memory
        A -= A.mean(axis=0)
        sigma = np.linalg.svd(A, compute_uv=False)
        return {"alpha": _fit(sigma**2)}

    return work


def self_cluster_streamed(path, n_rows):
    """``repeval_ref.self_cluster`` on the memory map: the d x d route, memory O(d^2)."""
    from repeval_ref import self_cluster

    X = np.load(path, mmap_mode="r")[:n_rows]

    def work():
        return {"score": self_cluster(X)}

    return work


def self_cluster_naive(path, n_rows):
    """The N x N definition: unit rows in memory, the full cosine matrix, its squared norm."""
    X = np.load(path, mmap_mode="r")

    def work():
        A = np.array(X[:n_rows], dtype=np.float64)
        A /= np.linalg.norm(A, axis=1, keepdims=True)
        G = A @ A.T  # N x N
        F = float(np.sum(G * G))
        n, d = A.shape
        return {"score": (d * F - n * (d + n - 1)) / ((d - 1) * (n - 1) * n)}

    return work


def make_unit_memmap(tmp, n, d, seed=3, name="unit.npy"):
    """An ``(n, d)`` float32 ``.npy`` of unit-norm Gaussian rows: a flat spectrum.

    With the defaults at ``(20000, 128)`` the rows are
    ``default_rng(3).standard_normal((20000, 128)).astype(float32)``, each divided by its
    norm in float32.
    """
    path = str(Path(tmp) / name)
    X = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    np.save(path, X)
    return path


def dse_default(path, n_rows, n_sub=10000, sigma=10.0):
    """Diffusion spectral entropy with its default subsample of 10,000 rows."""
    import time

    from repeval_ref import diffusion_spectral_entropy

    X = np.load(path, mmap_mode="r")[:n_rows]

    def work():
        c0 = time.process_time()
        value = diffusion_spectral_entropy(
            X, sigma=sigma, n_sub=n_sub, rng=np.random.default_rng(0)
        )
        return {"dse": value, "cpu_seconds": time.process_time() - c0}

    return work


def dse_dense(path, n_rows, n_sub, sigma=10.0):
    """The previous route, as the competitor: the same subsample, exact pairwise distances
    (``scipy.spatial.distance.pdist``) and LAPACK's one-stage ``eigvalsh`` of the whole
    normalised kernel."""
    import time

    import scipy.linalg
    from scipy.spatial.distance import pdist, squareform

    X = np.load(path, mmap_mode="r")[:n_rows]

    def work():
        c0 = time.process_time()
        rng = np.random.default_rng(0)
        n = X.shape[0]
        Xs = np.asarray(
            X[np.sort(rng.choice(n, size=n_sub, replace=False))] if n > n_sub else X,
            dtype=np.float64,
        )
        G = squareform(pdist(Xs, "sqeuclidean"))
        G *= -1.0 / (2.0 * sigma**2)
        np.exp(G, out=G)
        r = 1.0 / np.sqrt(G.sum(axis=1))
        G *= r[:, None]
        G *= r[None, :]
        mu = np.abs(scipy.linalg.eigvalsh(G.T, overwrite_a=True, check_finite=False))
        p = mu / mu.sum()
        p = p[p > 0]
        return {"dse": float(-(p * np.log2(p)).sum()), "cpu_seconds": time.process_time() - c0}

    return work
