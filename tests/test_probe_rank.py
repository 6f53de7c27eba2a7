"""Tests of repeval_ref.probe_rank.rank_bound (book/rank.md; seed 000, what a linear probe can
read)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression

from repeval_ref import rank_bound


def one_hot(y, n_classes):
    Y = np.zeros((len(y), n_classes))
    Y[np.arange(len(y)), y] = 1.0
    return Y


def eckart_young_floor(y, n_classes, r):
    """Energy of Y beyond its r + 1 largest singular values (numpy SVD)."""
    sv = np.linalg.svd(one_hot(y, n_classes), compute_uv=False)
    return float(np.sum(sv[r + 1 :] ** 2))


def noisy_clusters(rng, counts, d=12, spread=0.8):
    centres = rng.normal(size=(len(counts), d)) * 3
    y = rng.permutation(np.repeat(np.arange(len(counts)), counts))
    return centres[y] + spread * rng.normal(size=(len(y), d)), y


def test_seed_opening_example_rank_one_four_classes():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(4), 25)
    H = rng.normal(size=(100, 1)) * rng.normal(size=(1, 5))  # rank 1 in 5 dimensions
    residual, floor = rank_bound(H, y, 4)
    assert floor == 50  # (4 - 1 - 1) / 4 = 0.5 per image, 100 images
    assert isinstance(floor, int) and isinstance(residual, float)
    assert residual >= 50


def test_floor_is_attained():
    # h = +1 on class 0, -1 on class 1, 0 on classes 2 and 3. span{1, h} is the column
    # space of the best rank-2 approximation Y (v v^T + w w^T) with v = (1,1,1,1)/2 and
    # w = (1,-1,0,0)/sqrt(2), so the least-squares fit leaves exactly the floor:
    # columns 0 and 1 leave 6.25 each, columns 2 and 3 leave 18.75 each.
    y = np.repeat(np.arange(4), 25)
    h = np.select([y == 0, y == 1], [1.0, -1.0], 0.0)
    residual, floor = rank_bound(h[:, None], y, 4)
    assert floor == 50
    assert residual == pytest.approx(50.0, rel=1e-12)


@pytest.mark.parametrize("r", range(1, 10))
def test_residual_above_floor_for_random_rank_r_projections(r):
    rng = np.random.default_rng(r)
    counts = np.array([30, 25, 40, 22, 35, 28, 31, 26, 33, 20])
    X, y = noisy_clusters(rng, counts)
    H = X @ rng.normal(size=(12, r)) @ rng.normal(size=(r, 12))
    assert np.linalg.matrix_rank(H) == r
    residual, floor = rank_bound(H, y, 10)
    expected_floor = int(np.sort(counts)[: 10 - r - 1].sum()) if r < 9 else 0
    assert floor == expected_floor
    assert floor == pytest.approx(eckart_young_floor(y, 10, r), abs=1e-8)
    assert residual >= floor - 1e-9 * len(y)
    if r < 9:
        assert floor > 0


def test_residual_equals_sklearn_linear_regression():
    rng = np.random.default_rng(5)
    for r in (2, 6, 12):
        X, y = noisy_clusters(rng, [15, 20, 25, 18, 22])
        H = X @ rng.normal(size=(12, r)) @ rng.normal(size=(r, 12))
        Y = one_hot(y, 6)  # class 5 is absent
        pred = LinearRegression().fit(H, Y).predict(H)
        residual, _ = rank_bound(H, y, 6)
        assert residual == pytest.approx(np.sum((Y - pred) ** 2), rel=1e-9, abs=1e-9)


def test_gram_of_one_hot_is_diagonal_counts_and_floor_is_eckart_young_tail():
    rng = np.random.default_rng(2)
    y = rng.integers(0, 7, size=90)
    y[y == 6] = 5  # class 6 empty
    Y = one_hot(y, 7)
    counts = np.bincount(y, minlength=7)
    np.testing.assert_array_equal(Y.T @ Y, np.diag(counts))
    for r in range(0, 8):
        H = rng.normal(size=(90, r)) if r else np.zeros((90, 1))
        residual, floor = rank_bound(H, y, 7)
        assert floor == pytest.approx(eckart_young_floor(y, 7, r), abs=1e-9)
        assert residual >= floor - 1e-9


def test_absent_classes_count_zero_and_high_rank_gives_zero_floor():
    y = np.array([0] * 10 + [1] * 6 + [2] * 8)
    H = np.linspace(1, 2, 24)[:, None]  # rank 1
    # K = 5: K - r - 1 = 3 smallest counts are 0, 0, 6
    assert rank_bound(H, y, 5)[1] == 6
    assert rank_bound(H, y, 3)[1] == 6  # K - r - 1 = 1: the smallest count
    assert rank_bound(np.column_stack([H, H**2]), y, 3)[1] == 0  # r + 1 = K


def test_single_class_fits_with_bias():
    residual, floor = rank_bound(np.random.default_rng(0).normal(size=(8, 3)), np.zeros(8, int), 1)
    assert floor == 0
    assert residual == pytest.approx(0.0, abs=1e-20)


def test_zero_representation_has_rank_zero():
    y = np.array([0, 0, 1, 2, 2, 2])
    residual, floor = rank_bound(np.zeros((6, 4)), y, 3)
    assert floor == 1 + 2  # K - 0 - 1 = 2 smallest counts
    # only the bias is left: each column is predicted by its mean
    Y = one_hot(y, 3)
    assert residual == pytest.approx(np.sum((Y - Y.mean(axis=0)) ** 2), rel=1e-12)


def test_inputs_not_mutated():
    rng = np.random.default_rng(0)
    H = rng.normal(size=(20, 3))
    y = rng.integers(0, 4, size=20)
    H0, y0 = H.copy(), y.copy()
    rank_bound(H, y, 4)
    np.testing.assert_array_equal(H, H0)
    np.testing.assert_array_equal(y, y0)


GOOD_H = np.arange(12.0).reshape(6, 2) ** 1.5
GOOD_Y = np.array([0, 1, 2, 0, 1, 2])


@pytest.mark.parametrize(
    "H, y, n_classes, exc, word",
    [
        (np.zeros((0, 2)), [], 3, ValueError, "H"),
        (np.ones(6), GOOD_Y, 3, ValueError, "H"),
        (np.where(np.eye(6, 2) > 0, np.nan, GOOD_H), GOOD_Y, 3, ValueError, "H"),
        (np.full((6, 2), np.inf), GOOD_Y, 3, ValueError, "H"),
        ("H", GOOD_Y, 3, TypeError, "H"),
        (GOOD_H, GOOD_Y[:-1], 3, ValueError, "y"),
        (GOOD_H, GOOD_Y, 2, ValueError, "y"),
        (GOOD_H, GOOD_Y - 1, 3, ValueError, "y"),
        (GOOD_H, GOOD_Y + 0.5, 3, ValueError, "y"),
        (GOOD_H, GOOD_Y, 0, ValueError, "n_classes"),
        (GOOD_H, GOOD_Y, 2.5, TypeError, "n_classes"),
    ],
)
def test_bad_inputs(H, y, n_classes, exc, word):
    with pytest.raises(exc, match=word):
        rank_bound(H, y, n_classes)


@pytest.mark.parametrize("scale", [1e-170, 1e-20, 1e-8, 1e8, 1e20, 1e200])
def test_residual_does_not_depend_on_the_scale_of_the_features(scale):
    # Solving on the design [1, H] would make lstsq's rank cut-off compare H with the
    # column of ones: at scale 1e-20 the features would count as zero (the bias-only
    # residual) and at 1e20 the bias would be lost (a residual above the bias-only fit).
    # The unpenalised bias is eliminated by centring instead.
    rng = np.random.default_rng(0)
    H = rng.normal(size=(20, 3))
    y = np.arange(20) % 2
    Y = one_hot(y, 2)
    pred = LinearRegression().fit(H, Y).predict(H)
    expected = np.sum((Y - pred) ** 2)
    residual, floor = rank_bound(H * scale, y, 2)
    assert residual == pytest.approx(expected, rel=1e-9)
    assert residual <= np.sum((Y - Y.mean(axis=0)) ** 2)  # never worse than the bias alone
    assert floor == 0


def test_constant_features_fit_like_the_bias_alone():
    y = np.array([0, 1, 0, 1, 0, 2])
    residual, floor = rank_bound(np.full((6, 2), 0.1), y, 3)
    Y = one_hot(y, 3)
    assert residual == pytest.approx(np.sum((Y - Y.mean(axis=0)) ** 2), rel=1e-12)
    assert floor == 1  # r = 1, K = 3: the smallest count


# --------------------------------------------------------------------------- the soft floor
from scipy.optimize import minimize  # noqa: E402

from repeval_ref import norm_constrained_residual, soft_rank_floor  # noqa: E402


def centred(A):
    return A - A.mean(axis=0)


def low_energy_tail_features(rng, n=120, d=15, K=5, k_strong=2, tail=0.05):
    """Class signal in k_strong directions plus a weak full-rank tail."""
    y = rng.integers(0, K, size=n)
    strong = rng.normal(size=(K, k_strong))[y] * 3
    H = (
        np.hstack([strong, tail * rng.normal(size=(n, d - k_strong))])
        @ np.linalg.qr(rng.normal(size=(d, d)))[0]
    )
    return H, y


def brute_constrained_residual(H, y, K, B):
    """min over ||W||_F <= B and free b, by SLSQP on the flattened (W, b)."""
    n, d = H.shape
    Y = one_hot(y, K)

    def loss(theta):
        W, b = theta[: d * K].reshape(d, K), theta[d * K :]
        return np.sum((Y - H @ W - b) ** 2)

    def grad(theta):
        W, b = theta[: d * K].reshape(d, K), theta[d * K :]
        R = Y - H @ W - b
        return np.concatenate([(-2 * H.T @ R).ravel(), -2 * R.sum(0)])

    cons = {
        "type": "ineq",
        "fun": lambda th: B**2 - np.sum(th[: d * K] ** 2),
        "jac": lambda th: np.concatenate([-2 * th[: d * K], np.zeros(K)]),
    }
    best = np.inf
    for start in range(3):
        x0 = np.random.default_rng(start).normal(size=d * K + K) * 0.01
        res = minimize(
            loss,
            x0,
            jac=grad,
            constraints=[cons],
            method="SLSQP",
            options={"ftol": 1e-13, "maxiter": 2000},
        )
        if np.sum(res.x[: d * K] ** 2) <= B**2 * (1 + 1e-6):
            best = min(best, res.fun)
    return best


@pytest.mark.parametrize("B", [0.05, 0.3, 1.0, 5.0])
def test_constrained_residual_matches_slsqp(B):
    rng = np.random.default_rng(11)
    H, y = low_energy_tail_features(rng, n=40, d=6, K=4)
    residual, used = norm_constrained_residual(H, y, 4, B)
    assert used <= B * (1 + 1e-9)
    assert residual == pytest.approx(brute_constrained_residual(H, y, 4, B), rel=1e-6, abs=1e-8)


def test_constrained_residual_without_a_binding_budget_is_least_squares():
    rng = np.random.default_rng(3)
    H, y = low_energy_tail_features(rng)
    residual_ls, _ = rank_bound(H, y, 5)
    residual, used = norm_constrained_residual(H, y, 5, 1e9)
    assert residual == pytest.approx(residual_ls, rel=1e-9)
    # zero budget: only the bias is left
    Y = one_hot(y, 5)
    assert norm_constrained_residual(H, y, 5, 0.0) == (pytest.approx(np.sum(centred(Y) ** 2)), 0.0)


@pytest.mark.parametrize("norm", ["frobenius", "spectral"])
@pytest.mark.parametrize("seed", range(4))
def test_soft_floor_is_below_every_admissible_probe(seed, norm):
    rng = np.random.default_rng(seed)
    H, y = low_energy_tail_features(rng, tail=0.02 * (seed + 1))
    Y = one_hot(y, 5)
    for B in (0.01, 0.1, 0.5, 2.0):
        floor, per_k = soft_rank_floor(H, y, 5, B, norm=norm)
        assert per_k.shape == (5,) and per_k[-1] == 0.0 and floor == per_k.max()
        if norm == "frobenius":
            assert norm_constrained_residual(H, y, 5, B)[0] >= floor - 1e-9
        for _ in range(50):  # random probes inside the budget, random biases
            W = rng.normal(size=(H.shape[1], 5))
            size = np.linalg.norm(W, "fro" if norm == "frobenius" else 2)
            W *= B * rng.uniform() / size
            b = rng.normal(size=5)
            assert np.sum((Y - H @ W - b) ** 2) >= floor - 1e-9


def test_soft_floor_by_hand_for_each_k():
    rng = np.random.default_rng(7)
    H, y = low_energy_tail_features(rng)
    Yc, Hc = centred(one_hot(y, 5)), centred(H)
    sy = np.linalg.svd(Yc, compute_uv=False)
    sh = np.linalg.svd(Hc, compute_uv=False)
    B = 0.3
    _, per_k = soft_rank_floor(H, y, 5, B)
    _, per_k_spec = soft_rank_floor(H, y, 5, B, norm="spectral")
    for k in range(5):
        T = np.sum(sy[k:] ** 2)
        assert per_k[k] == pytest.approx(max(0.0, np.sqrt(T) - sh[k] * B) ** 2, abs=1e-10)
        tail_h = np.sqrt(np.sum(sh[k:] ** 2))
        assert per_k_spec[k] == pytest.approx(max(0.0, np.sqrt(T) - tail_h * B) ** 2, abs=1e-10)
    # the spectral-norm version pays the whole tail energy, so it is never larger
    assert np.all(per_k_spec <= per_k + 1e-12)


def test_soft_floor_zero_budget_is_the_bias_only_residual():
    rng = np.random.default_rng(1)
    H, y = low_energy_tail_features(rng)
    floor, _ = soft_rank_floor(H, y, 5, 0.0)
    assert floor == pytest.approx(np.sum(centred(one_hot(y, 5)) ** 2), rel=1e-12)


def test_soft_floor_of_exact_rank_features_is_at_least_the_rank_floor_and_tight():
    # H spans the top-k left singular vectors of the centred targets: the least-squares fit
    # leaves exactly the Eckart-Young tail T_k, and the soft floor (sigma_{k+1}(Hc) = 0)
    # attains it for any budget that admits the fit.
    rng = np.random.default_rng(4)
    counts = [30, 22, 18, 15, 15]
    y = rng.permutation(np.repeat(np.arange(5), counts))
    Yc = centred(one_hot(y, 5))
    U, sy, _ = np.linalg.svd(Yc, full_matrices=False)
    for k in (1, 2, 3):
        H = U[:, :k] @ rng.normal(size=(k, 8)) * 4.0
        T_k = float(np.sum(sy[k:] ** 2))
        residual, _ = rank_bound(H, y, 5)
        floor, per_k = soft_rank_floor(H, y, 5, 1e6)
        assert residual == pytest.approx(T_k, rel=1e-9)
        assert per_k[k] == pytest.approx(T_k, rel=1e-9)
        assert floor == pytest.approx(T_k, rel=1e-9)
        assert floor >= rank_bound(H, y, 5)[1] - 1e-9  # centred tail >= one-hot tail


def test_soft_floor_is_positive_for_full_rank_features_with_a_small_tail():
    rng = np.random.default_rng(0)
    H, y = low_energy_tail_features(rng, tail=0.01)
    assert np.linalg.matrix_rank(H) == H.shape[1]
    assert rank_bound(H, y, 5)[1] == 0  # the exact floor says nothing
    floor, _ = soft_rank_floor(H, y, 5, 1.0)
    assert floor > 0.3 * len(y)  # the soft one still does


@pytest.mark.parametrize(
    "kwargs, exc, word",
    [
        ({"weight_norm": -1.0}, ValueError, "weight_norm"),
        ({"weight_norm": np.inf}, ValueError, "weight_norm"),
        ({"weight_norm": "big"}, TypeError, "weight_norm"),
        ({"weight_norm": 1.0, "norm": "nuclear"}, ValueError, "norm"),
        ({"weight_norm": 1.0, "n_classes": 0}, ValueError, "n_classes"),
        ({"weight_norm": 1.0, "H": np.full((6, 2), np.nan)}, ValueError, "H"),
        ({"weight_norm": 1.0, "y": GOOD_Y[:-1]}, ValueError, "y"),
    ],
)
def test_soft_floor_bad_inputs(kwargs, exc, word):
    args = {"H": GOOD_H, "y": GOOD_Y, "n_classes": 3, **kwargs}
    with pytest.raises(exc, match=word):
        soft_rank_floor(**args)
    args.pop("norm", None)
    if "norm" not in kwargs:
        with pytest.raises(exc, match=word):
            norm_constrained_residual(**args)


def test_soft_functions_do_not_mutate_inputs():
    rng = np.random.default_rng(0)
    H, y = low_energy_tail_features(rng)
    H0, y0 = H.copy(), y.copy()
    soft_rank_floor(H, y, 5, 0.5)
    norm_constrained_residual(H, y, 5, 0.5)
    np.testing.assert_array_equal(H, H0)
    np.testing.assert_array_equal(y, y0)
