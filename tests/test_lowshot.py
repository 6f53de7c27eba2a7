"""Tests of repeval_ref.lowshot.low_shot_eval (book/noise.md; seed 000, low-shot evaluation)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from repeval_ref import low_shot_eval


def make_data(seed=0, n_classes=4, per_class=(12, 9, 15, 10), n_test=60, d=6):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_classes, d))
    train_y = np.repeat(np.arange(n_classes) * 2 + 1, per_class)  # labels 1, 3, 5, 7
    train_h = centres[(train_y - 1) // 2] + 1.2 * rng.normal(size=(len(train_y), d))
    test_y = rng.choice(np.arange(n_classes) * 2 + 1, size=n_test)
    test_h = centres[(test_y - 1) // 2] + 1.2 * rng.normal(size=(n_test, d))
    perm = rng.permutation(len(train_y))  # classes interleaved in the pool
    return train_h[perm], train_y[perm], test_h, test_y


def reference_accuracies(train_h, train_y, test_h, test_y, shots, n_draws, rng):
    """Explicit loops over draws, classes and test images."""
    n_per_class = shots

    def unit(v):
        return v / math.sqrt(float(np.dot(v, v)))

    train_u = [unit(h) for h in train_h]
    test_u = [unit(h) for h in test_h]
    classes = sorted(set(train_y.tolist()))
    accs = []
    for _ in range(n_draws):
        means = []
        for c in classes:
            idx = np.flatnonzero(train_y == c)
            support = rng.choice(idx, size=n_per_class, replace=False)
            total = np.zeros(train_h.shape[1])
            for i in support:
                total = total + train_u[i]
            means.append(unit(total / n_per_class))
        correct = 0
        for h, y in zip(test_u, test_y):
            best_c, best_s = None, -np.inf
            for c, m in zip(classes, means):
                s = float(np.dot(h, m))
                if s > best_s:
                    best_c, best_s = c, s
            correct += best_c == y
        accs.append(correct / len(test_y))
    return np.array(accs)


@pytest.fixture(scope="module")
def data():
    return make_data()


@pytest.mark.parametrize("n_per_class", [1, 3, 9])
def test_matches_explicit_loops(data, n_per_class):
    mean, std = low_shot_eval(*data, n_per_class, 12, np.random.default_rng(42))
    accs = reference_accuracies(*data, n_per_class, 12, np.random.default_rng(42))
    assert isinstance(mean, float) and isinstance(std, float)
    assert mean == pytest.approx(accs.mean(), abs=1e-15)
    assert std == pytest.approx(np.std(accs, ddof=1), abs=1e-15)
    if n_per_class == 1:
        # ddof=1, not ddof=0: the two differ when the draws disagree
        assert np.std(accs, ddof=1) > np.std(accs, ddof=0) > 0


def test_rng_stream_is_exactly_the_choice_calls(data):
    train_h, train_y, test_h, test_y = data
    rng = np.random.default_rng(123)
    low_shot_eval(train_h, train_y, test_h, test_y, 2, 5, rng)
    replay = np.random.default_rng(123)
    for _ in range(5):
        for c in np.unique(train_y):
            replay.choice(np.flatnonzero(train_y == c), size=2, replace=False)
    assert rng.bit_generator.state == replay.bit_generator.state
    # one extra call would have been visible
    replay.choice(np.flatnonzero(train_y == 1), size=2, replace=False)
    assert rng.bit_generator.state != replay.bit_generator.state


def test_int_seed_is_default_rng(data):
    assert low_shot_eval(*data, 2, 6, 7) == low_shot_eval(*data, 2, 6, np.random.default_rng(7))


def test_whole_class_support_has_no_spread():
    train_h, train_y, test_h, test_y = make_data(seed=4, per_class=(8, 8, 8, 8))
    mean, std = low_shot_eval(train_h, train_y, test_h, test_y, 8, 5, np.random.default_rng(0))
    assert std == 0.0
    accs = reference_accuracies(train_h, train_y, test_h, test_y, 8, 1, np.random.default_rng(0))
    assert mean == pytest.approx(accs[0], abs=1e-15)


def test_spread_shrinks_with_more_shots(data):
    stds = [low_shot_eval(*data, n, 20, np.random.default_rng(1))[1] for n in (1, 8)]
    assert stds[0] > stds[1]


def test_hand_example_and_tie_to_smaller_class():
    # row 0 is class 2 at (1, 0), row 1 is class 0 at (0, 1): the class means
    train_h = np.array([[1.0, 0.0], [0.0, 1.0]])
    train_y = np.array([2, 0])
    # (1, 1) is equally close to both means: the tie goes to class 0, the smaller label
    test_h = np.array([[1.0, 1.0], [5.0, 1.0], [1.0, 5.0]])
    assert low_shot_eval(train_h, train_y, test_h, [0, 2, 0], 1, 2, 0) == (1.0, 0.0)
    assert low_shot_eval(train_h, train_y, test_h, [2, 2, 0], 1, 2, 0) == (2 / 3, 0.0)


def test_inputs_not_mutated(data):
    copies = [x.copy() for x in data]
    low_shot_eval(*data, 2, 3, 0)
    for before, after in zip(copies, data):
        np.testing.assert_array_equal(before, after)


SMALL = make_data(seed=1, per_class=(3, 2, 4, 3), n_test=5, d=3)


def call(**overrides):
    args = dict(zip(["train_h", "train_y", "test_h", "test_y"], SMALL))
    args.update(n_per_class=1, n_draws=2, rng=0)
    args.update(overrides)
    return low_shot_eval(**args)


def test_small_good_call():
    mean, std = call()
    assert 0.0 <= mean <= 1.0 and std >= 0.0


@pytest.mark.parametrize(
    "overrides, exc, word",
    [
        (dict(n_per_class=0), ValueError, "n_per_class"),
        (dict(n_per_class=3), ValueError, "class 3"),
        (dict(n_per_class=1.5), TypeError, "n_per_class"),
        (dict(n_draws=1), ValueError, "n_draws"),
        (dict(n_draws=0), ValueError, "n_draws"),
        (dict(rng="seed"), TypeError, "rng"),
        (dict(rng=np.random.RandomState(0)), TypeError, "rng"),
        (dict(test_y=SMALL[3][:-1]), ValueError, "test_y"),
        (dict(test_y=np.r_[SMALL[3][:-1], -1]), ValueError, "test_y"),
        (dict(train_y=SMALL[1][:-1]), ValueError, "train_y"),
        (dict(train_h=np.where(np.eye(12, 3) > 0, np.nan, SMALL[0])), ValueError, "train_h"),
        (dict(test_h=np.full((5, 3), np.inf)), ValueError, "test_h"),
        (dict(test_h=np.zeros((5, 3))), ValueError, "test_h"),
        (dict(train_h=np.r_[np.zeros((1, 3)), SMALL[0][1:]]), ValueError, "train_h"),
        (dict(test_h=SMALL[2][:, :2]), ValueError, "test_h"),
        (dict(train_h=np.zeros((0, 3)), train_y=np.zeros(0, int)), ValueError, "train_h"),
    ],
)
def test_bad_inputs(overrides, exc, word):
    with pytest.raises(exc, match=word):
        call(**overrides)


def test_support_mean_zero_is_reported():
    # two opposite unit vectors in one class: a 2-shot mean of exactly zero
    train_h = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, 2.0]])
    train_y = np.array([0, 0, 1, 1])
    with pytest.raises(ValueError, match="zero vector"):
        low_shot_eval(train_h, train_y, [[1.0, 1.0]], [0], 2, 2, 0)


def test_test_label_absent_from_training_counts_as_an_error():
    """A test image of a class with no support example can never be predicted: it is
    scored as wrong (not rejected), so accuracy drops by exactly its share."""
    train_h, train_y, test_h, test_y = SMALL
    unseen = test_y.copy()
    unseen[0] = 2  # no training example has label 2 (labels are odd)
    a, _ = low_shot_eval(train_h, train_y, test_h, test_y, 1, 3, np.random.default_rng(5))
    b, _ = low_shot_eval(train_h, train_y, test_h, unseen, 1, 3, np.random.default_rng(5))
    first_right = reference_accuracies(
        train_h, train_y, test_h[:1], test_y[:1], 1, 3, np.random.default_rng(5)
    )
    assert np.isclose(a - b, np.mean(first_right) / len(test_y))


def test_float32_memory_map_equals_normalising_every_row_first(tmp_path, monkeypatch):
    import repeval_ref._blocks as blocks_module

    rng = np.random.default_rng(7)
    y = np.arange(300) % 3
    X = (rng.standard_normal((300, 8)) + y[:, None]).astype(np.float32)
    Xt, yt = (
        (rng.standard_normal((40, 8)) + np.arange(40)[:, None] % 3).astype(np.float32),
        np.arange(40) % 3,
    )
    np.save(tmp_path / "x.npy", X)
    M = np.load(tmp_path / "x.npy", mmap_mode="r")
    monkeypatch.setattr(blocks_module, "BLOCK_BYTES", 64)  # two rows a block
    got = low_shot_eval(M, y, Xt, yt, 5, 4, 11)
    # independent: every row normalised first, the draws replayed with the same generator
    U = X.astype(np.float64) / np.linalg.norm(X.astype(np.float64), axis=1, keepdims=True)
    Ut = Xt.astype(np.float64) / np.linalg.norm(Xt.astype(np.float64), axis=1, keepdims=True)
    g = np.random.default_rng(11)
    accs = []
    for _ in range(4):
        m = np.stack(
            [U[g.choice(np.flatnonzero(y == c), 5, replace=False)].mean(axis=0) for c in range(3)]
        )
        m /= np.linalg.norm(m, axis=1, keepdims=True)
        accs.append(np.mean(np.argmax(Ut @ m.T, axis=1) == yt))
    assert got[0] == pytest.approx(np.mean(accs), abs=1e-12)
    assert got[1] == pytest.approx(np.std(accs, ddof=1), abs=1e-12)
    X[251] = 0
    np.save(tmp_path / "z.npy", X)
    with pytest.raises(ValueError, match="train_h has a zero vector at row 251"):
        low_shot_eval(np.load(tmp_path / "z.npy", mmap_mode="r"), y, Xt, yt, 5, 4, 11)
