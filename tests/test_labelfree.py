"""Tests of repeval_ref.labelfree: RankMe (effective rank) and the TwoNN dimension."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import cdist
from scipy.stats import ortho_group

from repeval_ref.labelfree import rankme, two_nn_id
from repeval_ref.labelfree.spectrum import singular_values as _singular_values


def _with_singular_values(sigma, n, d, seed):
    """An n x d matrix whose singular values are ``sigma`` (padded with zeros)."""
    rng = np.random.default_rng(seed)
    m = min(n, d)
    s = np.zeros(m)
    s[: len(sigma)] = sigma
    U = ortho_group.rvs(n, random_state=rng)[:, :m]
    V = ortho_group.rvs(d, random_state=rng)[:, :m]
    return (U * s) @ V.T


def _rankme_direct(Z, eps):
    s = np.linalg.svd(Z, compute_uv=False)
    p = s / s.sum() + eps
    return np.exp(-np.sum(p * np.log(p)))


# ----------------------------------------------------------------------------- RankMe


def test_rankme_seed_example_three_equal_singular_values():
    # Seed 000: singular values (3, 3, 3, 0) -> shares (1/3, 1/3, 1/3, 0) -> rank 3.
    Z = np.diag([3.0, 3.0, 3.0, 0.0])
    assert rankme(Z) == pytest.approx(3.0, abs=1e-5)
    assert rankme(Z, eps=0.0) == pytest.approx(3.0, rel=1e-12)
    # The same spectrum hidden by random rotations on both sides.
    Z2 = _with_singular_values([3, 3, 3], 10, 4, seed=1)
    assert rankme(Z2, eps=0.0) == pytest.approx(3.0, rel=1e-9)


def test_rankme_eps_effect_matches_closed_form():
    # With eps, each share is 1/3 + eps (three of them) and eps (one).
    eps = 1e-3
    p = np.array([1 / 3 + eps] * 3 + [eps])
    expected = np.exp(-np.sum(p * np.log(p)))
    assert rankme(np.diag([3.0, 3.0, 3.0, 0.0]), eps=eps) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("r", [1, 2, 5, 8])
def test_rankme_equal_singular_values_give_the_rank(r):
    Z = _with_singular_values([2.5] * r, 40, 8, seed=r)
    assert rankme(Z) == pytest.approx(r, rel=1e-4)
    assert rankme(Z, eps=0.0) == pytest.approx(r, rel=1e-9)


def test_rankme_matches_direct_svd_computation():
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(60, 12)) * np.linspace(0.1, 3.0, 12)
    for eps in (0.0, 1e-7, 1e-2):
        assert rankme(Z, eps=eps) == pytest.approx(_rankme_direct(Z, eps), rel=1e-12)
        Zc = Z - Z.mean(axis=0)
        assert rankme(Z, center=True, eps=eps) == pytest.approx(_rankme_direct(Zc, eps), rel=1e-12)


def test_rankme_uses_min_n_d_singular_values_for_wide_matrices():
    rng = np.random.default_rng(1)
    Z = rng.normal(size=(5, 30))
    assert rankme(Z) == pytest.approx(_rankme_direct(Z, 1e-7), rel=1e-12)
    assert rankme(Z, eps=0.0) <= 5 + 1e-9


def test_rankme_invariant_to_rotation_and_scale():
    rng = np.random.default_rng(2)
    Z = rng.normal(size=(80, 10)) @ np.diag(np.geomspace(0.01, 5, 10))
    Q = ortho_group.rvs(10, random_state=3)
    base = rankme(Z)
    assert rankme(Z @ Q) == pytest.approx(base, rel=1e-10)
    assert rankme(7.3 * Z) == pytest.approx(base, rel=1e-10)
    assert rankme(1e-150 * Z) == pytest.approx(base, rel=1e-10)
    assert rankme(1e150 * Z) == pytest.approx(base, rel=1e-10)
    # Row permutation (order of samples) does not matter either.
    assert rankme(Z[rng.permutation(80)]) == pytest.approx(base, rel=1e-10)


def test_rankme_centering_gives_translation_invariance():
    rng = np.random.default_rng(4)
    Z = rng.normal(size=(100, 6))
    shift = np.full(6, 25.0)
    centred = rankme(Z, center=True)
    assert rankme(Z + shift, center=True) == pytest.approx(centred, rel=1e-9)
    # Without centring, a large common offset dominates the spectrum: rank near 1.
    assert rankme(Z + shift) < 1.5 < centred


def test_rankme_centering_constant_columns_are_exactly_zero():
    rng = np.random.default_rng(5)
    Z = np.column_stack([rng.normal(size=50), np.full(50, 0.1), rng.normal(size=50)])
    # The constant column carries no spread after centring: two directions remain.
    assert rankme(Z, center=True, eps=0.0) == pytest.approx(
        _rankme_direct(np.delete(Z, 1, axis=1) - np.delete(Z, 1, axis=1).mean(0), 0.0), rel=1e-12
    )
    sv = _singular_values(Z, center=True)
    assert sv.shape == (3,) and sv[-1] <= 1e-12 * sv[0]
    # Without the exact zeroing, the rounded mean of 0.1 would leave a residue column.
    assert np.all(np.isfinite(sv))


def test_rankme_collapsed_toy_has_lower_rank():
    rng = np.random.default_rng(6)
    n_classes, d = 10, 32
    centers = rng.normal(size=(n_classes, d)) * 3
    y = rng.integers(0, n_classes, size=400)
    clustered = centers[y] + 0.5 * rng.normal(size=(400, d))
    # Collapse: project onto 3 directions (dimensional collapse, as in seed 000).
    P = np.linalg.qr(rng.normal(size=(d, 3)))[0]
    collapsed = clustered @ P @ P.T
    assert rankme(collapsed, center=True) < 3.0 + 1e-6
    assert rankme(collapsed, center=True) < rankme(clustered, center=True)


def test_rankme_default_is_uncentred():
    assert inspect.signature(rankme).parameters["center"].default is False
    assert inspect.signature(rankme).parameters["eps"].default == 1e-7


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(1, 12),
    d=st.integers(1, 12),
    seed=st.integers(0, 10_000),
)
def test_rankme_bounds_property(n, d, seed):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, d))
    value = rankme(Z, eps=0.0)
    assert 1.0 - 1e-9 <= value <= min(n, d) + 1e-9


def test_rankme_does_not_modify_input():
    rng = np.random.default_rng(7)
    Z = rng.normal(size=(20, 4)) + 3
    Z_copy = Z.copy()
    rankme(Z, center=True)
    rankme(Z)
    np.testing.assert_array_equal(Z, Z_copy)


def test_rankme_returns_python_float():
    assert type(rankme(np.eye(3))) is float


@pytest.mark.parametrize(
    "Z, kwargs, match",
    [
        (np.zeros((4, 3)), {}, "all zeros"),
        (np.ones((4, 3)) * 2.0, {"center": True}, "constant"),
        (np.array([[1.0, np.nan], [0.0, 1.0]]), {}, "Z contains NaN"),
        (np.array([[1.0, np.inf], [0.0, 1.0]]), {}, "Z contains NaN or infinite"),
        (np.ones(4), {}, "Z must be 2-dimensional"),
        (np.ones((0, 3)), {}, "Z needs at least 1 row"),
        (np.ones((3, 0)), {}, "Z needs at least 1 column"),
        (np.eye(3), {"eps": -1e-3}, "eps must be >= 0"),
        (np.eye(3), {"eps": float("nan")}, "eps must be finite"),
    ],
)
def test_rankme_bad_input(Z, kwargs, match):
    with pytest.raises(ValueError, match=match):
        rankme(Z, **kwargs)


def test_rankme_bad_types():
    with pytest.raises(TypeError, match="Z"):
        rankme("abc")
    with pytest.raises(TypeError, match="center"):
        rankme(np.eye(3), center="yes")
    with pytest.raises(TypeError, match="eps"):
        rankme(np.eye(3), eps="small")


# ----------------------------------------------------------------------------- TwoNN


def _two_nn_brute(X):
    D = cdist(X, X)
    np.fill_diagonal(D, np.inf)
    D.sort(axis=1)
    return X.shape[0] / np.sum(np.log(D[:, 1] / D[:, 0]))


@pytest.mark.parametrize("shape", [(3, 1), (4, 2), (30, 3), (200, 7)])
def test_two_nn_matches_brute_force(shape):
    rng = np.random.default_rng(shape[0])
    X = rng.normal(size=shape)
    assert two_nn_id(X) == pytest.approx(_two_nn_brute(X), rel=1e-10)


def test_two_nn_hand_example_on_a_line():
    # Points 0, 1, 3 on a line: r1 = (1, 1, 2), r2 = (3, 2, 3).
    X = np.array([[0.0], [1.0], [3.0]])
    expected = 3 / (np.log(3) + np.log(2) + np.log(1.5))
    assert two_nn_id(X) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("d", [2, 5])
@pytest.mark.parametrize("kind", ["cube", "gaussian"])
def test_two_nn_recovers_dimension_of_linear_embedding(d, kind):
    rng = np.random.default_rng(10 * d + (kind == "cube"))
    n, ambient = 2000, 20
    latent = rng.uniform(size=(n, d)) if kind == "cube" else rng.normal(size=(n, d))
    A = rng.normal(size=(d, ambient))  # injective linear embedding into 20 dimensions
    X = latent @ A
    # The MLE has standard error about d / sqrt(n) (~0.11 for d = 5), plus a small
    # boundary and curvature bias of the density.
    assert two_nn_id(X) == pytest.approx(d, rel=0.12)


def test_two_nn_invariant_to_rotation_translation_scale():
    rng = np.random.default_rng(11)
    X = rng.normal(size=(300, 4)) @ rng.normal(size=(4, 9))
    Q = ortho_group.rvs(9, random_state=12)
    base = two_nn_id(X)
    assert two_nn_id(X @ Q) == pytest.approx(base, rel=1e-8)
    assert two_nn_id(X + 100.0) == pytest.approx(base, rel=1e-8)
    assert two_nn_id(0.01 * X) == pytest.approx(base, rel=1e-10)
    assert two_nn_id(X[rng.permutation(300)]) == pytest.approx(base, rel=1e-10)


# skdim also builds its linear-fit coordinates, whose last entry is -log(0).
@pytest.mark.filterwarnings("ignore:divide by zero encountered in log:RuntimeWarning")
def test_two_nn_against_scikit_dimension():
    skdim = pytest.importorskip("skdim")
    if "method" not in inspect.signature(skdim.id.TwoNN).parameters:
        pytest.skip("this scikit-dimension has no closed-form (method='mle') TwoNN")
    rng = np.random.default_rng(13)
    # Low and high ambient dimension exercise both of skdim's neighbour searches.
    for X in (rng.normal(size=(400, 3)) @ rng.normal(size=(3, 10)), rng.normal(size=(300, 30))):
        n = X.shape[0]
        est = skdim.id.TwoNN(discard_fraction=0.0, method="mle").fit(X).dimension_
        # skdim returns the unbiased (N - 1) / sum(log mu); this module the MLE N / sum.
        assert two_nn_id(X) == pytest.approx(est * n / (n - 1), rel=1e-10)


def test_two_nn_does_not_modify_input_and_returns_float():
    rng = np.random.default_rng(14)
    X = rng.normal(size=(50, 3))
    X_copy = X.copy()
    value = two_nn_id(X)
    np.testing.assert_array_equal(X, X_copy)
    assert type(value) is float


def test_two_nn_duplicates_raise():
    rng = np.random.default_rng(15)
    X = rng.normal(size=(20, 3))
    X[7] = X[3]
    with pytest.raises(ValueError, match="X contains duplicate points"):
        two_nn_id(X)


def test_two_nn_zero_log_sum_raises():
    # Equilateral triangle (the unit vectors of R^3): every point is exactly as far
    # from its second neighbour as from its first, so every log ratio is 0.
    X = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    with pytest.raises(ValueError, match="X gives a zero sum"):
        two_nn_id(X)


@pytest.mark.parametrize(
    "X, err, match",
    [
        (np.zeros((2, 3)), ValueError, "X needs at least 3 row"),
        (np.ones(5), ValueError, "X must be 2-dimensional"),
        (np.array([[0.0], [1.0], [np.nan]]), ValueError, "X contains NaN"),
        ("points", TypeError, "X must be a numeric array"),
    ],
)
def test_two_nn_bad_input(X, err, match):
    with pytest.raises(err, match=match):
        two_nn_id(X)


@pytest.mark.parametrize("offsets", [(1e4,), (1e4, -1e4)])
def test_two_nn_exact_for_close_points_far_from_the_origin(offsets):
    # Regression (audit): the brute-force neighbour search expands |x - y|^2 as
    # |x|^2 - 2 x.y + |y|^2, which loses most digits when the points sit in tight
    # clusters far from the origin (d > 15 selects that search); the estimate was
    # about 1 percent (one cluster) to 3 percent (two clusters) off the exact one.
    rng = np.random.default_rng(11)
    X = np.concatenate([o + 1e-3 * rng.normal(size=(150, 20)) for o in offsets])
    assert two_nn_id(X) == pytest.approx(_two_nn_brute(X), rel=1e-9)


@pytest.mark.parametrize("scale", [1e-300, 1e-170, 1e200, 1e300])
def test_two_nn_extreme_scales(scale):
    # Regression (audit): at 1e-170 the squared distances underflowed to 0 and every
    # point was reported as a duplicate; at 1e200 they overflowed and scikit-learn's
    # neighbour search crashed. The estimate is scale invariant.
    X = np.random.default_rng(4).normal(size=(50, 4))
    assert two_nn_id(X * scale) == pytest.approx(two_nn_id(X), rel=1e-12)
