"""Tests of repeval_ref.lpft_theory: LP, FT and LP-FT in a two-layer linear network."""

import numpy as np
import pytest
import torch

from repeval_ref import layerwise_lr, prediction_error, transfer
from repeval_ref.lpft_theory import linear_net_gradients

C = 1 / np.sqrt(2)


def random_problem(seed=0, n=10, d=6, dp=3, span=4):
    """ID inputs in a span-dimensional subspace of R^d; returns X, y, B0, v0, basis of the
    complement."""
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    X = rng.normal(size=(n, span)) @ Q[:, :span].T
    B_star = rng.normal(size=(dp, d)) / np.sqrt(d)
    v_star = rng.normal(size=dp)
    y = X @ B_star.T @ v_star
    B0 = B_star + 0.1 * rng.normal(size=(dp, d))
    v0 = 0.1 * rng.normal(size=dp)
    return X, y, B0, v0, Q[:, span:]


def hand_example():
    X = np.array([[1.0, 0.0], [2.0, 0.0], [-1.5, 0.0]])  # ID inputs on the x1 axis
    B_star = np.array([[C, C]])
    y = X @ B_star.T @ np.array([1.0])
    return X, y, B_star


def test_gradients_match_torch_autograd():
    for seed in range(3):
        rng = np.random.default_rng(seed)
        X, y = rng.normal(size=(7, 5)), rng.normal(size=7)
        v, B = rng.normal(size=3), rng.normal(size=(3, 5))
        loss, gv, gB = linear_net_gradients(X, y, v, B)
        vt = torch.tensor(v, requires_grad=True)
        Bt = torch.tensor(B, requires_grad=True)
        lt = ((torch.tensor(X) @ Bt.T @ vt - torch.tensor(y)) ** 2).mean()
        lt.backward()
        assert isinstance(loss, float)
        assert loss == pytest.approx(lt.item(), rel=1e-13)
        np.testing.assert_allclose(gv, vt.grad.numpy(), rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(gB, Bt.grad.numpy(), rtol=1e-12, atol=1e-13)


@pytest.mark.slow
def test_hand_example_of_the_seed():
    X, y, B_star = hand_example()
    out = transfer(X, y, B_star, np.zeros(1), lr=0.01, steps=20_000)
    # LP keeps the perfect features and finds the true head v = 1
    v_lp, B_lp = out["lp"]
    assert v_lp[0] == pytest.approx(1.0, abs=1e-10)
    np.testing.assert_array_equal(B_lp, B_star)
    # FT from v0 = 0 follows the gradient flow: v -> 1/sqrt(2), b1 -> 1, b2 stays c
    v_ft, B_ft = out["ft"]
    assert v_ft[0] == pytest.approx(C, abs=5e-3)
    assert B_ft[0, 0] == pytest.approx(1.0, abs=5e-3)
    assert B_ft[0, 1] == C  # exactly: the gradient has no x2 component
    assert v_ft[0] * B_ft[0, 0] == pytest.approx(C, abs=1e-10)  # ID fitted
    ood = prediction_error(v_ft, B_ft, [[0.0, 1.0]], [1.0], B_star)
    assert ood == pytest.approx((0.5 - C) ** 2, abs=2e-3)  # about 0.043
    assert ood == pytest.approx(0.043, abs=1e-3)
    # LP-FT starts from v = 1, where the ID residuals vanish: nothing moves
    v_lpft, B_lpft = out["lpft"]
    assert v_lpft[0] == pytest.approx(1.0, abs=1e-10)
    np.testing.assert_allclose(B_lpft, B_star, atol=1e-10)
    assert prediction_error(v_lpft, B_lpft, [[0.0, 1.0]], [1.0], B_star) < 1e-18


def test_lpft_from_a_perfect_head_does_not_move():
    X, y, B_star = hand_example()
    out = transfer(X, y, B_star, np.ones(1), lr=0.05, steps=500)
    for key in ("lp", "ft", "lpft"):
        v, B = out[key]
        np.testing.assert_allclose(v, [1.0], atol=1e-15)
        np.testing.assert_allclose(B, B_star, atol=1e-15)


@pytest.mark.parametrize("seed", [0, 1])
def test_features_outside_the_training_span_never_move(seed):
    X, y, B0, v0, complement = random_problem(seed)
    out = transfer(X, y, B0, v0, lr=0.05, steps=3000)
    for key in ("ft", "lpft"):
        _, B = out[key]
        np.testing.assert_allclose(B @ complement, B0 @ complement, rtol=0, atol=1e-12)
        assert np.abs(B - B0).max() > 1e-3  # while the features inside the span did move
    np.testing.assert_array_equal(out["lp"][1], B0)


def test_lp_converges_to_least_squares_head():
    X, y, B0, v0, _ = random_problem(3, n=12, span=5)
    v_lp, _ = transfer(X, y, B0, v0, lr=0.1, steps=3000)["lp"]
    F = X @ B0.T
    v_ls = np.linalg.lstsq(F, y, rcond=None)[0]
    np.testing.assert_allclose(v_lp, v_ls, atol=1e-8)


def test_updates_are_simultaneous_not_sequential():
    X, y, B0, v0, _ = random_problem(4)
    lr, steps = 0.1, 50
    n = X.shape[0]

    def run(sequential):
        v, B = v0.copy(), B0.copy()
        for _ in range(steps):
            r = X @ B.T @ v - y
            v_new = v - lr * (2 / n) * B @ X.T @ r
            if sequential:  # B's gradient at the already updated head
                r = X @ B.T @ v_new - y
                B = B - lr * (2 / n) * np.outer(v_new, X.T @ r)
            else:
                B = B - lr * (2 / n) * np.outer(v, X.T @ r)
            v = v_new
        return v, B

    v_ft, B_ft = transfer(X, y, B0, v0, lr, steps)["ft"]
    v_sim, B_sim = run(sequential=False)
    v_seq, B_seq = run(sequential=True)
    np.testing.assert_allclose(v_ft, v_sim, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(B_ft, B_sim, rtol=1e-12, atol=1e-13)
    assert np.abs(v_seq - v_ft).max() + np.abs(B_seq - B_ft).max() > 1e-6


def test_lpft_starts_from_the_lp_head():
    X, y, B0, v0, _ = random_problem(5)
    out = transfer(X, y, B0, v0, lr=0.05, steps=200)
    v_lp, _ = out["lp"]
    again = transfer(X, y, B0, v_lp, lr=0.05, steps=200)["ft"]
    np.testing.assert_allclose(out["lpft"][0], again[0], atol=1e-14)
    np.testing.assert_allclose(out["lpft"][1], again[1], atol=1e-14)


def test_zero_steps_returns_new_copies_and_inputs_untouched():
    X, y, B0, v0, _ = random_problem(6)
    copies = [a.copy() for a in (X, y, B0, v0)]
    out = transfer(X, y, B0, v0, lr=0.1, steps=0)
    for v, B in out.values():
        np.testing.assert_array_equal(v, v0)
        np.testing.assert_array_equal(B, B0)
        assert not np.shares_memory(v, v0) and not np.shares_memory(B, B0)
    transfer(X, y, B0, v0, lr=0.1, steps=20)
    for a, c in zip((X, y, B0, v0), copies):
        np.testing.assert_array_equal(a, c)


def test_divergence_raises():
    X, y, B0, v0, _ = random_problem(7)
    with pytest.raises(ValueError, match="lr"):
        transfer(X * 10, y, B0, v0, lr=10.0, steps=2000)


def test_kumar_ordering_on_the_exercise_setup():
    from repeval_ref.datasets import transfer_setup

    S = transfer_setup(0)
    out = transfer(S["X"], S["y"], S["B0"], S["v0"], S["lr"], S["steps"])
    err = {
        split: {m: prediction_error(*out[m], X_eval, S["v_star"], S["B_star"]) for m in out}
        for split, X_eval in (("id", S["X"]), ("ood", S["X_ood"]))
    }
    # ID: fine-tuning (from either head) fits better than the probe
    assert err["id"]["ft"] < err["id"]["lp"] and err["id"]["lpft"] < err["id"]["lp"]
    # OOD: LP-FT < LP < FT
    assert err["ood"]["lpft"] < err["ood"]["lp"] < err["ood"]["ft"]
    # the features outside the ID span are the pretrained ones after FT and LP-FT
    P_out = np.eye(20) - np.linalg.pinv(S["X"]) @ S["X"]
    for m in ("ft", "lpft"):
        np.testing.assert_allclose(out[m][1] @ P_out, S["B0"] @ P_out, atol=1e-12)


def test_prediction_error():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(20, 4))
    v, B = rng.normal(size=2), rng.normal(size=(2, 4))
    v_s, B_s = rng.normal(size=3), rng.normal(size=(3, 4))  # other feature width is fine
    expected = np.mean([(v @ B @ x - v_s @ B_s @ x) ** 2 for x in X])
    got = prediction_error(v, B, X, v_s, B_s)
    assert isinstance(got, float)
    assert got == pytest.approx(expected, rel=1e-12)
    assert prediction_error(v, B, X, v, B) == 0.0


def test_layerwise_lr_decay_rule():
    rates = layerwise_lr(1.0, 0.75, 24)
    assert rates.shape == (26,)
    assert rates[25] == 1.0  # head
    assert rates[24] == pytest.approx(0.75)  # last block
    assert rates[12] == pytest.approx(0.75**13) and rates[12] == pytest.approx(0.024, abs=5e-4)
    assert rates[0] == pytest.approx(0.75**25) and rates[0] == pytest.approx(0.00075, abs=2e-5)
    np.testing.assert_allclose(layerwise_lr(3e-4, 0.5, 3), 3e-4 * 0.5 ** np.array([4, 3, 2, 1, 0]))
    np.testing.assert_array_equal(layerwise_lr(0.1, 1.0, 4), np.full(6, 0.1))
    np.testing.assert_allclose(layerwise_lr(0.1, 0.9, 0), [0.09, 0.1], rtol=1e-15)


def test_bad_inputs():
    X, y, B0, v0, _ = random_problem(9)
    with pytest.raises(ValueError, match="lr"):
        transfer(X, y, B0, v0, lr=0.0, steps=5)
    with pytest.raises(ValueError, match="lr"):
        transfer(X, y, B0, v0, lr=np.nan, steps=5)
    with pytest.raises(ValueError, match="steps"):
        transfer(X, y, B0, v0, lr=0.1, steps=-1)
    with pytest.raises(TypeError, match="steps"):
        transfer(X, y, B0, v0, lr=0.1, steps=2.5)
    with pytest.raises(ValueError, match="y"):
        transfer(X, y[:-1], B0, v0, lr=0.1, steps=5)
    with pytest.raises(ValueError, match="B0"):
        transfer(X, y, B0[:, :-1], v0, lr=0.1, steps=5)
    with pytest.raises(ValueError, match="v0"):
        transfer(X, y, B0, v0[:-1], lr=0.1, steps=5)
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError, match="X"):
        transfer(Xn, y, B0, v0, lr=0.1, steps=5)
    with pytest.raises(ValueError, match="X"):
        transfer(X[0], y, B0, v0, lr=0.1, steps=5)
    with pytest.raises(ValueError, match="B"):
        linear_net_gradients(X, y, v0, B0.T)
    with pytest.raises(ValueError, match="v_star"):
        prediction_error(v0, B0, X, v0[:-1], B0)
    with pytest.raises(ValueError, match="X"):
        prediction_error(v0, B0, X[:, :-1], v0, B0)
    with pytest.raises(ValueError, match="decay"):
        layerwise_lr(0.1, 1.5, 4)
    with pytest.raises(ValueError, match="decay"):
        layerwise_lr(0.1, 0.0, 4)
    with pytest.raises(ValueError, match="base_lr"):
        layerwise_lr(-0.1, 0.5, 4)
    with pytest.raises(ValueError, match="n_blocks"):
        layerwise_lr(0.1, 0.5, -1)
