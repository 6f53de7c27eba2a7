"""Weighted k-nearest-neighbour classification of frozen features.

Book: chapter ``book/knn.md`` ("The weighted k-NN classifier"); seed 000, section
"The weighted k-NN classifier" and its warm-up exercise "Weighted k-NN classifier".
The rule is the one of instance discrimination (Wu et al. 2018), reused by DINO
(Caron et al. 2021) with ``k = 20`` and ``tau = 0.07``.

Both banks are scaled to unit length, ``hat h = h / ||h||``. For a test feature the
cosine similarities to the stored training features are ``s_i = hat h_i^T hat h``;
with ``N_k`` the indices of the ``k`` largest of them the prediction is::

    y_hat = argmax_c  sum_{i in N_k} exp(s_i / tau) [y_i = c].

Implementation notes
--------------------
* **No overflow.** Every weight is divided by the largest kept one,
  ``exp((s_i - s_max) / tau)``, which lies in ``(0, 1]`` and leaves the argmax
  unchanged (all votes of a row are scaled by the same positive number). The nearest
  neighbour always gets weight exactly 1, so even ``tau = 1e-4`` is safe.
* **Tiles.** The test set is processed in blocks of 512 rows (``block_size``) and the
  bank in chunks of columns, so that one tile of similarities takes about 4 MB and
  stays in the cache while it is scaled and searched; the full ``n_test x n_train``
  matrix never exists, and the memory does not grow with either bank. The tiles are
  a fixed grid (it depends only on ``block_size`` and the dtype), and each tile's
  product runs on one BLAS thread, so the rounding of every similarity, and hence
  every prediction, is the same whatever the number of threads or of test rows.
* **Threads.** The tiles of different blocks (or, for a single block, of different
  stretches of the bank) are searched by as many worker threads as the BLAS has
  threads, each running a one-thread product and its own selection; so the cores
  never wait for a selection, and no two thread pools compete for them. The BLAS is
  held at one thread (``threadpoolctl``) for the duration of the call.
* **No copy of the bank.** The queries are scaled to unit length; the bank is not:
  a product ``hat h^T h_i`` is divided by the norm ``||h_i||`` (computed in chunks),
  which gives the same cosines without a normalised copy of a bank that may take
  gigabytes. Only the first tile of a stretch is divided in full; later tiles are
  compared with ``t * min ||h_i||`` first, and only the few products that pass are
  divided (the same division, so the same cosine).
* **Selection.** In the first tile of a stretch of the bank the ``k`` best entries of
  each row come from the maxima of column groups (:func:`_top_k`); they give each query
  a threshold, the ``k``-th best similarity so far. Every later tile is only compared
  with the thresholds: the few entries above them are merged into the running lists
  (:func:`_merge_hits`) and the thresholds rise. No later tile is partitioned, so the
  selection costs a few percent of the products (``benchmarks/``, row 1).
* **Ties.** When several training features share the ``k``-th largest similarity, the
  ones with the smaller training index are kept, so that exactly ``min(k, n_train)``
  neighbours vote and the result does not depend on the sorting algorithm. When two
  classes receive the same total vote, the smaller label wins (``argmax`` returns
  the first maximum). Votes of one class are added in increasing training index,
  except in rows whose two best totals lie within ``1e-12`` (relative): there each
  class's votes are re-added in decreasing weight, so that classes whose neighbours
  have exactly the same similarities (duplicated features) tie exactly.
* If ``k`` exceeds the number of training features, all of them vote.
"""

from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from itertools import islice

import numpy as np

from ._blocks import release_pages
from ._parallel import pool_size
from ._validation import (
    as_float_array,
    as_labels,
    as_sequence,
    check_int,
    check_positive,
    check_same_width,
    unit_rows,
)

__all__ = ["knn_classify", "knn_classify_curve"]


def auto_block_size(n_train, itemsize=8):
    """Rows of the test set per block by default (``_TILE_ROWS``, whatever the bank).

    The arguments are kept for the callers that chunk their queries in whole blocks.
    Public because the ``repeval`` command (:mod:`repeval_ref.cli._evaluate`) chunks its
    k-NN curve in blocks of this size, so that its numbers are those of
    :func:`knn_classify`.
    """
    return _TILE_ROWS


def _keep_mask(sims, k):
    """Boolean mask of the ``k`` largest entries of each row of ``sims``.

    Ties at the ``k``-th largest value are resolved toward the smaller column index.

    Parameters
    ----------
    sims : numpy.ndarray of shape (m, n)
        Similarities of one block, ``k < n``.
    k : int

    Returns
    -------
    numpy.ndarray of bool, shape (m, n), exactly ``k`` True entries per row.
    """
    n = sims.shape[1]
    # The k-th largest value of each row sits at position n - k after partitioning.
    cut = np.argpartition(sims, n - k, axis=1)[:, n - k]
    kth = sims[np.arange(sims.shape[0]), cut][:, None]
    above = sims > kth
    at = sims == kth
    # How many boundary entries each row still needs, taken in increasing index.
    need = k - above.sum(axis=1, keepdims=True)
    return above | (at & (np.cumsum(at, axis=1) <= need))


def _row_norms(X):
    """Euclidean norms of the rows of ``X``, in chunks of ~16 MB (no full-size temporary).

    Returns ``None`` when some row's norm cannot be trusted (zero, NaN or infinite: a
    NaN or infinite entry, or a sum of squares that under- or overflows: entries below
    about 1e-154 or above 1e154 in float64); so a finite result also proves every entry
    finite;
    the caller then falls back to :func:`repeval_ref._validation.unit_rows`, which
    rescales such rows first and rejects true zero rows.
    """
    norms = np.empty(X.shape[0], dtype=X.dtype)
    step = max(1, (16 * 2**20) // (X.itemsize * X.shape[1]))
    with np.errstate(over="ignore", under="ignore"):
        for lo in range(0, X.shape[0], step):
            norms[lo : lo + step] = np.linalg.norm(X[lo : lo + step], axis=1)
            release_pages(X)  # a memory-mapped bank keeps no more than a chunk resident
    info = np.finfo(X.dtype)
    if not np.all(np.isfinite(norms) & (norms >= np.sqrt(info.tiny) / info.eps)):
        return None
    return norms


def _top_k(sims, k):
    """Positions of the ``k`` largest entries of each row, ties toward the smaller column.

    Same selection as :func:`_keep_mask`, much faster on wide rows. The columns are cut
    into ``G >= k`` groups and ``t`` is the ``k``-th largest of the ``G`` group maxima:
    those ``k`` maxima are distinct entries ``>= t``, so ``t <= s_k`` (the ``k``-th
    largest entry) and the entries ``>= t`` contain the ``k`` neighbours and every
    entry tied with ``s_k``. Only these few candidates are sorted (value descending,
    then column ascending) and the first ``k`` of each row kept. If the candidates are
    many (massive ties), :func:`_top_k_partition` is used instead.

    Parameters
    ----------
    sims, k
        As for :func:`_keep_mask`: the (m, n) similarities of one block, ``k < n``.

    Returns
    -------
    rows, cols : numpy.ndarray of intp, shape (m * k,)
        Row-major: the rows in order, within a row increasing column index.
    """
    m, n = sims.shape
    n_groups = min(n, max(256, 4 * k))
    starts = np.linspace(0, n, n_groups, endpoint=False).astype(np.intp)
    group_max = np.maximum.reduceat(sims, starts, axis=1)
    g = group_max.shape[1]
    t = np.partition(group_max, g - k, axis=1)[:, g - k : g - k + 1]
    flat = np.flatnonzero(sims >= t)
    if flat.size > 16 * m * k:
        return _top_k_partition(sims, k)
    rows = flat // n
    cols = flat - rows * n
    order = np.lexsort((cols, -sims.ravel()[flat], rows))
    rows, cols = rows[order], cols[order]
    counts = np.bincount(rows, minlength=m)
    first = np.cumsum(counts) - counts
    keep = (np.arange(rows.size) - first[rows]) < k
    flat = np.sort(rows[keep] * n + cols[keep])  # back to row-major, increasing column
    rows = flat // n
    return rows, flat - rows * n


def _top_k_partition(sims, k):
    """Positions of the ``k`` largest entries of each row, ties toward the smaller column.

    Same selection as :func:`_keep_mask`, faster: the ``k``-th largest value ``s_k``
    of each row comes from ``np.partition`` (values only); the entries ``>= s_k`` are
    exactly the ``k`` largest unless several entries equal ``s_k``, and only such
    rows are passed through :func:`_keep_mask`. Takes ``sims`` (m, n) and ``k < n``
    and returns ``rows, cols`` (intp, shape (m * k,)) as :func:`_top_k` does.
    """
    m, n = sims.shape
    kth = np.partition(sims, n - k, axis=1)[:, n - k : n - k + 1]
    keep = sims >= kth
    # flat positions (one pass over the mask, much faster than a 2-D np.nonzero)
    flat = np.flatnonzero(keep)
    if flat.size > m * k:  # some row has more than k entries >= s_k: ties at s_k
        tied = np.flatnonzero(np.bincount(flat // n, minlength=m) > k)
        keep[tied] = _keep_mask(sims[tied], k)
        flat = np.flatnonzero(keep)
    rows = flat // n
    return rows, flat - rows * n


# The tiled search. One tile of similarities (query rows x bank columns) takes about
# _TILE_BYTES, so that it stays in the cache while it is divided by the bank's norms
# and compared with the running thresholds: with two workers, two tiles, their bank
# rows and masks take about 22 MB, inside a 32 MB L3 (8 MB tiles spill out of it;
# in one A/B run at 4,096 queries they were 2.5 % slower); _TILE_ROWS query rows make a block.
_TILE_BYTES = 4 * 2**20
_TILE_ROWS = 512
#: worker threads of the tiled search: None follows the BLAS's thread count; an int
#: forces it (tests force 2 to run the threaded path on any machine)
_WORKERS = None


def _merge_hits(best_v, best_i, rows, vals, cols, k):
    """Fold new candidates into the running top-``k`` lists, in place.

    ``best_v``, ``best_i`` (m, k) hold each query's current ``k`` best similarities and
    training indices, sorted by (similarity descending, index ascending). The new
    candidates ``rows, vals, cols`` (1-D) have larger indices than any in the lists, and
    those of one row come in increasing index. Each row that received candidates gets
    them appended after its list (padded with ``-inf``), and a stable sort on the
    similarity then keeps the smaller index first among equal similarities.
    """
    order = np.argsort(rows, kind="stable")
    rows, vals, cols = rows[order], vals[order], cols[order]
    sub, first, counts = np.unique(rows, return_index=True, return_counts=True)
    loc = np.repeat(np.arange(sub.size), counts)
    pos = np.arange(rows.size) - first[loc]
    new_v = np.full((sub.size, int(counts.max())), -np.inf, dtype=best_v.dtype)
    new_i = np.zeros(new_v.shape, dtype=best_i.dtype)
    new_v[loc, pos] = vals
    new_i[loc, pos] = cols
    cand_v = np.concatenate([best_v[sub], new_v], axis=1)
    cand_i = np.concatenate([best_i[sub], new_i], axis=1)
    take = np.argsort(-cand_v, axis=1, kind="stable")[:, :k]
    best_v[sub] = np.take_along_axis(cand_v, take, axis=1)
    best_i[sub] = np.take_along_axis(cand_i, take, axis=1)


def _candidates(raw, norms, t, offset, mask, pending, dense=False):
    """Append to ``pending`` the entries of a tile above each row's threshold ``t``.

    With ``norms`` (the tile's bank rows are not unit-length) the tile holds products
    ``raw`` and is not divided: an entry can only pass if ``raw > t * n_min`` (``t > 0``)
    or ``raw > t * n_max`` (``t <= 0``), ``n_min, n_max`` the extreme norms of the
    tile's bank rows. That test, widened by a few roundings, picks the few entries whose
    similarity ``raw / norm`` is then computed (the division of the scaled path, so the
    same value) and compared with ``t`` exactly. ``pending`` receives (rows, values,
    training indices), row-major.

    Each row's maximum is compared first, and only the rows whose maximum passes (the
    live rows) are searched, unless ``dense``: then the whole tile is compared at once
    (in the first tiles nearly every row is live, and the row maxima would be one more
    pass over the tile). Returns the number of live rows, from which the caller
    chooses ``dense`` for the next tile (thresholds only rise, so the number falls).
    """
    if norms is None:
        bound = t
    else:
        eps = 4 * np.finfo(raw.dtype).eps
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            bound = np.where(t > 0, t * norms.min() * (1 - eps), t * norms.max() * (1 + eps))
        bound = bound.astype(raw.dtype)
    m, w = raw.shape
    if dense:
        n_live = None
    else:
        # Rows whose largest entry does not pass have no candidate: one reduction per
        # row (no mask written) settles most rows once the thresholds have risen.
        live = np.flatnonzero(raw.max(axis=1) > bound)
        n_live = live.size
        if n_live == 0:
            return 0
    # Many live rows: compare the whole tile (no entry of a settled row can pass, so
    # they add nothing); copying the live rows out would cost more than comparing the
    # others. Few live rows: compare a copy of just those.
    if dense or 8 * n_live >= m:
        np.greater(raw, bound[:, None], out=mask)
        hit = np.flatnonzero(mask)
        rows = hit // w
        cols = hit - rows * w
        vals = raw.ravel()[hit]
        if n_live is None:
            n_live = int(np.count_nonzero(np.bincount(rows, minlength=m)))
    else:
        sub = raw[live]
        part = mask[:n_live]
        np.greater(sub, bound[live][:, None], out=part)
        hit = np.flatnonzero(part)
        rows = hit // w
        cols = hit - rows * w
        vals = sub.ravel()[hit]
        rows = live[rows]
    if norms is not None:
        vals = vals / norms[cols]
        keep = vals > t[rows]
        rows, vals, cols = rows[keep], vals[keep], cols[keep]
    if rows.size:
        pending.append((rows, vals, cols + offset))
    return n_live


def _block_neighbours(queries, bank, norms, k, width, offset=0, scratch=None):
    """The ``k`` nearest bank rows of each query, over tiles of ``width`` bank rows.

    If the first tile is wider than ``k``, its ``k`` best come from :func:`_top_k`;
    otherwise the lists start empty (similarity ``-inf``). The ``k``-th entry of a
    query's list is its threshold ``t``, the ``k``-th best similarity seen so far. In
    every later tile only the entries ``> t`` can enter the top ``k`` (an entry equal to
    ``t`` has a larger index than the ``k`` kept entries ``>= t``, so it loses the tie),
    so one comparison with ``t`` finds the few candidates, which :func:`_merge_hits`
    folds in once about ``m`` have gathered; ``t`` only grows, and a ``t`` that is not yet
    updated only admits more candidates, never loses one. No tile is partitioned or
    sorted after the first.

    Parameters
    ----------
    queries : numpy.ndarray of shape (m, d)
        Unit-length queries.
    bank : numpy.ndarray of shape (n, d)
        A stretch of the stored features; its rows are the training indices
        ``offset .. offset + n - 1``.
    norms : numpy.ndarray of shape (n,) or None
        Their norms (``None``: the bank is already unit-length).
    k : int
        Neighbours kept per query.
    width : int
        Bank rows per tile.
    offset : int
        Training index of ``bank[0]``.
    scratch : dict, optional
        Buffers kept from an earlier call on the same thread (``"tile"``, ``"mask"``),
        reused when large enough: a fresh multi-megabyte buffer costs its page faults
        every time (on a kernel that backs it with huge pages, several ms per tile).

    Returns
    -------
    vals, cols : numpy.ndarray of shape (m, k)
        Similarities and training indices of each query's ``k`` neighbours in the
        stretch, sorted by (similarity descending, index ascending): the set
        :func:`_top_k` keeps over the whole row, ties at the ``k``-th similarity toward
        the smaller index. If the stretch has fewer than ``k`` rows, the lists end with
        entries of similarity ``-inf`` (index ``offset + n``).
    """
    m, n = queries.shape[0], bank.shape[0]
    size = m * min(width, n)
    scratch = {} if scratch is None else scratch
    buf = scratch.get("tile")
    if buf is None or buf.size < size or buf.dtype != queries.dtype:
        buf = scratch["tile"] = np.empty(size, dtype=queries.dtype)
        scratch["mask"] = np.empty(size, dtype=bool)
    mask = scratch["mask"]
    best_v = np.full((m, k), -np.inf, dtype=queries.dtype)
    best_i = np.full((m, k), offset + n, dtype=np.intp)
    pending = []
    dense = True
    for c0 in range(0, n, width):
        c1 = min(n, c0 + width)
        w = c1 - c0
        tile = buf[: m * w].reshape(m, w)
        np.matmul(queries, bank[c0:c1].T, out=tile)
        scale = None if norms is None else norms[c0:c1]
        if c0 == 0 and scale is not None:
            np.divide(tile, scale, out=tile)  # the first tile is scaled in full
            scale = None
        if c0 == 0 and k < w:  # the first tile's k best, without sorting the tile
            rows, cols = _top_k(tile, k)
            vals, cols = tile[rows, cols].reshape(m, k), cols.reshape(m, k)
            order = np.argsort(-vals, axis=1, kind="stable")  # ties keep increasing index
            best_v = np.take_along_axis(vals, order, axis=1)
            best_i = np.take_along_axis(cols, order, axis=1) + offset
            continue
        n_live = _candidates(
            tile, scale, best_v[:, k - 1], c0 + offset, mask[: m * w].reshape(m, w), pending, dense
        )
        dense = 2 * n_live >= m  # most rows still live: skip the row maxima next time
        # Candidates wait until there are about as many as queries: merging less often
        # is cheaper, and a threshold that rises later only lets a few more entries in.
        if pending and (sum(p[0].size for p in pending) >= m or c1 == n):
            rows, vals, cols = (np.concatenate(a) for a in zip(*pending))
            _merge_hits(best_v, best_i, rows, vals, cols, k)
            pending = []
    return best_v, best_i


def knn_classify(
    train_h,
    train_y,
    test_h,  # bank, its labels, queries
    k,
    tau,
    n_classes,
    *,
    block_size=None,
    dtype=np.float64,
):
    """Predict labels by the temperature-weighted vote of the ``k`` nearest neighbours.

    Parameters
    ----------
    train_h : array_like of shape (n_train, d)
        Stored (training) features; no row may be zero.
    train_y : array_like of int, shape (n_train,)
        Their labels, each in ``0 .. n_classes - 1``.
    test_h : array_like of shape (n_test, d)
        Query features; no row may be zero.
    k : int
        Number of neighbours, ``k >= 1``. If ``k > n_train`` every training
        feature votes.
    tau : float
        Temperature, ``tau > 0``. Small ``tau`` tends to 1-NN, large ``tau`` to an
        unweighted vote of the ``k`` neighbours.
    n_classes : int
        Number of classes ``K >= 1``; predictions lie in ``0 .. K - 1``.
    block_size : int, optional
        Test rows per block (default 512); a tile of similarities holds about 4 MB, so
        its number of bank columns follows from it. The predictions do not depend on
        it, except through the last-bit rounding of the similarity products (see Notes).
    dtype : {numpy.float64, numpy.float32}
        Precision of the unit features and similarities (default float64).

    Returns
    -------
    numpy.ndarray of int64, shape (n_test,)
        ``argmax_c sum_{i in N_k} exp(s_i / tau) [y_i = c]`` for each test row,
        ties toward the smaller label; neighbours tied at the ``k``-th similarity are
        taken in increasing training index.

    Raises
    ------
    ValueError
        On empty banks, mismatched lengths or feature dimensions, NaN/inf entries,
        zero rows, ``k < 1``, ``tau <= 0``, ``n_classes < 1``, labels outside
        ``0 .. n_classes - 1`` or ``block_size < 1``.
    TypeError
        On non-numeric input, a non-integer ``k``/``n_classes``/``block_size`` or an
        unsupported ``dtype``.

    Notes
    -----
    Book ``book/knn.md``; seed 000, "The weighted k-NN classifier".

    Ties are settled exactly on the computed similarities. Where two stored rows are
    equal in exact arithmetic (duplicated real-valued features, or one a positive
    multiple of the other), the matrix product may round their similarities
    differently in the last bit, depending on where they sit in the bank and on the
    BLAS library; the boundary rule (smaller training index) then applies only if the
    rounded values are equal. Integer-valued features, whose products are exact, always
    follow the rule.
    """
    k = check_int(k, "k", minimum=1)
    tau = check_positive(tau, "tau")
    n_test, n_train, train_y, n_classes, blocks = _neighbour_blocks(
        train_h, train_y, test_h, n_classes, block_size, dtype, k
    )
    pred = np.empty(n_test, dtype=np.int64)
    for start, stop, vals, cols in blocks:
        m, per_row = cols.shape
        order = np.argsort(cols, axis=1)  # votes are added in increasing training index
        cols = np.take_along_axis(cols, order, axis=1).ravel()
        kept = np.take_along_axis(vals, order, axis=1).ravel()
        rows = np.repeat(np.arange(m), per_row)
        pred[start:stop] = _vote(kept, rows, train_y[cols], m, tau, n_classes)
    return pred


def _neighbour_blocks(train_h, train_y, test_h, n_classes, block_size, dtype, k):
    """Validate the banks; return their sizes and an iterator over each block's neighbours.

    Shared by :func:`knn_classify` and :func:`knn_classify_curve`, so that both see
    bitwise the same similarities (same normalisation, same tiles). The arguments are
    checked here, before any tile is computed.

    Returns
    -------
    n_test, n_train : int
    train_y : numpy.ndarray of int64, shape (n_train,)
        Validated labels.
    n_classes : int
    blocks : iterator of (start, stop, vals, cols)
        ``vals`` and ``cols`` of shape (stop - start, min(k, n_train)): the cosine
        similarities and training indices of the nearest neighbours of the queries
        ``start:stop``, each row sorted by (similarity descending, index ascending).
    """
    try:
        dtype = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"dtype must be float32 or float64, got {dtype!r}") from exc
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"dtype must be float32 or float64, got {dtype}")
    # The bank's NaN/inf check comes from its row norms below (a norm is finite only
    # if every entry of its row is), which saves a pass over the largest input.
    train_h = as_float_array(train_h, "train_h", dtype=dtype, allow_nonfinite=True)
    test_h = as_float_array(test_h, "test_h", dtype=dtype)
    check_same_width(test_h, train_h, "test_h", "train_h")
    n_classes = check_int(n_classes, "n_classes", minimum=1)
    train_y = as_labels(train_y, "train_y", n=train_h.shape[0], n_classes=n_classes)
    if block_size is not None:
        block_size = check_int(block_size, "block_size", minimum=1)

    bank_norms = _row_norms(train_h)
    if bank_norms is None:  # non-finite entries, extreme magnitudes or a zero row
        if not np.all(np.isfinite(train_h)):
            raise ValueError("train_h contains NaN or infinite values")
        train_h = unit_rows(train_h, "train_h")  # normalise a copy instead
    queries = unit_rows(test_h, "test_h")
    n_train, n_test = train_h.shape[0], queries.shape[0]
    if block_size is None:
        block_size = auto_block_size(n_train, dtype.itemsize)
    k = min(k, n_train)
    width = max(1, _TILE_BYTES // (dtype.itemsize * block_size))
    n_tiles = -(-n_train // width)
    workers = max(1, int(_WORKERS)) if _WORKERS is not None else pool_size()
    starts = list(range(0, n_test, block_size))
    # Fewer blocks than workers: each block's bank is cut into stretches of whole tiles.
    n_seg = max(1, min(n_tiles, workers // len(starts)))
    edges = [width * (n_tiles * j // n_seg) for j in range(n_seg)] + [n_train]
    units = [(start, lo, hi) for start in starts for lo, hi in zip(edges[:-1], edges[1:])]

    per_thread = threading.local()  # each worker's tile and mask, reused across units

    def search(unit):
        start, lo, hi = unit
        if not hasattr(per_thread, "scratch"):
            per_thread.scratch = {}
        found = _block_neighbours(
            queries[start : start + block_size],
            train_h[lo:hi],
            None if bank_norms is None else bank_norms[lo:hi],
            k,
            width,
            lo,
            scratch=per_thread.scratch,
        )
        release_pages(train_h)  # a memory-mapped bank's pages go back after each sweep
        return found

    def blocks():
        from threadpoolctl import threadpool_limits

        with (
            threadpool_limits(limits=1, user_api="blas"),
            ThreadPoolExecutor(max_workers=workers) as pool,
        ):
            todo = iter(units)
            running = deque(pool.submit(search, u) for u in islice(todo, 2 * workers))
            for start in starts:
                parts = []
                for _ in range(n_seg):
                    parts.append(running.popleft().result())
                    nxt = next(todo, None)
                    if nxt is not None:
                        running.append(pool.submit(search, nxt))
                vals, cols = parts[0] if n_seg == 1 else _merge_stretches(parts, k)
                yield start, min(start + block_size, n_test), vals, cols

    return n_test, n_train, train_y, n_classes, blocks()


def _merge_stretches(parts, k):
    """The ``k`` best of per-stretch neighbour lists given in increasing index order."""
    vals = np.concatenate([p[0] for p in parts], axis=1)
    cols = np.concatenate([p[1] for p in parts], axis=1)
    # a stable sort on the similarity keeps the smaller indices first among equals
    order = np.argsort(-vals, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(vals, order, axis=1), np.take_along_axis(cols, order, axis=1)


def _vote(kept, rows, labels, m, tau, n_classes):
    """Weighted vote of one block's kept neighbours.

    ``kept``, ``rows`` and ``labels`` list every kept neighbour row-major, in
    increasing training index within a row (the order ``np.bincount`` adds them in).
    Returns the predicted label of each of the ``m`` rows.
    """
    # The row maximum is always among the kept neighbours, exactly
    # min(k, n_train) of them per row.
    row_max = kept.reshape(m, -1).max(axis=1)
    with np.errstate(under="ignore"):  # far neighbours' weights may flush to 0
        weights = np.exp((kept - row_max[rows]) / tau)
    votes = np.bincount(
        rows * n_classes + labels, weights=weights, minlength=m * n_classes
    ).reshape(m, n_classes)
    if n_classes > 1:
        settle_near_ties(votes, labels, weights, n_classes)
    return np.argmax(votes, axis=1)


def knn_classify_curve(
    train_h,
    train_y,
    test_h,  # bank, its labels, queries
    ks,
    tau,
    n_classes,
    *,
    block_size=None,
    dtype=np.float64,
):
    """:func:`knn_classify` for several ``k`` at once, from one pass over the similarities.

    For each block of queries the similarities are computed once and the
    ``max(ks)`` nearest neighbours of each query are found once, ordered by
    similarity (descending) and then training index (ascending). The neighbours of a
    smaller ``k`` are the first ``k`` of that order, which is exactly the set
    :func:`knn_classify` keeps (ties at the ``k``-th similarity toward the smaller
    training index); their votes are then added in the same order as there, so the
    predictions for each ``k`` equal those of a separate :func:`knn_classify` call with
    that ``k``, bit for bit (DINOv2's k-NN evaluation takes the same top-max-k route).

    Parameters
    ----------
    train_h, train_y, test_h : array_like
        As for :func:`knn_classify`: the (n_train, d) stored features, their (n_train,)
        labels in ``0 .. n_classes - 1`` and the (n_test, d) queries; no row may be zero.
    ks : sequence of int
        Neighbour counts, each ``>= 1``, in any order (repeats allowed). A ``k`` above
        ``n_train`` lets every training feature vote, as in :func:`knn_classify`.
    tau : float
        Temperature, ``tau > 0``.
    n_classes : int
        Number of classes ``K >= 1``.
    block_size : int, optional
        Test rows per block; as in :func:`knn_classify` (the same default, so that the
        similarity products are the same).
    dtype : {numpy.float64, numpy.float32}
        Precision of the unit features and similarities (default float64).

    Returns
    -------
    numpy.ndarray of int64, shape (len(ks), n_test)
        Row ``j`` holds the predictions for ``ks[j]``.

    Raises
    ------
    ValueError
        As :func:`knn_classify`, and when ``ks`` is empty or holds a ``k < 1``.
    TypeError
        As :func:`knn_classify`, and when ``ks`` is not a sequence of integers.

    Notes
    -----
    Book ``book/knn.md``; seed 000, "The weighted k-NN classifier". Time: one
    similarity product and one top-``max(ks)`` selection per block, then
    ``O(n_test max(ks))`` work per ``k`` instead of a full pass per ``k``.
    """
    ks = [
        check_int(k, f"ks[{i}]", minimum=1) for i, k in enumerate(as_sequence(ks, "ks", "integers"))
    ]
    if not ks:
        raise ValueError("ks is empty; give at least one number of neighbours")
    tau = check_positive(tau, "tau")
    n_test, n_train, train_y, n_classes, blocks = _neighbour_blocks(
        train_h, train_y, test_h, n_classes, block_size, dtype, max(ks)
    )
    out = np.empty((len(ks), n_test), dtype=np.int64)
    k_top = min(max(ks), n_train)
    for start, stop, ranked_vals, ranked_cols in blocks:
        m = stop - start
        # the blocks come in (similarity descending, index ascending) order, so the
        # position in a row is the rank; re-ordered by training index, rank[j] is the
        # rank of the j-th kept neighbour
        rank = np.argsort(ranked_cols, axis=1)
        cols = np.take_along_axis(ranked_cols, rank, axis=1).ravel()
        vals = np.take_along_axis(ranked_vals, rank, axis=1)
        rows = np.repeat(np.arange(m), k_top)
        labels_all = train_y[cols]
        rank = rank.ravel()
        for j, k in enumerate(ks):
            if k >= k_top:  # all k_top kept neighbours vote
                sel = slice(None)
            else:
                sel = rank < k  # keeps row-major, increasing-index order
            out[j, start:stop] = _vote(
                vals.ravel()[sel], rows[sel], labels_all[sel], m, tau, n_classes
            )
    return out


def settle_near_ties(votes, labels, weights, n_classes):
    """Re-add, in place, the votes of rows whose two best classes (nearly) tie.

    ``np.bincount`` adds in input order (training index), so two classes whose
    neighbours have exactly the same similarities (duplicated training features) can
    end one rounding apart and the larger label would win. For rows whose two largest
    totals lie within ``1e-12`` (relative) of each other, each class's weights are
    re-added in decreasing order: equal sets of weights then give bitwise equal
    totals, and the exact tie goes to the smaller label. Other rows are untouched.

    Public because the PyTorch k-NN (:func:`repeval_ref.torch.knn.knn_classify_torch`)
    settles its ties with the same step, so that both give the same labels.

    Parameters
    ----------
    votes : numpy.ndarray of shape (m, n_classes)
        Totals of one block, modified in place.
    labels, weights : numpy.ndarray of shape (m * per_row,)
        Row-major label and weight of every kept neighbour.
    n_classes : int
    """
    m = votes.shape[0]
    top2 = np.partition(votes, n_classes - 2, axis=1)[:, n_classes - 2 :]
    near = np.flatnonzero(top2[:, 1] - top2[:, 0] <= 1e-12 * top2[:, 1])
    if near.size == 0:
        return
    per_row = weights.size // m
    w = weights.reshape(m, per_row)[near]
    lab = labels.reshape(m, per_row)[near]
    order = np.argsort(-w, axis=1, kind="stable")
    w = np.take_along_axis(w, order, axis=1)
    lab = np.take_along_axis(lab, order, axis=1)
    slot = np.arange(near.size)[:, None] * n_classes + lab
    votes[near] = np.bincount(
        slot.ravel(), weights=w.ravel(), minlength=near.size * n_classes
    ).reshape(near.size, n_classes)
