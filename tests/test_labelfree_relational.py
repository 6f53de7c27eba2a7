"""Tests of Self-Cluster and diffusion spectral entropy (seed 002, section 3.2)."""

import numpy as np
import pytest
from scipy import stats
from scipy.spatial.distance import cdist

from repeval_ref import diffusion_spectral_entropy, self_cluster
from repeval_ref.labelfree.relational import _subsample


def _sphere(n, d, seed=0):
    X = np.random.default_rng(seed).normal(size=(n, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def _self_cluster_nxn(X):
    """002's definition written with the N x N matrix (squared Frobenius norm)."""
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    n, d = U.shape
    F = np.sum((U @ U.T) ** 2)
    expected = n + n * (n - 1) / d
    return (F - expected) / (n**2 - expected)


# ------------------------------------------------------------------------ Self-Cluster


@pytest.mark.parametrize("shape", [(30, 5), (7, 20), (200, 3)])
def test_self_cluster_equals_the_nxn_definition(shape):
    X = np.random.default_rng(1).normal(size=shape) + 0.3
    assert self_cluster(X) == pytest.approx(_self_cluster_nxn(X), rel=1e-10, abs=1e-12)


def test_self_cluster_closed_form_line_of_002():
    X = np.random.default_rng(2).normal(size=(25, 6))
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    n, d = U.shape
    F = np.sum((U @ U.T) ** 2)
    assert self_cluster(X) == pytest.approx((d * F - n * (d + n - 1)) / ((d - 1) * (n - 1) * n))


def test_self_cluster_is_one_for_a_collapse():
    rng = np.random.default_rng(3)
    v = rng.normal(size=8)
    X = np.outer(rng.uniform(0.5, 3.0, size=50), v)  # same direction, different lengths
    assert self_cluster(X) == pytest.approx(1.0, abs=1e-12)


def test_self_cluster_is_near_zero_on_the_sphere():
    vals = [self_cluster(_sphere(2000, 16, seed=s)) for s in range(3)]
    assert max(abs(v) for v in vals) < 0.01
    # clustered data scores clearly higher
    rng = np.random.default_rng(4)
    centres = rng.normal(size=(3, 16)) * 5
    clustered = centres[rng.integers(0, 3, 2000)] + rng.normal(size=(2000, 16))
    assert self_cluster(clustered) > 0.2


def test_self_cluster_orthogonal_rows():
    d = 6
    assert self_cluster(np.eye(d) * 3.0) == pytest.approx(-1.0 / (d - 1))


def test_self_cluster_streamed(tmp_path):
    X = np.random.default_rng(5).normal(size=(300, 9)).astype(np.float32)
    ref = self_cluster(X.astype(np.float64))
    assert self_cluster(iter([X[:10], X[10:170], X[170:]])) == pytest.approx(ref, rel=1e-9)
    np.save(tmp_path / "x.npy", X)
    assert self_cluster(np.load(tmp_path / "x.npy", mmap_mode="r")) == pytest.approx(ref, rel=1e-9)


def test_self_cluster_bad_input():
    X = np.random.default_rng(6).normal(size=(10, 4))
    X0 = X.copy()
    X0[4] = 0
    with pytest.raises(ValueError, match="zero vector at row 4"):
        self_cluster(X0)
    with pytest.raises(ValueError, match="zero vector at row 14"):
        self_cluster(iter([X, X0]))
    with pytest.raises(ValueError, match="2 rows"):
        self_cluster(X[:1])
    with pytest.raises(ValueError, match="2 columns"):
        self_cluster(X[:, :1])
    with pytest.raises(ValueError, match="NaN"):
        self_cluster(np.where(X > 1, np.inf, X))
    with pytest.raises(TypeError):
        self_cluster("abc")
    before = X.copy()
    self_cluster(X)
    np.testing.assert_array_equal(X, before)


# ---------------------------------------------------------------------------------- DSE


def _dse_by_definition(X, sigma, t=1):
    """Independent route: eigenvalues of the non-symmetric P = D^-1 G."""
    G = np.exp(-cdist(X, X, "sqeuclidean") / (2 * sigma**2)) / (sigma * np.sqrt(2 * np.pi))
    P = G / G.sum(axis=1, keepdims=True)
    mu = np.abs(np.linalg.eigvals(P).real) ** t
    return stats.entropy(mu / mu.sum(), base=2)


@pytest.mark.parametrize("sigma,t", [(1.0, 1), (2.5, 1), (1.0, 3)])
def test_dse_matches_the_definition(sigma, t):
    X = np.random.default_rng(7).normal(size=(60, 4))
    got = diffusion_spectral_entropy(X, sigma=sigma, t=t)
    assert got == pytest.approx(_dse_by_definition(X, sigma, t), rel=1e-7)


def test_dse_limits_and_base():
    X = np.random.default_rng(8).normal(size=(50, 5))
    assert diffusion_spectral_entropy(X, sigma=1e-3) == pytest.approx(np.log2(50), rel=1e-9)
    assert diffusion_spectral_entropy(X, sigma=1e4) < 0.01
    h2 = diffusion_spectral_entropy(X, sigma=2.0)
    he = diffusion_spectral_entropy(X, sigma=2.0, base=np.e)
    assert he == pytest.approx(h2 * np.log(2))
    # larger t damps the small eigenvalues: entropy decreases
    assert diffusion_spectral_entropy(X, sigma=2.0, t=4) < h2


def test_dse_subsample_uses_rng_choice_rows():
    X = np.random.default_rng(9).normal(size=(120, 3))
    got = diffusion_spectral_entropy(X, sigma=1.0, n_sub=40, rng=11)
    idx = np.sort(np.random.default_rng(11).choice(120, size=40, replace=False))
    assert got == pytest.approx(_dse_by_definition(X[idx], 1.0), rel=1e-7)
    # no subsampling when n <= n_sub
    assert diffusion_spectral_entropy(X, sigma=1.0, n_sub=500) == pytest.approx(
        _dse_by_definition(X, 1.0), rel=1e-7
    )


def test_dse_streamed_inputs(tmp_path):
    X = np.random.default_rng(10).normal(size=(90, 3))
    full = diffusion_spectral_entropy(X, sigma=1.0)
    assert diffusion_spectral_entropy(iter([X[:30], X[30:]]), sigma=1.0) == pytest.approx(full)
    np.save(tmp_path / "x.npy", X)
    mm = np.load(tmp_path / "x.npy", mmap_mode="r")
    assert diffusion_spectral_entropy(mm, sigma=1.0, n_sub=50, rng=3) == pytest.approx(
        diffusion_spectral_entropy(X, sigma=1.0, n_sub=50, rng=3)
    )


def test_subsample_of_an_iterator_is_a_uniform_sample_of_distinct_rows():
    X = np.arange(200, dtype=float).reshape(100, 2)
    counts = np.zeros(100)
    for seed in range(200):
        sub = _subsample(iter([X[:13], X[13:60], X[60:]]), 10, np.random.default_rng(seed))
        assert sub.shape == (10, 2)
        rows = sub[:, 0] / 2
        assert np.unique(rows).size == 10 and np.all(np.diff(rows) > 0)
        counts[rows.astype(int)] += 1
    # each row is kept with probability 1/10: 20 times on average over 200 draws
    assert stats.chisquare(counts).pvalue > 1e-4


def test_dse_bad_input():
    X = np.random.default_rng(12).normal(size=(20, 3))
    for kwargs, exc in [
        ({"sigma": 0.0}, ValueError),
        ({"sigma": -1.0}, ValueError),
        ({"sigma": 1.0, "t": 0}, ValueError),
        ({"sigma": 1.0, "n_sub": 1}, ValueError),
        ({"sigma": 1.0, "base": 1.0}, ValueError),
        ({"sigma": 1.0, "rng": "x"}, TypeError),
        ({"sigma": "1"}, TypeError),
    ]:
        with pytest.raises(exc):
            diffusion_spectral_entropy(X, **kwargs)
    with pytest.raises(ValueError, match="NaN"):
        diffusion_spectral_entropy(np.full((5, 2), np.nan), sigma=1.0)
    with pytest.raises(ValueError):
        diffusion_spectral_entropy(X[:1], sigma=1.0)
    before = X.copy()
    diffusion_spectral_entropy(X, sigma=1.0)
    np.testing.assert_array_equal(X, before)


# ------------------------------------------------------------------- property tests

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra.numpy import arrays  # noqa: E402


@st.composite
def _features(draw):
    n = draw(st.integers(2, 12))
    d = draw(st.integers(2, 6))
    X = draw(arrays(np.float64, (n, d), elements=st.floats(-100, 100, allow_nan=False, width=64)))
    norms = np.linalg.norm(X, axis=1)
    X[norms < 1e-3] += 1.0  # keep rows away from zero (unit-normalisation needs a direction)
    return X


@settings(max_examples=60, deadline=None)
@given(_features())
def test_self_cluster_property_d_by_d_equals_n_by_n(X):
    assert self_cluster(X) == pytest.approx(_self_cluster_nxn(X), rel=1e-9, abs=1e-9)
    n, d = X.shape
    # frame-potential bound: F >= max(N, N^2 / d), so the score is >= -1 / (max(N, d) - 1)
    assert -1.0 / (max(n, d) - 1) - 1e-9 <= self_cluster(X) <= 1.0 + 1e-9
    # batching does not change the value
    assert self_cluster(iter([X[:1], X[1:]])) == pytest.approx(self_cluster(X), rel=1e-9, abs=1e-12)
