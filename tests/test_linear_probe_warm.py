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
    keep = np.ptp(Xtr[np.random.default_rng(0).permutation(len(ytr))[len(ytr) // 5 :]], axis=0) > 0
    Xtr, Xte = Xtr[:, keep], Xte[:, keep]
    best, acc = linear_probe_done_right(Xtr, ytr, Xte, yte, Cs, seed=0)
    val_cold, _ = probe_accuracy_grid(Xtr, ytr, Xte, yte, Cs, seed=0)
    best_w, val_w, pred = linear_probe_warm_path(Xtr, ytr, Xte, yte, Cs, seed=0)
    assert best_w == best
    np.testing.assert_allclose(
        val_w, val_cold, atol=2 / (len(ytr) // 5)
    )  # at most 2 validation points
    assert abs(np.mean(pred == yte) - acc) <= 0.002 + 1e-12  # within 0.2 points
    assert pred.shape == yte.shape and pred.dtype == np.int64


def test_progress_is_called_once_per_fit(digits):
    Xtr, ytr, Xte, yte = digits
    keep = np.ptp(Xtr[np.random.default_rng(0).permutation(len(ytr))[len(ytr) // 5 :]], axis=0) > 0
    calls = []
    linear_probe_warm_path(
        Xtr[:, keep], ytr, Xte[:, keep], yte, (0.1, 1.0, 0.1), progress=calls.append
    )
    assert calls == [1, 1, 1]  # two distinct C, then the refit


def test_bad_input_is_named():
    X = np.random.default_rng(0).normal(size=(20, 3))
    y = np.arange(20) % 2
    with pytest.raises(ValueError, match="Cs"):
        linear_probe_warm_path(X, y, X, y, [])
    with pytest.raises(ValueError, match="train_h"):
        linear_probe_warm_path(X[:4], y[:4], X, y, [1.0])


# ------------------------------------------------------- blocks, memory maps and float32


def test_blocked_standardisation_equals_the_direct_formula(digits, monkeypatch):
    import repeval_ref._blocks as blocks_module
    from repeval_ref.linear_probe import _validation_split

    Xtr, ytr, _, _ = digits
    keep = np.ptp(Xtr, axis=0) > 0
    X = Xtr[:, keep] + 1e3  # a large common offset: the merged moments must not lose it
    monkeypatch.setattr(blocks_module, "BLOCK_BYTES", 8 * X.shape[1] * 37)  # 37 rows a block
    fit_z, fit_y, val_z, val_y = _validation_split(X, ytr, 4)
    perm = np.random.default_rng(4).permutation(len(ytr))
    fit, val = X[perm[len(ytr) // 5 :]], X[perm[: len(ytr) // 5]]
    mean, std = fit.mean(axis=0), fit.std(axis=0)
    np.testing.assert_allclose(fit_z, (fit - mean) / std, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(val_z, (val - mean) / std, rtol=1e-9, atol=1e-9)
    assert np.array_equal(fit_y, ytr[perm[len(ytr) // 5 :]]) and np.array_equal(
        val_y, ytr[perm[: len(ytr) // 5]]
    )
    assert fit_z.dtype == np.float64


def test_float32_memory_map_gives_the_float64_probe_within_rounding(digits, tmp_path, monkeypatch):
    import repeval_ref._blocks as blocks_module
    import repeval_ref.linear_probe as lp

    Xtr, ytr, Xte, yte = digits
    keep = np.ptp(Xtr, axis=0) > 0
    Xtr, Xte = Xtr[:, keep].astype(np.float32), Xte[:, keep].astype(np.float32)
    Cs = (1e-2, 0.1, 1.0)
    want = linear_probe_warm_path(Xtr.astype(np.float64), ytr, Xte, yte, Cs, seed=0)
    np.save(tmp_path / "tr.npy", Xtr)
    M = np.load(tmp_path / "tr.npy", mmap_mode="r")
    monkeypatch.setattr(lp, "FLOAT64_MAX_ENTRIES", 0)  # fitted in float32
    monkeypatch.setattr(blocks_module, "BLOCK_BYTES", 8 * Xtr.shape[1] * 50)
    seen = []
    from sklearn.linear_model import LogisticRegression

    original = LogisticRegression.fit

    def spy(self, X, y, *a, **k):
        seen.append(X.dtype)
        return original(self, X, y, *a, **k)

    monkeypatch.setattr(LogisticRegression, "fit", spy)
    got = linear_probe_warm_path(M, ytr, Xte, yte, Cs, seed=0)
    assert seen and all(dt == np.float32 for dt in seen)
    assert got[0] == want[0]
    n_val = len(ytr) // 5
    np.testing.assert_allclose(got[1], want[1], atol=2 / n_val)  # at most 2 validation points
    assert np.mean(got[2] == want[2]) >= 0.995  # only points at a decision boundary may move
    assert isinstance(M, np.memmap) and not M.flags.writeable  # the map is read, never copied into


def test_small_float32_features_are_fitted_as_float64(digits):
    Xtr, ytr, Xte, yte = digits
    keep = np.ptp(Xtr, axis=0) > 0
    X32, Xte32 = Xtr[:, keep].astype(np.float32), Xte[:, keep].astype(np.float32)
    got = linear_probe_warm_path(X32, ytr, Xte32, yte, (0.1, 1.0), seed=2)
    want = linear_probe_warm_path(
        X32.astype(np.float64), ytr, Xte32.astype(np.float64), yte, (0.1, 1.0), seed=2
    )
    assert got[0] == want[0]
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[2], want[2])
