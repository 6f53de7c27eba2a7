"""unique_row_order against np.unique, and two_nn_id_batched on selected rows of a memory map."""

import numpy as np
import pytest

from repeval_ref.labelfree import two_nn_id_batched, unique_row_order


@pytest.mark.parametrize("seed", range(6))
def test_unique_row_order_is_numpy_unique(seed):
    rng = np.random.default_rng(seed)
    for _ in range(30):
        n, d = int(rng.integers(1, 80)), int(rng.integers(1, 6))
        X = rng.integers(-2, 3, (n, d)).astype(np.float32 if seed % 2 else np.float64)
        if seed % 3 == 0:
            X[rng.integers(0, n)] = -0.0  # equal to a row of +0.0
        idx = unique_row_order(X)
        np.testing.assert_array_equal(X[idx], np.unique(X, axis=0))
        assert np.unique(idx).size == idx.size


def test_unique_row_order_on_a_memory_map_with_a_constant_first_column(tmp_path, monkeypatch):
    import repeval_ref._blocks as blocks_module

    rng = np.random.default_rng(1)
    X = rng.standard_normal((500, 7)).astype(np.float32)
    X[:, 0] = 0.0  # every row tied on the first column
    X[100:110] = X[5]  # ten duplicates of row 5
    np.save(tmp_path / "x.npy", X)
    monkeypatch.setattr(blocks_module, "BLOCK_BYTES", 40)
    idx = unique_row_order(np.load(tmp_path / "x.npy", mmap_mode="r"))
    np.testing.assert_array_equal(X[idx], np.unique(X, axis=0))
    assert idx.size == 490


def test_unique_row_order_bad_input():
    with pytest.raises(ValueError, match="X"):
        unique_row_order(np.zeros(4))
    with pytest.raises(ValueError, match="X"):
        unique_row_order(np.array([[1.0, np.nan]]))


def test_batched_on_rows_equals_batched_on_the_copy(tmp_path):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((600, 5)).astype(np.float32)
    np.save(tmp_path / "x.npy", X)
    M = np.load(tmp_path / "x.npy", mmap_mode="r")
    rows = np.sort(rng.choice(600, 450, replace=False))
    got = two_nn_id_batched(M, batch_size=100, rng=3, rows=rows)
    want = two_nn_id_batched(X[rows], batch_size=100, rng=3)
    assert got.mean == want.mean and got.std == want.std
    np.testing.assert_array_equal(got.estimates, want.estimates)


@pytest.mark.parametrize(
    "rows, word",
    [
        (np.array([0, 600]), "rows"),
        (np.array([[0, 1, 2]]), "rows"),
        (np.array([0.5, 1, 2]), "rows"),
        (np.array([0, 1]), "3 rows"),
    ],
)
def test_batched_rows_bad_input(rows, word):
    X = np.random.default_rng(0).standard_normal((600, 3))
    with pytest.raises(ValueError, match=word):
        two_nn_id_batched(X, batch_size=100, rng=0, rows=rows)
    with pytest.raises(ValueError, match="iterator"):
        two_nn_id_batched(iter([X[:10]]), rows=np.arange(3))
