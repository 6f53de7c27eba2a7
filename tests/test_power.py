"""The smallest detectable accuracy difference, paired and unpaired.

* The paired formula is checked against an independent root-finder on Connor's power
  function, against its own sample size (the two are inverse to each other on whole
  numbers), and against a Monte-Carlo simulation of McNemar's test at the returned
  difference: the simulated power must be close to the target.
* The unpaired formula is checked against statsmodels' ``NormalIndPower`` with Cohen's
  ``h`` from ``proportion_effectsize``.
* Monotone in n, alpha, power and the discordance; the discordance bound is the maximum
  over every joint distribution with those accuracies.
"""

import math

import numpy as np
import pytest
from scipy import optimize, stats
from statsmodels.stats.power import NormalIndPower
from statsmodels.stats.proportion import proportion_effectsize

import repeval_ref as R

CHI2_95 = stats.chi2.ppf(0.95, 1)


def _connor_power(delta, psi, n, alpha=0.05):
    """Normal-approximation power of McNemar's test (the far tail neglected)."""
    z_a = stats.norm.ppf(1 - alpha / 2)
    return stats.norm.cdf((math.sqrt(n) * delta - z_a * math.sqrt(psi)) / math.sqrt(psi - delta**2))


def _simulated_mcnemar_power(n, psi, delta, reps, seed, exact=False):
    """Share of simulated test sets on which McNemar's test rejects at 5 %."""
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(n, [(psi + delta) / 2, (psi - delta) / 2, 1 - psi], size=reps)
    n01, n10 = counts[:, 0], counts[:, 1]
    m = n01 + n10
    if exact:
        p = np.minimum(1.0, 2 * stats.binom.cdf(np.minimum(n01, n10), m, 0.5))
        return float(np.mean((m > 0) & (p < 0.05)))
    stat = (n01 - n10) ** 2 / np.maximum(m, 1)
    return float(np.mean(stat > CHI2_95))


@pytest.mark.parametrize(("n", "psi"), [(200, 0.3), (1000, 0.1), (5000, 0.04), (10000, 0.2)])
def test_paired_difference_solves_connors_power_equation(n, psi):
    delta = R.paired_detectable_difference(n, psi)
    assert _connor_power(delta, psi, n) == pytest.approx(0.8, abs=1e-9)
    root = optimize.brentq(
        lambda d: _connor_power(d, psi, n) - 0.8, 1e-9, psi * (1 - 1e-12), xtol=1e-14
    )
    assert delta == pytest.approx(root, rel=1e-9)


@pytest.mark.parametrize(("n", "psi"), [(300, 0.25), (1000, 0.1), (4000, 0.05)])
def test_simulated_mcnemar_power_at_the_returned_difference_is_the_target(n, psi):
    delta = R.paired_detectable_difference(n, psi)
    simulated = _simulated_mcnemar_power(n, psi, delta, reps=20000, seed=n)
    assert simulated == pytest.approx(0.8, abs=0.02)  # Monte-Carlo s.e. about 0.003
    # the exact test is conservative: it reaches a little less at the same difference
    exact = _simulated_mcnemar_power(n, psi, delta, reps=20000, seed=n, exact=True)
    assert 0.7 < exact <= simulated


def test_half_the_difference_is_not_detected_and_twice_is():
    n, psi = 1000, 0.1
    delta = R.paired_detectable_difference(n, psi)
    assert _simulated_mcnemar_power(n, psi, delta / 2, 20000, 1) < 0.35
    assert _simulated_mcnemar_power(n, psi, min(2 * delta, psi), 20000, 2) > 0.99


@pytest.mark.parametrize(
    ("delta", "psi"), [(0.01, 0.05), (0.02, 0.1), (0.05, 0.3), (0.1, 0.1), (0.003, 0.02)]
)
@pytest.mark.parametrize("power", [0.5, 0.8, 0.9])
def test_sample_size_and_detectable_difference_are_inverse(delta, psi, power):
    n = R.paired_sample_size(delta, psi, power=power)
    assert R.paired_detectable_difference(n, psi, power=power) <= delta * (1 + 1e-12)
    assert R.paired_detectable_difference(n - 1, psi, power=power) > delta


def test_detectable_difference_is_monotone():
    ns = [50, 100, 400, 1600, 6400, 25600]
    by_n = [R.paired_detectable_difference(n, 0.2) for n in ns]
    assert all(a > b for a, b in zip(by_n, by_n[1:]))
    # four times the items halve the detectable difference, asymptotically
    assert by_n[-1] / by_n[-2] == pytest.approx(0.5, abs=0.01)
    alphas = [0.001, 0.01, 0.05, 0.1, 0.2]
    by_alpha = [R.paired_detectable_difference(1000, 0.2, alpha=a) for a in alphas]
    assert all(a > b for a, b in zip(by_alpha, by_alpha[1:]))
    powers = [0.5, 0.6, 0.8, 0.9, 0.99]
    by_power = [R.paired_detectable_difference(1000, 0.2, power=p) for p in powers]
    assert all(a < b for a, b in zip(by_power, by_power[1:]))
    psis = [0.01, 0.05, 0.1, 0.3, 1.0]
    by_psi = [R.paired_detectable_difference(10000, p) for p in psis]
    assert all(a < b for a, b in zip(by_psi, by_psi[1:]))
    by_n_unpaired = [R.unpaired_detectable_difference(n, 0.7) for n in ns]
    assert all(a > b for a, b in zip(by_n_unpaired, by_n_unpaired[1:]))


def test_power_one_half_is_the_plain_z_test_margin():
    # z_b = 0: the difference whose expected statistic sits exactly on the critical value
    z = stats.norm.ppf(0.975)
    assert R.paired_detectable_difference(900, 0.16, power=0.5) == pytest.approx(
        z * math.sqrt(0.16 / 900)
    )


def test_nothing_is_detectable_with_too_few_discordant_items():
    assert R.paired_detectable_difference(3, 0.5) == math.inf  # n < z_a^2
    # 40 items with 5 % discordance: two discordant items expected, no difference reaches the power
    n, psi = 40, 0.05
    assert R.paired_detectable_difference(n, psi) == math.inf
    assert R.paired_sample_size(psi, psi) > n  # even the largest possible one


@pytest.mark.parametrize("p", [0.1, 0.5, 0.7, 0.93])
@pytest.mark.parametrize("n", [100, 1000, 10000])
def test_unpaired_difference_against_statsmodels(n, p):
    delta = R.unpaired_detectable_difference(n, p)
    h = proportion_effectsize(p + delta, p)
    # statsmodels adds the far tail, which is negligible here
    assert NormalIndPower().power(h, nobs1=n, alpha=0.05, ratio=1.0) == pytest.approx(0.8, abs=2e-4)
    solved = NormalIndPower().solve_power(
        effect_size=None, nobs1=n, alpha=0.05, power=0.8, ratio=1.0
    )
    assert h == pytest.approx(solved, rel=1e-3)


def test_unpaired_difference_impossible_near_one():
    assert R.unpaired_detectable_difference(10, 0.99) == math.inf


def test_pairing_helps_only_when_the_models_agree():
    n, p = 2000, 0.8
    unpaired = R.unpaired_detectable_difference(n, p)
    # independent errors: discordance 2 p (1 - p), and pairing gains next to nothing
    independent = R.paired_detectable_difference(n, 2 * p * (1 - p))
    assert independent == pytest.approx(unpaired, rel=0.05)
    # two encoders that agree on 95 % of the images: the paired test sees a much smaller difference
    assert R.paired_detectable_difference(n, 0.05) < 0.5 * unpaired


def test_discordance_bound_is_the_maximum_over_joint_distributions():
    for a in np.linspace(0, 1, 11):
        for b in np.linspace(0, 1, 11):
            # p11 ranges over [max(0, a + b - 1), min(a, b)]; discordance a + b - 2 p11
            grid = np.linspace(max(0.0, a + b - 1), min(a, b), 201)
            assert R.discordance_upper_bound(a, b) == pytest.approx(
                (a + b - 2 * grid).max(), abs=1e-12
            )
    rng = np.random.default_rng(0)
    for _ in range(50):
        x, y = rng.random(300) < rng.random(), rng.random(300) < rng.random()
        assert np.mean(x != y) <= R.discordance_upper_bound(x.mean(), y.mean()) + 1e-12


@pytest.mark.parametrize(
    ("fn", "kwargs", "name"),
    [
        ("paired_detectable_difference", dict(n=0, discordance=0.1), "n"),
        ("paired_detectable_difference", dict(n=100, discordance=0.0), "discordance"),
        ("paired_detectable_difference", dict(n=100, discordance=1.5), "discordance"),
        ("paired_detectable_difference", dict(n=100, discordance=np.nan), "discordance"),
        ("paired_detectable_difference", dict(n=100, discordance=0.1, alpha=0.0), "alpha"),
        ("paired_detectable_difference", dict(n=100, discordance=0.1, alpha=1.0), "alpha"),
        ("paired_detectable_difference", dict(n=100, discordance=0.1, power=0.3), "power"),
        ("paired_detectable_difference", dict(n=100, discordance=0.1, power=1.0), "power"),
        ("paired_sample_size", dict(difference=0.0, discordance=0.1), "difference"),
        ("paired_sample_size", dict(difference=0.2, discordance=0.1), "discordance"),
        ("paired_sample_size", dict(difference=-0.1, discordance=0.1), "difference"),
        ("discordance_upper_bound", dict(accuracy_a=1.2, accuracy_b=0.5), "accuracy_a"),
        ("discordance_upper_bound", dict(accuracy_a=0.2, accuracy_b=-0.5), "accuracy_b"),
        ("unpaired_detectable_difference", dict(n=100, accuracy=1.5), "accuracy"),
        ("unpaired_detectable_difference", dict(n=-1, accuracy=0.5), "n"),
    ],
)
def test_bad_input_names_the_argument(fn, kwargs, name):
    with pytest.raises(ValueError, match=name):
        getattr(R, fn)(**kwargs)
