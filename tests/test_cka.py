"""Tests of repeval_ref.cka.linear_cka (linear centred kernel alignment)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy.stats import ortho_group

from repeval_ref.cka import _hsic_linear, linear_cka


def _hsic_gram(K, L):
    """Biased HSIC from n x n Gram matrices: tr(K H L H) / (n - 1)^2."""
    n = K.shape[0]
    H = np.eye(n) - np.ones((n, n)) / n
    return np.trace(K @ H @ L @ H) / (n - 1) ** 2


def _cka_gram(X, Y):
    # In extended precision (80-bit on x86): the Gram form centres n x n products of the
    # raw features and loses digits when a column is nearly constant (at n = 2, two values
    # 1.4e-3 apart around -2.27 gave 1 + 7.8e-8 in float64 where CKA is exactly 1).
    X, Y = np.asarray(X, dtype=np.longdouble), np.asarray(Y, dtype=np.longdouble)
    K, L = X @ X.T, Y @ Y.T
    return float(_hsic_gram(K, L) / np.sqrt(_hsic_gram(K, K) * _hsic_gram(L, L)))


def _pair(seed, n=50, p=6, q=4, noise=1.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    Y = X @ rng.normal(size=(p, q)) + noise * rng.normal(size=(n, q))
    return X, Y


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_equals_gram_matrix_hsic_form(seed):
    rng = np.random.default_rng(seed)
    X, Y = _pair(seed, n=30 + seed, p=3 + seed, q=7 - seed)
    X = X + rng.normal(size=X.shape[1]) * 5  # uncentred inputs: centring must happen inside
    assert linear_cka(X, Y) == pytest.approx(_cka_gram(X, Y), rel=1e-10)
    Xc, Yc = X - X.mean(0), Y - Y.mean(0)
    assert _hsic_linear(Xc, Yc) == pytest.approx(_hsic_gram(X @ X.T, Y @ Y.T), rel=1e-10)


def test_wide_features_more_columns_than_samples():
    X, Y = _pair(4, n=8, p=20, q=15)
    assert linear_cka(X, Y) == pytest.approx(_cka_gram(X, Y), rel=1e-10)


def test_self_similarity_is_one():
    X, _ = _pair(5)
    assert linear_cka(X, X) == pytest.approx(1.0, abs=1e-12)


def test_invariant_to_orthogonal_maps_scaling_and_translation():
    X, Y = _pair(6, p=5, q=5)
    base = linear_cka(X, Y)
    Qx = ortho_group.rvs(5, random_state=1)
    Qy = ortho_group.rvs(5, random_state=2)
    assert linear_cka(X @ Qx, Y) == pytest.approx(base, rel=1e-10)
    assert linear_cka(X, Y @ Qy) == pytest.approx(base, rel=1e-10)
    assert linear_cka(3.7 * X, 0.02 * Y) == pytest.approx(base, rel=1e-10)
    assert linear_cka(1e-160 * X, 1e160 * Y) == pytest.approx(base, rel=1e-10)
    assert linear_cka(X + 40.0, Y - np.arange(5)) == pytest.approx(base, rel=1e-9)
    # An orthogonal map into more dimensions (orthonormal columns) also keeps CKA.
    E = np.linalg.qr(np.random.default_rng(3).normal(size=(9, 5)))[0]  # 9 x 5
    assert linear_cka(X @ E.T, Y) == pytest.approx(base, rel=1e-10)
    # Y an orthogonal transform of X up to scale and shift: CKA = 1.
    assert linear_cka(X, 2.0 * X @ Qx + 1.0) == pytest.approx(1.0, abs=1e-12)


def test_not_invariant_to_general_invertible_linear_map():
    # Two features; stretching one of them by 10 changes which direction dominates
    # the Gram matrix, so CKA with a fixed Y changes (CKA is not an affine invariant,
    # unlike CCA).
    rng = np.random.default_rng(7)
    X = rng.normal(size=(200, 2))
    Y = X[:, :1] + 0.1 * rng.normal(size=(200, 1))  # Y follows the first feature
    A = np.diag([1.0, 10.0])  # invertible
    before, after = linear_cka(X, Y), linear_cka(X @ A, Y)
    assert before > 0.6
    assert after < 0.05
    assert np.linalg.matrix_rank(A) == 2


def test_symmetry():
    X, Y = _pair(8, p=3, q=8)
    assert linear_cka(X, Y) == pytest.approx(linear_cka(Y, X), rel=1e-12)


def test_near_independent_pair_is_small():
    rng = np.random.default_rng(9)
    X = rng.normal(size=(2000, 10))
    Y = rng.normal(size=(2000, 10))
    # For independent Gaussians, E[CKA] is about sqrt(p q) / n = 0.005 here.
    assert linear_cka(X, Y) < 0.03
    # A linear function of X is far more similar.
    assert linear_cka(X, X @ rng.normal(size=(10, 6))) > 0.5


def test_centering_matters():
    # Both inputs share a large common offset. Without centring, the mean direction
    # dominates both Gram matrices and the "uncentred CKA" is near 1 although the
    # variations are independent; centred CKA is near 0.
    rng = np.random.default_rng(10)
    X = rng.normal(size=(500, 3)) + 20.0
    Y = rng.normal(size=(500, 3)) - 15.0

    def uncentred(X, Y):
        return np.sum((X.T @ Y) ** 2) / (np.linalg.norm(X.T @ X) * np.linalg.norm(Y.T @ Y))

    assert uncentred(X, Y) > 0.95
    assert linear_cka(X, Y) < 0.05


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(2, 15),
    p=st.integers(1, 6),
    q=st.integers(1, 6),
    seed=st.integers(0, 10_000),
)
@example(n=2, p=1, q=1, seed=517)  # nearly constant Y: the float64 Gram form was off by 8e-8
def test_in_unit_interval_and_matches_gram_form_property(n, p, q, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p)) * rng.uniform(0.1, 10, size=p)
    Y = rng.normal(size=(n, q)) + rng.normal(size=q)
    value = linear_cka(X, Y)
    assert 0.0 <= value <= 1.0
    assert value == pytest.approx(_cka_gram(X, Y), rel=1e-8, abs=1e-12)


def test_constant_columns_are_ignored_not_amplified():
    # A constant column of 0.1 leaves rounding residues after subtracting its mean;
    # CKA must equal the value without that column.
    X, Y = _pair(11, p=3, q=2)
    Xplus = np.column_stack([X, np.full(X.shape[0], 0.1)])
    assert linear_cka(Xplus, Y) == pytest.approx(linear_cka(X, Y), rel=1e-12)


def test_returns_python_float_and_does_not_modify_inputs():
    X, Y = _pair(12)
    Xc, Yc = X.copy(), Y.copy()
    value = linear_cka(X, Y)
    assert type(value) is float
    np.testing.assert_array_equal(X, Xc)
    np.testing.assert_array_equal(Y, Yc)


@pytest.mark.parametrize(
    "X, Y, err, match",
    [
        (np.ones((5, 3)), np.arange(10.0).reshape(5, 2), ValueError, "X is constant"),
        (np.arange(10.0).reshape(5, 2), np.full((5, 2), 7.0), ValueError, "Y is constant"),
        (np.ones((5, 2)), np.ones((6, 2)), ValueError, "mismatched lengths: X has 5, Y has 6"),
        (np.ones((1, 2)), np.ones((1, 2)), ValueError, "X needs at least 2 row"),
        (np.arange(4.0).reshape(2, 2), np.ones((1, 2)), ValueError, "Y needs at least 2 row"),
        (np.ones(5), np.ones((5, 2)), ValueError, "X must be 2-dimensional"),
        (np.ones((5, 2)), np.ones((5, 2, 1)), ValueError, "Y must be 2-dimensional"),
        (np.array([[1.0, np.nan], [0.0, 1.0]]), np.eye(2), ValueError, "X contains NaN"),
        (
            np.eye(2),
            np.array([[np.inf, 1.0], [0.0, 1.0]]),
            ValueError,
            "Y contains NaN or infinite",
        ),
        (np.ones((3, 0)), np.eye(3), ValueError, "X needs at least 1 column"),
        ("X", np.eye(3), TypeError, "X must be a numeric array"),
        (np.eye(3), [["a", "b", "c"]] * 3, TypeError, "Y must hold numbers"),
    ],
)
def test_bad_input(X, Y, err, match):
    with pytest.raises(err, match=match):
        linear_cka(X, Y)
