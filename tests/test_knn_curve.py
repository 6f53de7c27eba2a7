"""knn_classify_curve: one similarity pass for many k, equal to knn_classify at every k."""

import numpy as np
import pytest

from repeval_ref import knn_classify, knn_classify_curve

KS = (1, 2, 5, 10, 20, 50, 200)


def _check_all(train, y, test, ks, tau, n_classes, **kw):
    curve = knn_classify_curve(train, y, test, ks, tau, n_classes, **kw)
    assert curve.shape == (len(ks), len(test)) and curve.dtype == np.int64
    for j, k in enumerate(ks):
        np.testing.assert_array_equal(
            curve[j], knn_classify(train, y, test, k, tau, n_classes, **kw), err_msg=f"k={k}"
        )
    return curve


@pytest.mark.parametrize("tau", [0.07, 1.0, 1e3])
def test_equals_knn_classify_on_clustered_features(tau):
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(6, 12))
    y = rng.integers(0, 6, 400)
    train = centres[y] + rng.normal(size=(400, 12))
    yt = rng.integers(0, 6, 150)
    test = centres[yt] + rng.normal(size=(150, 12))
    _check_all(train, y, test, KS, tau, 6)


@pytest.mark.parametrize("seed", range(4))
def test_equals_knn_classify_on_tie_heavy_integer_features(seed):
    # few distinct integer vectors: many exactly equal similarities at every k-th place,
    # and many exact vote ties between classes (large tau: near-equal weights)
    rng = np.random.default_rng(seed)
    levels = rng.integers(-2, 3, size=(7, 3))
    train = levels[rng.integers(0, 7, 300)].astype(float)
    train[~train.any(axis=1)] = 1.0  # no zero rows
    test = levels[rng.integers(0, 7, 90)].astype(float)
    test[~test.any(axis=1)] = 1.0
    y = rng.integers(0, 4, 300)
    for tau in (0.07, 1e6):
        _check_all(train, y, test, (1, 3, 7, 8, 33, 100, 299, 300, 301), tau, 4)


def test_duplicated_training_rows_and_order_of_ks():
    rng = np.random.default_rng(1)
    base = rng.integers(0, 4, size=(20, 5)).astype(float) + 1
    train = np.vstack([base, base, base])  # every row three times, different labels
    y = np.concatenate([np.zeros(20, int), np.ones(20, int), np.full(20, 2)])
    test = base[rng.integers(0, 20, 40)]
    ks = (50, 3, 3, 1, 60, 61)
    curve = _check_all(train, y, test, ks, 0.07, 3)
    np.testing.assert_array_equal(curve[1], curve[2])  # repeated k


def test_block_size_and_float32():
    rng = np.random.default_rng(2)
    train = rng.integers(-3, 4, size=(120, 6)).astype(np.float32)
    train[~train.any(axis=1)] = 1
    test = rng.integers(-3, 4, size=(33, 6)).astype(np.float32)
    test[~test.any(axis=1)] = 1
    y = rng.integers(0, 5, 120)
    for kw in ({"block_size": 1}, {"block_size": 7}, {"dtype": np.float32}):
        _check_all(train, y, test, (1, 4, 20, 119, 500), 0.1, 5, **kw)


def test_brute_force_vote_at_every_k():
    # an independent computation: sort by (similarity desc, index asc), vote with exp weights
    rng = np.random.default_rng(3)
    train = rng.normal(size=(60, 4))
    test = rng.normal(size=(25, 4))
    y = rng.integers(0, 3, 60)
    ks = (1, 5, 17, 60)
    curve = knn_classify_curve(train, y, test, ks, 0.5, 3)
    tn = train / np.linalg.norm(train, axis=1, keepdims=True)
    qn = test / np.linalg.norm(test, axis=1, keepdims=True)
    S = qn @ tn.T
    for j, k in enumerate(ks):
        for i in range(len(test)):
            order = np.lexsort((np.arange(60), -S[i]))[:k]
            votes = np.zeros(3)
            np.add.at(votes, y[order], np.exp(S[i, order] / 0.5))
            assert curve[j, i] == np.argmax(votes)


@pytest.mark.parametrize(
    "ks, exc, word",
    [
        ([], ValueError, "ks"),
        ([0, 5], ValueError, "ks[0]"),
        ("20", TypeError, "ks"),
        (5, TypeError, "ks"),
        ([2.5], TypeError, "ks[0]"),
    ],
)
def test_bad_ks(ks, exc, word):
    X = np.eye(3) + 0.1
    with pytest.raises(exc, match=word.replace("[", r"\[").replace("]", r"\]")):
        knn_classify_curve(X, [0, 1, 0], X, ks, 0.1, 2)


def test_bad_arrays_are_named():
    X = np.eye(3) + 0.1
    with pytest.raises(ValueError, match="test_h"):
        knn_classify_curve(X, [0, 1, 0], X[:, :2], [1], 0.1, 2)
    with pytest.raises(ValueError, match="tau"):
        knn_classify_curve(X, [0, 1, 0], X, [1], 0.0, 2)
