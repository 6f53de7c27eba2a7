"""Row blocks of a feature matrix, read so that only about one block is held at a time.

A feature file opened with ``np.load(path, mmap_mode="r")`` is a read-only memory map:
its pages count in the process's resident memory once they are read and stay there
until the mapping lets them go. The passes over such a matrix read it a block of rows at
a time and, after each block, hand the mapping's pages back with :func:`release_pages`
(the data stays in the operating system's file cache; the next read of the same rows
maps it again). For an array held in memory these functions only cut it into blocks.

* :func:`row_slices`: consecutive row slices of a bounded size in bytes;
* :func:`iter_rows`: those blocks, with the pages released after each;
* :func:`iter_gather`: selected rows, read a stretch of the file at a time;
* :func:`release_pages`: drop the resident pages of a read-only memory map;
* :func:`column_moments`: per-column float64 mean and centred sum of squares, merged
  over blocks (Chan, Golub and LeVeque, 1979).
"""

from __future__ import annotations

import mmap
from itertools import pairwise

import numpy as np

__all__ = [
    "BLOCK_BYTES",
    "column_moments",
    "is_read_only_map",
    "iter_gather",
    "iter_rows",
    "release_pages",
    "row_slices",
]

#: size of one block of rows, in bytes of the dtype it is computed in
BLOCK_BYTES = 32 * 2**20


def row_slices(n, d, itemsize=8, block_bytes=None):
    """Consecutive slices of ``n`` rows of width ``d``, each about ``block_bytes`` large.

    Parameters
    ----------
    n, d : int
        Rows (``>= 0``) and columns (``>= 1``).
    itemsize : int, default 8
        Bytes per entry in the dtype the blocks are computed in.
    block_bytes : int, optional
        Default :data:`BLOCK_BYTES`.

    Returns
    -------
    list of slice
        Covering ``0 .. n`` in order, each at least one row.
    """
    block_bytes = BLOCK_BYTES if block_bytes is None else block_bytes
    for value, name, low in (
        (n, "n", 0),
        (d, "d", 1),
        (itemsize, "itemsize", 1),
        (block_bytes, "block_bytes", 1),
    ):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    step = max(1, int(block_bytes) // (int(itemsize) * int(d)))
    return [slice(lo, min(lo + step, n)) for lo in range(0, n, step)]


def _read_only_map(X):
    """The ``mmap.mmap`` behind ``X`` when ``X`` views a read-only ``numpy.memmap``."""
    obj = X
    while obj is not None:
        if isinstance(obj, np.memmap):
            mm = getattr(obj, "_mmap", None)
            if mm is not None and getattr(obj, "mode", None) == "r":
                return mm
            return None
        obj = getattr(obj, "base", None)
    return None


def is_read_only_map(X):
    """Whether ``X`` is, or views, a read-only ``numpy.memmap`` (mode ``"r"``).

    Parameters
    ----------
    X : object

    Returns
    -------
    bool
    """
    return isinstance(X, np.ndarray) and _read_only_map(X) is not None


def release_pages(X):
    """Drop the resident pages of the read-only memory map that ``X`` views.

    Only a read-only ``numpy.memmap`` (mode ``"r"``, as ``np.load(..., mmap_mode="r")``
    returns), or a view of one, is touched: its pages leave this process's resident
    memory and are read again from the file cache when next used, so the values seen
    through ``X`` never change. Anything else (an array in memory, a writable or
    copy-on-write map) is left alone.

    Parameters
    ----------
    X : numpy.ndarray

    Returns
    -------
    bool
        Whether pages were released.
    """
    if not isinstance(X, np.ndarray):
        raise TypeError(f"X must be a numpy array, got {type(X).__name__}")
    mm = _read_only_map(X)
    if mm is None or not hasattr(mm, "madvise") or not hasattr(mmap, "MADV_DONTNEED"):
        return False
    try:
        mm.madvise(mmap.MADV_DONTNEED)
    except (OSError, ValueError):  # a closed map, or a platform that refuses the advice
        return False
    return True


def iter_rows(X, itemsize=None, block_bytes=None):
    """Yield ``(slice, X[slice])`` for consecutive row blocks, releasing pages after each.

    Parameters
    ----------
    X : numpy.ndarray of shape (n, d)
    itemsize : int, optional
        Bytes per entry the caller computes in (default ``X.itemsize``).
    block_bytes : int, optional
        See :func:`row_slices`.

    Yields
    ------
    slice, numpy.ndarray of shape (rows, d)
        The block is a view of ``X``.
    """
    if not isinstance(X, np.ndarray) or X.ndim != 2:
        raise ValueError(
            f"X must be a 2-D numpy array, got {type(X).__name__} "
            f"of shape {getattr(X, 'shape', None)}"
        )
    for rows in row_slices(X.shape[0], max(1, X.shape[1]), itemsize or X.itemsize, block_bytes):
        yield rows, X[rows]
        release_pages(X)


def iter_gather(X, rows=None, itemsize=8, block_bytes=None):
    """Yield ``(positions, X[rows[positions]])`` covering every position of ``rows`` once.

    When the rows fit in one block this is ``(all positions, X[rows])`` in the given
    order. Otherwise the rows are taken by consecutive stretches of the file, each of at
    most one block of rows (a memory map's pages are released after each): reading rows
    in a random order would map pages all over the file within one block, since the
    operating system maps the pages around each one read.

    Parameters
    ----------
    X : numpy.ndarray of shape (n, d)
    rows : numpy.ndarray of int, shape (m,), optional
        Row indices; default all rows in order (then ``positions`` are slices).
    itemsize : int, default 8
        Bytes per entry the caller computes in.
    block_bytes : int, optional
        See :func:`row_slices`.

    Yields
    ------
    positions : slice or numpy.ndarray of intp
        Positions in ``rows`` (so that ``out[positions] = f(block)`` fills ``out``).
    block : numpy.ndarray of shape (len(positions), d)
    """
    if not isinstance(X, np.ndarray) or X.ndim != 2:
        raise ValueError(f"X must be a 2-D numpy array, got shape {getattr(X, 'shape', None)}")
    n, d = X.shape
    if rows is None:
        for part in row_slices(n, max(1, d), itemsize, block_bytes):
            yield part, X[part]
            release_pages(X)
        return
    rows = np.asarray(rows)
    spans = row_slices(n, max(1, d), itemsize, block_bytes)
    if len(row_slices(rows.shape[0], max(1, d), itemsize, block_bytes)) <= 1:
        yield slice(0, rows.shape[0]), X[rows]
        release_pages(X)
        return
    order = np.argsort(rows, kind="stable")
    srt = rows[order]
    edges = np.searchsorted(srt, [span.start for span in spans] + [n])
    for a, b in pairwise(edges):
        if b > a:
            yield order[a:b], X[srt[a:b]]
            release_pages(X)


def column_moments(X, rows=None, block_bytes=None):
    """Per-column float64 mean and centred sum of squares of ``X`` (or of ``X[rows]``).

    Each block contributes its own mean and centred sum of squares; blocks are merged
    with the pairwise update of Chan, Golub and LeVeque (1979), so no large sum of
    squares is differenced. When everything fits in one block the result is exactly
    ``Z.mean(axis=0)`` and ``((Z - mean) ** 2).sum(axis=0)`` of ``Z = X[rows]`` in
    float64.

    Parameters
    ----------
    X : numpy.ndarray of shape (n, d)
        Finite values.
    rows : numpy.ndarray of int, optional
        Row indices (in the order given) of the rows to use; default all.
    block_bytes : int, optional
        See :func:`row_slices` (float64 bytes).

    Returns
    -------
    mean : numpy.ndarray of float64, shape (d,)
    m2 : numpy.ndarray of float64, shape (d,)
        ``sum_i (x_ij - mean_j)^2``; the variance (``ddof=0``) is ``m2 / n``.
    lo, hi : numpy.ndarray of X's dtype, shape (d,)
        Per-column minimum and maximum (a column is constant when they are equal).
    """
    if not isinstance(X, np.ndarray) or X.ndim != 2:
        raise ValueError(f"X must be a 2-D numpy array, got shape {getattr(X, 'shape', None)}")
    n_rows = X.shape[0] if rows is None else len(rows)
    if n_rows == 0:
        raise ValueError("X (or X[rows]) holds no rows")
    n = 0
    mean = m2 = lo = hi = None
    for _, block in iter_gather(X, rows, 8, block_bytes):
        Z = np.asarray(block, dtype=np.float64)
        nb = Z.shape[0]
        mb = Z.mean(axis=0)
        sb = ((Z - mb) ** 2).sum(axis=0)
        zlo, zhi = Z.min(axis=0), Z.max(axis=0)
        if mean is None:
            n, mean, m2, lo, hi = nb, mb, sb, zlo, zhi
            continue
        delta = mb - mean
        total = n + nb
        m2 = m2 + sb + delta * delta * (n * nb / total)
        mean = mean + delta * (nb / total)
        lo, hi = np.minimum(lo, zlo), np.maximum(hi, zhi)
        n = total
    return mean, m2, lo.astype(X.dtype), hi.astype(X.dtype)
