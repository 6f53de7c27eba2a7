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
