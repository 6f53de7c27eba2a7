"""F1 scores of a probe's predictions: per class, macro-averaged and support-weighted.

Top-1 accuracy counts every test image once, so on an unbalanced test set it is carried by
the frequent classes; a probe that never predicts a rare class loses little accuracy. The
F1 score of one class weighs the two ways of failing it, images of the class given another
label (false negatives) and images of other classes given this one (false positives):

.. math::  F_1 = \\frac{2\\,TP}{2\\,TP + FP + FN},

the harmonic mean of the class's precision and recall. The *macro* F1 is the unweighted mean
over the classes, so a rare class counts as much as a frequent one; the *weighted* F1 weighs
each class by its support (its number of true images) and is therefore close to accuracy in
spirit; the *micro* F1 pools the counts of all the classes listed, and for single-label
predictions over every class it equals accuracy.

The conventions are those of scikit-learn's ``f1_score`` and
``precision_recall_fscore_support`` (checked by ``tests/test_f1.py``):

* the classes are the union of those in ``y_true`` and ``y_pred``, in increasing order,
  unless ``labels`` lists them (then classes outside the list are ignored and listed classes
  that never occur still count);
* F1 is computed from the counts as above, so a class that occurs only in the labels or only
  in the predictions has F1 = 0 without any division by zero;
* ``zero_division`` is the value given to a ratio whose denominator is zero: precision of a
  class never predicted, recall of a class that never occurs, and F1 of a class that occurs
  in neither. With ``zero_division=nan`` such a class is left out of the macro mean.

The chapter is ``book/protocols.md``; seed 003 reports these three numbers next to a linear
probe's accuracy.
"""

from __future__ import annotations

import numbers

import numpy as np

from ._validation import as_labels

__all__ = ["f1_scores"]


def _ratio(num, den, zero_division):
    """num / den elementwise, ``zero_division`` where den == 0."""
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    out = np.full(np.broadcast(num, den).shape, zero_division, dtype=np.float64)
    np.divide(num, den, out=out, where=den > 0)
    return out


def _check_zero_division(value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"zero_division must be 0, 1 or nan, got {value!r}")
    value = float(value)
    if not (np.isnan(value) or value in (0.0, 1.0)):
        raise ValueError(f"zero_division must be 0, 1 or nan, got {value!r}")
    return value


def f1_scores(y_true, y_pred, *, labels=None, zero_division=0.0):
    """Per-class, macro, weighted and micro F1 of predicted class labels.

    For class ``c`` with ``TP`` images of the class predicted as ``c``, ``FP`` images of
    other classes predicted as ``c`` and ``FN`` images of ``c`` predicted as something else:
    precision ``TP / (TP + FP)``, recall ``TP / (TP + FN)``, F1 ``2 TP / (2 TP + FP + FN)``.
    The macro F1 is the mean of the per-class F1 over the classes, the weighted F1 their mean
    weighted by the support ``TP + FN``, and the micro F1 the F1 of the counts summed over the
    classes.

    Parameters
    ----------
    y_true : array_like of int, shape (n,)
        True class labels (non-negative integers), at least one.
    y_pred : array_like of int, shape (n,)
        Predicted class labels, same length.
    labels : array_like of int, shape (K,), optional
        The classes to score, in the order wanted (distinct, non-negative). Default: every
        class that occurs in ``y_true`` or ``y_pred``, in increasing order. Images whose true
        and predicted labels are both outside the list are ignored.
    zero_division : {0.0, 1.0, nan}, default 0.0
        The value of a ratio whose denominator is zero (see the module docstring). With
        ``nan`` the classes concerned are left out of the macro mean; the weighted mean is
        unaffected because such a class has no support.

    Returns
    -------
    dict
        ``"labels"``: int64 array of shape (K,), the classes in the order used;
        ``"precision"``, ``"recall"``, ``"f1"``: float64 arrays of shape (K,);
        ``"support"``: int64 array of shape (K,), the number of true images per class;
        ``"macro"``, ``"weighted"``, ``"micro"``: floats.

    Raises
    ------
    ValueError
        If ``y_true`` or ``y_pred`` is empty, not 1-D, has negative or non-integer labels,
        or their lengths differ; if ``labels`` is empty, not 1-D, repeats a class or holds
        negative or non-integer values; if ``zero_division`` is not 0, 1 or nan.
    TypeError
        If a label array is not numeric.

    Notes
    -----
    Matches scikit-learn's ``f1_score(..., average=None | "macro" | "weighted" | "micro")``
    with the same ``labels`` and ``zero_division``. On a test set with the same number of
    images per class the weighted and macro F1 coincide.
    """
    y_true = as_labels(y_true, "y_true")
    y_pred = as_labels(y_pred, "y_pred")
    if y_pred.shape[0] != y_true.shape[0]:
        raise ValueError(f"y_pred has {y_pred.shape[0]} entries but y_true has {y_true.shape[0]}")
    zero_division = _check_zero_division(zero_division)
    if labels is None:
        labels = np.union1d(y_true, y_pred)
    else:
        labels = as_labels(labels, "labels")
        if np.unique(labels).size != labels.size:
            raise ValueError("labels must not repeat a class")

    # confusion counts restricted to the listed classes
    is_true = y_true[None, :] == labels[:, None]  # (K, n)
    is_pred = y_pred[None, :] == labels[:, None]
    tp = np.sum(is_true & is_pred, axis=1)
    support = is_true.sum(axis=1)
    predicted = is_pred.sum(axis=1)
    fp = predicted - tp
    fn = support - tp

    precision = _ratio(tp, predicted, zero_division)
    recall = _ratio(tp, support, zero_division)
    f1 = _ratio(2 * tp, 2 * tp + fp + fn, zero_division)

    defined = ~np.isnan(f1)
    macro = float(np.mean(f1[defined])) if defined.any() else float("nan")
    total = support.sum()
    weighted = (
        float(np.sum(np.where(support > 0, f1, 0.0) * support) / total) if total else zero_division
    )
    micro = float(_ratio(2 * tp.sum(), 2 * tp.sum() + fp.sum() + fn.sum(), zero_division))
    return {
        "labels": labels.astype(np.int64),
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "support": support.astype(np.int64),
        "macro": macro,
        "weighted": weighted,
        "micro": micro,
    }
