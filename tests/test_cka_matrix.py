"""Tests of ``cka_matrix``: each entry against the pairwise functions, symmetry, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from repeval_ref import cka_matrix, linear_cka, minibatch_cka, rbf_cka


def _layers(n, dims, seed):
    """Layers that share a latent signal, so the CKA values are spread over (0, 1)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, 5))
    return [
        z @ rng.normal(size=(5, d)) + s * rng.normal(size=(n, d))
        for d, s in zip(dims, (0.3, 1.0, 3.0))
    ]


@pytest.mark.parametrize("debiased", [False, True])
@pytest.mark.parametrize("kind", ["linear", "rbf"])
def test_entries_equal_pairwise_calls(kind, debiased):
    A = _layers(40, (6, 9, 4), 0)
    B = _layers(40, (3, 7), 1)
    M = cka_matrix(A, B, kind=kind, debiased=debiased)
    assert M.shape == (3, 2)
    pair = linear_cka if kind == "linear" else rbf_cka
    brute = np.array([[pair(a, b, debiased=debiased) for b in B] for a in A])
    np.testing.assert_allclose(M, brute, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kind", ["linear", "rbf"])
def test_self_comparison_is_symmetric_with_unit_diagonal(kind):
    A = _layers(30, (5, 8, 2), 2)
    M = cka_matrix(A, kind=kind)
    np.testing.assert_allclose(M, M.T, rtol=0, atol=0)
    np.testing.assert_allclose(np.diag(M), 1.0)
    np.testing.assert_allclose(cka_matrix(A, A, kind=kind), M, rtol=1e-12)
    # swapping the two models transposes the matrix
    B = _layers(30, (4, 6), 3)
    np.testing.assert_allclose(
        cka_matrix(B, A, kind=kind), cka_matrix(A, B, kind=kind).T, rtol=1e-12
    )


def test_one_batch_minibatch_cka_agrees_with_the_debiased_matrix():
    A = _layers(24, (5, 8, 2), 4)
    np.testing.assert_allclose(
        cka_matrix(A, debiased=True), minibatch_cka(A, batch_size=24, rng=0), rtol=1e-9, atol=1e-12
    )


def test_conv_maps_are_flattened_and_inputs_untouched():
    rng = np.random.default_rng(5)
    maps = rng.normal(size=(20, 2, 3, 3))
    flat = maps.reshape(20, -1)
    other = [rng.normal(size=(20, 4))]
    copy = maps.copy()
    np.testing.assert_allclose(cka_matrix([maps], other), cka_matrix([flat], other))
    np.testing.assert_array_equal(maps, copy)


def test_invariant_to_orthogonal_maps_of_each_layer():
    A = _layers(50, (6, 9), 6)
    B = _layers(50, (5,), 7)
    Q, _ = np.linalg.qr(np.random.default_rng(8).normal(size=(9, 9)))
    rotated = [A[0] * 3.0 + 1.0, A[1] @ Q]
    np.testing.assert_allclose(cka_matrix(rotated, B), cka_matrix(A, B), rtol=1e-10)


@pytest.mark.parametrize(
    ("kwargs", "err", "match"),
    [
        (dict(features_a=np.ones((5, 2))), TypeError, "features_a"),
        (dict(features_a=[]), TypeError, "features_a"),
        (dict(features_a=[np.ones((5, 2))], features_b="x"), TypeError, "features_b"),
        (dict(features_a=[np.eye(5)[:, :2], np.eye(4)]), ValueError, r"features_a\[1\]"),
        (dict(features_a=[np.eye(5)], features_b=[np.eye(4)]), ValueError, "features_b"),
        (dict(features_a=[np.ones((5, 2))]), ValueError, r"features_a\[0\]"),
        (dict(features_a=[np.full((5, 2), np.nan)]), ValueError, r"features_a\[0\]"),
        (dict(features_a=[np.eye(5)], kind="cosine"), ValueError, "kind"),
        (dict(features_a=[np.eye(5)], sigma_frac=0.0), ValueError, "sigma_frac"),
        (dict(features_a=[np.eye(5)], debiased=1), TypeError, "debiased"),
        (dict(features_a=[np.eye(3)], debiased=True), ValueError, r"features_a\[0\]"),
    ],
)
def test_bad_input(kwargs, err, match):
    with pytest.raises(err, match=match):
        cka_matrix(**kwargs)
