"""An honestly tuned logistic-regression probe on frozen features.

Book: chapter ``book/protocols.md`` ("Which features, and which hyperparameters",
"Tuning on the test set"); seed 000, sections "A linear probe done right" (core
exercise) and "Tuning on the test set".

The recipe, with ``n = len(train_h)``:

1. ``perm = np.random.default_rng(seed).permutation(n)``; the validation part is
   ``perm[:n // 5]``, the fitting part ``perm[n // 5:]``.
2. Both parts are standardised with the fitting part's per-feature mean and standard
   deviation (``ddof=0``): ``z = (h - mean_fit) / std_fit``.
3. For each ``C`` of ``Cs``, in order, ``LogisticRegression(C=C, max_iter=2000)`` is
   fitted on the fitting part and its accuracy measured on the validation part. The
   first ``C`` reaching the best validation accuracy is kept.
4. With that ``C`` the probe is refitted on the whole training set, standardised with
   the whole training set's mean and standard deviation (``ddof=0``), and scored on
   the test set standardised with the same whole-training statistics.

The standardisation statistics are float64, accumulated a block of rows at a time. The
standardised copies the probe fits on are float64, except for float32 features of more
than :data:`FLOAT64_MAX_ENTRIES` entries: those are fitted in float32 (scikit-learn's
L-BFGS keeps that precision), so that beside the input only one float32 copy of the
fitting part (then of the training set) is held. Validation and test rows are
standardised and predicted a block at a time.

The test set plays no part in the choice of ``C``. :func:`probe_accuracy_grid`
exposes every ``C``'s validation accuracy *and* its test accuracy; picking the ``C``
with the best test accuracy is the optimistic "tuning on the test set" the book warns
about. Both functions share the private steps below, so they cannot drift apart.
"""

from __future__ import annotations

import numpy as np

from ._blocks import column_moments, iter_gather
from ._validation import as_sequence, as_train_test, check_int, check_positive

__all__ = [
    "FLOAT64_MAX_ENTRIES",
    "linear_probe_done_right",
    "linear_probe_warm_path",
    "probe_accuracy_grid",
]

#: float32 training features with more entries than this are standardised and fitted in
#: float32; smaller ones (and float64 features) in float64
FLOAT64_MAX_ENTRIES = 2**25


def _z_dtype(train_h):
    """The dtype of the standardised copies of ``train_h`` (module docstring)."""
    if train_h.dtype == np.float32 and train_h.size > FLOAT64_MAX_ENTRIES:
        return np.dtype(np.float32)
    return np.dtype(np.float64)


def _check_inputs(train_h, train_y, test_h, test_y, Cs, seed):
    """Validate and convert the arguments shared by the public functions.

    Float32 and float64 features keep their dtype (a memory map stays one); the
    standardised copies the probe fits on are made in the training features' dtype.
    """
    train_h, train_y, test_h, test_y = as_train_test(train_h, train_y, test_h, test_y, dtype=None)
    Cs = as_sequence(Cs, "Cs", "positive numbers")
    if not Cs:
        raise ValueError("Cs is empty; give at least one regularisation strength")
    Cs = [check_positive(C, f"Cs[{i}]") for i, C in enumerate(Cs)]
    seed = check_int(seed, "seed", minimum=0)
    n = train_h.shape[0]
    if n // 5 < 1:
        raise ValueError(
            f"train_h has {n} rows; at least 5 are needed so that the validation part "
            f"(n // 5 rows) is not empty"
        )
    return train_h, train_y, test_h, test_y, Cs, seed


def _standardiser(X, what):
    """Per-feature float64 mean and standard deviation (ddof=0) of all rows of ``X``."""
    return _statistics(np.asarray(X), None, what)


def _statistics(X, rows, what):
    """Per-feature float64 mean and standard deviation (ddof=0) of ``X[rows]`` (all rows
    when ``rows`` is None), accumulated a block of rows at a time.

    A constant feature would be divided by zero, so it raises ``ValueError`` naming
    ``train_h`` and the part of it (``what``) where the feature is constant.
    """
    mean, m2, lo, hi = column_moments(X, rows)
    std = np.sqrt(m2 / (X.shape[0] if rows is None else len(rows)))
    constant = (lo == hi) | (std == 0)
    if np.any(constant):
        j = int(np.flatnonzero(constant)[0])
        raise ValueError(
            f"train_h: feature {j} is constant on {what} (standard deviation 0), so it "
            f"cannot be standardised (division by zero)"
        )
    return mean, std


def _blocks_of(X, rows):
    """``(part, block)`` pairs: ``X[rows]`` (or all of ``X``) a block of rows at a time."""
    for part, block in iter_gather(X, rows):
        yield part, np.asarray(block, dtype=np.float64)


def _standardised(X, rows, mean, std, dtype):
    """``(X[rows] - mean) / std`` computed in float64 a block at a time, stored as ``dtype``."""
    n = X.shape[0] if rows is None else len(rows)
    out = np.empty((n, X.shape[1]), dtype=dtype)
    for part, block in _blocks_of(X, rows):
        out[part] = (block - mean) / std
    return out


def _predict(clf, X, rows, mean, std, dtype):
    """Labels ``clf`` predicts for the standardised ``X[rows]``, a block of rows at a time."""
    n = X.shape[0] if rows is None else len(rows)
    pred = np.empty(n, dtype=np.int64)
    for part, block in _blocks_of(X, rows):
        pred[part] = clf.predict(((block - mean) / std).astype(dtype, copy=False))
    return pred


def _fit(C, Z, y):
    """``LogisticRegression(C=C, max_iter=2000)`` fitted on ``Z``."""
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=C, max_iter=2000).fit(Z, y)


def _fitting_part(train_h, train_y, seed):
    """Steps 1-2 of the recipe: a seeded fifth of the training rows for validation, the
    rest for fitting, standardised with the fitting part's statistics.

    Returns ``(fit_z, fit_y, val_idx, val_y, mean, std)``: the fitting part standardised
    (in :func:`_z_dtype`) and the validation rows with the statistics that standardise
    them, so that they are standardised a block at a time when predicted.
    """
    n = train_h.shape[0]
    perm = np.random.default_rng(seed).permutation(n)
    val_idx, fit_idx = perm[: n // 5], perm[n // 5 :]
    if np.unique(train_y[fit_idx]).size < 2:
        raise ValueError(
            "train_y: the fitting part of the training set (all but the validation "
            "rows) holds a single class; a classifier needs at least 2"
        )
    mean, std = _statistics(train_h, fit_idx, "the fitting part")
    fit_z = _standardised(train_h, fit_idx, mean, std, _z_dtype(train_h))
    return fit_z, train_y[fit_idx], val_idx, train_y[val_idx], mean, std


def _validation_split(train_h, train_y, seed):
    """Steps 1-2 of the recipe with both parts standardised: ``(fit_z, fit_y, val_z, val_y)``."""
    train_h = np.asarray(train_h)
    fit_z, fit_y, val_idx, val_y, mean, std = _fitting_part(train_h, train_y, seed)
    return fit_z, fit_y, _standardised(train_h, val_idx, mean, std, fit_z.dtype), val_y


def _validation_accuracies(train_h, train_y, Cs, seed):
    """Validation accuracy of each ``C`` (steps 1-3 of the recipe), in the order of Cs."""
    fit_z, fit_y, val_idx, val_y, mean, std = _fitting_part(train_h, train_y, seed)
    return [
        float(
            np.mean(
                _predict(_fit(C, fit_z, fit_y), train_h, val_idx, mean, std, fit_z.dtype) == val_y
            )
        )
        for C in Cs
    ]


def _test_accuracies(train_h, train_y, test_h, test_y, Cs):
    """Test accuracy after refitting on the whole training set with each ``C`` (step 4)."""
    mean, std = _statistics(train_h, None, "the whole training set")
    train_z = _standardised(train_h, None, mean, std, _z_dtype(train_h))
    return [
        float(
            np.mean(
                _predict(_fit(C, train_z, train_y), test_h, None, mean, std, train_z.dtype)
                == test_y
            )
        )
        for C in Cs
    ]


def linear_probe_done_right(
    train_h,
    train_y,  # fitting and validation data
    test_h,
    test_y,
    Cs,
    seed=0,
):
    """Tune ``C`` of a logistic-regression probe on a held-out split, then test once.

    Parameters
    ----------
    train_h : array_like of shape (n, d)
        Training features, ``n >= 5`` (the validation part has ``n // 5`` rows).
    train_y : array_like of int, shape (n,)
        Training labels (non-negative integers); the fitting part needs two classes.
    test_h : array_like of shape (n_test, d)
        Test features.
    test_y : array_like of int, shape (n_test,)
        Test labels.
    Cs : sequence of float
        Candidate inverse regularisation strengths, each finite and ``> 0``, tried in
        the given order.
    seed : int
        Seed of ``np.random.default_rng`` for the validation split.

    Returns
    -------
    best_C : float
        The first ``C`` of ``Cs`` with the highest validation accuracy.
    test_accuracy : float
        Accuracy on the test set of ``LogisticRegression(C=best_C, max_iter=2000)``
        fitted on the whole standardised training set.

    Raises
    ------
    ValueError
        Empty or non-positive/non-finite ``Cs``, fewer than 5 training rows,
        mismatched lengths or dimensions, NaN/inf, negative labels, a single class in
        the fitting part, or a constant feature (standard deviation 0) in the fitting
        part or the whole training set.

    Notes
    -----
    Book ``book/protocols.md``; seed 000, "A linear probe done right".
    """
    checked = _check_inputs(train_h, train_y, test_h, test_y, Cs, seed)
    train_h, train_y, test_h, test_y, Cs, seed = checked
    val_acc = _validation_accuracies(train_h, train_y, Cs, seed)
    best = int(np.argmax(val_acc))  # first maximum: the earliest C in Cs wins ties
    best_C = Cs[best]
    (test_accuracy,) = _test_accuracies(train_h, train_y, test_h, test_y, [best_C])
    return float(best_C), float(test_accuracy)


def probe_accuracy_grid(train_h, train_y, test_h, test_y, Cs, seed=0):
    """Validation and test accuracy of the probe for every ``C`` of the grid.

    The validation accuracies are exactly the ones :func:`linear_probe_done_right`
    compares; the test accuracies are what its refit would score with each ``C``.
    ``Cs[argmax(test_accuracy)]`` is the choice made by tuning on the test set, and
    ``max(test_accuracy)`` the optimistic number it reports.

    Parameters
    ----------
    train_h, train_y, test_h, test_y, Cs, seed
        As in :func:`linear_probe_done_right`.

    Returns
    -------
    validation_accuracy : numpy.ndarray of float64, shape (len(Cs),)
    test_accuracy : numpy.ndarray of float64, shape (len(Cs),)

    Notes
    -----
    Book ``book/protocols.md`` ("Tuning on the test set"); seed 000, same sections.
    """
    checked = _check_inputs(train_h, train_y, test_h, test_y, Cs, seed)
    train_h, train_y, test_h, test_y, Cs, seed = checked
    val_acc = _validation_accuracies(train_h, train_y, Cs, seed)
    test_acc = _test_accuracies(train_h, train_y, test_h, test_y, Cs)
    return np.array(val_acc, dtype=np.float64), np.array(test_acc, dtype=np.float64)


def linear_probe_warm_path(train_h, train_y, test_h, test_y, Cs, seed=0, *, progress=None):
    """The probe of :func:`linear_probe_done_right`, its ``C`` sweep warm-started along the path.

    The split, the standardisation, the solver (L-BFGS, ``max_iter=2000``) and the
    selection rule (the first ``C`` of ``Cs``, in the given order, that reaches the best
    validation accuracy) are those of :func:`linear_probe_done_right`. Only the starting
    point of each fit differs: the candidates are fitted in increasing ``C``, each from
    the previous solution (``warm_start=True``), and the final refit on the whole
    training set starts from the solution for the chosen ``C`` on the fitting part.
    Each fit still runs to the solver's tolerance, so the weights agree with cold-started
    fits up to that tolerance; a prediction can differ only for a point lying within
    that tolerance of a decision boundary. Along the path the solutions change little
    from one ``C`` to the next, so far fewer iterations are needed, most of all for
    the weakly regularised (large ``C``) fits that dominate a cold sweep.

    Parameters
    ----------
    train_h, train_y, test_h, test_y, Cs, seed
        As in :func:`linear_probe_done_right`.
    progress : callable, optional
        Called with ``1`` after each fit (``len(set(Cs)) + 1`` calls), e.g. a tqdm
        bar's ``update``.

    Returns
    -------
    best_C : float
        The first ``C`` of ``Cs`` with the highest validation accuracy.
    validation_accuracy : numpy.ndarray of float64, shape (len(Cs),)
        In the order of ``Cs``.
    test_prediction : numpy.ndarray of int64, shape (n_test,)
        Labels predicted for ``test_h`` by the refitted probe (its accuracy is
        ``mean(test_prediction == test_y)``).

    Raises
    ------
    ValueError
        As :func:`linear_probe_done_right`.

    Notes
    -----
    Book ``book/protocols.md``; seed 000, "A linear probe done right". Warm starts
    along a regularisation path are the route of glmnet and of scikit-learn's
    ``LogisticRegressionCV``.
    """
    from sklearn.linear_model import LogisticRegression

    checked = _check_inputs(train_h, train_y, test_h, test_y, Cs, seed)
    train_h, train_y, test_h, test_y, Cs, seed = checked
    fit_z, fit_y, val_idx, val_y, mean, std = _fitting_part(train_h, train_y, seed)
    clf = LogisticRegression(max_iter=2000, warm_start=True)
    by_C, start_of = {}, {}
    for C in sorted(set(Cs)):
        clf.set_params(C=C).fit(fit_z, fit_y)
        by_C[C] = float(np.mean(_predict(clf, train_h, val_idx, mean, std, fit_z.dtype) == val_y))
        start_of[C] = (clf.coef_.copy(), clf.intercept_.copy())
        if progress is not None:
            progress(1)
    del fit_z  # the refit's standardised copy takes its place
    val_acc = np.array([by_C[C] for C in Cs], dtype=np.float64)
    best_C = Cs[int(np.argmax(val_acc))]  # first maximum in the given order
    mean, std = _statistics(train_h, None, "the whole training set")
    train_z = _standardised(train_h, None, mean, std, _z_dtype(train_h))
    final = LogisticRegression(C=best_C, max_iter=2000, warm_start=True)
    if np.array_equal(np.unique(train_y), clf.classes_):  # same classes: same weight shape
        final.coef_, final.intercept_ = start_of[best_C]
    final.fit(train_z, train_y)
    del train_z
    pred = _predict(final, test_h, None, mean, std, _z_dtype(train_h)).astype(np.int64)
    if progress is not None:
        progress(1)
    return float(best_C), val_acc, pred
