"""repeval_ref.f1_scores against scikit-learn's f1_score and precision_recall_fscore_support."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, f1_score, precision_recall_fscore_support

import repeval_ref as rr

ZERO_DIVISIONS = (0.0, 1.0, np.nan)


def sklearn_reference(y_true, y_pred, labels, zero_division):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p, r, f, s = precision_recall_fscore_support(
            y_true, y_pred, labels=labels, average=None, zero_division=zero_division
        )
        means = {
            avg: f1_score(y_true, y_pred, labels=labels, average=avg, zero_division=zero_division)
            for avg in ("macro", "weighted", "micro")
        }
    return p, r, f, s, means


def assert_matches(y_true, y_pred, labels=None, zero_division=0.0):
    got = rr.f1_scores(y_true, y_pred, labels=labels, zero_division=zero_division)
    p, r, f, s, means = sklearn_reference(y_true, y_pred, labels, zero_division)
    np.testing.assert_allclose(got["precision"], p, rtol=0, atol=1e-12, equal_nan=True)
    np.testing.assert_allclose(got["recall"], r, rtol=0, atol=1e-12, equal_nan=True)
    np.testing.assert_allclose(got["f1"], f, rtol=0, atol=1e-12, equal_nan=True)
    np.testing.assert_array_equal(got["support"], s)
    for avg, value in means.items():
        np.testing.assert_allclose(got[avg], value, rtol=0, atol=1e-12, equal_nan=True, err_msg=avg)
    return got


@pytest.mark.parametrize("zero_division", ZERO_DIVISIONS)
@pytest.mark.parametrize("seed", range(12))
def test_random_predictions_match_sklearn(seed, zero_division):
    rng = np.random.default_rng(seed)
    n, K = int(rng.integers(5, 200)), int(rng.integers(2, 9))
    y_true = rng.integers(0, K, n)
    y_pred = np.where(rng.random(n) < 0.6, y_true, rng.integers(0, K + 2, n))  # two extra classes
    assert_matches(y_true, y_pred, zero_division=zero_division)


@pytest.mark.parametrize("zero_division", ZERO_DIVISIONS)
def test_class_absent_from_predictions_or_from_labels(zero_division):
    y_true = np.array([0, 0, 1, 1, 2, 2, 2])
    y_pred = np.array([0, 0, 0, 1, 0, 0, 3])  # 2 is never predicted, 3 never occurs
    got = assert_matches(y_true, y_pred, zero_division=zero_division)
    np.testing.assert_array_equal(got["labels"], [0, 1, 2, 3])
    # counts are defined for both absent classes: F1 = 0 without a zero division
    assert got["f1"][2] == 0.0 and got["f1"][3] == 0.0
    assert (
        got["precision"][2] == zero_division
        or np.isnan(zero_division)
        and np.isnan(got["precision"][2])
    )
    assert got["support"][3] == 0


@pytest.mark.parametrize("zero_division", ZERO_DIVISIONS)
def test_listed_class_that_never_occurs(zero_division):
    y_true = np.array([0, 1, 1, 2])
    y_pred = np.array([0, 1, 2, 2])
    got = assert_matches(y_true, y_pred, labels=[2, 0, 1, 5], zero_division=zero_division)
    np.testing.assert_array_equal(got["labels"], [2, 0, 1, 5])
    f5 = got["f1"][3]
    assert np.isnan(f5) if np.isnan(zero_division) else f5 == zero_division


def test_labels_subset_ignores_other_classes():
    rng = np.random.default_rng(3)
    y_true = rng.integers(0, 6, 300)
    y_pred = np.where(rng.random(300) < 0.5, y_true, rng.integers(0, 6, 300))
    assert_matches(y_true, y_pred, labels=[1, 4])


def test_micro_f1_is_accuracy_and_balanced_weighted_equals_macro():
    rng = np.random.default_rng(7)
    y_true = np.repeat(np.arange(5), 40)  # 40 images per class
    y_pred = np.where(rng.random(200) < 0.7, y_true, rng.integers(0, 5, 200))
    got = rr.f1_scores(y_true, y_pred)
    assert got["micro"] == pytest.approx(accuracy_score(y_true, y_pred), abs=1e-12)
    assert got["weighted"] == pytest.approx(got["macro"], abs=1e-12)


def test_perfect_and_constant_predictions():
    y = np.array([0, 1, 2, 2])
    assert rr.f1_scores(y, y)["macro"] == 1.0
    got = assert_matches(y, np.full(4, 2))
    np.testing.assert_allclose(got["f1"], [0.0, 0.0, 2 * 2 / (2 * 2 + 2)])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(y_true=[], y_pred=[]), "y_true"),
        (dict(y_true=[0, 1], y_pred=[0]), "y_pred"),
        (dict(y_true=[[0, 1]], y_pred=[[0, 1]]), "y_true"),
        (dict(y_true=[0, -1], y_pred=[0, 1]), "y_true"),
        (dict(y_true=[0, 1], y_pred=[0.5, 1]), "y_pred"),
        (dict(y_true=[0, 1], y_pred=[0, 1], labels=[]), "labels"),
        (dict(y_true=[0, 1], y_pred=[0, 1], labels=[1, 1]), "labels"),
        (dict(y_true=[0, 1], y_pred=[0, 1], zero_division=0.5), "zero_division"),
        (dict(y_true=[0, 1], y_pred=[0, 1], zero_division="warn"), "zero_division"),
    ],
)
def test_bad_input_names_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        rr.f1_scores(**kwargs)
