"""The MOVER interval of a sum of estimates: Newcombe's difference of Wilson intervals, and
coverage."""

import numpy as np
import pytest

from repeval_ref.mover import mover_interval
from repeval_ref.uncertainty import wilson_interval


def test_difference_of_two_wilson_intervals_is_newcombes_method_10():
    k1, n1, k2, n2 = 56, 70, 48, 80
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson_interval(k1, n1)
    l2, u2 = wilson_interval(k2, n2)
    # Newcombe (1998), method 10, written out
    delta = p1 - p2
    low = delta - np.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = delta + np.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    np.testing.assert_allclose(
        mover_interval([p1, p2], [l1, l2], [u1, u2], [1, -1]), (delta, low, high)
    )


def test_symmetric_intervals_add_their_half_widths_in_quadrature():
    est = np.array([0.3, 0.1, 0.5, 0.2])
    half = np.array([0.02, 0.05, 0.01, 0.03])
    w = np.array([1.0, -1.0, -2.0, 0.5])
    d, lo, hi = mover_interval(est, est - half, est + half, w)
    assert d == pytest.approx(np.sum(w * est))
    assert hi - d == pytest.approx(np.sqrt(np.sum((w * half) ** 2)))
    assert d - lo == pytest.approx(hi - d)


def test_one_term_with_unit_weight_is_its_own_interval():
    np.testing.assert_allclose(mover_interval([0.4], [0.3], [0.45], [1]), (0.4, 0.3, 0.45))
    np.testing.assert_allclose(mover_interval([0.4], [0.3], [0.45], [-1]), (-0.4, -0.45, -0.3))


def test_coverage_of_an_interaction_of_four_independent_accuracies():
    """(b1 - a1) - (b2 - a2) with Wilson intervals on 800 items each covers the truth about 95 %
    of the time."""
    rng = np.random.default_rng(0)
    p = np.array([0.72, 0.70, 0.74, 0.66])
    w = np.array([1.0, -1.0, -1.0, 1.0])
    truth = np.sum(w * p)
    n, hits, reps = 800, 0, 1000
    for _ in range(reps):
        k = rng.binomial(n, p)
        iv = np.array([wilson_interval(int(x), n) for x in k])
        _, lo, hi = mover_interval(k / n, iv[:, 0], iv[:, 1], w)
        hits += lo <= truth <= hi
    assert 0.93 <= hits / reps <= 0.97


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: mover_interval([], [], [], []), "estimates"),
        (lambda: mover_interval([0.5, 0.4], [0.4], [0.6, 0.5], [1, -1]), "lows"),
        (lambda: mover_interval([0.5], [0.4], [0.6, 0.7], [1]), "highs"),
        (lambda: mover_interval([0.5], [0.4], [0.6], [np.inf]), "weights"),
        (lambda: mover_interval([0.5], [0.55], [0.6], [1]), "lows"),
        (lambda: mover_interval([0.5], [0.4], [0.45], [1]), "highs"),
        (lambda: mover_interval(["a"], [0.4], [0.45], [1]), "estimates"),
    ],
)
def test_bad_input_raises_value_error_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()
