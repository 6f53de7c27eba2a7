"""Separations of two protocols on one task: signs, flips and the range of tau, against brute
force."""

import itertools

import numpy as np
import pytest

from repeval_ref.protocol_agreement import protocol_flips, separation_signs, tau_range
from repeval_ref.rank_agreement import kendall_tau_b


def test_separation_signs_need_both_the_corrected_test_and_the_interval():
    lo = [0.01, -0.05, -0.02, 0.01, -0.03]
    hi = [0.04, -0.01, 0.03, 0.05, -0.01]
    p = [0.001, 0.002, 0.001, 0.2, 0.05]
    np.testing.assert_array_equal(separation_signs(lo, hi, p, alpha=0.05), [1, -1, 0, 0, 0])


def test_protocol_flips_are_the_pairs_with_opposite_nonzero_signs():
    a = [1, -1, 0, 1, -1, 1]
    b = [-1, -1, 1, 0, 1, 1]
    np.testing.assert_array_equal(protocol_flips(a, b), [0, 4])


def _brute_tau_range(a, b):
    """Every +-1 filling of the pairs that one protocol leaves unseparated, then the mean
    product."""
    a, b = np.asarray(a), np.asarray(b)
    free = np.flatnonzero((a == 0) | (b == 0))
    values = []
    for fill in itertools.product((-1, 1), repeat=free.size):
        prod = a * b
        prod[free] = fill
        values.append(prod.mean())
    return min(values), max(values)


@pytest.mark.parametrize("seed", range(8))
def test_tau_range_equals_brute_force_over_fillings(seed):
    rng = np.random.default_rng(seed)
    P = int(rng.integers(1, 11))
    a = rng.integers(-1, 2, size=P)
    b = rng.integers(-1, 2, size=P)
    np.testing.assert_allclose(tau_range(a, b), _brute_tau_range(a, b))


@pytest.mark.parametrize("seed", range(5))
def test_tau_range_covers_the_true_tau_when_every_separation_is_right(seed):
    """Separations copied from the true orders (some pairs hidden) keep the true tau-b inside."""
    rng = np.random.default_rng(seed)
    m = 6
    x, y = rng.normal(size=m), rng.normal(size=m)
    i, j = np.triu_indices(m, k=1)
    sa, sb = np.sign(x[j] - x[i]), np.sign(y[j] - y[i])
    sa[rng.random(sa.size) < 0.4] = 0
    sb[rng.random(sb.size) < 0.4] = 0
    low, high = tau_range(sa, sb)
    assert low - 1e-12 <= kendall_tau_b(x, y) <= high + 1e-12


def test_tau_range_all_separated_is_the_tau_itself():
    x = np.array([0.9, 0.7, 0.8, 0.5])
    y = np.array([0.6, 0.9, 0.8, 0.5])
    i, j = np.triu_indices(4, k=1)
    sa, sb = np.sign(x[j] - x[i]), np.sign(y[j] - y[i])
    low, high = tau_range(sa, sb)
    assert low == pytest.approx(kendall_tau_b(x, y)) and high == pytest.approx(low)


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: separation_signs([0.1], [0.0], [0.01]), "lo"),
        (lambda: separation_signs([0.0, 0.1], [0.2], [0.01]), "hi"),
        (lambda: separation_signs([0.0], [0.2], [1.5]), "p_adjusted"),
        (lambda: separation_signs([0.0], [np.nan], [0.5]), "hi"),
        (lambda: separation_signs([0.0], [0.2], [0.5], alpha=1.0), "alpha"),
        (lambda: protocol_flips([1, 2], [1, 1]), "sign_a"),
        (lambda: protocol_flips([1, 0], [1]), "sign_b"),
        (lambda: tau_range([], []), "sign_a"),
        (lambda: tau_range([[1]], [[1]]), "sign_a"),
    ],
)
def test_bad_input_raises_value_error_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()
