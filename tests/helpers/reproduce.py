"""Tolerances for tests that recompute a committed result on another machine.

A committed accuracy was computed once, on one processor. Recomputed elsewhere, the same
code sums the same numbers in another order: OpenBLAS picks its kernel by processor
(``OPENBLAS_CORETYPE``), blocks a product by its thread count, and torch picks its own
vector width. L-BFGS then follows another path to a point within its tolerance of the
optimum, and a test image lying that close to a decision boundary can change side. Two
things follow, and the helpers here test each one for what it is:

* **A choice** (``C`` by validation or cross-validation) can flip between candidates whose
  scores tie or nearly tie. The tests pin the committed choice and check, separately,
  that it is the recomputed choice or one whose score is within the noise of the best
  (:func:`choice_within_noise`).
* **An accuracy given that choice** can move by a few images. How many is measured on the
  spot: the same fit is repeated with its rows (or, for a k-NN, its feature columns) in
  another order, which leaves the mathematics unchanged and changes only the order of
  the sums, as another kernel would. The images whose prediction changed measure the
  computation's reach (:func:`reach`), and the committed accuracy must lie within three
  binomial standard errors of a paired disagreement of that size
  (:func:`allowed_difference`).
"""

from __future__ import annotations

import math

import numpy as np

#: standard errors allowed, on both the size of the disagreement and its direction
Z = 3.0


def reach(*predictions):
    """Test images whose prediction differs between any two of ``predictions``.

    Parameters
    ----------
    *predictions : array_like of int, each of shape (n,)
        Predicted labels of the same test images from fits that differ only in the
        order of their sums (at least two).

    Returns
    -------
    int
        The number of images on which the predictions are not all equal.
    """
    if len(predictions) < 2:
        raise ValueError("predictions must hold at least two arrays")
    arrays = [np.asarray(a) for a in predictions]
    shapes = {a.shape for a in arrays}
    if len(shapes) != 1 or arrays[0].ndim != 1:
        raise ValueError(
            f"predictions must be 1-D arrays of one length, got shapes {sorted(shapes)}"
        )
    p = np.stack(arrays)
    return int(np.sum(np.any(p != p[0], axis=0)))


def allowed_difference(reach_count, n):
    """Largest accuracy difference that a change of summation order explains.

    Two runs disagree on ``D`` images, ``b`` the first gets right and ``c`` the second
    does; their accuracies differ by ``(b - c) / n``. Near-boundary flips have no
    preferred direction, so ``|b - c|`` stays within ``Z * sqrt(D)``. ``D`` itself is not
    seen (the committed predictions are not stored), but a reordering of the same fit
    showed how many images are that fragile: ``D`` is taken at the upper end of a
    Poisson count with that mean, ``reach + Z * sqrt(reach) + Z`` (the ``+ Z`` keeps a
    reach of 0 from demanding an exact match that a kernel the reordering did not imitate
    could break).

    Parameters
    ----------
    reach_count : int
        :func:`reach` of the recomputation, ``>= 0``.
    n : int
        Number of test images, ``>= 1``.

    Returns
    -------
    float
        The allowed ``|accuracy - committed accuracy|``.
    """
    if (
        isinstance(reach_count, bool)
        or not isinstance(reach_count, (int, np.integer))
        or reach_count < 0
    ):
        raise ValueError(f"reach_count must be a non-negative integer, got {reach_count!r}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    disagreement = reach_count + Z * math.sqrt(reach_count) + Z
    return Z * math.sqrt(disagreement) / n


def choice_within_noise(correct, committed, chosen):
    """Whether the committed choice is the recomputed one or as good within noise.

    Parameters
    ----------
    correct : dict
        For each candidate, a boolean array of shape (m,): which validation (or
        out-of-fold) rows it predicts correctly, the same rows for every candidate.
    committed, chosen
        Keys of ``correct``: the choice the committed record holds and the one the
        recomputation made.

    Returns
    -------
    bool
        True when ``committed == chosen``, or when the recomputed best leads the
        committed choice by at most ``Z`` standard errors of their paired difference,
        ``Z * sqrt(discordant rows) / m`` (McNemar's normal form).
    """
    if committed not in correct or chosen not in correct:
        raise ValueError(f"committed {committed!r} and chosen {chosen!r} must be keys of correct")
    if committed == chosen:
        return True
    a = np.asarray(correct[chosen], dtype=bool)
    b = np.asarray(correct[committed], dtype=bool)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError("correct must hold 1-D boolean arrays of one non-empty length")
    discordant = int(np.sum(a != b))
    lead = int(a.sum()) - int(b.sum())
    return lead <= Z * math.sqrt(discordant)


# ------------------------------------------------------------------ the probes' refits
def _logistic(C):
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=C, max_iter=2000)


def probe_predictions(train_z, train_y, test_z, C):
    """A logistic probe's test predictions, fitted three times in three summation orders.

    Parameters
    ----------
    train_z : numpy.ndarray, shape (n, d)
        Standardised training features.
    train_y : numpy.ndarray of int, shape (n,)
    test_z : numpy.ndarray, shape (m, d)
        Test features standardised with the training statistics.
    C : float
        The pinned inverse regularisation strength.

    Returns
    -------
    tuple of three numpy.ndarray of int, shape (m,)
        Predictions of ``LogisticRegression(C, max_iter=2000)`` fitted on the rows as
        given, on the same rows in reverse order, and on the features in reverse order
        (training and test alike): the same objective, its sums over rows and over
        features taken in other orders, as another BLAS kernel takes them.
    """
    given = _logistic(C).fit(train_z, train_y).predict(test_z)
    rows = _logistic(C).fit(train_z[::-1], train_y[::-1]).predict(test_z)
    columns = _logistic(C).fit(train_z[:, ::-1], train_y).predict(test_z[:, ::-1])
    return given, rows, columns


def validation_correct(train_h, train_y, Cs, seed):
    """Which validation rows each ``C`` gets right, on the split of ``linear_probe_done_right``.

    Returns
    -------
    dict
        ``{C: boolean array of shape (n // 5,)}``, for every ``C`` of ``Cs``.
    """
    from repeval_ref.linear_probe import _validation_split

    fit_z, fit_y, val_z, val_y = _validation_split(train_h, train_y, seed)
    return {C: _logistic(C).fit(fit_z, fit_y).predict(val_z) == val_y for C in Cs}


def out_of_fold_correct(h, y, Cs, folds):
    """Which rows each ``C`` gets right out of fold, on the folds of the 10-shot search.

    The search (``GridSearchCV`` with ``StratifiedKFold(folds)``) keeps the first ``C``
    of the best mean fold accuracy; with folds of equal size that is the best
    out-of-fold accuracy, so these arrays decide the same choice.

    Returns
    -------
    dict
        ``{C: boolean array of shape (n,)}``, for every ``C`` of ``Cs``.
    """
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    cv = StratifiedKFold(folds)
    return {
        C: cross_val_predict(make_pipeline(StandardScaler(), _logistic(C)), h, y, cv=cv) == y
        for C in Cs
    }


def first_best(correct):
    """The first key of ``correct`` (in its order) with the most rows right."""
    keys = list(correct)
    return keys[int(np.argmax([int(np.sum(correct[k])) for k in keys]))]


def assert_within(record, label, got, committed, allowed):
    """Assert ``|got - committed| <= allowed``, recording the three under ``label``.

    Parameters
    ----------
    record : callable
        pytest's ``record_property`` (the numbers land in the JUnit XML that
        ``make test-blas`` summarises with ``tests/helpers/deviations.py``).
    label : str
        ``source/quantity/instance``, e.g. ``"zoo_table/probe/mae_vit"``.
    got, committed, allowed : float
        Recomputed value, committed value and the allowed absolute difference.
    """
    record(label, f"{float(got)!r} {float(committed)!r} {float(allowed)!r}")
    assert abs(got - committed) <= allowed, (
        f"{label}: recomputed {got}, committed {committed}, allowed ±{allowed:.4g}"
    )
