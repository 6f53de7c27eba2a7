"""Low-shot evaluation by nearest class mean, averaged over random support sets.

Book: chapter ``book/noise.md`` (low-shot evaluation and its spread over draws); seed
000, sections "Few labels, many tasks, every pixel" and the core exercise "Low-shot
evaluation with honest error bars".

Every feature is scaled to unit length. One *draw* picks, for each class ``c`` of
``np.unique(train_y)`` in increasing order, the support set::

    members_c = np.flatnonzero(train_y == c)
    support_c = rng.choice(members_c, size=n_per_class, replace=False)

(the only random call), averages the unit features of ``support_c`` into a class mean
``m_c`` and rescales it to unit length. A test feature ``hat h`` is assigned the class
``argmax_c hat h^T m_c`` (ties toward the smaller class) and the draw's accuracy is
recorded. The result is the mean accuracy over draws and the sample standard
deviation (``ddof=1``) over draws: how far one evaluation with one draw may land from
another, not the standard error of the mean (smaller by ``sqrt(n_draws)``).

Only the support rows of each draw are unit-normalised (in float64, row by row, so the
class means are those of normalising every training row first); the training features
are read in their own dtype and checked for zero rows a block of rows at a time, so a
float32 memory map is never copied whole.
"""

from __future__ import annotations

import numpy as np

from ._blocks import iter_rows
from ._validation import as_train_test, check_int, check_rng, unit_rows

__all__ = ["low_shot_eval"]


def low_shot_eval(
    train_h,
    train_y,  # pool the support sets are drawn from
    test_h,
    test_y,
    n_per_class,
    n_draws,
    rng,
):
    """Mean and spread of nearest-class-mean accuracy over random support draws.

    Parameters
    ----------
    train_h : array_like of shape (n_train, d)
        Pool of labelled features the support sets are drawn from; no zero rows.
    train_y : array_like of int, shape (n_train,)
        Their labels (non-negative integers, need not be contiguous).
    test_h : array_like of shape (n_test, d)
        Test features; no zero rows.
    test_y : array_like of int, shape (n_test,)
        Test labels; each must occur in ``train_y``.
    n_per_class : int
        Support images per class, ``1 <= n_per_class <= `` the smallest class size.
    n_draws : int
        Number of support draws, ``>= 2`` (a sample standard deviation needs two).
    rng : numpy.random.Generator or int
        Source of the draws; it is advanced by exactly ``n_draws * n_classes`` calls
        ``rng.choice(..., size=n_per_class, replace=False)``. An int is used as the
        seed of ``np.random.default_rng``.

    Returns
    -------
    mean_accuracy : float
        Average over draws of the nearest-class-mean accuracy.
    std_accuracy : float
        Sample standard deviation (``ddof=1``) of the per-draw accuracies.

    Raises
    ------
    ValueError
        Mismatched lengths or dimensions, NaN/inf, zero feature vectors, negative
        labels, ``n_per_class`` outside
        ``1 .. smallest class size`` (the class is named), ``n_draws < 2``, or a
        support set whose mean is the zero vector (no direction to compare with).
    TypeError
        Non-numeric input, non-integer counts, or an ``rng`` that is neither a
        Generator nor an int.

    Notes
    -----
    Book ``book/noise.md``; seed 000, "Low-shot evaluation with honest error bars".
    """
    train_h, train_y, test_h, test_y = as_train_test(train_h, train_y, test_h, test_y, dtype=None)
    n_per_class = check_int(n_per_class, "n_per_class", minimum=1)
    n_draws = check_int(n_draws, "n_draws", minimum=2)
    rng = check_rng(rng, "rng")

    classes, sizes = np.unique(train_y, return_counts=True)
    smallest = int(np.argmin(sizes))
    if n_per_class > sizes[smallest]:
        raise ValueError(
            f"n_per_class={n_per_class} exceeds the {sizes[smallest]} example(s) of "
            f"class {classes[smallest]} in train_y"
        )
    _refuse_zero_rows(train_h, "train_h")
    test_u = unit_rows(np.asarray(test_h, dtype=np.float64), "test_h")
    members = [np.flatnonzero(train_y == c) for c in classes]

    accuracies = np.empty(n_draws, dtype=np.float64)
    for draw in range(n_draws):
        means = np.empty((classes.size, train_h.shape[1]))
        for j, idx in enumerate(members):
            support = rng.choice(idx, size=n_per_class, replace=False)
            rows = np.asarray(train_h[support], dtype=np.float64)
            means[j] = unit_rows(rows, "train_h").mean(axis=0)
        norms = np.linalg.norm(means, axis=1, keepdims=True)
        if np.any(norms == 0):
            c = classes[int(np.flatnonzero(norms[:, 0] == 0)[0])]
            raise ValueError(
                f"train_h: in draw {draw} the support features of class {c} average to "
                f"the zero vector, which cannot be normalised"
            )
        means = means / norms
        pred = classes[np.argmax(test_u @ means.T, axis=1)]
        accuracies[draw] = np.mean(pred == test_y)
    return float(accuracies.mean()), float(accuracies.std(ddof=1))


def _refuse_zero_rows(X, name):
    """Raise ``ValueError`` (as :func:`unit_rows`) at the first all-zero row of ``X``."""
    for rows, block in iter_rows(X):
        bad = np.flatnonzero(~np.any(block, axis=1))
        if bad.size:
            raise ValueError(
                f"{name} has a zero vector at row {rows.start + int(bad[0])}; "
                "it cannot be unit-normalised"
            )
