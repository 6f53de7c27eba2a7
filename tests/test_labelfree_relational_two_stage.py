"""diffusion_spectral_entropy on its large-n route (band reduction), against the dense route."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
from scipy import stats
from scipy.spatial.distance import cdist, pdist, squareform

import repeval_ref.labelfree.relational as rel
from repeval_ref import diffusion_spectral_entropy


def dense_route(X, sigma, t=1):
    """The previous implementation: exact pairwise distances, one-stage LAPACK eigvalsh."""
    G = np.exp(-squareform(pdist(X, "sqeuclidean")) / (2 * sigma**2))
    d = 1 / np.sqrt(G.sum(axis=1))
    mu = np.abs(scipy.linalg.eigvalsh(G * d[:, None] * d[None, :])) ** t
    p = mu / mu.sum()
    p = p[p > 0]
    return float(-(p * np.log2(p)).sum())


def by_definition(X, sigma, t=1):
    """Independent route: eigenvalues of the non-symmetric P = D^-1 G (numpy's geev)."""
    G = np.exp(-cdist(X, X, "sqeuclidean") / (2 * sigma**2))
    P = G / G.sum(axis=1, keepdims=True)
    mu = np.abs(np.linalg.eigvals(P).real) ** t
    return stats.entropy(mu / mu.sum(), base=2)


@pytest.fixture
def two_stage(monkeypatch):
    monkeypatch.setattr(rel, "_DENSE_MAX", 10)  # every kernel here takes the band route


@pytest.mark.parametrize(
    "n,d,sigma,t",
    [
        (400, 5, 1.0, 1),
        pytest.param(900, 32, 4.0, 1, marks=pytest.mark.slow),
        (700, 3, 0.3, 2),
        (500, 768, 10.0, 1),
    ],
)
def test_band_route_equals_the_dense_route(two_stage, n, d, sigma, t):
    rng = np.random.default_rng(n + d)
    X = rng.normal(size=(n, d)) * (np.arange(1, d + 1) ** -0.6) + 3.0  # off-centre on purpose
    got = diffusion_spectral_entropy(X, sigma=sigma, t=t)
    assert got == pytest.approx(dense_route(X, sigma, t), rel=1e-9)


def test_band_route_matches_the_definition(two_stage):
    X = np.random.default_rng(5).normal(size=(300, 4))
    for sigma in (0.5, 1.5):
        assert diffusion_spectral_entropy(X, sigma=sigma) == pytest.approx(
            by_definition(X, sigma), rel=1e-7
        )


def test_small_kernels_keep_the_dense_solver():
    X = np.random.default_rng(6).normal(size=(250, 6))
    assert rel._DENSE_MAX >= 250
    assert diffusion_spectral_entropy(X, sigma=1.0) == pytest.approx(dense_route(X, 1.0), rel=1e-11)


@pytest.mark.parametrize("dense_max", [10, 10**6])  # the band route, then the one-stage one
def test_edge_cases_against_the_dense_route(monkeypatch, dense_max):
    monkeypatch.setattr(rel, "_DENSE_MAX", dense_max)
    rng = np.random.default_rng(11)
    X = rng.normal(size=(150, 7)) * 2.0 + 4.0
    dup = np.vstack([X, X[:40]])  # repeated rows: the kernel is only semidefinite
    for Z, sigma in [(dup, 1.0), (dup, 3.0), (X, 30.0)]:
        for t in (1, 2, 3):
            assert diffusion_spectral_entropy(Z, sigma=sigma, t=t) == pytest.approx(
                dense_route(Z, sigma, t), rel=1e-9
            )
    # tiny bandwidth: the kernel is the identity and every eigenvalue 1/1 -> log2 n
    assert diffusion_spectral_entropy(X, sigma=1e-4) == pytest.approx(np.log2(150), rel=1e-12)
    # huge bandwidth: near rank one, the entropy goes to 0 (and stays non-negative)
    big = diffusion_spectral_entropy(X, sigma=1e5)
    assert 0.0 <= big < 1e-5
    assert big == pytest.approx(dense_route(X, 1e5), rel=1e-6)


@pytest.mark.parametrize("n", [1100, 256, 257, 7])
def test_kernel_buffer_holds_the_exact_lower_triangle(n):
    """The one-triangle kernel (row blocks of _ROWS rows, lower triangle and diagonal
    blocks in full) matches pdist's normalised kernel there, and every diagonal block
    is exactly symmetric; the upper triangle outside them is never read."""
    from repeval_ref.labelfree._symeig import _ROWS

    rng = np.random.default_rng(12 + n)
    X = rng.normal(size=(n, 9)) + 2.0
    S = np.array(rel._kernel_lower(X, 2.0))
    G = np.exp(-squareform(pdist(X, "sqeuclidean")) / 8.0)
    d = 1 / np.sqrt(G.sum(axis=1))
    want = G * d[:, None] * d[None, :]
    i, j = np.tril_indices(n)
    np.testing.assert_allclose(S[i, j], want[i, j], rtol=1e-10, atol=1e-14)
    for r0 in range(0, n, _ROWS):
        blk = S[r0 : r0 + _ROWS, r0 : r0 + _ROWS]
        assert np.array_equal(blk, blk.T)
        np.testing.assert_allclose(
            blk, want[r0 : r0 + _ROWS, r0 : r0 + _ROWS], rtol=1e-10, atol=1e-14
        )


def test_kernel_eigenvalues_ignore_the_unwritten_triangle(monkeypatch):
    """Both eigenvalue routes read only what the kernel writes: NaN in the rest of the
    upper triangle changes nothing."""
    from repeval_ref.labelfree._symeig import _ROWS

    rng = np.random.default_rng(13)
    X = rng.normal(size=(700, 5))
    real = rel._kernel_lower

    def poisoned(Xs, sigma):
        S = real(Xs, sigma)
        upper = np.triu(np.ones(S.shape, dtype=bool), 1)
        for r0 in range(0, S.shape[0], _ROWS):
            upper[r0 : r0 + _ROWS, r0 : r0 + _ROWS] = False
        S[upper] = np.nan
        return S

    want = np.sort(rel._normalised_kernel_eigvals(X, 1.5))
    monkeypatch.setattr(rel, "_kernel_lower", poisoned)
    for dense_max in (10, 2000):  # band route, then LAPACK's one-stage route
        monkeypatch.setattr(rel, "_DENSE_MAX", dense_max)
        got = rel._normalised_kernel_eigvals(X, 1.5)
        assert np.all(np.isfinite(got))
        np.testing.assert_allclose(np.sort(got), want, atol=1e-12)


@pytest.mark.parametrize("n", [1, 3, 600])
def test_fresh_matrix_is_a_writable_c_ordered_float64_buffer(n):
    """The kernel's buffer (private anonymous memory, no huge pages) behaves like
    np.empty((n, n)): C-contiguous, writable, float64, and it can be worked on in place
    by the band reduction."""
    G = rel._fresh_matrix(n)
    assert (
        G.shape == (n, n) and G.dtype == np.float64 and G.flags.c_contiguous and G.flags.writeable
    )
    rng = np.random.default_rng(n)
    M = rng.normal(size=(n, n))
    G[...] = M + M.T
    want = scipy.linalg.eigvalsh(M + M.T)
    np.testing.assert_allclose(rel.eigvalsh_two_stage(G, overwrite_a=True), want, atol=1e-10)


def _unit_rows(n, d, seed):
    X = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X


# inputs that differ in what might matter, at a size the dense route handles: unit-norm Gaussian
# rows (a flat spectrum) at d = 128 and sigma = 1 or 0.1, and a power-law spectrum at d = 768 with a
# tenth of the usual sigma; the band route (with LAPACK's dsytrd_sb2st and the in-place products)
# must give the dense route's value to 1e-12 relative
@pytest.mark.parametrize(
    "kind,d,sigma",
    [("unit", 128, 1.0), ("unit", 128, 0.1), ("power", 768, 1.0), ("power", 768, 10.0)],
)
def test_issue_inputs_equal_the_dense_route(two_stage, kind, d, sigma):
    n = 700
    if kind == "unit":
        X = _unit_rows(n, d, seed=3)
    else:
        X = np.random.default_rng(0).standard_normal((n, d)) * np.arange(1, d + 1) ** -0.6
    got = diffusion_spectral_entropy(X, sigma=sigma)
    want = dense_route(np.asarray(X, dtype=np.float64), sigma)
    assert abs(got - want) <= 1e-12 * abs(want)


def test_subsampled_unit_rows_equal_the_dense_route_of_the_same_rows(two_stage):
    """The default route on more rows than n_sub keeps rng.choice's rows, then the value
    is the dense route's on exactly those rows."""
    X = _unit_rows(2000, 128, seed=3)
    got = diffusion_spectral_entropy(X, sigma=1.0, n_sub=600, rng=0)
    idx = np.sort(np.random.default_rng(0).choice(2000, size=600, replace=False))
    want = dense_route(X[idx].astype(np.float64), 1.0)
    assert abs(got - want) <= 1e-12 * abs(want)


def test_band_route_without_the_lapack_shortcuts(two_stage, monkeypatch):
    """Where SciPy's library lacks dsytrd_sb2st and cblas_dgemm, the NumPy/eig_banded
    fallbacks give the same value."""
    from repeval_ref.labelfree import _lapack

    X = _unit_rows(500, 128, seed=4)
    fast = diffusion_spectral_entropy(X, sigma=1.0)
    monkeypatch.setattr(_lapack, "_symbol", lambda name: None)
    assert _lapack.band_to_tridiagonal(np.ones((3, 10))) is None
    slow = diffusion_spectral_entropy(X, sigma=1.0)
    assert abs(fast - slow) <= 1e-12 * abs(slow)
