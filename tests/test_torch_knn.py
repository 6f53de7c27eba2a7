"""Exact weighted k-NN in torch (repeval_ref.torch.knn) against the NumPy reference."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from repeval_ref import knn_classify
from repeval_ref.torch import knn_classify_torch, shard_range, topk_neighbors, weighted_vote

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _brute(train_h, train_y, test_h, k, tau, n_classes):
    """A loop written from the definition (ties: smaller index, then smaller label)."""
    a = train_h / np.linalg.norm(train_h, axis=1, keepdims=True)
    q = test_h / np.linalg.norm(test_h, axis=1, keepdims=True)
    pred = []
    for row in q:
        s = a @ row
        order = sorted(range(len(s)), key=lambda i: (-s[i], i))[:k]
        # Each class total is the exactly rounded sum of its weights (math.fsum), so
        # classes holding the same similarities tie exactly and the smaller label wins.
        votes = [
            math.fsum(np.exp((s[i] - s[order[0]]) / tau) for i in order if train_y[i] == c)
            for c in range(n_classes)
        ]
        pred.append(int(np.argmax(votes)))
    return np.array(pred)


@pytest.mark.parametrize("k", [1, 3, 10, 57, 120, 500])
@pytest.mark.parametrize("tau", [1e-4, 0.07, 1.0, 50.0])
def test_equals_knn_classify_with_many_merges(k, tau):
    rng = np.random.default_rng(k)
    train = rng.normal(size=(120, 6)) + np.repeat(rng.normal(size=(4, 6)), 30, axis=0)
    y = np.repeat(np.arange(4), 30)
    test = rng.normal(size=(41, 6))
    ref = knn_classify(train, y, test, k, tau, 4)
    # 7 x 11 tiles: 11 bank chunks per query block, so up to 10 merges per block.
    got = knn_classify_torch(train, y, test, k, tau, 4, query_block=7, bank_block=11)
    assert got.dtype == np.int64 and got.shape == (41,)
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(
        knn_classify_torch(
            torch.from_numpy(train), torch.from_numpy(y), torch.from_numpy(test), k, tau, 4
        ),
        ref,
    )


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
def test_ties_at_the_boundary_go_to_the_smaller_index(k):
    rng = np.random.default_rng(1)
    base = rng.integers(-2, 3, size=(15, 3)).astype(float)
    base[np.all(base == 0, axis=1)] = 1.0
    train = np.repeat(base, 3, axis=0)  # every point three times: exact ties everywhere
    y = rng.integers(0, 3, size=len(train))
    test = rng.integers(-2, 3, size=(30, 3)).astype(float)
    test[np.all(test == 0, axis=1)] = 1.0
    for tau in (1e-4, 1.0, 100.0):
        got = knn_classify_torch(train, y, test, k, tau, 3, query_block=4, bank_block=5)
        np.testing.assert_array_equal(got, _brute(train, y, test, k, tau, 3))
        np.testing.assert_array_equal(got, knn_classify(train, y, test, k, tau, 3))


def test_topk_neighbors_equals_full_sort():
    rng = np.random.default_rng(2)
    bank = torch.nn.functional.normalize(torch.from_numpy(rng.normal(size=(97, 5))), dim=1)
    q = torch.nn.functional.normalize(torch.from_numpy(rng.normal(size=(13, 5))), dim=1)
    vals, idx = topk_neighbors(bank, q, 9, query_block=4, bank_block=6, index_offset=100)
    full = (q @ bank.T).numpy()
    for r in range(13):
        order = np.lexsort((np.arange(97), -full[r]))[:9]
        np.testing.assert_array_equal(idx[r].numpy(), order + 100)
        np.testing.assert_allclose(vals[r].numpy(), full[r, order], rtol=0, atol=1e-15)


def test_float32_and_bfloat16_dtypes_run():
    rng = np.random.default_rng(3)
    centers = rng.normal(size=(3, 16)) * 3
    y = rng.integers(0, 3, 200)
    train = centers[y] + rng.normal(size=(200, 16))
    yt = rng.integers(0, 3, 50)
    test = centers[yt] + rng.normal(size=(50, 16))
    ref = knn_classify(train, y, test, 10, 0.07, 3)
    np.testing.assert_array_equal(
        knn_classify_torch(train, y, test, 10, 0.07, 3, dtype=torch.float32), ref
    )
    low = knn_classify_torch(train, y, test, 10, 0.07, 3, dtype=torch.bfloat16, bank_block=64)
    assert (low == ref).mean() > 0.9  # well-separated classes: bf16 ranking suffices


def test_no_overflow_and_inputs_unchanged():
    rng = np.random.default_rng(4)
    train, test, y = rng.normal(size=(30, 4)), rng.normal(size=(5, 4)), rng.integers(0, 2, 30)
    copies = train.copy(), test.copy(), y.copy()
    pred = knn_classify_torch(train, y, test, 30, 1e-4, 2)
    assert set(pred) <= {0, 1}
    for a, b in zip((train, test, y), copies):
        np.testing.assert_array_equal(a, b)


def test_weighted_vote_and_shard_range():
    vals = torch.tensor([[0.9, 0.9, 0.1]], dtype=torch.float64)
    idx = torch.tensor([[4, 2, 7]])
    # Two equal top votes for classes 1 and 0: the smaller label wins.
    assert weighted_vote(vals, idx, torch.tensor([[1, 0, 1]]), 1e-3, 2).tolist() == [0]
    assert weighted_vote(vals, idx, torch.tensor([[1, 1, 0]]), 1e-3, 2).tolist() == [1]
    cuts = [shard_range(10, r, 3) for r in range(3)]
    assert cuts == [(0, 4), (4, 7), (7, 10)]
    assert shard_range(1, 1, 2) == (1, 1)


def test_bad_inputs():
    rng = np.random.default_rng(5)
    tr, te, y = rng.normal(size=(10, 3)), rng.normal(size=(4, 3)), rng.integers(0, 2, 10)
    with pytest.raises(ValueError):
        knn_classify_torch(tr, y, te, 0, 0.1, 2)
    with pytest.raises(ValueError):
        knn_classify_torch(tr, y, te, 3, 0.0, 2)
    with pytest.raises(ValueError):
        knn_classify_torch(tr, y[:5], te, 3, 0.1, 2)
    with pytest.raises(ValueError):
        knn_classify_torch(tr, y, te[:, :2], 3, 0.1, 2)
    with pytest.raises(ValueError):
        knn_classify_torch(tr, y + 5, te, 3, 0.1, 2)
    bad = tr.copy()
    bad[2] = np.nan
    with pytest.raises(ValueError):
        knn_classify_torch(bad, y, te, 3, 0.1, 2)
    zero = tr.copy()
    zero[3] = 0
    with pytest.raises(ValueError, match="zero vector"):
        knn_classify_torch(zero, y, te, 3, 0.1, 2)
    with pytest.raises(ValueError):
        knn_classify_torch(np.zeros((0, 3)), y[:0], te, 3, 0.1, 2)
    with pytest.raises(ValueError):
        knn_classify_torch(tr, y, te, 3, 0.1, 2, query_block=0)
    with pytest.raises(TypeError):
        knn_classify_torch(tr, y, te, 3, 0.1, 2, dtype=torch.int32)
    with pytest.raises(TypeError):
        knn_classify_torch(tr, y, te, 2.5, 0.1, 2)
    with pytest.raises(RuntimeError, match="torch.distributed"):
        from repeval_ref.torch import knn_classify_sharded

        knn_classify_sharded(tr, y, te, 3, 0.1, 2, shard_offset=0)


def _exact_rows(rng, n, d):
    """Rows with 1 or 4 entries of +-1: unit-normalised entries are +-1 or +-0.5, so every
    norm and cosine is exact in any summation order and exact ties are common."""
    out = np.zeros((n, d))
    for row in out:
        m = rng.choice([1, 4])
        cols = rng.choice(d, size=m, replace=False)
        row[cols] = rng.choice([-1.0, 1.0], size=m)
    return out


@settings(max_examples=25, deadline=None)
@given(
    n_train=st.integers(1, 40),
    n_test=st.integers(1, 12),
    d=st.integers(4, 6),
    k=st.integers(1, 45),
    log_tau=st.floats(-4, 2),
    qb=st.integers(1, 8),
    bb=st.integers(1, 16),
    seed=st.integers(0, 2**16),
)
def test_property_any_tiling_equals_reference(n_train, n_test, d, k, log_tau, qb, bb, seed):
    rng = np.random.default_rng(seed)
    train, test = _exact_rows(rng, n_train, d), _exact_rows(rng, n_test, d)
    y = rng.integers(0, 3, n_train)
    tau = 10.0**log_tau
    got = knn_classify_torch(train, y, test, k, tau, 3, query_block=qb, bank_block=bb)
    np.testing.assert_array_equal(got, _brute(train, y, test, min(k, n_train), tau, 3))


@pytest.mark.parametrize(
    "width, chunk, k", [(64, 4, 5), (67, 4, 5), (67, 8, 8), (30, 3, 10), (9, 2, 5)]
)
def test_two_stage_selection_equals_topk(width, chunk, k):
    """Chunk maxima first, then the k best of the k best chunks: the values of torch.topk,
    and its columns when nothing is tied (continuous random data)."""
    from repeval_ref.torch.knn import _select_topk

    sims = torch.from_numpy(np.random.default_rng(width + chunk).normal(size=(40, width)))
    vals, cols = _select_topk(sims, k, chunk=chunk, two_stage=True)
    ref = torch.topk(sims, k, dim=1)
    torch.testing.assert_close(vals, ref.values, rtol=0, atol=0)
    torch.testing.assert_close(cols, ref.indices, rtol=0, atol=0)
    # Many ties (small integers): the values still agree, and the columns hold them.
    ties = torch.from_numpy(
        np.random.default_rng(width).integers(0, 4, size=(40, width)).astype(np.float32)
    )
    vals, cols = _select_topk(ties, k, chunk=chunk, two_stage=True)
    torch.testing.assert_close(vals, torch.topk(ties, k, dim=1).values, rtol=0, atol=0)
    torch.testing.assert_close(torch.gather(ties, 1, cols), vals, rtol=0, atol=0)


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
def test_two_stage_selection_keeps_the_exact_rules(k, monkeypatch):
    """The GPU's two-stage selection, forced on the CPU with small chunks, gives the same
    predictions as the definition, ties at the boundary included."""
    import repeval_ref.torch.knn as tk

    monkeypatch.setattr(tk, "_TWO_STAGE", True)
    monkeypatch.setattr(tk, "_CHUNK", 2)
    rng = np.random.default_rng(1)
    base = rng.integers(-2, 3, size=(15, 3)).astype(float)
    base[np.all(base == 0, axis=1)] = 1.0
    train = np.repeat(base, 3, axis=0)
    y = rng.integers(0, 3, size=len(train))
    test = rng.integers(-2, 3, size=(30, 3)).astype(float)
    test[np.all(test == 0, axis=1)] = 1.0
    got = knn_classify_torch(train, y, test, k, 0.5, 3, query_block=7, bank_block=40)
    np.testing.assert_array_equal(got, _brute(train, y, test, k, 0.5, 3))
    cont = rng.normal(size=(200, 8))
    yc = rng.integers(0, 4, size=200)
    q = rng.normal(size=(25, 8))
    got = knn_classify_torch(cont, yc, q, k, 0.07, 4, query_block=9, bank_block=77)
    np.testing.assert_array_equal(got, knn_classify(cont, yc, q, k, 0.07, 4))


def test_exact_class_ties_go_to_the_smaller_label_like_the_reference():
    """Both classes hold the same vectors in different orders: the class totals are equal
    in exact arithmetic, and summing in index order alone can leave the larger label one
    rounding ahead. Torch must settle such rows the reference's way."""
    rng = np.random.default_rng(3)
    for _ in range(60):
        V = rng.integers(-3, 4, size=(4, 3)).astype(float)
        V[np.all(V == 0, axis=1)] = 1.0
        train = np.vstack([V[rng.permutation(4)], V[rng.permutation(4)]])
        y = np.array([0] * 4 + [1] * 4)
        test = rng.integers(-3, 4, size=(5, 3)).astype(float)
        test[np.all(test == 0, axis=1)] = 1.0
        ref = knn_classify(train, y, test, 8, 0.07, 2)
        np.testing.assert_array_equal(ref, 0)
        np.testing.assert_array_equal(knn_classify_torch(train, y, test, 8, 0.07, 2), ref)


def test_boolean_k_is_refused():
    """True is an int to Python, not a neighbour count: both implementations refuse it."""
    train = np.eye(3)
    with pytest.raises(TypeError, match="k"):
        knn_classify(train, [0, 1, 2], train, True, 0.1, 3)
    with pytest.raises(TypeError, match="k"):
        knn_classify_torch(train, [0, 1, 2], train, True, 0.1, 3)
