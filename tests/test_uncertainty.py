"""Tests of repeval_ref.uncertainty: Wilson interval, paired tests and the paired bootstrap."""

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint

from repeval_ref import (
    binomial_standard_error,
    expected_max_of_normals,
    mcnemar_exact,
    paired_bootstrap_ci,
    paired_standard_error,
    wilson_interval,
)


def paired_outcomes(n00, n01, n10, n11, seed=0):
    """Correctness vectors with the given cell counts (a, b), shuffled."""
    a = np.repeat([0, 0, 1, 1], [n00, n01, n10, n11])
    b = np.repeat([0, 1, 0, 1], [n00, n01, n10, n11])
    perm = np.random.default_rng(seed).permutation(a.size)
    return a[perm], b[perm]


# ---------------------------------------------------------------- Wilson


@pytest.mark.parametrize("n", [1, 2, 7, 30, 600, 50_000])
def test_wilson_matches_statsmodels(n):
    ks = sorted({0, 1, n // 3, n // 2, n - 1, n})
    for k in ks:
        for z, alpha in [(1.959963984540054, 0.05), (stats.norm.ppf(0.995), 0.01)]:
            lo, hi = wilson_interval(k, n, z)
            ref_lo, ref_hi = proportion_confint(k, n, alpha=alpha, method="wilson")
            assert isinstance(lo, float) and isinstance(hi, float)
            assert lo == pytest.approx(ref_lo, abs=1e-12)
            assert hi == pytest.approx(ref_hi, abs=1e-12)
            assert 0.0 <= lo <= k / n <= hi <= 1.0


def test_wilson_endpoints_exact_and_default_z():
    for n in [1, 3, 10, 999]:
        assert wilson_interval(0, n)[0] == 0.0
        assert wilson_interval(n, n)[1] == 1.0
    assert wilson_interval(3, 10) == wilson_interval(3, 10, 1.959963984540054)
    # a wider z gives a wider interval
    lo1, hi1 = wilson_interval(30, 100, 1.0)
    lo2, hi2 = wilson_interval(30, 100, 3.0)
    assert lo2 < lo1 < 0.3 < hi1 < hi2


@pytest.mark.parametrize("z", [0.5, 2.0, 30.0, 1e3, 1e160, 1e300])
def test_wilson_large_z_is_finite_and_continuous(z):
    # z * z overflows for z > 1.3e154, which would give (0.0, nan); where z^2 > n the
    # formulas are multiplied through by n / z^2, and must agree with statsmodels where
    # both are finite.
    for n, k in [(1, 0), (1, 1), (10, 3), (600, 599)]:
        lo, hi = wilson_interval(k, n, z)
        assert np.isfinite(lo) and np.isfinite(hi) and 0.0 <= lo <= k / n <= hi <= 1.0
        if z < 1e100:
            alpha = 2 * stats.norm.sf(z)
            if alpha > 0:
                ref_lo, ref_hi = proportion_confint(k, n, alpha=alpha, method="wilson")
                assert lo == pytest.approx(ref_lo, abs=1e-12)
                assert hi == pytest.approx(ref_hi, abs=1e-12)
        else:
            assert lo == pytest.approx(0.0, abs=1e-12) and hi == pytest.approx(1.0, abs=1e-12)


def test_wilson_bad_inputs():
    with pytest.raises(ValueError, match="k"):
        wilson_interval(11, 10)
    with pytest.raises(ValueError, match="k"):
        wilson_interval(-1, 10)
    with pytest.raises(ValueError, match="n"):
        wilson_interval(0, 0)
    with pytest.raises(TypeError, match="k"):
        wilson_interval(2.5, 10)
    with pytest.raises(ValueError, match="z"):
        wilson_interval(3, 10, 0.0)
    with pytest.raises(ValueError, match="z"):
        wilson_interval(3, 10, np.nan)


# ---------------------------------------------------------------- standard errors


def test_binomial_standard_error():
    assert binomial_standard_error(0.8, 50_000) == pytest.approx(np.sqrt(0.16 / 50_000))
    assert binomial_standard_error(0.0, 10) == 0.0
    assert isinstance(binomial_standard_error(0.5, 4), float)
    assert binomial_standard_error(0.5, 4) == 0.25
    with pytest.raises(ValueError, match="p"):
        binomial_standard_error(1.2, 10)
    with pytest.raises(ValueError, match="p"):
        binomial_standard_error(-0.1, 10)
    with pytest.raises(ValueError, match="n"):
        binomial_standard_error(0.5, 0)


def test_paired_standard_error_seed_example():
    # 7 percent discordant images of 50,000, gain 0.3 points: about 0.12 points
    n = 50_000
    n01, n10 = 1825, 1675  # delta = 0.07, g = 0.003
    n11 = 38_825  # A at 81.0 percent, B at 81.3 percent
    a, b = paired_outcomes(n - 3500 - n11, n01, n10, n11)
    se = paired_standard_error(a, b)
    assert se == pytest.approx(np.sqrt((0.07 - 0.003**2) / n), rel=1e-12)
    assert 100 * se == pytest.approx(0.12, abs=0.005)
    # the same as the standard error of the mean per-image difference (ddof=0)
    assert se == pytest.approx(np.std(b - a) / np.sqrt(n), rel=1e-10)
    # treating the accuracies as independent gives about twice as much
    pa, pb = a.mean(), b.mean()
    indep = np.hypot(binomial_standard_error(pa, n), binomial_standard_error(pb, n))
    assert 100 * indep == pytest.approx(0.25, abs=0.01)


def test_paired_standard_error_no_discordance_and_bad_inputs():
    a = np.array([1, 0, 1, 1], dtype=bool)
    assert paired_standard_error(a, a) == 0.0
    with pytest.raises(ValueError, match="b_correct"):
        paired_standard_error([1, 0, 1], [1, 0])
    with pytest.raises(ValueError, match="a_correct"):
        paired_standard_error([1, 2, 0], [1, 0, 0])
    with pytest.raises(ValueError, match="a_correct"):
        paired_standard_error([], [])


# ---------------------------------------------------------------- McNemar


@pytest.mark.parametrize(
    "cells",
    [(10, 3, 9, 20), (5, 0, 6, 5), (40, 12, 12, 30), (1, 1, 0, 1), (3, 25, 2, 8), (0, 60, 50, 0)],
)
def test_mcnemar_matches_statsmodels_and_binomtest(cells):
    a, b = paired_outcomes(*cells, seed=sum(cells))
    p = mcnemar_exact(a, b)
    n00, n01, n10, n11 = cells
    ref = mcnemar([[n00, n01], [n10, n11]], exact=True).pvalue
    assert isinstance(p, float)
    assert p == pytest.approx(ref, rel=1e-12, abs=1e-15)
    ref2 = stats.binomtest(n01, n01 + n10, 0.5).pvalue
    assert p == pytest.approx(ref2, rel=1e-9, abs=1e-15)
    assert mcnemar_exact(b, a) == p  # symmetric in the two models


def test_mcnemar_no_discordant_pairs_and_bools():
    a = np.array([True, False, True])
    assert mcnemar_exact(a, a) == 1.0
    assert mcnemar_exact(a.astype(int), a.astype(float)) == 1.0
    assert mcnemar_exact([1, 0, 1, 0], [0, 1, 1, 0]) == 1.0  # one each way: 2 * 3/4 clipped to 1


def test_mcnemar_bad_inputs():
    with pytest.raises(ValueError, match="b_correct"):
        mcnemar_exact([1, 0, 1], [1, 0])
    with pytest.raises(ValueError, match="b_correct"):
        mcnemar_exact([1, 0, 1], [1, 0, 0.5])
    with pytest.raises(ValueError, match="a_correct"):
        mcnemar_exact(np.ones((2, 2)), np.ones((2, 2)))
    with pytest.raises(TypeError, match="a_correct"):
        mcnemar_exact(["a", "b"], [1, 0])


# ---------------------------------------------------------------- paired bootstrap


def test_bootstrap_uses_exactly_one_multinomial_call():
    a, b = paired_outcomes(300, 45, 30, 625, seed=1)
    n = a.size
    gain, lo, hi = paired_bootstrap_ci(a, b, 2000, np.random.default_rng(7), level=0.9)
    rng = np.random.default_rng(7)
    counts = rng.multinomial(n, np.array([300, 45, 30, 625]) / n, size=2000)
    gains = (counts[:, 1] - counts[:, 2]) / n
    ref_lo, ref_hi = np.percentile(gains, [5, 95])
    assert gain == pytest.approx((45 - 30) / n, abs=1e-15)
    assert gain == pytest.approx(b.mean() - a.mean(), abs=1e-15)
    assert (lo, hi) == (ref_lo, ref_hi)
    # the generator was advanced by exactly that one call
    gen = np.random.default_rng(7)
    paired_bootstrap_ci(a, b, 2000, gen, level=0.9)
    assert gen.random() == rng.random()
    assert all(isinstance(x, float) for x in (gain, lo, hi))


def test_bootstrap_int_seed_and_level():
    a, b = paired_outcomes(100, 20, 10, 170, seed=2)
    assert paired_bootstrap_ci(a, b, 500, 3) == paired_bootstrap_ci(
        a, b, 500, np.random.default_rng(3)
    )
    _, lo95, hi95 = paired_bootstrap_ci(a, b, 4000, 4, level=0.95)
    _, lo50, hi50 = paired_bootstrap_ci(a, b, 4000, 4, level=0.5)
    assert lo95 < lo50 < hi50 < hi95


def test_bootstrap_matches_explicit_resampling_in_distribution():
    a, b = paired_outcomes(120, 30, 18, 232, seed=3)
    n = a.size
    n_boot = 20_000
    rng = np.random.default_rng(11)
    idx = rng.integers(0, n, size=(n_boot, n))  # slow way: resample images
    slow = b[idx].mean(axis=1) - a[idx].mean(axis=1)
    counts = np.random.default_rng(12).multinomial(
        n, np.bincount(2 * a + b, minlength=4) / n, size=n_boot
    )
    fast = (counts[:, 1] - counts[:, 2]) / n
    assert fast.mean() == pytest.approx(slow.mean(), abs=5e-4)
    assert fast.std() == pytest.approx(slow.std(), rel=0.03)
    np.testing.assert_allclose(
        np.percentile(fast, [2.5, 25, 50, 75, 97.5]),
        np.percentile(slow, [2.5, 25, 50, 75, 97.5]),
        atol=3e-3,
    )
    gain, lo, hi = paired_bootstrap_ci(a, b, n_boot, np.random.default_rng(13))
    ref_lo, ref_hi = np.percentile(slow, [2.5, 97.5])
    assert lo == pytest.approx(ref_lo, abs=3e-3) and hi == pytest.approx(ref_hi, abs=3e-3)
    # and the bootstrap spread agrees with the paired standard error
    assert slow.std() == pytest.approx(paired_standard_error(a, b), rel=0.05)


def test_bootstrap_no_discordance_gives_zero_interval():
    a = np.array([1, 0, 1, 1, 0])
    assert paired_bootstrap_ci(a, a, 100, 0) == (0.0, 0.0, 0.0)


def test_bootstrap_bad_inputs_and_no_mutation():
    a, b = paired_outcomes(10, 5, 3, 12)
    ca, cb = a.copy(), b.copy()
    paired_bootstrap_ci(a, b, 50, 0)
    np.testing.assert_array_equal(a, ca)
    np.testing.assert_array_equal(b, cb)
    with pytest.raises(ValueError, match="n_boot"):
        paired_bootstrap_ci(a, b, 0, 0)
    with pytest.raises(TypeError, match="n_boot"):
        paired_bootstrap_ci(a, b, 10.5, 0)
    with pytest.raises(ValueError, match="level"):
        paired_bootstrap_ci(a, b, 10, 0, level=1.0)
    with pytest.raises(ValueError, match="level"):
        paired_bootstrap_ci(a, b, 10, 0, level=0.0)
    with pytest.raises(TypeError, match="rng"):
        paired_bootstrap_ci(a, b, 10, "seed")
    with pytest.raises(ValueError, match="b_correct"):
        paired_bootstrap_ci(a, b[:-1], 10, 0)


# ---------------------------------------------------------------- expected maximum


def test_expected_max_of_normals_closed_forms_and_seed_value():
    assert expected_max_of_normals(1) == 0.0
    assert expected_max_of_normals(2) == pytest.approx(1 / np.sqrt(np.pi), rel=1e-10)
    assert expected_max_of_normals(3) == pytest.approx(3 / (2 * np.sqrt(np.pi)), rel=1e-10)
    assert expected_max_of_normals(52) == pytest.approx(2.26, abs=0.005)
    values = [expected_max_of_normals(m) for m in (2, 5, 52, 1000, 10**6)]
    assert np.all(np.diff(values) > 0)
    assert isinstance(values[0], float)


def test_expected_max_of_normals_monte_carlo():
    rng = np.random.default_rng(0)
    draws = rng.standard_normal((20_000, 52)).max(axis=1)
    se = draws.std() / np.sqrt(draws.size)
    assert abs(expected_max_of_normals(52) - draws.mean()) < 4 * se
    draws10 = rng.standard_normal((20_000, 10)).max(axis=1)
    assert abs(expected_max_of_normals(10) - draws10.mean()) < 4 * draws10.std() / np.sqrt(20_000)


def test_expected_max_bad_inputs():
    with pytest.raises(ValueError, match="m"):
        expected_max_of_normals(0)
    with pytest.raises(TypeError, match="m"):
        expected_max_of_normals(2.5)
