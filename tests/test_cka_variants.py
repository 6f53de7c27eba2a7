"""Tests of unbiased HSIC, debiased linear CKA, RBF CKA and minibatch CKA (seed 003, section 6)."""

import itertools

import numpy as np
import pytest
from scipy.spatial.distance import cdist, pdist
from scipy.stats import ortho_group

from repeval_ref import MinibatchCKA, hsic_unbiased, linear_cka, minibatch_cka, rbf_cka


def _pair(n=40, p=6, q=5, seed=0, noise=1.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    Y = X @ rng.normal(size=(p, q)) + noise * rng.normal(size=(n, q))
    return X, Y


def _hsic_u_statistic(K, L):
    """Song et al. (2012) as a U-statistic over ordered 4-tuples of distinct indices."""
    n = K.shape[0]
    total = 0.0
    for i, j, q, r in itertools.permutations(range(n), 4):
        total += K[i, j] * L[i, j] + K[i, j] * L[q, r] - 2 * K[i, j] * L[i, q]
    return total / (n * (n - 1) * (n - 2) * (n - 3))


def _centred_cka(K, L):
    n = K.shape[0]
    H = np.eye(n) - 1.0 / n
    a, b = H @ K @ H, H @ L @ H
    return np.sum(a * b) / np.sqrt(np.sum(a * a) * np.sum(b * b))


# ------------------------------------------------------------------------ unbiased HSIC


def test_hsic_unbiased_equals_the_u_statistic():
    rng = np.random.default_rng(1)
    A, B = rng.normal(size=(7, 3)), rng.normal(size=(7, 2))
    K = np.exp(-cdist(A, A, "sqeuclidean"))
    L = B @ B.T
    assert hsic_unbiased(K, L) == pytest.approx(_hsic_u_statistic(K, L), rel=1e-10)


def test_hsic_unbiased_bad_input():
    K = np.eye(5)
    with pytest.raises(ValueError, match="square"):
        hsic_unbiased(np.ones((5, 4)), np.ones((5, 4)))
    with pytest.raises(ValueError, match="shape"):
        hsic_unbiased(K, np.eye(6))
    with pytest.raises(ValueError):
        hsic_unbiased(np.eye(3), np.eye(3))  # n < 4
    with pytest.raises(ValueError, match="NaN"):
        hsic_unbiased(K * np.nan, K)


# ------------------------------------------------------------------- debiased linear


def test_debiased_linear_cka_equals_the_gram_form():
    X, Y = _pair()
    K, L = X @ X.T, Y @ Y.T
    expected = hsic_unbiased(K, L) / np.sqrt(hsic_unbiased(K, K) * hsic_unbiased(L, L))
    assert linear_cka(X, Y, debiased=True) == pytest.approx(expected, rel=1e-9)


def test_debiased_linear_cka_invariances():
    X, Y = _pair(seed=2)
    ref = linear_cka(X, Y, debiased=True)
    Q = ortho_group.rvs(X.shape[1], random_state=3)
    assert linear_cka(3.0 * X @ Q + 7.0, Y - 2.0, debiased=True) == pytest.approx(ref, rel=1e-9)
    assert linear_cka(X, X, debiased=True) == pytest.approx(1.0)


def test_debiasing_removes_the_small_sample_inflation():
    rng = np.random.default_rng(4)
    X, Y = rng.normal(size=(60, 400)), rng.normal(size=(60, 400))
    assert linear_cka(X, Y) > 0.8  # biased: independent features look similar
    assert abs(linear_cka(X, Y, debiased=True)) < 0.1


def test_linear_cka_debiased_bad_input():
    X, Y = _pair(n=3)
    with pytest.raises(ValueError):
        linear_cka(X, Y, debiased=True)  # needs 4 samples
    with pytest.raises(TypeError):
        linear_cka(X, Y, debiased="yes")


# ------------------------------------------------------------------------------- RBF


def _rbf_by_definition(X, Y, frac):
    """RBF Grams with sigma = frac * median distance over distinct pairs (median="pairs")."""

    def gram(Z):
        sigma = frac * np.median(pdist(Z))
        return np.exp(-cdist(Z, Z, "sqeuclidean") / (2 * sigma**2))

    return gram(X), gram(Y)


@pytest.mark.parametrize("frac", [0.2, 0.5, 1.0])
def test_rbf_cka_pairs_median_matches_the_definition(frac):
    X, Y = _pair(seed=5)
    K, L = _rbf_by_definition(X, Y, frac)
    got = rbf_cka(X, Y, sigma_frac=frac, median="pairs")
    assert got == pytest.approx(_centred_cka(K, L), rel=1e-9)
    expected_u = hsic_unbiased(K, L) / np.sqrt(hsic_unbiased(K, K) * hsic_unbiased(L, L))
    got_u = rbf_cka(X, Y, sigma_frac=frac, debiased=True, median="pairs")
    assert got_u == pytest.approx(expected_u, rel=1e-9)


# Literal transcription of Kornblith et al.'s public CKA code (the colab accompanying
# "Similarity of Neural Network Representations Revisited", 2019): gram_rbf,
# center_gram (with the Szekely-Rizzo U-centring for the unbiased case) and cka.
def _kornblith_gram_rbf(x, threshold=1.0):
    dot_products = x.dot(x.T)
    sq_norms = np.diag(dot_products)
    sq_distances = -2 * dot_products + sq_norms[:, None] + sq_norms[None, :]
    sq_median_distance = np.median(sq_distances)
    return np.exp(-sq_distances / (2 * threshold**2 * sq_median_distance))


def _kornblith_center_gram(gram, unbiased=False):
    if not np.allclose(gram, gram.T):
        raise ValueError("Input must be a symmetric matrix.")
    gram = gram.copy()
    if unbiased:
        n = gram.shape[0]
        np.fill_diagonal(gram, 0)
        means = np.sum(gram, 0, dtype=np.float64) / (n - 2)
        means -= np.sum(means) / (2 * (n - 1))
        gram -= means[:, None]
        gram -= means[None, :]
        np.fill_diagonal(gram, 0)
    else:
        means = np.mean(gram, 0, dtype=np.float64)
        means -= np.mean(means) / 2
        gram -= means[:, None]
        gram -= means[None, :]
    return gram


def _kornblith_cka(gram_x, gram_y, debiased=False):
    gram_x = _kornblith_center_gram(gram_x, unbiased=debiased)
    gram_y = _kornblith_center_gram(gram_y, unbiased=debiased)
    scaled_hsic = gram_x.ravel().dot(gram_y.ravel())
    normalization_x = np.linalg.norm(gram_x)
    normalization_y = np.linalg.norm(gram_y)
    return scaled_hsic / (normalization_x * normalization_y)


@pytest.mark.parametrize("n", [9, 30, 31, 120])
@pytest.mark.parametrize("frac", [0.2, 0.5, 0.8, 1.0])
def test_rbf_cka_default_is_kornblith_code(n, frac):
    # odd and even n: with n^2 entries even, np.median averages the two middle squared
    # distances, which is why the bandwidth is taken from the squared distances
    X, Y = _pair(n=n, p=7, q=4, seed=n, noise=0.7)
    Y = np.tanh(Y)
    K, L = _kornblith_gram_rbf(X, frac), _kornblith_gram_rbf(Y, frac)
    assert abs(rbf_cka(X, Y, sigma_frac=frac) - _kornblith_cka(K, L)) < 1e-12
    got_u = rbf_cka(X, Y, sigma_frac=frac, debiased=True)
    assert abs(got_u - _kornblith_cka(K, L, debiased=True)) < 1e-12


def test_rbf_cka_full_and_pairs_medians_differ_for_small_n():
    # The n zero diagonal entries lower the full median below the distinct-pair one,
    # so for small n the two conventions give different values; "full" is the
    # distinct-pair definition with sigma_X, sigma_Y each rescaled by
    # sqrt(median_full(d^2)) / median_pairs(d).
    X, Y = _pair(n=20, seed=3)
    full, pairs = rbf_cka(X, Y), rbf_cka(X, Y, median="pairs")
    assert abs(full - pairs) > 1e-4

    def gram_rescaled(Z, frac):
        D2 = cdist(Z, Z, "sqeuclidean")
        med_pairs = np.median(pdist(Z))
        ratio = np.sqrt(np.median(D2)) / med_pairs
        assert ratio < 1
        sigma = frac * ratio * med_pairs
        return np.exp(-D2 / (2 * sigma**2))

    K, L = gram_rescaled(X, 0.5), gram_rescaled(Y, 0.5)
    assert full == pytest.approx(_centred_cka(K, L), rel=1e-10)
    with pytest.raises(ValueError, match="median"):
        rbf_cka(X, Y, median="mean")


def test_rbf_cka_invariances_and_range():
    X, Y = _pair(seed=6)
    ref = rbf_cka(X, Y)
    Q = ortho_group.rvs(X.shape[1], random_state=7)
    assert rbf_cka(5.0 * X @ Q - 1.0, Y + 3.0) == pytest.approx(ref, rel=1e-9)
    assert rbf_cka(X, X) == pytest.approx(1.0)
    assert 0.0 <= ref <= 1.0
    rng = np.random.default_rng(8)
    far = rbf_cka(rng.normal(size=(80, 5)), rng.normal(size=(80, 5)))
    assert far < ref


def test_rbf_cka_bad_input():
    X, Y = _pair()
    with pytest.raises(ValueError):
        rbf_cka(X, Y, sigma_frac=0)
    with pytest.raises(ValueError, match="median"):
        rbf_cka(np.ones((10, 3)), Y[:10])
    with pytest.raises(ValueError, match="mismatched"):
        rbf_cka(X, Y[:-1])
    with pytest.raises(ValueError, match="NaN"):
        rbf_cka(X * np.nan, Y)
    before = X.copy()
    rbf_cka(X, Y)
    np.testing.assert_array_equal(X, before)


# ------------------------------------------------------------------------ minibatch


def test_minibatch_cka_with_one_batch_is_debiased_cka():
    X, Y = _pair(n=50, seed=9)
    Z = np.random.default_rng(10).normal(size=(50, 3))
    M = minibatch_cka([X, Y, Z], batch_size=50)
    assert M.shape == (3, 3)
    np.testing.assert_allclose(M, M.T)
    np.testing.assert_allclose(np.diag(M), 1.0)
    assert M[0, 1] == pytest.approx(linear_cka(X, Y, debiased=True), rel=1e-9)
    assert M[1, 2] == pytest.approx(linear_cka(Y, Z, debiased=True), rel=1e-9)


def test_minibatch_cka_is_the_ratio_of_summed_unbiased_hsic():
    X, Y = _pair(n=64, seed=11)
    M = minibatch_cka([X, Y], batch_size=16, rng=5)
    perm = np.random.default_rng(5).permutation(64)
    hxy = hxx = hyy = 0.0
    for part in np.array_split(perm, 4):
        idx = np.sort(part)
        K, L = X[idx] @ X[idx].T, Y[idx] @ Y[idx].T
        hxy += hsic_unbiased(K, L)
        hxx += hsic_unbiased(K, K)
        hyy += hsic_unbiased(L, L)
    assert M[0, 1] == pytest.approx(hxy / np.sqrt(hxx * hyy), rel=1e-9)


def test_minibatch_cka_approaches_full_debiased_cka():
    X, Y = _pair(n=2000, p=10, q=8, seed=12, noise=3.0)
    full = linear_cka(X, Y, debiased=True)
    assert minibatch_cka([X, Y], batch_size=100, rng=0)[0, 1] == pytest.approx(full, abs=0.03)


def test_minibatch_accumulator_and_conv_maps(tmp_path):
    rng = np.random.default_rng(13)
    conv = rng.normal(size=(40, 2, 3, 3))
    flat = conv.reshape(40, -1)
    dense = flat @ rng.normal(size=(18, 4))
    acc = MinibatchCKA(2)
    for lo in (0, 20):
        acc.update([conv[lo : lo + 20], dense[lo : lo + 20]])
    assert acc.n_batches == 2
    M = acc.result()
    acc2 = MinibatchCKA(2)
    for lo in (0, 20):
        acc2.update([flat[lo : lo + 20], dense[lo : lo + 20]])
    np.testing.assert_allclose(M, acc2.result())
    np.save(tmp_path / "f.npy", flat)
    mm = np.load(tmp_path / "f.npy", mmap_mode="r")
    np.testing.assert_allclose(
        minibatch_cka([mm, dense], batch_size=10, rng=1),
        minibatch_cka([flat, dense], batch_size=10, rng=1),
    )


def test_minibatch_cka_bad_input():
    X, Y = _pair(n=20)
    with pytest.raises(TypeError):
        minibatch_cka(X)
    with pytest.raises(ValueError, match="rows"):
        minibatch_cka([X, Y[:-1]])
    with pytest.raises(ValueError):
        minibatch_cka([X, Y], batch_size=3)
    with pytest.raises(ValueError, match="NaN"):
        minibatch_cka([X * np.nan, Y])
    with pytest.raises(ValueError, match="no minibatch"):
        MinibatchCKA(2).result()
    with pytest.raises(ValueError, match="layers"):
        MinibatchCKA(2).update([X])
    with pytest.raises(ValueError, match="rows"):
        MinibatchCKA(2).update([X, Y[:10]])
    with pytest.raises(ValueError, match="layer 0"):
        minibatch_cka([np.ones((20, 3)), Y], batch_size=20)
