"""diffusion_spectral_entropy on its large-n route (band reduction), against the dense route."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
from scipy import stats
from scipy.spatial.distance import cdist, pdist, squareform

import repeval_ref.relational as rel
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


@pytest.mark.parametrize("n,d,sigma,t", [(400, 5, 1.0, 1), (900, 32, 4.0, 1), (700, 3, 0.3, 2),
                                         (500, 768, 10.0, 1)])
def test_band_route_equals_the_dense_route(two_stage, n, d, sigma, t):
    rng = np.random.default_rng(n + d)
    X = rng.normal(size=(n, d)) * (np.arange(1, d + 1) ** -0.6) + 3.0  # off-centre on purpose
    got = diffusion_spectral_entropy(X, sigma=sigma, t=t)
    assert got == pytest.approx(dense_route(X, sigma, t), rel=1e-9)


def test_band_route_matches_the_definition(two_stage):
    X = np.random.default_rng(5).normal(size=(300, 4))
    for sigma in (0.5, 1.5):
        assert diffusion_spectral_entropy(X, sigma=sigma) == pytest.approx(
            by_definition(X, sigma), rel=1e-7)


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
                dense_route(Z, sigma, t), rel=1e-9)
    # tiny bandwidth: the kernel is the identity and every eigenvalue 1/1 -> log2 n
    assert diffusion_spectral_entropy(X, sigma=1e-4) == pytest.approx(np.log2(150), rel=1e-12)
    # huge bandwidth: near rank one, the entropy goes to 0 (and stays non-negative)
    big = diffusion_spectral_entropy(X, sigma=1e5)
    assert 0.0 <= big < 1e-5
    assert big == pytest.approx(dense_route(X, 1e5), rel=1e-6)


def test_kernel_buffer_is_symmetric_and_exact():
    """The dsyrk Gram matrix, mirrored block by block, matches pdist's kernel and is symmetric."""
    rng = np.random.default_rng(12)
    X = rng.normal(size=(1100, 9)) + 2.0  # > one mirroring block of 512 rows
    seen = {}

    def capture(G, overwrite_a=False):
        seen["G"] = G.copy()
        return scipy.linalg.eigvalsh(G)

    mp = pytest.MonkeyPatch()
    mp.setattr(rel, "_DENSE_MAX", 10)
    mp.setattr(rel, "eigvalsh_two_stage", capture)
    try:
        rel._normalised_kernel_eigvals(X, 2.0)
    finally:
        mp.undo()
    S = seen["G"]
    # symmetric up to rounding: (g + s_i) + s_j and (g + s_j) + s_i, and d_i d_j, round
    # differently; exp scales that by the exponent (about 10 here)
    np.testing.assert_allclose(S, S.T, rtol=1e-13, atol=0)
    G = np.exp(-squareform(pdist(X, "sqeuclidean")) / 8.0)
    d = 1 / np.sqrt(G.sum(axis=1))
    np.testing.assert_allclose(S, G * d[:, None] * d[None, :], rtol=1e-10, atol=1e-14)
