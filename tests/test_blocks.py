"""_blocks: row blocks of a memory map, released pages, per-column moments merged over blocks."""

import numpy as np
import pytest

from repeval_ref._blocks import column_moments, iter_rows, release_pages, row_slices


def test_row_slices_cover_the_rows_in_order():
    for n, d, size in ((0, 3, 80), (1, 3, 8), (10, 3, 80), (10, 3, 1), (17, 2, 48)):
        parts = row_slices(n, d, 8, size)
        covered = np.concatenate([np.arange(n)[p] for p in parts]) if parts else np.arange(0)
        assert np.array_equal(covered, np.arange(n))
        assert all(p.stop - p.start >= 1 for p in parts)
        assert all(p.stop - p.start <= max(1, size // (8 * d)) for p in parts)


@pytest.mark.parametrize(
    "bad", [{"n": -1}, {"d": 0}, {"itemsize": 0}, {"block_bytes": 0}, {"n": 2.5}]
)
def test_row_slices_bad_input_is_named(bad):
    args = {"n": 4, "d": 2, "itemsize": 8, "block_bytes": 64, **bad}
    with pytest.raises(ValueError, match=next(iter(bad))):
        row_slices(**args)


def _resident_pages(mm_array):
    """Resident pages of the mapping behind a memmap, from /proc/self/smaps."""
    import re

    addr = mm_array.ctypes.data
    with open("/proc/self/smaps") as f:
        text = f.read()
    for block in re.split(r"\n(?=[0-9a-f]+-[0-9a-f]+ )", text):
        lo, hi = (int(x, 16) for x in block.split()[0].split("-"))
        if lo <= addr < hi:
            return int(re.search(r"\nRss:\s+(\d+) kB", block).group(1))
    raise AssertionError("mapping not found")


def test_release_pages_drops_a_read_only_map_and_keeps_its_values(tmp_path):
    X = np.random.default_rng(0).standard_normal((2048, 256)).astype(np.float32)
    np.save(tmp_path / "x.npy", X)
    M = np.load(tmp_path / "x.npy", mmap_mode="r")
    assert float(np.asarray(M).sum()) == pytest.approx(float(X.sum()), rel=1e-5)
    try:
        before = _resident_pages(M)
    except (OSError, AssertionError):
        pytest.skip("no /proc/self/smaps")
    assert before >= 1024  # 2 MiB read
    assert release_pages(M[10:20]) is True  # a view of the map releases the whole map
    assert _resident_pages(M) < before / 4
    np.testing.assert_array_equal(M, X)  # read again from the file: same values


def test_release_pages_leaves_other_arrays_alone(tmp_path):
    X = np.arange(12.0).reshape(3, 4)
    assert release_pages(X) is False
    np.save(tmp_path / "x.npy", X)
    for mode in ("r+", "c"):
        M = np.load(tmp_path / "x.npy", mmap_mode=mode)
        assert release_pages(M) is False
    with pytest.raises(TypeError, match="X"):
        release_pages([1.0, 2.0])


def test_iter_rows_yields_views_of_every_row_once(tmp_path):
    X = np.random.default_rng(1).standard_normal((37, 5))
    np.save(tmp_path / "x.npy", X)
    M = np.load(tmp_path / "x.npy", mmap_mode="r")
    got = [(rows, block.copy()) for rows, block in iter_rows(M, block_bytes=80)]
    assert len(got) == 19
    np.testing.assert_array_equal(np.concatenate([b for _, b in got]), X)
    with pytest.raises(ValueError, match="X"):
        next(iter_rows(np.zeros(3)))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_column_moments_merged_over_blocks_equal_the_direct_ones(dtype):
    rng = np.random.default_rng(2)
    X = (1e4 + rng.standard_normal((101, 6)) * np.array([1, 1e-3, 5, 1, 0, 2])).astype(dtype)
    rows = rng.permutation(101)[:60]
    for sel in (None, rows):
        Z = (X if sel is None else X[sel]).astype(np.float64)
        for size in (8 * 6, 8 * 6 * 7, None):  # one row a block, seven rows, one block
            mean, m2, lo, hi = column_moments(X, sel, block_bytes=size)
            np.testing.assert_allclose(mean, Z.mean(axis=0), rtol=1e-14)
            np.testing.assert_allclose(
                m2, ((Z - Z.mean(axis=0)) ** 2).sum(axis=0), rtol=1e-9, atol=1e-9 * Z.shape[0]
            )
            np.testing.assert_array_equal(lo, Z.min(axis=0).astype(dtype))
            np.testing.assert_array_equal(hi, Z.max(axis=0).astype(dtype))
            assert m2[4] == 0 and lo[4] == hi[4]
    one = column_moments(X)  # a single block: exactly numpy's mean and variance
    Z = X.astype(np.float64)
    assert np.array_equal(one[0], Z.mean(axis=0))
    assert np.array_equal(one[1] / Z.shape[0], Z.var(axis=0))


def test_column_moments_bad_input():
    with pytest.raises(ValueError, match="X"):
        column_moments(np.zeros(3))
    with pytest.raises(ValueError, match="no rows"):
        column_moments(np.zeros((3, 2)), rows=np.arange(0))


def test_iter_gather_covers_every_position_once_with_its_row(tmp_path):
    from repeval_ref._blocks import iter_gather

    rng = np.random.default_rng(4)
    X = rng.standard_normal((50, 3))
    np.save(tmp_path / "x.npy", X)
    M = np.load(tmp_path / "x.npy", mmap_mode="r")
    rows = rng.permutation(50)[:31]
    for size, rows_ in ((24, rows), (24 * 7, rows), (None, rows), (24 * 7, None)):
        want = X if rows_ is None else X[rows_]
        out = np.full_like(want, np.nan)
        seen = np.zeros(want.shape[0], dtype=int)
        for pos, block in iter_gather(M, rows_, 8, size):
            out[pos] = block
            seen[pos] += 1
            if size is not None and rows_ is not None:
                idx = rows_[pos]
                assert idx.max() - idx.min() < size // 24  # one stretch of the file
        assert np.all(seen == 1)
        np.testing.assert_array_equal(out, want)
