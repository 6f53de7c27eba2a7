"""Tests of the geometry metrics (seed 003, section 5) and the batched TwoNN (002, 3.3)."""

import numpy as np
import pytest
from scipy.spatial.distance import pdist
from scipy.special import logsumexp

from repeval_ref import (
    alignment,
    explained_variance_dimension,
    isotropy_ratio,
    mean_pairwise_cosine,
    participation_ratio,
    power_law_spectrum,
    sample_features_with_spectrum,
    two_nn_id,
    two_nn_id_batched,
    uniformity,
)


def _data(n=150, d=10, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)) @ rng.normal(size=(d, d)) + 2.0


def _cov_eigs(X):
    return np.sort(np.linalg.eigvalsh(np.cov(X, rowvar=False)))[::-1]


# ------------------------------------------------------------------ spectral geometry


def test_participation_ratio_matches_the_svd_formula():
    X = _data()
    s2 = np.linalg.svd(X - X.mean(axis=0), compute_uv=False) ** 2
    assert participation_ratio(X) == pytest.approx(s2.sum() ** 2 / np.sum(s2**2), rel=1e-10)


def test_participation_ratio_limits():
    flat = sample_features_with_spectrum(np.ones(12), 40, rng=1, exact=True)
    assert participation_ratio(flat) == pytest.approx(12.0)
    rng = np.random.default_rng(2)
    line = np.outer(rng.normal(size=60), rng.normal(size=7)) + 1.0
    assert participation_ratio(line) == pytest.approx(1.0)
    low = rng.normal(size=(500, 3)) @ rng.normal(size=(3, 20))
    assert participation_ratio(low) <= 3.0 + 1e-9


def test_explained_variance_dimension():
    flat = sample_features_with_spectrum(np.ones(10), 30, rng=3, exact=True)
    assert explained_variance_dimension(flat) == 9  # 9 of 10 equal directions = 90 %
    assert explained_variance_dimension(flat, threshold=1.0) == 10
    X = _data(seed=4)
    share = _cov_eigs(X) / _cov_eigs(X).sum()
    seed_style = int((np.cumsum(share) < 0.90).sum()) + 1  # 003's dashboard formula
    assert explained_variance_dimension(X) == seed_style
    lam = np.array([0.5, 0.3, 0.15, 0.05])
    Y = sample_features_with_spectrum(lam, 30, rng=5, exact=True)
    assert explained_variance_dimension(Y, threshold=0.8) == 2
    assert explained_variance_dimension(Y, threshold=0.81) == 3
    with pytest.raises(ValueError):
        explained_variance_dimension(Y, threshold=0.0)
    with pytest.raises(ValueError):
        explained_variance_dimension(Y, threshold=1.2)


def test_isotropy_ratio():
    X = _data(seed=6)
    lam = _cov_eigs(X)
    assert isotropy_ratio(X) == pytest.approx(lam[-1] / lam[0], rel=1e-9)
    iso = sample_features_with_spectrum(np.ones(5), 20, rng=7, exact=True)
    assert isotropy_ratio(iso) == pytest.approx(1.0)
    assert isotropy_ratio(_data(n=8, d=10)) == 0.0  # N <= d: rank deficient
    Y = sample_features_with_spectrum(power_law_spectrum(1.0, 6), 20, rng=8, exact=True)
    assert isotropy_ratio(Y) == pytest.approx(1 / 6)


def test_constant_features_are_an_error():
    for fn in (participation_ratio, explained_variance_dimension, isotropy_ratio):
        with pytest.raises(ValueError, match="constant"):
            fn(np.ones((10, 4)))


# ------------------------------------------------------------------------------ cosine


def test_mean_pairwise_cosine_equals_the_nxn_average():
    X = _data(80, 6, seed=9)
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    S = U @ U.T
    nxn = S[~np.eye(80, dtype=bool)].mean()
    assert mean_pairwise_cosine(X) == pytest.approx(nxn, rel=1e-10)
    assert mean_pairwise_cosine(iter([X[:5], X[5:]])) == pytest.approx(nxn, rel=1e-10)


def test_mean_pairwise_cosine_limits(tmp_path):
    rng = np.random.default_rng(10)
    v = rng.normal(size=5)
    assert mean_pairwise_cosine(np.outer(rng.uniform(1, 2, 30), v)) == pytest.approx(1.0)
    assert mean_pairwise_cosine(np.vstack([v, -v])) == pytest.approx(-1.0)
    sphere = rng.normal(size=(5000, 30))
    assert abs(mean_pairwise_cosine(sphere)) < 0.005
    np.save(tmp_path / "s.npy", sphere.astype(np.float32))
    mm = np.load(tmp_path / "s.npy", mmap_mode="r")
    assert mean_pairwise_cosine(mm) == pytest.approx(
        mean_pairwise_cosine(sphere.astype(np.float32).astype(float)), rel=1e-9, abs=1e-12
    )


# -------------------------------------------------------------- alignment / uniformity


def test_alignment_matches_the_definition():
    rng = np.random.default_rng(11)
    X, Y = rng.normal(size=(40, 8)), rng.normal(size=(40, 8))
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    V = Y / np.linalg.norm(Y, axis=1, keepdims=True)
    assert alignment(X, Y) == pytest.approx(np.mean(np.sum((U - V) ** 2, axis=1)))
    assert alignment(X, Y, alpha=1) == pytest.approx(np.mean(np.linalg.norm(U - V, axis=1)))
    assert alignment(X, 3 * X) == pytest.approx(0.0, abs=1e-15)
    assert alignment(X, -X) == pytest.approx(4.0)


def test_alignment_bad_input():
    X = np.ones((5, 3))
    with pytest.raises(ValueError, match="mismatched"):
        alignment(X, X[:4])
    with pytest.raises(ValueError, match="columns"):
        alignment(X, X[:, :2])
    with pytest.raises(ValueError, match="zero vector"):
        alignment(X, np.zeros((5, 3)))
    with pytest.raises(ValueError):
        alignment(X, X, alpha=0)


def _uniformity_pdist(X, t=2.0):
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    return np.log(np.mean(np.exp(-t * pdist(U, "sqeuclidean"))))


@pytest.mark.parametrize("block", [None, 1, 7, 1000])
def test_uniformity_matches_scipy_pdist(block):
    X = np.random.default_rng(12).normal(size=(57, 5))
    assert uniformity(X, block_size=block) == pytest.approx(_uniformity_pdist(X), rel=1e-10)
    assert uniformity(X, t=0.5, block_size=block) == pytest.approx(
        _uniformity_pdist(X, 0.5), rel=1e-10
    )


def test_uniformity_limits_and_jensen_bound():
    rng = np.random.default_rng(13)
    v = rng.normal(size=4)
    assert uniformity(np.outer(rng.uniform(1, 2, 20), v)) == pytest.approx(0.0, abs=1e-12)
    X = rng.normal(size=(300, 32))
    u = uniformity(X)
    assert u >= -2.0 * (2 - 2 * mean_pairwise_cosine(X)) - 1e-12
    assert -4.0 < u < -3.5  # near -2t for spread points in high dimension
    # large t: the direct formula underflows to log(0) = -inf, the blocked one does not
    t = 5000.0
    with np.errstate(divide="ignore"):
        assert _uniformity_pdist(X, t) == -np.inf
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    d2 = pdist(U, "sqeuclidean")
    exact = logsumexp(-t * d2) - np.log(d2.size)
    assert uniformity(X, t=t) == pytest.approx(exact, rel=1e-9)


def test_uniformity_bad_input():
    X = np.random.default_rng(14).normal(size=(6, 3))
    with pytest.raises(ValueError):
        uniformity(X[:1])
    with pytest.raises(ValueError):
        uniformity(X, t=0)
    with pytest.raises(ValueError):
        uniformity(X, block_size=0)
    X0 = X.copy()
    X0[2] = 0
    with pytest.raises(ValueError, match="zero vector at row 2"):
        uniformity(X0)
    with pytest.raises(ValueError, match="NaN"):
        uniformity(np.where(X > 0, np.nan, X))


@pytest.mark.parametrize(
    "fn",
    [
        participation_ratio,
        explained_variance_dimension,
        isotropy_ratio,
        mean_pairwise_cosine,
        uniformity,
    ],
)
def test_common_bad_input_and_no_mutation(fn):
    with pytest.raises(ValueError, match="NaN"):
        fn(np.array([[1.0, np.nan], [1.0, 2.0], [0.0, 1.0]]))
    with pytest.raises(ValueError):
        fn(np.ones(4))
    with pytest.raises(TypeError):
        fn(None)
    X = _data(30, 4)
    before = X.copy()
    fn(X)
    np.testing.assert_array_equal(X, before)


# ---------------------------------------------------------------------- batched TwoNN


def _plane(n, seed):
    rng = np.random.default_rng(seed)
    return rng.uniform(size=(n, 2)) @ rng.normal(size=(2, 6))


def test_two_nn_batched_one_batch_is_two_nn():
    X = _plane(300, 15)
    res = two_nn_id_batched(X, batch_size=300, rng=0)
    assert res.mean == pytest.approx(two_nn_id(X))
    assert res.std is None and res.estimates.shape == (1,)


def test_two_nn_batched_replicates_the_split():
    X = _plane(1000, 16)
    res = two_nn_id_batched(X, batch_size=300, rng=4)
    perm = np.random.default_rng(4).permutation(1000)
    parts = np.array_split(perm, 3)  # floor(1000 / 300) = 3 batches of 333-334 rows
    manual = [two_nn_id(X[np.sort(p)]) for p in parts]
    np.testing.assert_allclose(res.estimates, manual)
    assert res.mean == pytest.approx(np.mean(manual))
    assert res.std == pytest.approx(np.std(manual, ddof=1))
    assert 1.6 < res.mean < 2.4  # a plane in 6-D


def test_two_nn_batched_iterator_and_memmap(tmp_path):
    X = _plane(400, 17)
    res = two_nn_id_batched(iter([X[:150], X[150:]]))
    np.testing.assert_allclose(res.estimates, [two_nn_id(X[:150]), two_nn_id(X[150:])])
    np.save(tmp_path / "p.npy", X)
    mm = np.load(tmp_path / "p.npy", mmap_mode="r")
    a = two_nn_id_batched(mm, batch_size=100, rng=2)
    b = two_nn_id_batched(X, batch_size=100, rng=2)
    np.testing.assert_allclose(a.estimates, b.estimates)


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # skdim's unused line fit
def test_two_nn_matches_scikit_dimension():
    skdim = pytest.importorskip("skdim")
    X = np.random.default_rng(18).normal(size=(500, 4))
    n = X.shape[0]
    theirs = skdim.id.TwoNN(discard_fraction=0.0, method="mle").fit(X).dimension_
    assert theirs == pytest.approx(two_nn_id(X) * (n - 1) / n, rel=1e-9)
    res = two_nn_id_batched(X, batch_size=250, rng=1)
    perm = np.random.default_rng(1).permutation(n)
    for est, part in zip(res.estimates, np.array_split(perm, 2)):
        sk = skdim.id.TwoNN(discard_fraction=0.0, method="mle").fit(X[np.sort(part)]).dimension_
        assert sk == pytest.approx(est * (len(part) - 1) / len(part), rel=1e-9)


def test_two_nn_batched_bad_input():
    X = _plane(50, 19)
    with pytest.raises(ValueError):
        two_nn_id_batched(X, batch_size=2)
    with pytest.raises(ValueError, match="3 rows"):
        two_nn_id_batched(X[:2])
    with pytest.raises(ValueError, match="duplicate"):
        two_nn_id_batched(np.vstack([X, X[:1]]), batch_size=51)
    with pytest.raises(TypeError):
        two_nn_id_batched(X, rng="seed")
    with pytest.raises(ValueError, match="NaN"):
        two_nn_id_batched(np.where(X > 0, np.nan, X))
