"""Tests of repeval_ref.cca (canonical correlations and the mean CCA similarity).

Checked against independent computations: the eigenvalues of the covariance form
Sxx^-1 Sxy Syy^-1 Syx, the absolute Pearson correlation for one column each, scikit-learn's
iterative CCA, and the invariances that define CCA.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.cross_decomposition import CCA

from repeval_ref.cca import canonical_correlations, mean_cca_similarity
from repeval_ref.cka import linear_cka


def _pair(seed, n=400, p=5, q=3, noise=1.0):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, 3))
    X = Z @ rng.normal(size=(3, p)) + noise * rng.normal(size=(n, p))
    Y = np.tanh(Z @ rng.normal(size=(3, q))) + noise * rng.normal(size=(n, q))
    return X, Y


@pytest.mark.parametrize("seed", range(4))
def test_matches_the_covariance_eigenproblem(seed):
    X, Y = _pair(seed)
    C = np.cov(np.hstack([X, Y]).T)
    p = X.shape[1]
    Sxx, Syy, Sxy = C[:p, :p], C[p:, p:], C[:p, p:]
    M = np.linalg.solve(Sxx, Sxy) @ np.linalg.solve(Syy, Sxy.T)
    expected = np.sort(np.sqrt(np.clip(np.linalg.eigvals(M).real, 0, None)))[::-1][: Y.shape[1]]
    np.testing.assert_allclose(canonical_correlations(X, Y), expected, atol=1e-10)


def test_one_column_each_is_the_absolute_pearson_correlation():
    rng = np.random.default_rng(7)
    x = rng.normal(size=200)
    y = -0.6 * x + rng.normal(size=200)
    got = canonical_correlations(x[:, None], y[:, None])
    assert got.shape == (1,)
    assert got[0] == pytest.approx(abs(np.corrcoef(x, y)[0, 1]), abs=1e-12)


def test_first_correlation_agrees_with_scikit_learn():
    X, Y = _pair(11, n=2000, noise=0.5)
    u, v = CCA(n_components=1, max_iter=5000, tol=1e-12).fit(X, Y).transform(X, Y)
    sk = abs(np.corrcoef(u[:, 0], v[:, 0])[0, 1])
    assert canonical_correlations(X, Y)[0] == pytest.approx(sk, abs=1e-6)


def test_invariant_to_invertible_maps_and_translation_unlike_cka():
    X, Y = _pair(3)
    rng = np.random.default_rng(3)
    # an invertible map that is not orthogonal
    A = rng.normal(size=(X.shape[1], X.shape[1])) + 3 * np.eye(X.shape[1])
    moved = X @ A + 5.0
    assert mean_cca_similarity(moved, Y) == pytest.approx(mean_cca_similarity(X, Y), abs=1e-10)
    assert abs(linear_cka(moved, Y) - linear_cka(X, Y)) > 1e-3


@pytest.mark.parametrize("n, width", [(20, 20), (30, 64), (50, 49)])
def test_every_correlation_is_one_when_samples_do_not_exceed_width(n, width):
    rng = np.random.default_rng(n)
    X, Y = rng.normal(size=(n, width)), rng.normal(size=(n, width + 3))  # independent
    rho = canonical_correlations(X, Y)
    assert rho.shape == (n - 1,)
    np.testing.assert_allclose(rho, 1.0, atol=1e-8)
    assert linear_cka(X, Y) < 0.9


def test_exact_linear_relation_gives_one_and_independent_wide_sample_is_low():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(500, 4))
    assert mean_cca_similarity(X, X @ rng.normal(size=(4, 4))) == pytest.approx(1.0, abs=1e-10)
    far = mean_cca_similarity(X, rng.normal(size=(500, 4)))
    assert 0.0 <= far < 0.2


def test_rank_deficient_input_uses_its_rank():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(100, 2)) @ rng.normal(size=(2, 6))  # rank 2 in six columns
    Y = rng.normal(size=(100, 5))
    assert canonical_correlations(X, Y).shape == (2,)


@pytest.mark.parametrize(
    "X, Y, word",
    [
        (np.ones((5, 2)), np.zeros((5, 2)) + np.arange(5)[:, None], "X"),
        (np.arange(10.0).reshape(5, 2), np.ones((5, 3)), "Y"),
        (np.zeros((5,)), np.ones((5, 2)), "X"),
        (np.ones((1, 2)), np.ones((1, 2)), "X"),
        (np.arange(10.0).reshape(5, 2), np.arange(12.0).reshape(6, 2), "rows"),
        (np.array([[0.0, np.nan], [1.0, 2.0]]), np.ones((2, 1)), "X"),
        (np.arange(10.0).reshape(5, 2), np.full((5, 2), np.inf), "Y"),
        ([["a", "b"]], np.ones((1, 2)), "X"),
    ],
)
def test_bad_input_raises_naming_the_argument(X, Y, word):
    with pytest.raises(ValueError, match=word):
        mean_cca_similarity(X, Y)
