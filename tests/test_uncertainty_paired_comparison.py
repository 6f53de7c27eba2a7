"""One paired comparison, reported in full, with the verdict "shown" or "not shown at this scale".

Checked against independent computations: statsmodels' exact McNemar test, a bootstrap
that resamples item indices in a loop, and the sample-size formula of
:mod:`repeval_ref.power`; the verdict follows the interval and nothing else.
"""

import math

import numpy as np
import pytest
from statsmodels.stats.contingency_tables import mcnemar

import repeval_ref as R


def _vectors(n, only_a, only_b, both, seed=0):
    """Correctness vectors with the given counts of the discordant and both-right cells,
    shuffled."""
    a = np.zeros(n, bool)
    b = np.zeros(n, bool)
    a[:only_a] = True
    b[only_a : only_a + only_b] = True
    a[only_a + only_b : only_a + only_b + both] = b[only_a + only_b : only_a + only_b + both] = True
    order = np.random.default_rng(seed).permutation(n)
    return a[order], b[order]


@pytest.mark.parametrize(("only_a", "only_b"), [(30, 55), (40, 42), (0, 9), (12, 0)])
def test_against_statsmodels_and_a_loop_bootstrap(only_a, only_b):
    n = 600
    a, b = _vectors(n, only_a, only_b, 400)
    out = R.paired_comparison(a, b, 4000, np.random.default_rng(1))
    table = [[np.sum(a & b), np.sum(a & ~b)], [np.sum(~a & b), np.sum(~a & ~b)]]
    assert out["mcnemar_p"] == pytest.approx(mcnemar(table, exact=True).pvalue, rel=1e-9)
    assert out["gain"] == pytest.approx(b.mean() - a.mean())
    assert (out["n"], out["only_a"], out["only_b"]) == (n, only_a, only_b)
    assert out["discordance"] == pytest.approx((only_a + only_b) / n)
    # the same numbers as the paired bootstrap with the same generator
    assert (out["gain"], out["lo"], out["hi"]) == R.paired_bootstrap_ci(
        a, b, 4000, np.random.default_rng(1)
    )
    # an independent bootstrap over item indices lands close by
    rng = np.random.default_rng(2)
    gains = [b[idx].mean() - a[idx].mean() for idx in rng.integers(0, n, size=(4000, n))]
    lo, hi = np.percentile(gains, [2.5, 97.5])
    assert out["lo"] == pytest.approx(lo, abs=0.006) and out["hi"] == pytest.approx(hi, abs=0.006)


def test_verdict_follows_the_interval():
    rng = np.random.default_rng(0)
    for seed in range(40):
        only_a, only_b = rng.integers(0, 40, size=2)
        a, b = _vectors(300, int(only_a), int(only_b), 150, seed)
        out = R.paired_comparison(a, b, 1000, seed)
        excludes_zero = out["lo"] > 0 or out["hi"] < 0
        assert out["verdict"] == ("shown" if excludes_zero else "not shown at this scale")


def test_a_large_gain_is_shown_and_identical_models_are_not():
    a, b = _vectors(1000, 10, 80, 700)
    assert R.paired_comparison(a, b, 2000, 0)["verdict"] == "shown"
    same = R.paired_comparison(a, a, 2000, 0)
    assert same["verdict"] == "not shown at this scale"
    assert (same["gain"], same["lo"], same["hi"], same["mcnemar_p"]) == (0.0, 0.0, 0.0, 1.0)
    assert same["needed_n"] is None and same["detectable"] == math.inf


def test_what_would_be_needed():
    a, b = _vectors(500, 20, 28, 300)  # 8 items of 500: not shown
    out = R.paired_comparison(a, b, 2000, 0)
    assert out["verdict"] == "not shown at this scale"
    psi = 48 / 500
    assert out["detectable"] == pytest.approx(R.paired_detectable_difference(500, psi))
    assert out["detectable"] > abs(out["gain"])
    assert out["needed_n"] == R.paired_sample_size(8 / 500, psi)
    assert out["needed_n"] > 500
    # at the needed size, with the same cell shares, the effect is shown
    k = out["needed_n"] / 500
    a2, b2 = _vectors(out["needed_n"], round(20 * k), round(28 * k), round(300 * k))
    assert R.paired_comparison(a2, b2, 2000, 0)["verdict"] == "shown"


def test_level_and_power_reach_the_numbers():
    a, b = _vectors(800, 30, 50, 500)
    wide = R.paired_comparison(a, b, 2000, 0, level=0.99, power=0.9)
    narrow = R.paired_comparison(a, b, 2000, 0)
    assert wide["hi"] - wide["lo"] > narrow["hi"] - narrow["lo"]
    assert wide["detectable"] == pytest.approx(
        R.paired_detectable_difference(800, 0.1, alpha=0.01, power=0.9)
    )
    assert wide["needed_n"] > narrow["needed_n"]


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        (dict(b_correct=np.ones(5)), "b_correct"),
        (dict(a_correct=np.array([0, 2, 1, 0, 1, 1])), "a_correct"),
        (dict(n_boot=0), "n_boot"),
        (dict(level=1.0), "level"),
        (dict(power=0.2), "power"),
    ],
)
def test_bad_input_names_the_argument(kwargs, name):
    args = dict(
        a_correct=np.array([1, 0, 1, 1, 0, 1]),
        b_correct=np.array([1, 1, 1, 0, 0, 1]),
        n_boot=10,
        rng=0,
    )
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        R.paired_comparison(**args)


# ------------------------------------------------ an interval read against a predicted effect
@pytest.mark.parametrize(
    "lo,hi,predicted,verdict,size_in",
    [
        (0.01, 0.05, 0.03, "shown", True),  # excludes 0 on the predicted side
        (0.01, 0.02, 0.07, "shown", False),  # shown, smaller than predicted
        (-0.05, -0.01, -0.03, "shown", True),  # a predicted loss, shown
        (-0.032, -0.022, 0.07, "opposite", False),  # excludes 0 on the other side
        (0.022, 0.032, -0.02, "opposite", False),
        (-0.006, 0.009, 0.07, "contradicted in size", False),  # covers 0, excludes the prediction
        (-0.09, 0.001, -0.1, "contradicted in size", False),
        (-0.02, 0.09, 0.07, "not detected", True),  # covers both
        (0.0, 0.05, 0.03, "not detected", True),  # touching 0 is covering it
        (-0.05, 0.0, 0.03, "contradicted in size", False),
        (0.0, 0.0, 0.01, "contradicted in size", False),  # a point at 0
        (0.07, 0.07, 0.07, "shown", True),
    ],
)
def test_prediction_verdict_on_hand_made_intervals(lo, hi, predicted, verdict, size_in):
    from repeval_ref.uncertainty import prediction_verdict

    out = prediction_verdict(lo, hi, predicted)
    assert out["verdict"] == verdict
    assert out["size_in_interval"] is size_in
    assert (out["lo"], out["hi"], out["predicted"]) == (lo, hi, predicted)


def test_prediction_verdict_reads_a_paired_comparisons_interval():
    """Its two halves agree with paired_comparison's own: "shown" exactly when the interval
    excludes 0 (either side), "not shown at this scale" otherwise."""
    from repeval_ref.uncertainty import NOT_SHOWN, SHOWN, paired_comparison, prediction_verdict

    rng = np.random.default_rng(5)
    for flip in (0.0, 0.02, 0.1):
        a = rng.random(2000) < 0.7
        b = np.where(rng.random(2000) < flip, ~a, a)
        c = paired_comparison(a, b, 500, 0)
        for predicted in (0.05, -0.05):
            v = prediction_verdict(c["lo"], c["hi"], predicted)["verdict"]
            assert (v in ("shown", "opposite")) == (c["verdict"] == SHOWN)
            assert (v in ("not detected", "contradicted in size")) == (c["verdict"] == NOT_SHOWN)


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(lo=0.1, hi=0.0, predicted=0.1), "lo must be <= hi"),
        (dict(lo=0.0, hi=0.1, predicted=0.0), "predicted must be non-zero"),
        (dict(lo=float("nan"), hi=0.1, predicted=0.1), "lo must be a finite"),
        (dict(lo=0.0, hi=float("inf"), predicted=0.1), "hi must be a finite"),
        (dict(lo=0.0, hi=0.1, predicted=True), "predicted must be a finite"),
        (dict(lo="0", hi=0.1, predicted=0.1), "lo must be a finite"),
    ],
)
def test_prediction_verdict_bad_input(kw, match):
    from repeval_ref.uncertainty import prediction_verdict

    with pytest.raises(ValueError, match=match):
        prediction_verdict(**kw)
