"""Tests of repeval_ref.batchnorm (book/batchnorm.md; seed 000, folding a BatchNorm)."""

from __future__ import annotations

import numpy as np
import pytest

from repeval_ref import fold_batchnorm
from repeval_ref.batchnorm import unfold_batchnorm

# The seed's worked example: d = K = 2.
MU = np.array([1.0, -2.0])
S = np.array([2.0, 0.5])
W = np.array([[1.0, -1.0], [2.0, 0.0]])  # columns w1 = (1, 2), w2 = (-1, 0)
B = np.array([0.5, 0.0])
H = np.array([3.0, -1.0])


def test_seed_hand_example():
    standardised = (H - MU) / S
    np.testing.assert_array_equal(standardised, [1.0, 2.0])
    np.testing.assert_array_equal(W.T @ standardised + B, [5.5, -1.0])
    Wf, bf = fold_batchnorm(W, B, MU, S)
    np.testing.assert_array_equal(Wf, [[0.5, -0.5], [4.0, 0.0]])  # w1' = (0.5, 4), w2' = (-0.5, 0)
    np.testing.assert_array_equal(bf, [8.0, 0.5])
    np.testing.assert_array_equal(Wf.T @ H + bf, [5.5, -1.0])
    W_back, b_back = unfold_batchnorm(Wf, bf, MU, S)
    np.testing.assert_array_equal(W_back, W)
    np.testing.assert_array_equal(b_back, B)


@pytest.mark.parametrize("d, K", [(1, 1), (5, 3), (20, 10)])
def test_random_logits_and_round_trip(d, K):
    rng = np.random.default_rng(d * 100 + K)
    W = rng.normal(size=(d, K))
    b = rng.normal(size=K)
    mu = rng.normal(size=d) * 3
    s = rng.uniform(0.05, 20.0, size=d)
    H = rng.normal(size=(50, d)) * s + mu
    Wf, bf = fold_batchnorm(W, b, mu, s)
    assert Wf.shape == (d, K) and bf.shape == (K,)
    np.testing.assert_allclose(H @ Wf + bf, ((H - mu) / s) @ W + b, rtol=1e-10, atol=1e-10)
    W2, b2 = unfold_batchnorm(Wf, bf, mu, s)
    np.testing.assert_allclose(W2, W, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(b2, b, rtol=1e-12, atol=1e-12)
    # and the other way round, starting from a probe on raw features
    W3, b3 = fold_batchnorm(*unfold_batchnorm(W, b, mu, s), mu, s)
    np.testing.assert_allclose(W3, W, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(b3, b, rtol=1e-12, atol=1e-12)


def test_matches_torch_batchnorm_then_linear():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    d, K = 7, 4
    mean = rng.normal(size=d)
    var = rng.uniform(0.01, 9.0, size=d)
    eps = 1e-5
    bn = torch.nn.BatchNorm1d(d, affine=False, eps=eps, dtype=torch.float64)
    bn.running_mean.copy_(torch.from_numpy(mean))
    bn.running_var.copy_(torch.from_numpy(var))
    lin = torch.nn.Linear(d, K, dtype=torch.float64)
    bn.eval()
    H = rng.normal(size=(30, d)) * 2 + mean
    with torch.no_grad():
        expected = lin(bn(torch.from_numpy(H))).numpy()
        W = lin.weight.numpy().T.copy()  # nn.Linear stores (K, d)
        b = lin.bias.numpy().copy()
    s = np.sqrt(var + eps)  # BatchNorm divides by sqrt(running_var + eps)
    Wf, bf = fold_batchnorm(W, b, mean, s)
    np.testing.assert_allclose(H @ Wf + bf, expected, rtol=1e-12, atol=1e-12)
    # the folded probe is an ordinary nn.Linear on the raw features
    folded = torch.nn.Linear(d, K, dtype=torch.float64)
    with torch.no_grad():
        folded.weight.copy_(torch.from_numpy(Wf.T))
        folded.bias.copy_(torch.from_numpy(bf))
        np.testing.assert_allclose(
            folded(torch.from_numpy(H)).numpy(), expected, rtol=1e-12, atol=1e-12
        )


def test_inputs_not_mutated():
    args = [W.copy(), B.copy(), MU.copy(), S.copy()]
    fold_batchnorm(*args)
    unfold_batchnorm(*args)
    for before, after in zip((W, B, MU, S), args):
        np.testing.assert_array_equal(before, after)


@pytest.mark.parametrize(
    "fn, w_name, b_name",
    [
        (fold_batchnorm, "W", "b"),
        (unfold_batchnorm, "W_folded", "b_folded"),
    ],
)
@pytest.mark.parametrize(
    "position, value, exc, word",
    [
        (0, np.ones(2), ValueError, "W"),
        (0, np.ones((3, 2)), ValueError, "mu"),
        (0, [[1.0, np.nan], [0.0, 1.0]], ValueError, "W"),
        (0, "W", TypeError, "W"),
        (1, np.ones(3), ValueError, "b"),
        (1, np.ones((2, 1)), ValueError, "b"),
        (1, [np.inf, 0.0], ValueError, "b"),
        (2, np.ones(3), ValueError, "mu"),
        (2, [np.nan, 0.0], ValueError, "mu"),
        (3, [2.0, 0.0], ValueError, "s"),
        (3, [2.0, -0.5], ValueError, "s"),
        (3, [2.0, np.inf], ValueError, "s"),
        (3, np.ones(3), ValueError, "s"),
        (3, np.ones((2, 1)), ValueError, "s"),
    ],
)
def test_bad_inputs(fn, w_name, b_name, position, value, exc, word):
    args = [W, B, MU, S]
    args[position] = value
    word = {"W": w_name, "b": b_name}.get(word, word)
    with pytest.raises(exc, match=word):
        fn(*args)
