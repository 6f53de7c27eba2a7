"""spectrum_metrics, reptrix's two conventions and the unit-embedding spread, against
independent computations (book/rankme.md; seeds 000 and 002)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.decomposition import PCA
from sklearn.preprocessing import normalize

import repeval_ref as R


def _matrix_with_spectrum(lam):
    """A (d + 3) x d matrix whose uncentred Gram matrix has eigenvalues ``lam``."""
    d = lam.size
    Q = np.linalg.qr(np.random.default_rng(1).normal(size=(d + 3, d)))[0]
    return Q * np.sqrt(lam)


@pytest.mark.parametrize("alpha", [-1.5, 0.0, 0.7, 2.0])
def test_spectrum_metrics_equal_the_feature_matrix_functions(alpha):
    lam = R.power_law_spectrum(alpha, 40)
    X = _matrix_with_spectrum(lam)
    m = R.spectrum_metrics(np.random.default_rng(0).permutation(lam), fit_range=(10, 0.9))
    assert m["rankme"] == pytest.approx(R.rankme(X, center=False), rel=1e-9)
    assert m["ne_sum"] == pytest.approx(R.stable_rank(X, center=False), rel=1e-9)
    assert m["kappa"] == pytest.approx(np.linalg.cond(X), rel=1e-7)
    assert m["alpha"] == pytest.approx(R.alpha_req(X, fit_range=(10, 0.9), center=False), abs=1e-8)
    for key in ("rankme", "ne_sum", "kappa"):
        assert m[key + "_star"] == pytest.approx(m[key] / 40)


def test_spectrum_metrics_closed_forms():
    flat = R.spectrum_metrics(np.full(50, 2.0), eps=0.0)
    assert flat["rankme"] == pytest.approx(50) and flat["ne_sum"] == pytest.approx(50)
    assert flat["kappa"] == pytest.approx(1.0) and flat["alpha"] == pytest.approx(0.0, abs=1e-12)
    i = np.arange(1, 201, dtype=float)
    assert R.spectrum_metrics(i**-1.3)["alpha"] == pytest.approx(1.3)
    # kappa of a power law: sqrt(d^|alpha|), the same for +alpha and -alpha (002, 4.1)
    a, b = (R.spectrum_metrics(R.power_law_spectrum(s, 300))["kappa"] for s in (1.2, -1.2))
    assert a == pytest.approx(300**0.6) and b == pytest.approx(a)
    # a range that does not fit the spectrum gives NaN, not an error
    assert np.isnan(R.spectrum_metrics(np.r_[np.ones(5), np.zeros(5)], fit_range=(1, 10))["alpha"])


def _entropy_rank(shares, eps=1e-7):
    p = shares + eps
    return float(np.exp(-np.sum(p * np.log(p))))


def test_rankme_squared_shares_is_pca_explained_variance_entropy():
    X = np.random.default_rng(3).normal(size=(80, 12)) @ np.diag(np.linspace(3, 0.1, 12)) + 5.0
    ratios = PCA(svd_solver="full").fit(X).explained_variance_ratio_
    assert R.rankme_squared_shares(X) == pytest.approx(_entropy_rank(ratios), rel=1e-10)
    # the squared shares concentrate the distribution: never above RankMe (eps = 0)
    assert R.rankme_squared_shares(X, eps=0.0) < R.rankme(X, center=True, eps=0.0)
    flat = np.vstack([np.eye(6), -np.eye(6)])  # centred, equal singular values
    assert R.rankme_squared_shares(flat, eps=0.0) == pytest.approx(6.0)
    assert R.rankme_squared_shares(flat, eps=0.0) == pytest.approx(
        R.rankme(flat, center=True, eps=0.0)
    )


def test_alpha_req_weighted_recovers_an_exact_power_law_and_matches_polyfit():
    lam = np.arange(1, 31, dtype=float) ** -1.7
    X = R.sample_features_with_spectrum(lam, 60, rng=0, exact=True)
    assert R.alpha_req_weighted(X, fit_range=(2, 25)) == pytest.approx(1.7, abs=1e-8)
    # a spectrum off the power law: compare with numpy's weighted polyfit (w = sqrt of 1/i)
    Y = np.random.default_rng(4).normal(size=(200, 30)) * np.linspace(4, 0.5, 30)
    s = np.linalg.svd(Y - Y.mean(0), compute_uv=False) ** 2
    i = np.arange(6, 26, dtype=float)
    slope = np.polyfit(np.log(i), np.log(s[5:25]), 1, w=1 / np.sqrt(i))[0]
    assert R.alpha_req_weighted(Y, fit_range=(6, 25)) == pytest.approx(-slope, rel=1e-9)
    unweighted = np.polyfit(np.log(i), np.log(s[5:25]), 1)[0]
    assert R.alpha_req(Y, fit_range=(6, 25)) == pytest.approx(-unweighted, rel=1e-9)


def test_unit_coordinate_std():
    rng = np.random.default_rng(5)
    Z = rng.normal(size=(300, 7)) * 3 + 1
    np.testing.assert_allclose(R.unit_coordinate_std(Z), normalize(Z).std(axis=0), rtol=1e-12)
    collapsed = np.outer(rng.uniform(1, 5, size=50), rng.normal(size=7))
    np.testing.assert_allclose(R.unit_coordinate_std(collapsed), 0.0, atol=1e-12)
    sphere = rng.normal(size=(40000, 16))
    np.testing.assert_allclose(R.unit_coordinate_std(sphere), 1 / np.sqrt(16), rtol=0.03)
