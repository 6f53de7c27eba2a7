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

The test set plays no part in the choice of ``C``. :func:`probe_accuracy_grid`
exposes every ``C``'s validation accuracy *and* its test accuracy; picking the ``C``
with the best test accuracy is the optimistic "tuning on the test set" the book warns
about. Both functions share the private steps below, so they cannot drift apart.
"""
from __future__ import annotations

import numpy as np

from ._validation import as_sequence, as_train_test, check_int, check_positive

__all__ = ["linear_probe_done_right", "linear_probe_warm_path", "probe_accuracy_grid"]


def _check_inputs(train_h, train_y, test_h, test_y, Cs, seed):
    """Validate and convert the arguments shared by both public functions."""
    train_h, train_y, test_h, test_y = as_train_test(train_h, train_y, test_h, test_y)
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
    """Per-feature mean and standard deviation (ddof=0) of ``X``.

    A constant feature would be divided by zero, so it raises ``ValueError`` naming
    ``train_h`` and the part of it (``what``) where the feature is constant.
    """
    mean = X.mean(axis=0)
    std = X.std(axis=0)
    constant = (np.ptp(X, axis=0) == 0) | (std == 0)
    if np.any(constant):
        j = int(np.flatnonzero(constant)[0])
        raise ValueError(
            f"train_h: feature {j} is constant on {what} (standard deviation 0), so it "
            f"cannot be standardised (division by zero)"
        )
    return mean, std


def _accuracy(C, fit_z, fit_y, eval_z, eval_y):
    """Fit ``LogisticRegression(C=C, max_iter=2000)`` and return its accuracy."""
    from sklearn.linear_model import LogisticRegression

    clf = LogisticRegression(C=C, max_iter=2000).fit(fit_z, fit_y)
    return float(np.mean(clf.predict(eval_z) == eval_y))


def _validation_split(train_h, train_y, seed):
    """Steps 1-2 of the recipe: a seeded fifth of the training rows for validation, the
    rest for fitting, both standardised with the fitting part's statistics.
    Returns ``(fit_z, fit_y, val_z, val_y)``."""
    n = train_h.shape[0]
    perm = np.random.default_rng(seed).permutation(n)
    val_idx, fit_idx = perm[: n // 5], perm[n // 5:]
    if np.unique(train_y[fit_idx]).size < 2:
        raise ValueError(
            "train_y: the fitting part of the training set (all but the validation "
            "rows) holds a single class; a classifier needs at least 2"
        )
    mean, std = _standardiser(train_h[fit_idx], "the fitting part")
    fit_z = (train_h[fit_idx] - mean) / std
    val_z = (train_h[val_idx] - mean) / std
    return fit_z, train_y[fit_idx], val_z, train_y[val_idx]


def _validation_accuracies(train_h, train_y, Cs, seed):
    """Validation accuracy of each ``C`` (steps 1-3 of the recipe), in the order of Cs."""
    fit_z, fit_y, val_z, val_y = _validation_split(train_h, train_y, seed)
    return [_accuracy(C, fit_z, fit_y, val_z, val_y) for C in Cs]


def _test_accuracies(train_h, train_y, test_h, test_y, Cs):
    """Test accuracy after refitting on the whole training set with each ``C`` (step 4)."""
    mean, std = _standardiser(train_h, "the whole training set")
    train_z = (train_h - mean) / std
    test_z = (test_h - mean) / std
    return [_accuracy(C, train_z, train_y, test_z, test_y) for C in Cs]


def linear_probe_done_right(train_h, train_y,  # fitting and validation data
                            test_h, test_y, Cs, seed=0):
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
    fit_z, fit_y, val_z, val_y = _validation_split(train_h, train_y, seed)
    clf = LogisticRegression(max_iter=2000, warm_start=True)
    by_C, start_of = {}, {}
    for C in sorted(set(Cs)):
        clf.set_params(C=C).fit(fit_z, fit_y)
        by_C[C] = float(np.mean(clf.predict(val_z) == val_y))
        start_of[C] = (clf.coef_.copy(), clf.intercept_.copy())
        if progress is not None:
            progress(1)
    val_acc = np.array([by_C[C] for C in Cs], dtype=np.float64)
    best_C = Cs[int(np.argmax(val_acc))]  # first maximum in the given order
    mean, std = _standardiser(train_h, "the whole training set")
    final = LogisticRegression(C=best_C, max_iter=2000, warm_start=True)
    if np.array_equal(np.unique(train_y), clf.classes_):  # same classes: same weight shape
        final.coef_, final.intercept_ = start_of[best_C]
    final.fit((train_h - mean) / std, train_y)
    pred = final.predict((test_h - mean) / std).astype(np.int64)
    if progress is not None:
        progress(1)
    return float(best_C), val_acc, pred
