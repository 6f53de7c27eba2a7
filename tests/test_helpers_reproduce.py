"""The tolerances of the recomputation tests (tests/helpers/reproduce.py), and the kernel they
run under."""

import math
import os

import numpy as np
import pytest
from helpers import reproduce


def test_reach_counts_the_images_any_two_predictions_disagree_on():
    a = np.array([0, 1, 2, 3, 4])
    assert reproduce.reach(a, a) == 0
    assert reproduce.reach(a, np.array([0, 1, 2, 3, 0])) == 1
    assert reproduce.reach(a, np.array([9, 1, 2, 3, 4]), np.array([0, 1, 2, 9, 4])) == 2
    with pytest.raises(ValueError, match="at least two"):
        reproduce.reach(a)
    with pytest.raises(ValueError, match="predictions"):
        reproduce.reach(a, a[:3])


def test_allowed_difference_is_three_standard_errors_of_the_upper_disagreement():
    # closed form: D = r + 3 sqrt(r) + 3, allowed = 3 sqrt(D) / n
    for r, n in [(0, 1000), (4, 1000), (39, 10000), (400, 10000)]:
        d = r + 3 * math.sqrt(r) + 3
        assert reproduce.allowed_difference(r, n) == pytest.approx(3 * math.sqrt(d) / n, rel=1e-15)
    # monotone: a more fragile computation is allowed more, a larger test set less
    assert reproduce.allowed_difference(10, 1000) > reproduce.allowed_difference(2, 1000)
    assert reproduce.allowed_difference(10, 10000) < reproduce.allowed_difference(10, 1000)
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(ValueError, match="reach_count"):
            reproduce.allowed_difference(bad, 10)
    for bad in (0, 2.0, False):
        with pytest.raises(ValueError, match="n must"):
            reproduce.allowed_difference(1, bad)


def test_allowed_difference_covers_symmetric_flips_and_rejects_a_systematic_shift():
    """Simulated: two runs disagree on a random subset of a fragile set, each flip going
    either way with probability 1/2; the bound holds in (far) more than 99 % of cases.
    A pipeline change that moves 2 % of 10,000 images one way is far outside it."""
    rng = np.random.default_rng(0)
    n, fragile = 10000, 40
    misses = 0
    for _ in range(2000):
        reach = rng.binomial(fragile, 0.5)  # what a reordering shows
        disagree = rng.binomial(fragile, 0.5)  # what the other machine's run changes
        shift = abs(2 * rng.binomial(disagree, 0.5) - disagree)
        misses += shift / n > reproduce.allowed_difference(int(reach), n)
    assert misses / 2000 < 0.01
    assert 0.02 > reproduce.allowed_difference(fragile, n) * 5


def test_choice_within_noise_is_mcnemars_normal_form():
    best = np.array([True] * 60 + [False] * 40)
    tied = best.copy()
    tied[:4] = False
    tied[60:64] = True  # same count, 8 discordant rows
    assert reproduce.choice_within_noise({0.1: best, 1.0: tied}, 1.0, 0.1)
    worse = best.copy()
    worse[:20] = False  # 20 rows behind, all discordant: 20 > 3 sqrt(20)
    assert not reproduce.choice_within_noise({0.1: best, 1.0: worse}, 1.0, 0.1)
    assert reproduce.choice_within_noise({0.1: best}, 0.1, 0.1)
    with pytest.raises(ValueError, match="keys"):
        reproduce.choice_within_noise({0.1: best}, 1.0, 0.1)
    assert reproduce.first_best({0.01: worse, 0.1: best, 1.0: tied}) == 0.1  # first of the tie


def test_a_reordered_fit_is_the_same_fit():
    """Reversing the fitting rows or the feature columns changes only the order of the sums:
    the same weights to the solver's tolerance, hence the same predictions away from the
    boundary."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((300, 5))
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(int)
    test = rng.standard_normal((500, 5))
    fits = reproduce.probe_predictions(x, y, test, 1.0)
    assert len(fits) == 3 and reproduce.reach(*fits) <= 2


#: kernels an OpenBLAS build may report for a requested core type: its Zen target runs the
#: Haswell kernels (some builds name the core, others the kernels)
SAME_KERNELS = {"zen": {"haswell"}}


@pytest.mark.recompute
def test_the_blas_kernel_is_the_one_asked_for():
    """Under ``OPENBLAS_CORETYPE=K`` (``make test-blas``) every loaded OpenBLAS (NumPy's, SciPy's)
    runs kernel K, so the recomputations really sum in K's order, not the processor's."""
    from threadpoolctl import threadpool_info

    asked = os.environ.get("OPENBLAS_CORETYPE")
    if not asked:
        pytest.skip("OPENBLAS_CORETYPE is not set: the processor's own kernel")
    kernels = {
        i.get("architecture", "").lower()
        for i in threadpool_info()
        if i.get("internal_api") == "openblas"
    }
    assert kernels and kernels <= {asked.lower()} | SAME_KERNELS.get(asked.lower(), set()), kernels
