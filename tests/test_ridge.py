"""Tests of repeval_ref.ridge: the least-squares probe and its exact leave-one-out."""

import inspect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import ortho_group
from sklearn.linear_model import LinearRegression, Ridge, RidgeCV

from repeval_ref import loo_scores, ridge_loo, ridge_probe


def make_data(seed=0, n=60, d=6, K=4, m=25, shift=2.0):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % K
    rng.shuffle(y)
    means = rng.normal(size=(K, d))
    H = means[y] + rng.normal(size=(n, d)) + shift
    Ht = means[rng.integers(0, K, m)] + rng.normal(size=(m, d)) + shift
    return H, y, Ht


def targets(y, K):
    return 2.0 * np.eye(K)[y] - 1.0


def orthogonal(d, seed):
    return ortho_group.rvs(d, random_state=seed)


def brute_force_loo(H, y, lam):
    return np.stack(
        [
            ridge_probe(np.delete(H, i, 0), np.delete(y, i), H[i : i + 1], lam)[0]
            for i in range(len(y))
        ]
    )


def ridgecv_press(H, T, lams):
    """Mean squared LOO error per alpha from scikit-learn's RidgeCV (GCV mode)."""
    params = inspect.signature(RidgeCV).parameters
    if "store_cv_results" in params:
        cv = RidgeCV(alphas=lams, store_cv_results=True, fit_intercept=True).fit(H, T)
        values = cv.cv_results_
    else:  # scikit-learn < 1.5
        cv = RidgeCV(alphas=lams, store_cv_values=True, fit_intercept=True).fit(H, T)
        values = cv.cv_values_
    assert values.shape == (H.shape[0], T.shape[1], len(lams))
    return values.mean(axis=(0, 1))


# ---------------------------------------------------------------- ridge_probe


@pytest.mark.parametrize("lam", [1e-4, 0.3, 1.0, 50.0])
@pytest.mark.parametrize("bias", [True, False])
def test_ridge_probe_matches_sklearn_ridge(lam, bias):
    H, y, Ht = make_data()
    ours = ridge_probe(H, y, Ht, lam, bias=bias)
    ref = Ridge(alpha=lam, fit_intercept=bias).fit(H, targets(y, 4)).predict(Ht)
    assert ours.shape == (Ht.shape[0], 4) and ours.dtype == np.float64
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-10)


def test_ridge_probe_matches_explicit_closed_form():
    """B = (Z^T Z + P)^{-1} Z^T T with Z = [1, H], P = diag(0, lam I)."""
    H, y, Ht = make_data(seed=3)
    lam, K = 0.7, 4
    T = targets(y, K)
    Z = np.c_[np.ones(len(H)), H]
    P = lam * np.eye(Z.shape[1])
    P[0, 0] = 0.0
    B = np.linalg.solve(Z.T @ Z + P, Z.T @ T)
    np.testing.assert_allclose(
        ridge_probe(H, y, Ht, lam), np.c_[np.ones(len(Ht)), Ht] @ B, atol=1e-10
    )
    B_nb = np.linalg.solve(H.T @ H + lam * np.eye(H.shape[1]), H.T @ T)
    np.testing.assert_allclose(ridge_probe(H, y, Ht, lam, bias=False), Ht @ B_nb, atol=1e-10)


@pytest.mark.parametrize("bias", [True, False])
def test_lam_zero_is_least_squares(bias):
    H, y, Ht = make_data(seed=1)
    ref = LinearRegression(fit_intercept=bias).fit(H, targets(y, 4)).predict(Ht)
    np.testing.assert_allclose(ridge_probe(H, y, Ht, 0.0, bias=bias), ref, atol=1e-10)


def test_lam_zero_rank_deficient_matches_linear_regression():
    rng = np.random.default_rng(2)
    # fewer points than features, and a duplicated feature column
    H = rng.normal(size=(8, 12))
    H[:, 5] = H[:, 4]
    y = np.arange(8) % 3
    Ht = rng.normal(size=(5, 12))
    ref = LinearRegression().fit(H, targets(y, 3)).predict(Ht)
    ours = ridge_probe(H, y, Ht, 0)
    assert np.all(np.isfinite(ours))
    np.testing.assert_allclose(ours, ref, atol=1e-9)
    # interpolates the training targets
    np.testing.assert_allclose(ridge_probe(H, y, H, 0), targets(y, 3), atol=1e-9)


def test_number_of_classes_is_max_label_plus_one():
    H, y, Ht = make_data(K=3)
    y = np.where(y == 1, 4, y)  # labels {0, 2, 4}: K = 5, classes 1 and 3 unused
    scores = ridge_probe(H, y, Ht, 0.1)
    assert scores.shape == (Ht.shape[0], 5)
    # an unused class has all targets -1, so its column is constant -1
    np.testing.assert_allclose(scores[:, 1], -1.0, atol=1e-12)
    np.testing.assert_allclose(scores[:, 3], -1.0, atol=1e-12)


# ---------------------------------------------------------------- invariances (001 table)


def test_ridge_with_bias_invariant_to_rotation_and_translation():
    H, y, Ht = make_data(seed=4)
    Q = orthogonal(H.shape[1], 5)
    c = np.random.default_rng(6).normal(size=H.shape[1]) * 3
    base = ridge_probe(H, y, Ht, 0.5)
    np.testing.assert_allclose(ridge_probe(H @ Q.T, y, Ht @ Q.T, 0.5), base, atol=1e-10)
    np.testing.assert_allclose(ridge_probe(H + c, y, Ht + c, 0.5), base, atol=1e-10)


def test_ridge_not_invariant_to_isotropic_scale_but_equivalent_to_rescaled_lambda():
    H, y, Ht = make_data(seed=4)
    lam, a = 5.0, 10.0
    base = ridge_probe(H, y, Ht, lam)
    scaled = ridge_probe(a * H, y, a * Ht, lam)
    assert np.abs(scaled - base).max() > 1e-3
    # scale a is the same probe with lam / a^2
    np.testing.assert_allclose(ridge_probe(a * H, y, a * Ht, lam * a**2), base, atol=1e-10)


def test_ridge_without_bias_not_invariant_to_translation():
    H, y, Ht = make_data(seed=4)
    Q = orthogonal(H.shape[1], 7)
    base = ridge_probe(H, y, Ht, 0.5, bias=False)
    np.testing.assert_allclose(ridge_probe(H @ Q.T, y, Ht @ Q.T, 0.5, bias=False), base, atol=1e-10)
    assert np.abs(ridge_probe(H + 1.0, y, Ht + 1.0, 0.5, bias=False) - base).max() > 1e-3


def test_least_squares_with_bias_invariant_to_any_invertible_affine_map():
    H, y, Ht = make_data(seed=8)
    rng = np.random.default_rng(9)
    d = H.shape[1]
    M = orthogonal(d, 10) @ np.diag(10 ** rng.uniform(-1, 1, d)) @ orthogonal(d, 11).T
    c = rng.normal(size=d)
    base = ridge_probe(H, y, Ht, 0.0)
    np.testing.assert_allclose(ridge_probe(H @ M.T + c, y, Ht @ M.T + c, 0.0), base, atol=1e-8)
    # a penalty breaks it
    assert (
        np.abs(ridge_probe(H @ M.T + c, y, Ht @ M.T + c, 5.0) - ridge_probe(H, y, Ht, 5.0)).max()
        > 1e-3
    )


# ---------------------------------------------------------------- leave-one-out


@pytest.mark.parametrize("lam", [0.0, 1e-3, 0.5, 20.0])
def test_loo_scores_match_explicit_refits(lam):
    H, y, _ = make_data(seed=12, n=40, d=5)
    np.testing.assert_allclose(
        loo_scores(H, y, lam), brute_force_loo(H, y, lam), rtol=0, atol=1e-10
    )


def test_loo_scores_rank_deficient_least_squares():
    # a duplicated feature column: lambda = 0 uses the minimum-norm solution
    H, y, _ = make_data(seed=22, n=30, d=5)
    H = np.c_[H, H[:, 2], H[:, 0] - H[:, 1]]
    np.testing.assert_allclose(loo_scores(H, y, 0.0), brute_force_loo(H, y, 0.0), atol=1e-9)


def test_loo_scores_high_dimensional_with_penalty():
    # n < d + 1: only a positive lambda keeps every leverage below 1
    H, y, _ = make_data(seed=13, n=15, d=30)
    np.testing.assert_allclose(loo_scores(H, y, 0.3), brute_force_loo(H, y, 0.3), atol=1e-9)


@settings(max_examples=15, deadline=None)
@given(
    n=st.integers(6, 14),
    d=st.integers(1, 4),
    log_lam=st.floats(-3, 2),
    seed=st.integers(0, 10_000),
)
def test_loo_scores_property(n, d, log_lam, seed):
    rng = np.random.default_rng(seed)
    H = rng.normal(size=(n, d)) * rng.uniform(0.1, 10)
    y = np.arange(n) % 3
    lam = 10.0**log_lam
    np.testing.assert_allclose(loo_scores(H, y, lam), brute_force_loo(H, y, lam), atol=1e-8)


def test_press_is_mean_squared_loo_residual():
    H, y, _ = make_data(seed=14)
    lams = [0.0, 0.1, 1.0]
    T = targets(y, 4)
    _, press = ridge_loo(H, y, lams)
    expected = [np.mean((T - loo_scores(H, y, lam)) ** 2) for lam in lams]
    np.testing.assert_allclose(press, expected, rtol=1e-12)


def test_press_matches_sklearn_ridgecv():
    H, y, _ = make_data(seed=15, n=80, d=10, K=5)
    lams = 10.0 ** np.arange(-4, 4)
    best, press = ridge_loo(H, y, lams)
    ref = ridgecv_press(H, targets(y, 5), lams)
    np.testing.assert_allclose(press, ref, rtol=1e-8)
    assert best == lams[np.argmin(ref)]
    assert isinstance(best, float) and press.dtype == np.float64 and press.shape == (8,)


def test_press_scale_identity():
    H, y, _ = make_data(seed=16)
    lams = 10.0 ** np.arange(-6, 4)
    a = 10.0
    _, p1 = ridge_loo(H, y, lams)
    _, p2 = ridge_loo(a * H, y, a**2 * lams)
    np.testing.assert_allclose(p2, p1, rtol=1e-9)
    # the selected lambda moves by a^2 ...
    assert ridge_loo(a * H, y, lams * a**2)[0] == pytest.approx(ridge_loo(H, y, lams)[0] * a**2)
    # ... while a fixed lambda does give a different PRESS on rescaled features
    assert not np.allclose(ridge_loo(a * H, y, lams)[1], p1, rtol=1e-3)


def test_press_invariant_to_rotation_and_translation():
    H, y, _ = make_data(seed=17)
    Q = orthogonal(H.shape[1], 18)
    lams = [0.0, 0.01, 1.0, 100.0]
    _, p = ridge_loo(H, y, lams)
    np.testing.assert_allclose(ridge_loo(H @ Q.T - 4.0, y, lams)[1], p, rtol=1e-9)


def test_best_lambda_is_first_minimum():
    # constant features: every lambda gives the same PRESS, so the first one wins
    H = np.ones((12, 3))
    y = np.arange(12) % 3
    best, press = ridge_loo(H, y, [5.0, 0.1, 2.0, 0.0])
    assert np.all(press == press[0])
    assert best == 5.0
    # duplicated grid entries: the earliest position of the minimum is chosen
    H2, y2, _ = make_data(seed=19)
    grid = [100.0, 0.5, 1.0, 0.5]
    best2, press2 = ridge_loo(H2, y2, grid)
    assert press2[1] == press2[3]
    assert best2 == grid[int(np.argmin(press2))]


def test_leverage_one_raises():
    rng = np.random.default_rng(20)
    H = rng.normal(size=(6, 5))  # n <= d + 1 with lambda = 0: every point has leverage 1
    y = np.arange(6) % 2
    with pytest.raises(ValueError, match="lams.*train_h|train_h.*lams"):
        ridge_loo(H, y, [1.0, 0.0])
    with pytest.raises(ValueError, match="leverage"):
        loo_scores(H, y, 0.0)
    # a positive lambda is fine
    assert np.all(np.isfinite(ridge_loo(H, y, [1.0])[1]))
    # a single training point always has leverage 1
    with pytest.raises(ValueError, match="leverage"):
        ridge_loo(np.ones((1, 2)), [0], [1.0])


def test_inputs_not_mutated():
    H, y, Ht = make_data(seed=21)
    copies = [H.copy(), y.copy(), Ht.copy()]
    lams = np.array([0.1, 1.0])
    ridge_probe(H, y, Ht, 0.1)
    ridge_loo(H, y, lams)
    loo_scores(H, y, 0.1)
    for a, b in zip((H, y, Ht), copies):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(lams, [0.1, 1.0])


def test_bad_inputs():
    H, y, Ht = make_data()
    with pytest.raises(ValueError, match="lam"):
        ridge_probe(H, y, Ht, -1.0)
    with pytest.raises(ValueError, match="lam"):
        ridge_probe(H, y, Ht, np.inf)
    with pytest.raises(TypeError, match="lam"):
        ridge_probe(H, y, Ht, "1")
    with pytest.raises(ValueError, match="test_h"):
        ridge_probe(H, y, Ht[:, :3], 1.0)
    with pytest.raises(ValueError, match="train_y"):
        ridge_probe(H, y[:-1], Ht, 1.0)
    with pytest.raises(ValueError, match="train_y"):
        ridge_probe(H, y - 1, Ht, 1.0)
    Hn = H.copy()
    Hn[0, 0] = np.nan
    with pytest.raises(ValueError, match="train_h"):
        ridge_probe(Hn, y, Ht, 1.0)
    with pytest.raises(ValueError, match="train_h"):
        ridge_probe(H[:, 0], y, Ht, 1.0)
    with pytest.raises(TypeError, match="bias"):
        ridge_probe(H, y, Ht, 1.0, bias="yes")
    with pytest.raises(ValueError, match="lams"):
        ridge_loo(H, y, [])
    with pytest.raises(ValueError, match="lams"):
        ridge_loo(H, y, [1.0, -0.1])
    with pytest.raises(ValueError, match="lams"):
        ridge_loo(H, y, [1.0, np.nan])
    with pytest.raises(ValueError, match="lams"):
        ridge_loo(H, y, [[1.0]])
    with pytest.raises(ValueError, match="train_y"):
        ridge_loo(H, y[:-1], [1.0])
    with pytest.raises(ValueError, match="lam"):
        loo_scores(H, y, -2.0)
    with pytest.raises(ValueError, match="train_h"):
        loo_scores(np.zeros((0, 3)), [], 1.0)


def test_loo_small_lambda_in_the_low_shot_regime():
    # Regression (audit): 1 - leverage was computed as 1 - (1/n + sum_k U_ik^2 f_k),
    # which cancels to rounding noise when lam << s_k^2 and n <= d + 1, so ridge_loo
    # raised "leverage 1" for the whole grid, e.g. on 10 points in 20 dimensions of
    # scale 10 with the seed's grid 1e-8 .. 1e4. The true leverage is 1 - O(lam), and
    # PRESS(lam) tends, as lam -> 0, to the PRESS of explicit least-squares refits.
    from repeval_ref import ridge_loo, ridge_probe

    rng = np.random.default_rng(0)
    H = 10 * rng.normal(size=(10, 20))
    y = np.arange(10) % 3
    grid = 10.0 ** np.arange(-8, 5)
    best, press = ridge_loo(H, y, grid)
    best_1, press_1 = ridge_loo(H / 10, y, grid / 100)  # PRESS(a h, a^2 lam) = PRESS(h, lam)
    np.testing.assert_allclose(press, press_1, rtol=1e-10)
    assert best == 100 * best_1
    T = 2 * np.eye(3)[y] - 1
    refits = [
        T[i] - ridge_probe(np.delete(H, i, 0), np.delete(y, i), H[i : i + 1], 0.0)[0]
        for i in range(10)
    ]
    limit = np.mean(np.square(refits))
    assert ridge_loo(H, y, [1e-12])[1][0] == pytest.approx(limit, rel=1e-8)
    assert press[0] == pytest.approx(limit, rel=1e-6)
    with pytest.raises(ValueError, match="leverage"):
        ridge_loo(H, y, [0.0])  # exactly 0 / 0


@pytest.mark.parametrize("bias", [True, False])
def test_probe_small_lambda_with_more_features_than_points(bias):
    # Regression (audit): the normal equations (A^T A + lam I) W = A^T R square the
    # condition number; with n <= d and lam = 1e-12 the scores were 0.5 away from
    # scikit-learn's SVD-based Ridge. The SVD form is accurate for every lam.
    rng = np.random.default_rng(0)
    H, test_h = 10 * rng.normal(size=(10, 20)), 10 * rng.normal(size=(4, 20))
    y = np.arange(10) % 3
    T = 2 * np.eye(3)[y] - 1
    for lam in (1e-12, 1e-8, 1e-4, 1.0):
        ref = Ridge(alpha=lam, solver="svd", fit_intercept=bias).fit(H, T).predict(test_h)
        np.testing.assert_allclose(ridge_probe(H, y, test_h, lam, bias), ref, atol=1e-10)


# ---------------------------------------------------------------- blocked scatter route


@pytest.fixture
def blocked(monkeypatch):
    """Every call takes the blocked route, in blocks of 7 float64 rows of width 12."""
    import repeval_ref._blocks as blocks_module
    import repeval_ref.ridge as ridge_module

    monkeypatch.setattr(ridge_module, "SVD_MAX_ENTRIES", 0)
    monkeypatch.setattr(blocks_module, "BLOCK_BYTES", 7 * 8 * 12)


def _ridge_data(n=90, d=12, K=4, seed=0):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % K
    H = rng.standard_normal((n, d)) @ rng.standard_normal((d, d)) + 3.0 + y[:, None] * 0.5
    return H, y, rng.standard_normal((25, d)) + 3.0


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("lam", [0.0, 1e-3, 2.0, 300.0])
def test_blocked_route_equals_the_svd(blocked, bias, lam, monkeypatch):
    H, y, Ht = _ridge_data()
    got = ridge_probe(H, y, Ht, lam, bias=bias)
    import repeval_ref.ridge as ridge_module

    monkeypatch.setattr(ridge_module, "SVD_MAX_ENTRIES", 10**12)
    np.testing.assert_allclose(got, ridge_probe(H, y, Ht, lam, bias=bias), rtol=1e-9, atol=1e-9)


def test_blocked_loo_equals_the_svd_and_brute_force(blocked, monkeypatch):
    import repeval_ref.ridge as ridge_module

    H, y, _ = _ridge_data()
    lams = [0.0, 1e-2, 1.0, 50.0]
    best, press = ridge_loo(H, y, lams)
    scores = loo_scores(H, y, 1.0)
    n = H.shape[0]
    for i in (0, 13, n - 1):  # brute force: refit without point i (on the blocked route too)
        keep = np.arange(n) != i
        direct = ridge_probe(H[keep], y[keep], H[i : i + 1], 1.0)
        if direct.shape[1] == scores.shape[1]:
            np.testing.assert_allclose(scores[i], direct[0], rtol=1e-8, atol=1e-9)
    monkeypatch.setattr(ridge_module, "SVD_MAX_ENTRIES", 10**12)
    best_svd, press_svd = ridge_loo(H, y, lams)
    assert best == best_svd
    np.testing.assert_allclose(press, press_svd, rtol=1e-9)
    np.testing.assert_allclose(scores, loo_scores(H, y, 1.0), rtol=1e-9, atol=1e-10)


def test_blocked_leverage_one_is_refused_with_the_same_message(blocked, monkeypatch):
    import repeval_ref.ridge as ridge_module

    rng = np.random.default_rng(3)
    H, y = rng.standard_normal((10, 12)), np.arange(10) % 2  # n <= d + 1: every point interpolated
    with pytest.raises(ValueError) as blocked_err:
        ridge_loo(H, y, [1.0, 0.0])
    monkeypatch.setattr(ridge_module, "SVD_MAX_ENTRIES", 10**12)
    with pytest.raises(ValueError) as svd_err:
        ridge_loo(H, y, [1.0, 0.0])
    assert str(blocked_err.value) == str(svd_err.value)
    assert "training point 0" in str(svd_err.value) and "lams value 0.0" in str(svd_err.value)


def test_float32_memory_map_gives_the_float64_result(tmp_path):
    H, y, Ht = _ridge_data(n=400, d=12, seed=5)
    H32 = H.astype(np.float32)
    np.save(tmp_path / "h.npy", H32)
    M = np.load(tmp_path / "h.npy", mmap_mode="r")  # a read-only map: the blocked route
    lams = [1e-3, 1.0, 100.0]
    exact = H32.astype(np.float64)  # the same values, through the in-memory SVD route
    np.testing.assert_allclose(
        ridge_probe(M, y, Ht, 1.0), ridge_probe(exact, y, Ht, 1.0), rtol=1e-9, atol=1e-9
    )
    best, press = ridge_loo(M, y, lams)
    best64, press64 = ridge_loo(exact, y, lams)
    assert best == best64
    np.testing.assert_allclose(press, press64, rtol=1e-9)
    # against the float64 features the float32 file was made from: float32 rounding only
    np.testing.assert_allclose(press, ridge_loo(H, y, lams)[1], rtol=1e-5)
    assert isinstance(M, np.memmap)  # the caller's map is not replaced or modified
