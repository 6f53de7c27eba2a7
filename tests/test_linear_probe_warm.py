"""linear_probe_warm_path: the same selection as linear_probe_done_right, from warm starts."""
import numpy as np
import pytest
from sklearn.datasets import load_digits

from repeval_ref import linear_probe_done_right
from repeval_ref.linear_probe import linear_probe_warm_path, probe_accuracy_grid


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    p = np.random.default_rng(1).permutation(len(y))
    return X[p[:700]], y[p[:700]], X[p[700:]], y[p[700:]]


@pytest.mark.slow
@pytest.mark.parametrize("Cs", [(1e-3, 1e-2, 0.1, 1.0, 10.0), (10.0, 0.1, 0.1, 1e-2)])
def test_same_selection_and_accuracy_as_the_cold_sweep(digits, Cs):
    Xtr, ytr, Xte, yte = digits
    keep = np.ptp(Xtr[np.random.default_rng(0).permutation(len(ytr))[len(ytr) // 5:]], axis=0) > 0
    Xtr, Xte = Xtr[:, keep], Xte[:, keep]
    best, acc = linear_probe_done_right(Xtr, ytr, Xte, yte, Cs, seed=0)
    val_cold, _ = probe_accuracy_grid(Xtr, ytr, Xte, yte, Cs, seed=0)
    best_w, val_w, pred = linear_probe_warm_path(Xtr, ytr, Xte, yte, Cs, seed=0)
    assert best_w == best
    np.testing.assert_allclose(val_w, val_cold, atol=2 / (len(ytr) // 5))  # at most 2 validation points
    assert abs(np.mean(pred == yte) - acc) <= 0.002 + 1e-12  # within 0.2 points
    assert pred.shape == yte.shape and pred.dtype == np.int64


def test_progress_is_called_once_per_fit(digits):
    Xtr, ytr, Xte, yte = digits
    keep = np.ptp(Xtr[np.random.default_rng(0).permutation(len(ytr))[len(ytr) // 5:]], axis=0) > 0
    calls = []
    linear_probe_warm_path(Xtr[:, keep], ytr, Xte[:, keep], yte, (0.1, 1.0, 0.1), progress=calls.append)
    assert calls == [1, 1, 1]  # two distinct C, then the refit


def test_bad_input_is_named():
    X = np.random.default_rng(0).normal(size=(20, 3))
    y = np.arange(20) % 2
    with pytest.raises(ValueError, match="Cs"):
        linear_probe_warm_path(X, y, X, y, [])
    with pytest.raises(ValueError, match="train_h"):
        linear_probe_warm_path(X[:4], y[:4], X, y, [1.0])
