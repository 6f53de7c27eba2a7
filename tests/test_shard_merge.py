"""merge_topk: the shards' top-k lists merge into the top-k of the whole bank.

Checked against brute force (one stable sort of the whole similarity matrix), under
heavy ties, with shards smaller than k and empty shards, against a heapq merge written
independently, and against the PyTorch side (``topk_neighbors`` on the whole bank and
the merge inside ``knn_classify_sharded``).
"""

import heapq

import numpy as np
import pytest
import torch

import repeval_ref as rr
import repeval_ref.torch as rt
from repeval_ref.torch.knn import _lexsort_desc, topk_neighbors


def _brute(sims, k):
    """Top-k of each row: value decreasing, ties to the smaller column (stable sort)."""
    order = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(sims, order, axis=1), order


def _shards(sims, bounds, k, shuffle_rng=None):
    """Each shard's own top-k (local indices), optionally with its columns shuffled."""
    vals, idx, offsets = [], [], []
    for start, stop in bounds:
        v, i = _brute(sims[:, start:stop], k)
        if shuffle_rng is not None and v.shape[1] > 1:
            perm = shuffle_rng.permutation(v.shape[1])
            v, i = v[:, perm], i[:, perm]
        vals.append(v)
        idx.append(i)
        offsets.append(start)
    return vals, idx, offsets


def _bounds(n, world):
    return [rt.shard_range(n, r, world) for r in range(world)]


@pytest.mark.parametrize("n,world,k", [(37, 2, 5), (37, 5, 8), (50, 3, 1), (9, 4, 30), (64, 8, 64)])
def test_equals_top_k_of_the_concatenated_bank(n, world, k):
    rng = np.random.default_rng(n * world + k)
    sims = rng.normal(size=(11, n))
    vals, idx = rr.merge_topk(*_shards(sims, _bounds(n, world), k, rng), k)
    want_v, want_i = _brute(sims, k)
    assert vals.shape == idx.shape == (11, min(k, n))
    assert idx.dtype == np.int64 and vals.dtype == np.float64
    np.testing.assert_array_equal(idx, want_i)
    np.testing.assert_array_equal(vals, want_v)


@pytest.mark.parametrize("seed", range(5))
def test_ties_across_shards_go_to_the_smaller_global_index(seed):
    rng = np.random.default_rng(seed)
    n = 40
    sims = rng.integers(0, 4, size=(13, n)) / 4.0  # four values: ties everywhere
    for world in (2, 3, 7):
        for k in (1, 3, 6, 17):
            vals, idx = rr.merge_topk(*_shards(sims, _bounds(n, world), k, rng), k)
            want_v, want_i = _brute(sims, k)
            np.testing.assert_array_equal(idx, want_i)
            np.testing.assert_array_equal(vals, want_v)


def test_independent_of_how_the_bank_is_cut():
    rng = np.random.default_rng(7)
    sims = rng.integers(0, 3, size=(6, 30)).astype(float)
    cuts = [[(0, 30)], [(0, 1), (1, 29), (29, 30)], [(0, 10), (10, 10), (10, 30)]]
    results = [rr.merge_topk(*_shards(sims, b, 7), 7) for b in cuts]
    for vals, idx in results[1:]:
        np.testing.assert_array_equal(idx, results[0][1])
        np.testing.assert_array_equal(vals, results[0][0])


def test_empty_shards_and_k_beyond_the_bank():
    rng = np.random.default_rng(3)
    sims = rng.normal(size=(4, 6))
    bounds = [(0, 0), (0, 2), (2, 2), (2, 6)]
    vals, idx = rr.merge_topk(*_shards(sims, bounds, 10), 10)
    assert vals.shape == (4, 6)  # every row of the bank, once
    np.testing.assert_array_equal(idx, _brute(sims, 10)[1])


def _heapq_merge(shard_vals, shard_idx, offsets, k):
    """An independent merge: per row, heapq.merge of the shards' sorted lists."""
    rows_v, rows_i = [], []
    for r in range(shard_vals[0].shape[0]):
        lists = [
            sorted((-float(v[r, j]), int(i[r, j]) + off) for j in range(v.shape[1]))
            for v, i, off in zip(shard_vals, shard_idx, offsets)
        ]
        best = list(heapq.merge(*lists))[:k]
        rows_v.append([-a for a, _ in best])
        rows_i.append([b for _, b in best])
    return np.array(rows_v), np.array(rows_i)


def test_agrees_with_a_heapq_merge():
    rng = np.random.default_rng(11)
    sims = np.round(rng.normal(size=(9, 45)), 1)
    args = _shards(sims, _bounds(45, 4), 9, rng)
    got = rr.merge_topk(*args, 9)
    want = _heapq_merge(*args, 9)
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[0], want[0])


def test_agrees_with_the_torch_side():
    """Per-shard topk_neighbors (local indices) merged = topk_neighbors on the whole bank,
    and = the merge knn_classify_sharded does on its all-gathered candidates."""
    rng = np.random.default_rng(5)
    bank = rng.normal(size=(53, 6))
    bank[20:26] = bank[3]  # exact duplicates across shards
    queries = np.vstack([rng.normal(size=(7, 6)), bank[3:4]])
    unit = lambda a: torch.from_numpy(a / np.linalg.norm(a, axis=1, keepdims=True))  # noqa: E731
    B, Q = unit(bank), unit(queries)
    k = 9
    whole_v, whole_i = topk_neighbors(B, Q, k, bank_block=8)
    parts = [topk_neighbors(B[a:b], Q, k, bank_block=5) for a, b in _bounds(53, 3)]
    offsets = [a for a, _ in _bounds(53, 3)]
    vals, idx = rr.merge_topk(
        [v.numpy() for v, _ in parts], [i.numpy() for _, i in parts], offsets, k
    )
    np.testing.assert_array_equal(idx, whole_i.numpy())
    # the products of tiles of other shapes may round differently in the last bit
    np.testing.assert_allclose(vals, whole_v.numpy(), rtol=1e-14, atol=0)
    # the sharded classifier's merge: concatenate (global indices, rank order), lexsort
    cat_v = torch.cat([v for v, _ in parts], dim=1)
    cat_i = torch.cat([i + off for (_, i), off in zip(parts, offsets)], dim=1)
    sv, si, _ = _lexsort_desc(cat_v, cat_i)
    np.testing.assert_array_equal(si[:, :k].numpy(), idx)
    np.testing.assert_array_equal(sv[:, :k].numpy(), vals)


def test_bad_input_names_the_argument():
    v, i = np.array([[0.5, 0.1]]), np.array([[0, 1]])
    cases = [
        (dict(shard_vals=[v], shard_idx=[i], offsets=[0], k=0), "k"),
        (dict(shard_vals=[v, v], shard_idx=[i], offsets=[0, 2], k=1), "shard_idx"),
        (dict(shard_vals=[v], shard_idx=[i[:, :1]], offsets=[0], k=1), "shard_idx"),
        (dict(shard_vals=[v], shard_idx=[-i], offsets=[0], k=1), "shard_idx"),
        (dict(shard_vals=[v], shard_idx=[i], offsets=[-1], k=1), "offsets"),
        (dict(shard_vals=[v, v], shard_idx=[i, i], offsets=[0, 1], k=1), "offsets"),  # overlap
        (
            dict(shard_vals=[np.array([[np.nan, 0.1]])], shard_idx=[i], offsets=[0], k=1),
            "shard_vals",
        ),
        (
            dict(
                shard_vals=[v, np.ones((2, 1))],
                shard_idx=[i, np.zeros((2, 1), int)],
                offsets=[0, 5],
                k=1,
            ),
            "shard_vals",
        ),
        (
            dict(
                shard_vals=[np.zeros((1, 0))], shard_idx=[np.zeros((1, 0), int)], offsets=[0], k=1
            ),
            "shard_vals",
        ),
        (dict(shard_vals=[], shard_idx=[], offsets=[], k=1), "shard_vals"),
        (dict(shard_vals=[v], shard_idx=[i + 0.5], offsets=[0], k=1), "shard_idx"),
    ]
    for kwargs, name in cases:
        with pytest.raises((ValueError, TypeError), match=name):
            rr.merge_topk(**kwargs)


def test_torch_package_exports_the_finetune_helpers():
    from repeval_ref.torch import finetune

    assert set(finetune.__all__) <= set(rt.__all__)
    for name in rt.__all__:
        assert getattr(rt, name) is not None
