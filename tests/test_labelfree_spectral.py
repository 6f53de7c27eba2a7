"""Tests of the spectral label-free metrics (seed 002, sections 3.1 and 4.1)."""

import warnings

import numpy as np
import pytest
from scipy import stats

from repeval_ref import (
    alpha_req,
    condition_number,
    gram_spectrum,
    ne_sum,
    power_law_spectrum,
    rankme,
    rankme_normalized,
    sample_features_with_spectrum,
    stable_rank,
)


def _data(n=200, d=12, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)) @ rng.normal(size=(d, d)) + rng.normal(size=d)


def _batches(X, sizes):
    """Iterator over row batches of X with the given (uneven) sizes."""
    cuts = np.cumsum(sizes)[:-1]
    return iter(np.split(X, cuts))


def _memmap(tmp_path, X, dtype=np.float32):
    path = tmp_path / "feats.npy"
    np.save(path, X.astype(dtype))
    return np.load(path, mmap_mode="r")


# --------------------------------------------------------------------------- spectrum


@pytest.mark.parametrize("center", [True, False])
def test_gram_spectrum_is_squared_singular_values(center):
    X = _data(50, 8)
    Z = X - X.mean(axis=0) if center else X
    s = np.linalg.svd(Z, compute_uv=False)
    np.testing.assert_allclose(gram_spectrum(X, center=center), s**2, rtol=1e-10)


def test_gram_spectrum_pads_zeros_when_n_below_d():
    X = _data(5, 9)
    lam = gram_spectrum(X, center=True)
    assert lam.shape == (9,)
    s = np.linalg.svd(X - X.mean(axis=0), compute_uv=False)
    np.testing.assert_allclose(lam[:4], s[:4] ** 2, rtol=1e-9)
    assert np.all(lam[4:] < 1e-10 * lam[0])


def test_centred_spectrum_is_exact_despite_a_huge_offset():
    rng = np.random.default_rng(1)
    X = 1e7 + rng.normal(size=(300, 4)) * np.array([1.0, 2.0, 3.0, 4.0])
    expected = np.linalg.svd(X - X.mean(axis=0), compute_uv=False) ** 2
    got = gram_spectrum(_batches(X, [7, 100, 193]), center=True)
    np.testing.assert_allclose(got, expected, rtol=1e-6)


# ------------------------------------------------------------- streamed == in memory

STREAMED = [
    (lambda X: alpha_req(X, fit_range=(2, 0.9))),
    ne_sum,
    stable_rank,
    condition_number,
    (lambda X: condition_number(X, center=True)),
    (lambda X: rankme(X, center=True)),
    rankme,
    rankme_normalized,
    (lambda X: gram_spectrum(X, center=False)),
]


@pytest.mark.parametrize("fn", STREAMED)
def test_iterator_of_batches_gives_the_in_memory_value(fn):
    X = _data(230, 12)
    np.testing.assert_allclose(fn(_batches(X, [1, 50, 79, 100])), fn(X), rtol=1e-7)


@pytest.mark.parametrize("fn", STREAMED)
def test_float32_memmap_gives_the_in_memory_value(fn, tmp_path):
    X = _data(230, 12).astype(np.float32)
    mm = _memmap(tmp_path, X)
    assert isinstance(mm, np.memmap)
    np.testing.assert_allclose(fn(mm), fn(X.astype(np.float64)), rtol=1e-7)


def test_memmap_is_read_in_blocks(tmp_path, monkeypatch):
    from repeval_ref.labelfree import _streaming

    monkeypatch.setattr(_streaming, "_BLOCK_BYTES", 8 * 12 * 16)  # 16 rows per block
    X = _data(100, 12)
    mm = _memmap(tmp_path, X, dtype=np.float64)
    seen = []
    for b in _streaming.iter_batches(mm, "X"):
        seen.append(b.shape[0])
    assert max(seen) == 16 and sum(seen) == 100
    np.testing.assert_allclose(ne_sum(mm), ne_sum(X), rtol=1e-10)


def test_batch_errors_name_the_batch():
    X = _data(20, 4)
    with pytest.raises(ValueError, match="batch 1 has 3 columns"):
        ne_sum(iter([X, X[:, :3]]))
    bad = X.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match="batch 0 contains NaN"):
        ne_sum(iter([bad]))
    with pytest.raises(ValueError, match="no rows"):
        ne_sum(iter([]))


# ------------------------------------------------------------------------- NE-sum etc.


def test_ne_sum_equals_stable_rank_of_the_centred_matrix():
    X = _data(120, 10)
    Xc = X - X.mean(axis=0)
    direct = np.linalg.norm(Xc, "fro") ** 2 / np.linalg.norm(Xc, 2) ** 2
    assert ne_sum(X) == pytest.approx(direct, rel=1e-10)
    assert stable_rank(Xc) == pytest.approx(direct, rel=1e-10)
    assert stable_rank(X, center=True) == pytest.approx(direct, rel=1e-10)
    # without centring the stable rank of X differs (the mean adds a direction)
    raw = np.linalg.norm(X, "fro") ** 2 / np.linalg.norm(X, 2) ** 2
    assert stable_rank(X) == pytest.approx(raw, rel=1e-10)
    assert ne_sum(X, center=False) == pytest.approx(raw, rel=1e-10)


def test_ne_sum_bounds():
    rng = np.random.default_rng(3)
    u = rng.normal(size=5)
    line = np.outer(rng.normal(size=40), u)
    assert ne_sum(line) == pytest.approx(1.0)
    white = sample_features_with_spectrum(np.ones(6), 30, rng=0, exact=True)
    assert ne_sum(white) == pytest.approx(6.0)


def test_condition_number_matches_numpy_for_full_rank():
    X = _data(60, 7)
    assert condition_number(X) == pytest.approx(np.linalg.cond(X), rel=1e-6)
    Xc = X - X.mean(axis=0)
    assert condition_number(X, center=True) == pytest.approx(np.linalg.cond(Xc), rel=1e-6)


def test_condition_number_ignores_zero_singular_values():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(50, 3)) @ rng.normal(size=(3, 8))  # rank 3
    s = np.linalg.svd(X, compute_uv=False)
    assert condition_number(X) == pytest.approx(s[0] / s[2], rel=1e-6)
    # a looser tolerance drops small but genuine singular values
    Y = np.diag([1.0, 1e-3, 1e-5]) @ np.eye(3)
    assert condition_number(Y) == pytest.approx(1e5, rel=1e-6)
    assert condition_number(Y, rtol=1e-4) == pytest.approx(1e3, rel=1e-6)


def _with_singular_values(s, n, d, seed=0):
    """U diag(s) V^T with Haar-like orthonormal U (n, m) and V (d, m), m = len(s)."""
    rng = np.random.default_rng(seed)
    U, _ = np.linalg.qr(rng.normal(size=(n, len(s))))
    V, _ = np.linalg.qr(rng.normal(size=(d, len(s))))
    return (U * s) @ V.T


@pytest.mark.parametrize("kappa", [1e3, 1e7, 1e9])
@pytest.mark.parametrize("shape", [(500, 50), (40, 90)])
def test_condition_number_of_an_array_matches_numpy_cond(kappa, shape):
    n, d = shape
    s = np.logspace(0, -np.log10(kappa), min(n, d))
    X = _with_singular_values(s, n, d, seed=int(np.log10(kappa)))
    # both are SVD-based: they differ by rounding of the smallest singular value,
    # about kappa * eps relative (measured 4e-9 at kappa = 1e9); numpy is the reference
    assert condition_number(X) == pytest.approx(
        np.linalg.cond(X), rel=max(1e-12, 100 * kappa * 2.2e-16)
    )
    assert condition_number(X) == pytest.approx(kappa, rel=max(1e-12, 100 * kappa * 2.2e-16))
    Xc = X - X.mean(axis=0)
    assert condition_number(X, center=True) == pytest.approx(
        np.linalg.cond(Xc) if n > d else _kappa_nonzero(Xc), rel=max(1e-12, 100 * kappa * 2.2e-16)
    )


def _kappa_nonzero(Z):
    """sigma_1 / smallest singular value above max(N, d) * eps * sigma_1 (matrix_rank's
    tolerance)."""
    s = np.linalg.svd(Z, compute_uv=False)
    s = s[s > max(Z.shape) * np.finfo(float).eps * s[0]]
    return s[0] / s[-1]


def test_condition_number_streamed_warns_at_its_resolution_limit(tmp_path):
    n, d = 500, 50
    limit = np.sqrt(d * np.finfo(float).eps)  # about 1e-7: kappa is resolved to about 1e7
    good = _with_singular_values(np.logspace(0, -3, d), n, d, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning far from the limit
        assert condition_number(_batches(good, [200, 300])) == pytest.approx(1e3, rel=1e-9)
        assert condition_number(_memmap(tmp_path, good, np.float64)) == pytest.approx(1e3, rel=1e-9)
    bad = _with_singular_values(np.logspace(0, -9, d), n, d, seed=2)
    assert condition_number(bad) == pytest.approx(1e9, rel=1e-6)  # in memory: exact
    with pytest.warns(RuntimeWarning, match="resolution limit"):
        streamed = condition_number(_batches(bad, [200, 300]))
    assert streamed < 1e9 and streamed * limit > 0.1  # capped near 1 / limit


def test_condition_number_ignores_zero_singular_values_when_streamed():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(50, 3)) @ rng.normal(size=(3, 8))  # rank 3
    s = np.linalg.svd(X, compute_uv=False)
    assert condition_number(_batches(X, [20, 30])) == pytest.approx(s[0] / s[2], rel=1e-8)
    W = rng.normal(size=(6, 20))  # N < d: only 6 singular values
    s = np.linalg.svd(W, compute_uv=False)
    assert condition_number(_batches(W, [2, 4])) == pytest.approx(s[0] / s[5], rel=1e-8)
    assert condition_number(W) == pytest.approx(np.linalg.cond(W), rel=1e-12)


# ---------------------------------------------------- RankMe: streamed == SVD exactly


def _rankme_svd(Z, eps=1e-7):
    s = np.linalg.svd(Z, compute_uv=False)  # min(N, d) values
    p = s / s.sum() + eps
    return float(np.exp(-np.sum(p * np.log(p))))


@pytest.mark.parametrize("case", ["wide", "rank5"])
@pytest.mark.parametrize("center", [False, True])
def test_rankme_streamed_equals_the_svd_value(case, center, tmp_path):
    rng = np.random.default_rng(9)
    if case == "wide":  # N < d: the Gram matrix has d - N extra (zero) eigenvalues
        Z = rng.normal(size=(30, 100))
    else:  # N > d but rank 5: 55 zero singular values
        Z = rng.normal(size=(400, 5)) @ rng.normal(size=(5, 60))
    d = Z.shape[1]
    ref = _rankme_svd(Z - Z.mean(axis=0) if center else Z)
    assert rankme(Z, center=center) == pytest.approx(ref, rel=1e-12)
    mm = _memmap(tmp_path, Z, dtype=np.float64)
    # The Gram route squares the singular values, so each carries a relative error of
    # about eps * (sigma_1 / sigma_i)^2; these spectra are well conditioned (measured
    # differences <= 7e-15), so rtol 1e-12 leaves a wide margin. Without keeping only
    # min(N, d) values and zeroing the Gram's rounding residues the wide case was off
    # by 1.1e-4 and the rank-5 one by 9e-7.
    for streamed in (mm, _batches(Z, [7, 13, Z.shape[0] - 20])):
        assert rankme(streamed, center=center) == pytest.approx(ref, rel=1e-12)
    assert rankme_normalized(mm, center=center) == pytest.approx(ref / d, rel=1e-12)
    assert rankme_normalized(_batches(Z, [10, Z.shape[0] - 10]), center=center) == pytest.approx(
        ref / d, rel=1e-12
    )


def test_rankme_normalized_can_exceed_one_by_the_documented_bound():
    d, eps = 300, 1e-7
    Q, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(500, d)))  # d equal singular values
    bound = (1 / d + eps) ** (-(1 + d * eps)) / d
    assert rankme_normalized(Q) == pytest.approx(bound, rel=1e-12)
    assert 1.0 < bound < 1 + d * eps * np.log(d)
    assert rankme_normalized(Q, eps=0.0) == pytest.approx(1.0, rel=1e-12)


def test_zero_matrix_is_an_error_not_nan():
    for fn in (ne_sum, stable_rank, condition_number, alpha_req):
        with pytest.raises(ValueError, match="zero"):
            fn(np.zeros((30, 20)))
    with pytest.raises(ValueError):
        ne_sum(np.ones((10, 3)))  # constant: zero after centring


# -------------------------------------------------------------------------- alpha-ReQ


@pytest.mark.parametrize("alpha", [0.5, 1.0, 1.7])
def test_alpha_req_recovers_an_exact_power_law(alpha):
    d = 40
    X = sample_features_with_spectrum(power_law_spectrum(alpha, d), 60, rng=1, exact=True)
    assert alpha_req(X) == pytest.approx(alpha, abs=1e-8)
    assert alpha_req(X, fit_range=(1, 0.5)) == pytest.approx(alpha, abs=1e-8)


def test_alpha_req_matches_scipy_linregress_on_the_covariance_spectrum():
    X = _data(400, 30, seed=5)
    lam = np.sort(np.linalg.eigvalsh(np.cov(X, rowvar=False)))[::-1]
    i = np.arange(10, 28)  # [10, floor(0.9 * 30)] = [10, 27]
    fit = stats.linregress(np.log(i), np.log(lam[i - 1]))
    assert alpha_req(X) == pytest.approx(-fit.slope, rel=1e-9)
    i2 = np.arange(3, 16)
    fit2 = stats.linregress(np.log(i2), np.log(lam[i2 - 1]))
    assert alpha_req(X, fit_range=(3, 15)) == pytest.approx(-fit2.slope, rel=1e-9)


def test_alpha_req_range_errors():
    X = _data(200, 12)
    with pytest.raises(ValueError, match="at least 2"):
        alpha_req(X)  # [10, floor(10.8)] = [10, 10]: one point
    with pytest.raises(ValueError, match="exceeds"):
        alpha_req(X, fit_range=(1, 13))
    with pytest.raises(ValueError, match=">= 0"):
        alpha_req(X, fit_range=(-1, 0.9))
    with pytest.raises(ValueError, match=">= 1"):
        alpha_req(X, fit_range=(1, 0))
    with pytest.raises(ValueError, match="fraction"):
        alpha_req(X, fit_range=(1, 1.5))
    with pytest.raises(TypeError):
        alpha_req(X, fit_range=(1, "end"))
    with pytest.raises(TypeError):
        alpha_req(X, fit_range=5)
    with pytest.raises(ValueError, match="zero"):
        alpha_req(_data(8, 30), fit_range=(1, 0.9))  # rank <= 7 with 8 rows


def test_alpha_req_lower_bound_zero_means_the_first_eigenvalue():
    # 002 writes its ranges (0, d/2), (0, 0.8 d), (0, d): 0 is "from the first"
    X = _data(400, 30, seed=6)
    lam = np.sort(np.linalg.eigvalsh(np.cov(X, rowvar=False)))[::-1]
    i = np.arange(1, 25)  # 1-based inclusive [1, floor(0.8 * 30)] = [1, 24]
    fit = stats.linregress(np.log(i), np.log(lam[i - 1]))
    ref = alpha_req(X, fit_range=(1, 0.8))
    assert ref == pytest.approx(-fit.slope, rel=1e-9)
    assert alpha_req(X, fit_range=(0, 0.8)) == ref
    assert alpha_req(X, fit_range=(0.0, 0.8)) == ref
    assert alpha_req(X, fit_range=(0.01, 0.8)) == ref  # floor(0.3) = 0: the first too
    assert alpha_req(X, fit_range=(0, 1.0)) == alpha_req(X, fit_range=(1, 30))
    assert alpha_req(X, fit_range=(0, 0.5)) == alpha_req(X, fit_range=(1, 15))


# ------------------------------------------------------- synthetic spectra (002, 4.1)


def test_power_law_spectrum():
    lam = power_law_spectrum(1.0, 5)
    expected = 1.0 / np.arange(1, 6)
    np.testing.assert_allclose(lam, expected / expected.sum())
    np.testing.assert_allclose(power_law_spectrum(0.0, 4), np.full(4, 0.25))
    neg = power_law_spectrum(-1.5, 50)
    assert neg.sum() == pytest.approx(1.0) and np.all(np.diff(neg) <= 0)
    pos = power_law_spectrum(1.5, 50)
    assert neg[0] / neg[-1] == pytest.approx(50**1.5) == pos[0] / pos[-1]
    big = power_law_spectrum(-4.0, 5000)  # no overflow
    assert np.all(np.isfinite(big)) and big.sum() == pytest.approx(1.0)


def test_sampler_exact_has_the_requested_sample_covariance():
    lam = power_law_spectrum(0.8, 7)
    X = sample_features_with_spectrum(lam, 20, rng=2, exact=True)
    np.testing.assert_allclose(X.mean(axis=0), 0, atol=1e-12)
    got = np.sort(np.linalg.eigvalsh(np.cov(X, rowvar=False)))[::-1]
    np.testing.assert_allclose(got, lam, atol=1e-12)


def test_sampler_population_covariance():
    lam = np.array([4.0, 1.0, 0.25])
    X = sample_features_with_spectrum(lam, 40000, rng=3)
    got = np.sort(np.linalg.eigvalsh(np.cov(X, rowvar=False)))[::-1]
    np.testing.assert_allclose(got, lam, rtol=0.05)


def test_sampler_bad_input():
    with pytest.raises(ValueError, match=">= 0"):
        sample_features_with_spectrum([1.0, -1.0], 10)
    with pytest.raises(ValueError, match="n > d"):
        sample_features_with_spectrum(np.ones(5), 5, exact=True)
    with pytest.raises(ValueError):
        sample_features_with_spectrum(np.ones(3), 1)
    with pytest.raises(TypeError):
        sample_features_with_spectrum(np.ones(3), 10, exact="yes")
    with pytest.raises(TypeError):
        power_law_spectrum("1", 5)
    with pytest.raises(ValueError):
        power_law_spectrum(np.inf, 5)
    with pytest.raises(ValueError):
        power_law_spectrum(1.0, 0)


ALPHAS = np.round(np.linspace(-2, 2, 17), 2)
DIMS = (10, 30, 80)


@pytest.fixture(scope="module")
def sensitivity():
    """RankMe*, NE-sum*, kappa and kappa* on exact power-law spectra (002, section 4.1)."""
    out = {}
    for d in DIMS:
        for a in ALPHAS:
            X = sample_features_with_spectrum(power_law_spectrum(a, d), d + 1, rng=7, exact=True)
            kappa = condition_number(X, center=True)
            out[d, a] = (
                rankme_normalized(X, center=True, eps=0.0),
                ne_sum(X) / d,
                kappa,
                kappa / d,
            )
    return out


def test_rankme_and_ne_sum_are_maximal_at_alpha_zero_for_every_d(sensitivity):
    for d in DIMS:
        rm = [sensitivity[d, a][0] for a in ALPHAS]
        ns = [sensitivity[d, a][1] for a in ALPHAS]
        assert ALPHAS[int(np.argmax(rm))] == 0.0
        assert ALPHAS[int(np.argmax(ns))] == 0.0
        assert max(rm) == pytest.approx(1.0)  # flat: RankMe = d
        assert max(ns) == pytest.approx(1.0)  # flat: NE-sum = d


def test_kappa_is_symmetric_in_alpha_and_smallest_at_zero(sensitivity):
    for d in DIMS:
        for a in ALPHAS[ALPHAS > 0]:
            k_pos, k_neg = sensitivity[d, a][2], sensitivity[d, -a][2]
            assert k_pos == pytest.approx(k_neg, rel=1e-6)
            assert k_pos == pytest.approx(d ** (a / 2), rel=1e-6)  # sqrt(lambda_1 / lambda_d)
        ks = [sensitivity[d, a][3] for a in ALPHAS]
        assert ALPHAS[int(np.argmin(ks))] == 0.0


def test_rankme_and_ne_sum_are_asymmetric_about_zero(sensitivity):
    for d in DIMS:
        for a in (1.0, 2.0):
            assert sensitivity[d, -a][0] > sensitivity[d, a][0]
            assert sensitivity[d, -a][1] > sensitivity[d, a][1]


def test_normalised_forms_in_d(sensitivity):
    # alpha > 0: both normalised metrics decrease with d (sub-linear scaling)
    for a in ALPHAS[ALPHAS >= 0.5]:
        for j in (0, 1):
            vals = [sensitivity[d, a][j] for d in DIMS]
            assert vals[0] > vals[1] > vals[2]
    # alpha <= 0: nearly insensitive to d (linear scaling)
    for a in ALPHAS[ALPHAS <= 0]:
        for j in (0, 1):
            vals = [sensitivity[d, a][j] for d in DIMS]
            assert max(vals) - min(vals) < 0.05
    # RankMe* sits above NE-sum* at the same alpha
    for d in DIMS:
        for a in ALPHAS[ALPHAS != 0]:
            assert sensitivity[d, a][0] > sensitivity[d, a][1]


# -------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "fn", [alpha_req, ne_sum, stable_rank, condition_number, gram_spectrum, rankme_normalized]
)
def test_bad_input(fn):
    with pytest.raises(ValueError, match="NaN"):
        fn(np.array([[1.0, np.nan], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="2-dimensional"):
        fn(np.ones(5))
    with pytest.raises(TypeError):
        fn("features")
    with pytest.raises(TypeError):
        fn(np.array([["a", "b"]]))
    with pytest.raises(ValueError):
        fn(np.empty((0, 3)))
    with pytest.raises(TypeError, match="center"):
        fn(np.ones((3, 3)), center="yes")


def test_inputs_are_not_mutated():
    X = _data(40, 12)
    before = X.copy()
    for fn in STREAMED:
        fn(X)
    np.testing.assert_array_equal(X, before)


def test_condition_number_rtol_validation():
    X = _data(30, 3)
    with pytest.raises(ValueError):
        condition_number(X, rtol=0.0)
    with pytest.raises(ValueError):
        condition_number(X, rtol=1.5)


# ------------------------------------------------------------------ two-pass summary


def test_label_free_summary_equals_the_single_metrics(tmp_path):
    import repeval_ref as r

    X = _data(300, 15, seed=8)
    mm = _memmap(tmp_path, X, dtype=np.float64)
    got = r.label_free_summary(mm, fit_range=(2, 0.9))
    expected = {
        "rankme": r.rankme(X),
        "rankme_normalized": r.rankme_normalized(X),
        "alpha_req": r.alpha_req(X, fit_range=(2, 0.9)),
        "ne_sum": r.ne_sum(X),
        "stable_rank": r.stable_rank(X),
        "condition_number": r.condition_number(X),
        "participation_ratio": r.participation_ratio(X),
        "explained_variance_dim": r.explained_variance_dimension(X),
        "isotropy_ratio": r.isotropy_ratio(X),
        "self_cluster": r.self_cluster(X),
        "mean_pairwise_cosine": r.mean_pairwise_cosine(X),
    }
    for name, value in expected.items():
        assert got[name] == pytest.approx(value, rel=1e-8), name
    assert got["n"] == 300 and got["d"] == 15 and got["notes"] == {}
    in_memory = r.label_free_summary(X, fit_range=(2, 0.9))
    for name, value in expected.items():
        assert in_memory[name] == pytest.approx(value, rel=1e-8), name


def test_label_free_summary_rankme_and_kappa_follow_the_single_metrics(tmp_path):
    import repeval_ref as r

    rng = np.random.default_rng(2)
    W = rng.normal(size=(30, 100))  # N < d
    for X in (W, _memmap(tmp_path, W, dtype=np.float64)):
        got = r.label_free_summary(X)
        assert got["rankme"] == pytest.approx(_rankme_svd(W), rel=1e-9)
        assert got["rankme_normalized"] == pytest.approx(_rankme_svd(W) / 100, rel=1e-9)
        assert got["condition_number"] == pytest.approx(np.linalg.cond(W), rel=1e-9)
    ill = _with_singular_values(np.logspace(0, -9, 20), 200, 20, seed=3)
    assert r.label_free_summary(ill)["condition_number"] == pytest.approx(1e9, rel=1e-6)


def test_label_free_summary_reports_undefined_metrics_as_none():
    import repeval_ref as r

    X = _data(40, 12)
    X[3] = 0.0
    got = r.label_free_summary(X)  # d = 12: the default alpha range has one index
    assert got["alpha_req"] is None and "at least 2" in got["notes"]["alpha_req"]
    assert got["self_cluster"] is None and "zero vector at row 3" in got["notes"]["self_cluster"]
    assert got["ne_sum"] == pytest.approx(r.ne_sum(X))
    with pytest.raises(TypeError, match="iterator"):
        r.label_free_summary(iter([X]))
    with pytest.raises(ValueError, match="NaN"):
        r.label_free_summary(np.full((3, 3), np.nan))
