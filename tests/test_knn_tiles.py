"""The tiled, threaded search inside repeval_ref.knn_classify (book/knn.md).

The default tiles are wide (thousands of bank rows), so the small banks of the other
k-NN tests fit in one tile. Here the tile size and the number of worker threads are
forced small, so that every path of the running-threshold search runs: a first tile
narrower than k, stretches of the bank searched by different workers, later tiles
with and without new candidates. The checks are against a sort of the full
similarity matrix (value descending, index ascending) and a literal vote.
"""

from __future__ import annotations

import numpy as np
import pytest

import repeval_ref.knn as knn_mod
from repeval_ref import knn_classify, knn_classify_curve


def full_sort_neighbours(train_h, test_h, k):
    """Indices of the k nearest rows by a full lexicographic sort (float64 cosines)."""
    a = train_h / np.linalg.norm(train_h, axis=1, keepdims=True)
    q = test_h / np.linalg.norm(test_h, axis=1, keepdims=True)
    sims = q @ a.T
    idx = np.arange(a.shape[0])
    return np.array([np.lexsort((idx, -row))[:k] for row in sims]), sims


def literal_vote(nbrs, sims, train_y, tau, n_classes):
    """argmax_c sum exp((s - s_max)/tau) [y = c]; equal sets of weights tie exactly."""
    out = []
    for row, s in zip(nbrs, sims):
        w = np.exp((s[row] - s[row].max()) / tau)
        totals = [float(np.sum(np.sort(w[train_y[row] == c])[::-1])) for c in range(n_classes)]
        out.append(int(np.argmax(totals)))
    return np.array(out)


@pytest.fixture
def small_tiles(monkeypatch):
    """Tiles of a few bank rows; the test sets the number of workers."""

    def force(tile_bytes, workers):
        monkeypatch.setattr(knn_mod, "_TILE_BYTES", tile_bytes)
        monkeypatch.setattr(knn_mod, "_WORKERS", workers)

    return force


def tied_data(rng, n_train, n_test, d, n_classes):
    """Sign vectors and scaled axes of norm sqrt(d) (a power of 2), times powers of 2:
    every cosine is a multiple of 1/d, computed without rounding, with many ties and
    duplicated directions at different norms."""

    def rows(n):
        x = rng.choice([-1.0, 1.0], size=(n, d))
        axis = rng.random(n) < 0.3
        x[axis] = 0.0
        x[axis, rng.integers(0, d, size=int(axis.sum()))] = np.sqrt(d) * rng.choice(
            [-1.0, 1.0], size=int(axis.sum())
        )
        # norms from sqrt(d) / 4 to 4 sqrt(d): powers of 2, so still no rounding
        return x * 2.0 ** rng.integers(-2, 3, size=(n, 1))

    return rows(n_train), rng.integers(0, n_classes, size=n_train), rows(n_test)


@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize(
    "tile_bytes", [pytest.param(8 * 3 * 5, marks=pytest.mark.slow), 8 * 3 * 40, 8 * 3 * 2000]
)
def test_tiled_neighbours_equal_the_full_sort(small_tiles, workers, tile_bytes):
    # block_size 3: tiles of 5, 40 or 2000 bank rows; k below and above the tile width
    small_tiles(tile_bytes, workers)
    rng = np.random.default_rng(tile_bytes + workers)
    for d in (4, 16, 64):
        train, train_y, test = tied_data(rng, 157, 11, d, 4)
        # block_size 11: one block, so the bank is cut into stretches among the workers
        for k, block_size in [(k, b) for k in (1, 4, 7, 23, 156, 157, 400) for b in (3, 11)]:
            n_test, n_train, _, _, blocks = knn_mod._neighbour_blocks(
                train, train_y, test, 4, block_size, np.float64, k
            )
            got = np.concatenate([cols for _, _, _, cols in blocks])
            want, sims = full_sort_neighbours(train, test, min(k, n_train))
            np.testing.assert_array_equal(got, want)
            # and the predictions are those of the literal vote on these neighbours
            pred = knn_classify(train, train_y, test, k, 0.5, 4, block_size=block_size)
            np.testing.assert_array_equal(pred, literal_vote(want, sims, train_y, 0.5, 4))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_threads_and_test_set_size_do_not_change_a_bit(small_tiles, dtype):
    # The tile grid is fixed and every product runs on one BLAS thread, so the number
    # of workers (and how the bank is cut among them) changes no similarity at all.
    rng = np.random.default_rng(7)
    train = rng.normal(size=(3001, 24)).astype(dtype)
    train_y = rng.integers(0, 10, size=3001)
    test = rng.normal(size=(45, 24)).astype(dtype)
    runs = {16: [], 64: []}
    for workers, block_size in ((1, 16), (2, 16), (5, 16), (1, 64), (3, 64)):
        # tiles of 4 KiB: 32 (float64) or 64 (float32) bank rows for 16 test rows; with
        # block_size 64 the one block's bank is cut into stretches among the workers
        small_tiles(4 * 2**10 * block_size // 16, workers)
        _, _, _, _, blocks = knn_mod._neighbour_blocks(
            train, train_y, test, 10, block_size, dtype, 20
        )
        runs[block_size].append(np.concatenate([np.concatenate([v, c]) for _, _, v, c in blocks]))
    for same_tiles in runs.values():
        for other in same_tiles[1:]:
            np.testing.assert_array_equal(other, same_tiles[0])  # bitwise, values and indices
    # a subset of the queries gets the same predictions as inside the whole set
    small_tiles(4 * 2**10, 2)
    whole = knn_classify(train, train_y, test, 20, 0.07, 10, block_size=16, dtype=dtype)
    part = knn_classify(train, train_y, test[16:32], 20, 0.07, 10, block_size=16, dtype=dtype)
    np.testing.assert_array_equal(part, whole[16:32])


def test_curve_equals_knn_classify_on_tiles(small_tiles):
    small_tiles(8 * 4 * 9, 2)  # block_size 4: tiles of 9 rows
    rng = np.random.default_rng(3)
    train, train_y, test = tied_data(rng, 120, 13, 4, 5)
    ks = [1, 5, 10, 11, 50, 130]
    curve = knn_classify_curve(train, train_y, test, ks, 0.2, 5, block_size=4)
    for row, k in zip(curve, ks):
        np.testing.assert_array_equal(
            row, knn_classify(train, train_y, test, k, 0.2, 5, block_size=4)
        )


def test_blas_threads_are_restored(two_threads):
    from threadpoolctl import threadpool_info

    before = [(i["filepath"], i["num_threads"]) for i in threadpool_info()]
    rng = np.random.default_rng(0)
    knn_classify(
        rng.normal(size=(300, 8)), rng.integers(0, 3, 300), rng.normal(size=(9, 8)), 5, 0.1, 3
    )
    assert [(i["filepath"], i["num_threads"]) for i in threadpool_info()] == before


def test_merge_hits_keeps_value_then_index_order():
    # two queries; the running lists hold indices 0..9, the new candidates 10..
    best_v = np.array([[5.0, 4.0, 4.0], [3.0, 2.0, 1.0]])
    best_i = np.array([[0, 3, 7], [1, 2, 9]])
    rows = np.array([0, 0, 1, 1])
    vals = np.array([4.5, 4.0, 2.0, 9.0])
    cols = np.array([10, 11, 12, 13])
    knn_mod._merge_hits(best_v, best_i, rows, vals, cols, 3)
    assert best_v.tolist() == [[5.0, 4.5, 4.0], [9.0, 3.0, 2.0]]
    assert best_i.tolist() == [[0, 10, 3], [13, 1, 2]]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unscaled_prefilter_loses_nothing_under_rounding(small_tiles, dtype):
    # Norms spread over six decades, so the bound t * n_min is far from most entries; the
    # neighbours must still be exactly those of _top_k on the same tiles, scaled in full.
    from threadpoolctl import threadpool_limits

    small_tiles(dtype().itemsize * 16 * 64, 1)  # block_size 16: tiles of 64 bank rows
    rng = np.random.default_rng(11)
    train = (rng.normal(size=(1000, 12)) * 10.0 ** rng.uniform(-3, 3, size=(1000, 1))).astype(dtype)
    test = rng.normal(size=(40, 12)).astype(dtype)
    y = rng.integers(0, 3, size=1000)
    _, _, _, _, blocks = knn_mod._neighbour_blocks(train, y, test, 3, 16, dtype, 25)
    got = [(v, c) for _, _, v, c in blocks]
    norms = np.linalg.norm(train, axis=1)
    q = test / np.linalg.norm(test, axis=1, keepdims=True)
    with threadpool_limits(limits=1, user_api="blas"):
        for (v, c), s in zip(got, range(0, 40, 16)):
            qb = q[s : s + 16]
            sims = np.empty((qb.shape[0], 1000), dtype=dtype)
            for c0 in range(0, 1000, 64):  # the same products, tile by tile
                tile = np.empty((qb.shape[0], min(64, 1000 - c0)), dtype=dtype)
                np.matmul(qb, train[c0 : c0 + 64].T, out=tile)
                sims[:, c0 : c0 + 64] = tile / norms[c0 : c0 + 64]
            rows, cols = knn_mod._top_k(sims, 25)
            want = cols.reshape(-1, 25)
            np.testing.assert_array_equal(np.sort(c, axis=1), want)
            np.testing.assert_array_equal(
                np.sort(v, axis=1), np.sort(sims[rows, cols].reshape(-1, 25), axis=1)
            )


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_bank_entry_is_rejected_from_the_norms(bad):
    """The bank's NaN/inf check rides on its row norms: a bad entry anywhere, in float32
    or float64, still raises ValueError naming train_h."""
    rng = np.random.default_rng(3)
    for dtype in (np.float32, np.float64):
        train = rng.normal(size=(57, 6))
        train[41, 4] = bad
        with pytest.raises(ValueError, match="train_h contains NaN or infinite"):
            knn_classify(
                train, rng.integers(0, 3, 57), rng.normal(size=(5, 6)), 4, 0.1, 3, dtype=dtype
            )


def test_finite_bank_whose_squares_overflow_is_searched(small_tiles):
    """Entries near 1e30 overflow x**2 in float32 (the norms are inf) but are finite:
    the bank is normalised by the fallback instead, with the predictions of a bank
    scaled down by the same positive factor (cosines do not change)."""
    rng = np.random.default_rng(4)
    small_tiles(4 * 3 * 10, 2)
    train = rng.normal(size=(90, 5))
    y = rng.integers(0, 4, 90)
    test = rng.normal(size=(13, 5))
    big = (train * 1e30).astype(np.float32)
    with np.errstate(over="ignore"):
        assert np.all(np.isfinite(big)) and not np.all(np.isfinite(np.linalg.norm(big, axis=1)))
    expected = knn_classify(train, y, test, 7, 0.2, 4)
    assert np.array_equal(knn_classify(big, y, test, 7, 0.2, 4, dtype=np.float32), expected)


def test_worker_buffers_are_reused_and_results_unchanged(small_tiles, monkeypatch):
    """Each worker keeps one tile buffer across the units it searches (a fresh
    multi-megabyte buffer costs page faults); units of different widths share it and
    the neighbours are still those of a full sort."""
    rng = np.random.default_rng(5)
    small_tiles(8 * 8 * 9, 2)  # block_size 8: tiles of 9 bank rows
    train = rng.normal(size=(203, 8))
    test = rng.normal(size=(41, 8))
    y = rng.integers(0, 5, 203)
    seen = []
    real = knn_mod._block_neighbours

    def spy(*args, scratch=None, **kw):
        out = real(*args, scratch=scratch, **kw)
        seen.append((id(scratch), scratch["tile"].ctypes.data))
        return out

    monkeypatch.setattr(knn_mod, "_block_neighbours", spy)
    pred = knn_classify(train, y, test, 6, 0.1, 5, block_size=8)
    nbrs, sims = full_sort_neighbours(train, test, 6)
    assert np.array_equal(pred, literal_vote(nbrs, sims, y, 0.1, 5))
    per_scratch = {}
    for sid, addr in seen:
        per_scratch.setdefault(sid, set()).add(addr)
    assert len(seen) > len(per_scratch) >= 1  # several units per worker buffer
    assert all(len(a) == 1 for a in per_scratch.values())  # one allocation each
