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
* **Blocks.** The test set is processed in blocks of rows so that the similarity
  matrix of one block takes about 128 MB in the chosen precision (its temporaries, a
  partitioned copy and a boolean mask, about as much again); the full
  ``n_test x n_train`` matrix never exists. For ImageNet's 1.28M-image bank a float64
  block holds 13 test rows (float32: 26). ``block_size`` overrides the automatic
  choice. The block size never changes the predictions.
* **No copy of the bank.** The queries are scaled to unit length; the bank is not:
  each block of products ``hat h^T h_i`` is divided by the norms ``||h_i||`` (computed
  in chunks), which gives the same cosines without a normalised copy of a bank that
  may take gigabytes. Together with the larger blocks this lets the matrix products
  run on more query rows at a time (``benchmarks/``, row 1).
* **Selection.** ``np.partition`` finds the ``k``-th largest similarity ``s_k`` of each
  row; the entries ``>= s_k`` are the ``k`` neighbours unless several entries tie at
  ``s_k``. Only those rows (rare with real features) go through the slower exact
  tie-breaking mask. This is several times faster than building the tie-breaking
  mask for every row (``benchmarks/``, row 1).
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

import numpy as np

from ._validation import as_float_array, as_labels, check_int, check_positive, unit_rows

__all__ = ["knn_classify", "knn_classify_curve"]

# Memory for one block's similarity matrix (in the precision of the computation). The
# temporaries of a block (a partitioned copy, a boolean mask) take about as much again,
# so the peak stays a few hundred MB whatever the size of the test set.
_BLOCK_BUDGET_BYTES = 128 * 2**20


def _auto_block_size(n_train, itemsize=8):
    """Rows of the test set per block so that one block's similarities take ~128 MB."""
    return max(1, _BLOCK_BUDGET_BYTES // (itemsize * n_train))


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

    Returns ``None`` when some row's norm cannot be trusted (zero, or a sum of squares
    that under- or overflows: entries below about 1e-154 or above 1e154 in float64);
    the caller then falls back to :func:`repeval_ref._validation.unit_rows`, which
    rescales such rows first and rejects true zero rows.
    """
    norms = np.empty(X.shape[0], dtype=X.dtype)
    step = max(1, (16 * 2**20) // (X.itemsize * X.shape[1]))
    with np.errstate(over="ignore", under="ignore"):
        for lo in range(0, X.shape[0], step):
            norms[lo:lo + step] = np.linalg.norm(X[lo:lo + step], axis=1)
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
    sims : numpy.ndarray of shape (m, n)
        Similarities of one block, ``k < n``.
    k : int

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
    t = np.partition(group_max, g - k, axis=1)[:, g - k:g - k + 1]
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
    rows are passed through :func:`_keep_mask`.

    Parameters
    ----------
    sims : numpy.ndarray of shape (m, n)
        Similarities of one block, ``k < n``.
    k : int

    Returns
    -------
    rows, cols : numpy.ndarray of intp, shape (m * k,)
        Row-major: the rows in order, within a row increasing column index.
    """
    m, n = sims.shape
    kth = np.partition(sims, n - k, axis=1)[:, n - k:n - k + 1]
    keep = sims >= kth
    # flat positions (one pass over the mask, much faster than a 2-D np.nonzero)
    flat = np.flatnonzero(keep)
    if flat.size > m * k:  # some row has more than k entries >= s_k: ties at s_k
        tied = np.flatnonzero(np.bincount(flat // n, minlength=m) > k)
        keep[tied] = _keep_mask(sims[tied], k)
        flat = np.flatnonzero(keep)
    rows = flat // n
    return rows, flat - rows * n


def knn_classify(train_h, train_y, test_h,  # bank, its labels, queries
                 k, tau, n_classes, *, block_size=None,
                 dtype=np.float64):
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
        Test rows per block. By default it is chosen so that one block's similarities
        take about 128 MB. The predictions do not depend on it, except through the
        last-bit rounding of the similarity products (see Notes).
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
    n_test, n_train, train_y, n_classes, blocks = _similarity_blocks(
        train_h, train_y, test_h, n_classes, block_size, dtype)
    pred = np.empty(n_test, dtype=np.int64)
    for start, stop, sims in blocks:
        m = stop - start
        if k < n_train:
            rows, cols = _top_k(sims, k)  # row-major: increasing training index
        else:
            rows = np.repeat(np.arange(m), n_train)
            cols = np.tile(np.arange(n_train), m)
        pred[start:stop] = _vote(sims[rows, cols], rows, train_y[cols], m, tau, n_classes)
    return pred


def _similarity_blocks(train_h, train_y, test_h, n_classes, block_size, dtype):
    """Validate the banks; return their sizes and an iterator over similarity blocks.

    Shared by :func:`knn_classify` and :func:`knn_classify_curve`, so that both see
    bitwise the same similarities (same normalisation, same block boundaries). The
    arguments are checked here, before any block is computed.

    Returns
    -------
    n_test, n_train : int
    train_y : numpy.ndarray of int64, shape (n_train,)
        Validated labels.
    n_classes : int
    blocks : iterator of (start, stop, sims)
        ``sims`` of shape (stop - start, n_train): cosine similarities of the queries
        ``start:stop`` to every stored feature.
    """
    try:
        dtype = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"dtype must be float32 or float64, got {dtype!r}") from exc
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"dtype must be float32 or float64, got {dtype}")
    train_h = as_float_array(train_h, "train_h", dtype=dtype)
    test_h = as_float_array(test_h, "test_h", dtype=dtype)
    if test_h.shape[1] != train_h.shape[1]:
        raise ValueError(
            f"test_h has {test_h.shape[1]} features but train_h has {train_h.shape[1]}"
        )
    n_classes = check_int(n_classes, "n_classes", minimum=1)
    train_y = as_labels(train_y, "train_y", n=train_h.shape[0], n_classes=n_classes)
    if block_size is not None:
        block_size = check_int(block_size, "block_size", minimum=1)

    bank_norms = _row_norms(train_h)
    if bank_norms is None:  # extreme magnitudes or a zero row: normalise a copy instead
        train_h = unit_rows(train_h, "train_h")
    queries = unit_rows(test_h, "test_h")
    n_train, n_test = train_h.shape[0], queries.shape[0]
    if block_size is None:
        block_size = _auto_block_size(n_train, dtype.itemsize)

    def blocks():
        for start in range(0, n_test, block_size):
            stop = min(start + block_size, n_test)
            sims = queries[start:stop] @ train_h.T  # (m, n_train): hat h^T h_i
            if bank_norms is not None:
                np.divide(sims, bank_norms, out=sims)  # cosine similarities hat h^T hat h_i
            yield start, stop, sims

    return n_test, n_train, train_y, n_classes, blocks()


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
        _settle_near_ties(votes, labels, weights, n_classes)
    return np.argmax(votes, axis=1)


def knn_classify_curve(train_h, train_y, test_h,  # bank, its labels, queries
                       ks, tau, n_classes, *, block_size=None, dtype=np.float64):
    """:func:`knn_classify` for several ``k`` at once, from one pass over the similarities.

    For each block of queries the similarities are computed once and the
    ``max(ks)`` nearest neighbours of each query are found once, ordered by
    similarity (descending) and then training index (ascending). The neighbours of a
    smaller ``k`` are the first ``k`` of that order, which is exactly the set
    :func:`knn_classify` keeps (ties at the ``k``-th similarity toward the smaller
    training index); their votes are then added in the same order as there, so the
    predictions equal ``knn_classify(train_h, train_y, test_h, k, tau, n_classes)`` for
    every ``k``, bit for bit (DINOv2's k-NN evaluation takes the same top-max-k route).

    Parameters
    ----------
    train_h : array_like of shape (n_train, d)
        Stored (training) features; no row may be zero.
    train_y : array_like of int, shape (n_train,)
        Their labels, each in ``0 .. n_classes - 1``.
    test_h : array_like of shape (n_test, d)
        Query features; no row may be zero.
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
    if isinstance(ks, (str, bytes)) or not hasattr(ks, "__iter__"):
        raise TypeError(f"ks must be a sequence of integers, got {ks!r}")
    ks = [check_int(k, f"ks[{i}]", minimum=1) for i, k in enumerate(ks)]
    if not ks:
        raise ValueError("ks is empty; give at least one number of neighbours")
    tau = check_positive(tau, "tau")
    n_test, n_train, train_y, n_classes, blocks = _similarity_blocks(
        train_h, train_y, test_h, n_classes, block_size, dtype)
    out = np.empty((len(ks), n_test), dtype=np.int64)
    for start, stop, sims in blocks:
        m = stop - start
        k_top = min(max(ks), n_train)
        if k_top < n_train:
            rows, cols = _top_k(sims, k_top)  # row-major, increasing training index
        else:
            rows = np.repeat(np.arange(m), n_train)
            cols = np.tile(np.arange(n_train), m)
        vals = sims[rows, cols].reshape(m, k_top)
        col2 = cols.reshape(m, k_top)
        # rank of each kept neighbour in (similarity descending, index ascending) order
        order = np.lexsort((col2, -vals), axis=1)
        rank = np.empty_like(order)
        np.put_along_axis(rank, order, np.arange(k_top)[None, :], axis=1)
        labels_all = train_y[cols]
        rank = rank.ravel()
        for j, k in enumerate(ks):
            if k >= k_top:  # all k_top kept neighbours vote
                sel = slice(None)
            else:
                sel = rank < k  # keeps row-major, increasing-index order
            out[j, start:stop] = _vote(vals.ravel()[sel], rows[sel], labels_all[sel], m, tau, n_classes)
    return out


def _settle_near_ties(votes, labels, weights, n_classes):
    """Re-add, in place, the votes of rows whose two best classes (nearly) tie.

    ``np.bincount`` adds in input order (training index), so two classes whose
    neighbours have exactly the same similarities (duplicated training features) can
    end one rounding apart and the larger label would win. For rows whose two largest
    totals lie within ``1e-12`` (relative) of each other, each class's weights are
    re-added in decreasing order: equal sets of weights then give bitwise equal
    totals, and the exact tie goes to the smaller label. Other rows are untouched.

    Parameters
    ----------
    votes : numpy.ndarray of shape (m, n_classes)
        Totals of one block, modified in place.
    labels, weights : numpy.ndarray of shape (m * per_row,)
        Row-major label and weight of every kept neighbour.
    n_classes : int
    """
    m = votes.shape[0]
    top2 = np.partition(votes, n_classes - 2, axis=1)[:, n_classes - 2:]
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
