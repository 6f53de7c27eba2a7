"""Ranks across tasks, the mean rank and Kendall's tau-b, checked against SciPy and a plain
bootstrap loop."""

import itertools

import numpy as np
import pytest
from scipy.stats import kendalltau, rankdata

from repeval_ref.rank_agreement import (
    kendall_tau_b,
    mean_rank,
    rank_bootstrap,
    task_ranks,
    tau_b_matrix,
)


def _suite(seed, m=5, sizes=(60, 45, 80), ties=False):
    """Correctness arrays of m encoders on tasks of the given sizes; better encoders get more
    right."""
    rng = np.random.default_rng(seed)
    skill = np.linspace(0.45, 0.8, m)
    out = []
    for n in sizes:
        p = np.clip(skill + 0.15 * rng.normal(size=m), 0.05, 0.95)
        c = rng.random((m, n)) < p[:, None]
        if ties:
            c[1] = c[0]  # two encoders with the same answers: tied on every replicate
        out.append(c)
    return out


def test_task_ranks_equal_scipy_rankdata_with_average_ties():
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 4, size=(7, 5)) / 4.0  # many ties
    ranks = task_ranks(scores)
    for j in range(scores.shape[1]):
        np.testing.assert_allclose(ranks[:, j], rankdata(-scores[:, j], method="average"))
    np.testing.assert_allclose(ranks.sum(axis=0), 7 * 8 / 2)
    np.testing.assert_allclose(mean_rank(scores), ranks.mean(axis=1))


@pytest.mark.parametrize("seed", range(6))
def test_kendall_tau_b_equals_scipy_including_ties(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(2, 9))
    x = rng.integers(0, 3, size=m).astype(float)
    y = rng.integers(0, 3, size=m).astype(float)
    expected = kendalltau(x, y).statistic
    got = kendall_tau_b(x, y)
    if np.isnan(expected):
        assert np.isnan(got)
    else:
        assert got == pytest.approx(expected, abs=1e-12)


def test_tau_matrix_is_scipy_on_every_pair_of_tasks():
    rng = np.random.default_rng(3)
    scores = rng.random((6, 4))
    scores[2, 1] = scores[3, 1]  # one tie
    tau = tau_b_matrix(scores)
    for a, b in itertools.product(range(4), repeat=2):
        assert tau[a, b] == pytest.approx(
            kendalltau(scores[:, a], scores[:, b]).statistic, abs=1e-12
        )
    # tau on ranks is tau on scores: ranking is monotone
    np.testing.assert_allclose(tau_b_matrix(task_ranks(scores)), tau, atol=1e-12)


def test_a_duplicated_task_has_tau_one_and_a_reversed_one_minus_one():
    rng = np.random.default_rng(4)
    s = rng.random(6)
    tau = tau_b_matrix(np.stack([s, s, -s], axis=1))
    assert tau[0, 1] == pytest.approx(1.0) and tau[0, 2] == pytest.approx(-1.0)
    c = _suite(5, sizes=(50,))
    res = rank_bootstrap([c[0], c[0]], n_boot=200, seed=1)
    assert res["tau"][0, 1] == pytest.approx(1.0)
    # the two copies are resampled independently, so replicates differ; but a task against
    # itself is 1 on every replicate where defined
    np.testing.assert_allclose(res["tau_interval"][0, 0], [1.0, 1.0])


def test_all_tied_task_gives_nan_tau():
    scores = np.array([[0.5, 0.1], [0.5, 0.9], [0.5, 0.4]])
    assert np.isnan(tau_b_matrix(scores)[0, 1]) and np.isnan(
        kendall_tau_b(scores[:, 0], scores[:, 1])
    )
    assert np.isnan(kendalltau(scores[:, 0], scores[:, 1]).statistic)


def _brute_force(correct, n_boot, seed, level):
    """The documented resampling written as a plain loop over replicates, scored with SciPy."""
    rng = np.random.default_rng(seed)
    draws = [rng.integers(0, c.shape[1], size=(n_boot, c.shape[1])) for c in correct]
    m, t = correct[0].shape[0], len(correct)
    means, taus = [], []
    for b in range(n_boot):
        acc = np.empty((m, t))
        for k, c in enumerate(correct):
            for i in range(m):
                acc[i, k] = np.mean(c[i, draws[k][b]])
        ranks = np.column_stack([rankdata(-acc[:, k], method="average") for k in range(t)])
        means.append(ranks.mean(axis=1))
        taus.append(
            [[kendalltau(ranks[:, a], ranks[:, bb]).statistic for bb in range(t)] for a in range(t)]
        )
    q = [100 * (1 - level) / 2, 100 * (1 + level) / 2]
    taus = np.array(taus)
    tau_int = np.full((t, t, 2), np.nan)
    for a, bb in itertools.product(range(t), repeat=2):
        v = taus[:, a, bb]
        v = v[np.isfinite(v)]
        if v.size:
            tau_int[a, bb] = np.percentile(v, q)
    return np.percentile(np.array(means), q, axis=0).T, tau_int


@pytest.mark.parametrize("ties", [False, True])
def test_bootstrap_equals_a_plain_loop_over_replicates(ties):
    correct = _suite(7, ties=ties)
    res = rank_bootstrap(correct, n_boot=150, seed=11, level=0.9)
    mean_int, tau_int = _brute_force(correct, 150, 11, 0.9)
    np.testing.assert_allclose(res["mean_rank_interval"], mean_int, atol=1e-12)
    np.testing.assert_allclose(res["tau_interval"], tau_int, atol=1e-12)
    acc = np.stack([c.mean(axis=1) for c in correct], axis=1)
    np.testing.assert_allclose(res["accuracy"], acc)
    np.testing.assert_allclose(
        res["ranks"], np.column_stack([rankdata(-acc[:, k]) for k in range(3)])
    )
    assert np.all(res["mean_rank_interval"][:, 0] <= res["mean_rank_interval"][:, 1])


def test_blocks_of_draws_give_the_stream_of_one_call(monkeypatch):
    import repeval_ref.rank_agreement as ra

    correct = _suite(8, sizes=(40, 30))
    whole = rank_bootstrap(correct, n_boot=60, seed=2)
    monkeypatch.setattr(ra, "_BLOCK_ITEMS", 7 * 40)  # 7 replicates per block
    blocked = rank_bootstrap(correct, n_boot=60, seed=2)
    np.testing.assert_array_equal(whole["mean_rank_interval"], blocked["mean_rank_interval"])
    np.testing.assert_array_equal(whole["tau_interval"], blocked["tau_interval"])


def test_relabelling_the_encoders_permutes_the_output():
    correct = _suite(9, m=6)
    perm = np.array([3, 0, 5, 1, 4, 2])
    a = rank_bootstrap(correct, n_boot=120, seed=4)
    b = rank_bootstrap([c[perm] for c in correct], n_boot=120, seed=4)
    for key in ("accuracy", "ranks", "mean_rank", "mean_rank_interval"):
        np.testing.assert_allclose(b[key], a[key][perm], atol=1e-12)
    np.testing.assert_allclose(b["tau"], a["tau"], atol=1e-12)  # tau does not depend on the order
    np.testing.assert_allclose(b["tau_interval"], a["tau_interval"], atol=1e-12)


def test_interval_narrows_with_more_items_and_covers_the_point():
    rng = np.random.default_rng(12)
    p = np.array([0.5, 0.6, 0.7, 0.8])
    widths = []
    for n in (60, 2000):
        correct = [rng.random((4, n)) < p[:, None] for _ in range(3)]
        res = rank_bootstrap(correct, n_boot=300, seed=0)
        lo, hi = res["mean_rank_interval"].T
        widths.append(np.mean(hi - lo))
    assert widths[1] < widths[0]
    # with 2000 items per task the order 4 > 3 > 2 > 1 is clear on every task
    np.testing.assert_allclose(res["mean_rank"], [4, 3, 2, 1])
    np.testing.assert_allclose(res["tau_interval"][0, 1], [1, 1])


@pytest.mark.parametrize(
    "bad, match",
    [
        ([np.ones((1, 5), bool)], "at least 2 encoders"),
        ([], "empty"),
        ([np.ones((3, 5), bool), np.ones((2, 5), bool)], r"correct\[1\] has 2 encoders"),
        ([np.full((3, 5), 0.5)], r"correct\[0\] must hold booleans"),
        ([np.ones(5, bool)], r"correct\[0\] must have shape"),
    ],
)
def test_bad_correct_arrays_are_named(bad, match):
    with pytest.raises(ValueError, match=match):
        rank_bootstrap(bad, n_boot=10)


def test_bad_arguments_are_named():
    c = _suite(1)
    with pytest.raises(ValueError, match="n_boot"):
        rank_bootstrap(c, n_boot=0)
    with pytest.raises(ValueError, match="level"):
        rank_bootstrap(c, level=1.5)
    with pytest.raises(ValueError, match="scores"):
        task_ranks(np.ones(4))
    with pytest.raises(ValueError, match="scores must be finite"):
        task_ranks(np.array([[1.0], [np.nan]]))
    with pytest.raises(ValueError, match="same length"):
        kendall_tau_b([1, 2, 3], [1, 2])
