"""Tests of repeval_ref.knn.knn_classify (book/knn.md; seed 000, weighted k-NN)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import ortho_group
from sklearn.neighbors import KNeighborsClassifier

from repeval_ref import knn_classify


def brute_force_knn(train_h, train_y, test_h, k, tau, n_classes):
    """Literal loop version of the definition, one test row and one neighbour at a time."""
    out = []
    for q in test_h:
        q = q / math.sqrt(sum(v * v for v in q))
        sims = []
        for i, h in enumerate(train_h):
            h = h / math.sqrt(sum(v * v for v in h))
            sims.append((float(np.dot(h, q)), i))
        # k largest similarities, ties toward the smaller training index
        sims.sort(key=lambda t: (-t[0], t[1]))
        votes = [0.0] * n_classes
        for s, i in sims[:k]:
            votes[train_y[i]] += math.exp(s / tau)
        best = 0
        for c in range(1, n_classes):
            if votes[c] > votes[best]:
                best = c
        out.append(best)
    return np.array(out)


def clustered(rng, n, d, n_classes, spread=1.0):
    centres = rng.normal(size=(n_classes, d)) * 2
    y = rng.integers(0, n_classes, size=n)
    return centres[y] + spread * rng.normal(size=(n, d)), y


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    train_h, train_y = clustered(rng, 60, 6, 4)
    test_h, _ = clustered(rng, 25, 6, 4)
    return train_h, train_y, test_h


@pytest.mark.parametrize("k", [1, 2, 5, 20, 59])
@pytest.mark.parametrize("tau", [0.07, 0.3, 2.0])
def test_matches_brute_force(data, k, tau):
    train_h, train_y, test_h = data
    got = knn_classify(train_h, train_y, test_h, k, tau, 4)
    assert got.dtype == np.int64 and got.shape == (len(test_h),)
    np.testing.assert_array_equal(got, brute_force_knn(train_h, train_y, test_h, k, tau, 4))


def test_more_classes_than_present(data):
    train_h, train_y, test_h = data
    got = knn_classify(train_h, train_y, test_h, 7, 0.1, 9)
    np.testing.assert_array_equal(got, brute_force_knn(train_h, train_y, test_h, 7, 0.1, 9))
    assert got.max() < 4


def test_float32_option_agrees(data):
    train_h, train_y, test_h = data
    np.testing.assert_array_equal(
        knn_classify(train_h, train_y, test_h, 10, 0.07, 4, dtype=np.float32),
        knn_classify(train_h, train_y, test_h, 10, 0.07, 4),
    )


def test_tiny_tau_is_one_nearest_neighbour(data):
    train_h, train_y, test_h = data
    sk = KNeighborsClassifier(n_neighbors=1, metric="cosine", algorithm="brute")
    expected = sk.fit(train_h, train_y).predict(test_h)
    for k in (3, 20, 60):
        np.testing.assert_array_equal(knn_classify(train_h, train_y, test_h, k, 1e-6, 4), expected)


def test_huge_tau_is_unweighted_vote():
    rng = np.random.default_rng(1)
    train_h, train_y = clustered(rng, 80, 5, 2, spread=2.0)
    test_h, _ = clustered(rng, 40, 5, 2, spread=2.0)
    unit_train = train_h / np.linalg.norm(train_h, axis=1, keepdims=True)
    unit_test = test_h / np.linalg.norm(test_h, axis=1, keepdims=True)
    for k in (1, 3, 7, 15):  # odd k, two classes: no tied votes
        got = knn_classify(train_h, train_y, test_h, k, 1e9, 2)
        sk = KNeighborsClassifier(n_neighbors=k, metric="cosine", algorithm="brute")
        np.testing.assert_array_equal(got, sk.fit(train_h, train_y).predict(test_h))
        # explicit counting of the k most similar labels
        nearest = np.argsort(-(unit_test @ unit_train.T), axis=1, kind="stable")[:, :k]
        counts = np.array([np.bincount(train_y[row], minlength=2) for row in nearest])
        np.testing.assert_array_equal(got, counts.argmax(axis=1))
        assert 0 < got.sum() < len(got)  # both classes predicted: the check has teeth


def test_huge_tau_unweighted_vote_many_classes(data):
    train_h, train_y, test_h = data
    unit_train = train_h / np.linalg.norm(train_h, axis=1, keepdims=True)
    unit_test = test_h / np.linalg.norm(test_h, axis=1, keepdims=True)
    k = 9
    nearest = np.argsort(-(unit_test @ unit_train.T), axis=1, kind="stable")[:, :k]
    counts = np.array([np.bincount(train_y[row], minlength=4) for row in nearest])
    unique_top = (counts == counts.max(axis=1, keepdims=True)).sum(axis=1) == 1
    assert unique_top.sum() >= 10
    got = knn_classify(train_h, train_y, test_h, k, 1e9, 4)
    np.testing.assert_array_equal(got[unique_top], counts.argmax(axis=1)[unique_top])


def test_small_tau_does_not_overflow(data):
    train_h, train_y, test_h = data
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        got = knn_classify(train_h, train_y, test_h, 20, 1e-4, 4)
    with np.errstate(over="ignore"):  # the naive weight e^(1/tau) is not representable
        assert np.isinf(np.exp(np.float64(1.0) / 1e-4))
    expected = (
        KNeighborsClassifier(n_neighbors=1, metric="cosine", algorithm="brute")
        .fit(train_h, train_y)
        .predict(test_h)
    )
    np.testing.assert_array_equal(got, expected)


def test_k_larger_than_bank(data):
    train_h, train_y, test_h = data
    n = len(train_h)
    everyone = knn_classify(train_h, train_y, test_h, 10 * n, 0.2, 4)
    np.testing.assert_array_equal(everyone, knn_classify(train_h, train_y, test_h, n, 0.2, 4))
    np.testing.assert_array_equal(everyone, brute_force_knn(train_h, train_y, test_h, n, 0.2, 4))


def test_vote_tie_goes_to_smaller_label():
    # Two neighbours at exactly the same cosine 1/sqrt(2), labels 2 and 0.
    train_h = np.array([[1.0, 1.0], [1.0, -1.0]])
    train_y = np.array([2, 0])
    test_h = np.array([[1.0, 0.0]])
    for tau in (0.07, 1.0):
        assert knn_classify(train_h, train_y, test_h, 2, tau, 3).tolist() == [0]
        assert knn_classify(train_h, train_y[::-1].copy(), test_h, 2, tau, 3).tolist() == [0]


def test_neighbour_tie_at_kth_place_goes_to_smaller_index():
    train_h = np.array([[1.0, 1.0], [1.0, -1.0], [-1.0, 0.0]])
    test_h = np.array([[1.0, 0.0]])
    assert knn_classify(train_h, [2, 0, 1], test_h, 1, 0.1, 3).tolist() == [2]
    assert knn_classify(train_h, [0, 2, 1], test_h, 1, 0.1, 3).tolist() == [0]
    # with k = 2 both tied neighbours vote, the farthest one is left out
    assert knn_classify(train_h, [2, 1, 1], test_h, 2, 100.0, 3).tolist() == [1]
    assert knn_classify(train_h, [2, 0, 2], test_h, 2, 100.0, 3).tolist() == [0]


def test_block_size_does_not_change_predictions(data):
    train_h, train_y, test_h = data
    ref = knn_classify(train_h, train_y, test_h, 7, 0.07, 4)
    for block_size in (1, 3, 7, 1000):
        np.testing.assert_array_equal(
            knn_classify(train_h, train_y, test_h, 7, 0.07, 4, block_size=block_size), ref
        )


def test_invariant_to_positive_row_scaling_and_rotation(data):
    train_h, train_y, test_h = data
    rng = np.random.default_rng(5)
    ref = knn_classify(train_h, train_y, test_h, 7, 0.07, 4)
    a = rng.uniform(0.01, 100, size=(len(train_h), 1))
    b = rng.uniform(0.01, 100, size=(len(test_h), 1))
    np.testing.assert_array_equal(knn_classify(a * train_h, train_y, b * test_h, 7, 0.07, 4), ref)
    Q = ortho_group.rvs(train_h.shape[1], random_state=3)
    np.testing.assert_array_equal(knn_classify(train_h @ Q, train_y, test_h @ Q, 7, 0.07, 4), ref)


def test_not_invariant_to_translation():
    # a lies in almost the same direction as the query but far away; b is close but
    # at a wider angle. Cosine picks a; after shifting the origin it picks b.
    train_h = np.array([[2.0, 2.2], [1.2, 0.8]])
    train_y = np.array([0, 1])
    test_h = np.array([[1.0, 1.0]])
    assert knn_classify(train_h, train_y, test_h, 1, 0.07, 2).tolist() == [0]
    shift = np.array([-1.0, 0.0])
    assert knn_classify(train_h + shift, train_y, test_h + shift, 1, 0.07, 2).tolist() == [1]


def test_inputs_not_mutated(data):
    train_h, train_y, test_h = data
    copies = [train_h.copy(), train_y.copy(), test_h.copy()]
    knn_classify(train_h, train_y, test_h, 5, 0.07, 4, block_size=4)
    for before, after in zip(copies, (train_h, train_y, test_h)):
        np.testing.assert_array_equal(before, after)


def test_seed_factor_4_2_between_cosines_09_and_08():
    """Seed: at tau = 0.07 a neighbour at cosine 0.9 outvotes one at 0.8 by e^(0.1/0.07) ~ 4.2."""
    ratio = math.exp(0.1 / 0.07)
    assert round(ratio, 1) == 4.2

    def bank(m):
        # one neighbour at cosine 0.9 (label 0), m neighbours at cosine 0.8 (label 1)
        rows = [[0.9, math.sqrt(1 - 0.81), 0.0]]
        for j in range(m):
            phi = 2 * math.pi * j / m
            rows.append([0.8, 0.6 * math.cos(phi), 0.6 * math.sin(phi)])
        return np.array(rows), np.array([0] + [1] * m)

    query = np.array([[1.0, 0.0, 0.0]])
    # 4 votes of weight 1 lose to one vote of weight 4.17; 5 of them win.
    h, y = bank(4)
    assert knn_classify(h, y, query, 5, 0.07, 2).tolist() == [0]
    h, y = bank(5)
    assert knn_classify(h, y, query, 6, 0.07, 2).tolist() == [1]
    # At tau = 0.075 the factor drops below 4 (e^(0.1/0.075) ~ 3.79): 4 neighbours win.
    h, y = bank(4)
    assert knn_classify(h, y, query, 5, 0.075, 2).tolist() == [1]


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n_train=st.integers(1, 30),
    n_test=st.integers(1, 12),
    d=st.integers(1, 5),
    n_classes=st.integers(1, 6),
    k=st.integers(1, 40),
    tau=st.sampled_from([1e-4, 0.07, 1.0, 50.0]),
    block_size=st.one_of(st.none(), st.integers(1, 5)),
)
def test_property_shapes_and_labels(seed, n_train, n_test, d, n_classes, k, tau, block_size):
    rng = np.random.default_rng(seed)
    train_h = rng.normal(size=(n_train, d)) + 0.01  # a zero row has probability 0
    test_h = rng.normal(size=(n_test, d)) + 0.01
    train_y = rng.integers(0, n_classes, size=n_train)
    pred = knn_classify(
        train_h, train_y, test_h, k=k, tau=tau, n_classes=n_classes, block_size=block_size
    )
    assert pred.shape == (n_test,) and pred.dtype == np.int64
    assert np.all((pred >= 0) & (pred < n_classes))
    # the winning class always has a voter among the k nearest neighbours
    unit_train = train_h / np.linalg.norm(train_h, axis=1, keepdims=True)
    unit_test = test_h / np.linalg.norm(test_h, axis=1, keepdims=True)
    order = np.argsort(-(unit_test @ unit_train.T), axis=1, kind="stable")[:, :k]
    for row, p in zip(order, pred):
        assert p in set(train_y[row].tolist())
    if k == 1:
        np.testing.assert_array_equal(pred, train_y[order[:, 0]])


GOOD = dict(
    train_h=np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]),
    train_y=np.array([0, 1, 1]),
    test_h=np.array([[1.0, 0.2]]),
    k=2,
    tau=0.07,
    n_classes=2,
)


def call(**overrides):
    args = {**GOOD, **overrides}
    return knn_classify(
        args.pop("train_h"),
        args.pop("train_y"),
        args.pop("test_h"),
        args.pop("k"),
        args.pop("tau"),
        args.pop("n_classes"),
        **args,
    )


def test_good_arguments_work():
    assert call().tolist() == [0]


@pytest.mark.parametrize(
    "overrides, exc, word",
    [
        (dict(train_h=np.zeros((0, 2))), ValueError, "train_h"),
        (dict(train_h=np.ones(3)), ValueError, "train_h"),
        (dict(train_h=[[1.0, np.nan], [0, 1], [1, 1]]), ValueError, "train_h"),
        (dict(train_h=[[1.0, 0.0], [0, 0], [1, 1]]), ValueError, "train_h"),
        (dict(train_h="abc"), TypeError, "train_h"),
        (dict(test_h=[[1.0, 0.2, 0.3]]), ValueError, "test_h"),
        (dict(test_h=[[np.inf, 0.2]]), ValueError, "test_h"),
        (dict(test_h=[[0.0, 0.0]]), ValueError, "test_h"),
        (dict(train_y=[0, 1]), ValueError, "train_y"),
        (dict(train_y=[0, 1, 2]), ValueError, "train_y"),
        (dict(train_y=[0, -1, 1]), ValueError, "train_y"),
        (dict(train_y=[0, 0.5, 1]), ValueError, "train_y"),
        (dict(k=0), ValueError, "k"),
        (dict(k=1.5), TypeError, "k"),
        (dict(tau=0.0), ValueError, "tau"),
        (dict(tau=-1.0), ValueError, "tau"),
        (dict(tau=np.inf), ValueError, "tau"),
        (dict(tau=np.nan), ValueError, "tau"),
        (dict(n_classes=0), ValueError, "n_classes"),
        (dict(n_classes=1), ValueError, "train_y"),
        (dict(block_size=0), ValueError, "block_size"),
        (dict(dtype=np.int32), TypeError, "dtype"),
    ],
)
def test_bad_inputs(overrides, exc, word):
    with pytest.raises(exc, match=word):
        call(**overrides)


def test_exact_vote_tie_from_duplicated_features_goes_to_smaller_label():
    # Regression (audit): votes were summed in training-index order, so two classes
    # whose neighbours had exactly the same similarities (duplicated features) could
    # differ by one rounding and the larger label won (here class 2, by one ulp).
    # Classes 0 and 2 each own one copy of directions 2 and 3 and two of direction 1.
    directions = np.array([[1.0, 0.0], [0.8, 0.6], [0.6, 0.8], [0.28, 0.96]])
    train_h = directions[[1, 2, 3, 1, 1, 1, 0, 2, 3]]
    train_y = np.array([2, 0, 2, 0, 2, 0, 1, 2, 0])
    test_h = directions[:1]
    for tau in (0.3, 1.0, 3.0):
        assert knn_classify(train_h, train_y, test_h, k=9, tau=tau, n_classes=3).tolist() == [0]
        assert knn_classify(train_h, train_y, test_h, k=20, tau=tau, n_classes=3).tolist() == [0]


@pytest.mark.parametrize("levels", [3, 50, 10**6])
def test_fast_selection_equals_the_tie_breaking_mask(levels):
    # _top_k (group-maxima threshold, or its partition fallback under massive ties) must
    # select exactly the entries of _keep_mask: the k largest, ties to the smaller column
    from repeval_ref.knn import _keep_mask, _top_k, _top_k_partition

    rng = np.random.default_rng(levels)
    for _ in range(60):
        m, n = int(rng.integers(1, 6)), int(rng.integers(2, 700))
        k = int(rng.integers(1, n))
        sims = rng.integers(0, levels, size=(m, n)).astype(np.float32)
        expected = np.nonzero(_keep_mask(sims, k))
        for select in (_top_k, _top_k_partition):
            rows, cols = select(sims, k)
            np.testing.assert_array_equal(rows, expected[0])
            np.testing.assert_array_equal(cols, expected[1])
