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
  matrix of one block takes about 64 MB (its temporaries, partition indices, tie
  counts and masks, a small multiple of that); the full ``n_test x n_train`` matrix
  never exists. For ImageNet's 1.28M-image bank a block holds 6 test rows. ``block_size``
  overrides the automatic choice. The block size never changes the predictions.
* **Ties.** When several training features share the ``k``-th largest similarity, the
  ones with the smaller training index are kept, so that exactly ``min(k, n_train)``
  neighbours vote and the result does not depend on the sorting algorithm. When two
  classes receive the same total vote, the smaller label wins (``argmax`` returns
  the first maximum). Votes of one class are added in increasing training index.
* If ``k`` exceeds the number of training features, all of them vote.
"""
from __future__ import annotations

import numpy as np

from ._validation import as_float_array, as_labels, check_int, check_positive, unit_rows

__all__ = ["knn_classify"]

# Memory for one block's similarity matrix (counted as float64 entries). The
# temporaries of a block (partition indices, tie counts, masks) take a small multiple
# of it, so the peak stays a few hundred MB whatever the size of the test set.
_BLOCK_BUDGET_BYTES = 64 * 2**20


def _auto_block_size(n_train):
    """Rows of the test set per block so that one block's similarities take ~64 MB."""
    return max(1, _BLOCK_BUDGET_BYTES // (8 * n_train))


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


def knn_classify(train_h, train_y, test_h, k, tau, n_classes, *, block_size=None,
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
        take about 64 MB. Any value gives the same predictions.
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
    k = check_int(k, "k", minimum=1)
    tau = check_positive(tau, "tau")
    n_classes = check_int(n_classes, "n_classes", minimum=1)
    train_y = as_labels(train_y, "train_y", n=train_h.shape[0], n_classes=n_classes)
    if block_size is not None:
        block_size = check_int(block_size, "block_size", minimum=1)

    bank = unit_rows(train_h, "train_h")
    queries = unit_rows(test_h, "test_h")
    n_train, n_test = bank.shape[0], queries.shape[0]
    if block_size is None:
        block_size = _auto_block_size(n_train)

    pred = np.empty(n_test, dtype=np.int64)
    for start in range(0, n_test, block_size):
        stop = min(start + block_size, n_test)
        sims = queries[start:stop] @ bank.T  # (m, n_train) cosine similarities
        m = stop - start
        if k < n_train:
            keep = _keep_mask(sims, k)
            rows, cols = np.nonzero(keep)  # row-major: increasing training index
        else:
            rows = np.repeat(np.arange(m), n_train)
            cols = np.tile(np.arange(n_train), m)
        kept = sims[rows, cols]
        # The row maximum is always among the kept neighbours.
        row_max = sims.max(axis=1)
        with np.errstate(under="ignore"):  # far neighbours' weights may flush to 0
            weights = np.exp((kept - row_max[rows]) / tau)
        votes = np.bincount(
            rows * n_classes + train_y[cols], weights=weights, minlength=m * n_classes
        ).reshape(m, n_classes)
        pred[start:stop] = np.argmax(votes, axis=1)
    return pred
