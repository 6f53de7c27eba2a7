"""Holm and Benjamini-Hochberg adjusted p-values, cross-checked against statsmodels."""

import numpy as np
import pytest

from repeval_ref.multiple_testing import adjust_pvalues, benjamini_hochberg, holm

multipletests = pytest.importorskip("statsmodels.stats.multitest").multipletests


@pytest.mark.parametrize("seed", range(5))
def test_against_statsmodels(seed):
    rng = np.random.default_rng(seed)
    p = np.concatenate([rng.uniform(size=8), rng.uniform(0, 0.01, size=4), [0.0, 1.0, 0.5, 0.5]])
    rng.shuffle(p)
    np.testing.assert_allclose(holm(p), multipletests(p, method="holm")[1], rtol=0, atol=1e-15)
    np.testing.assert_allclose(
        benjamini_hochberg(p), multipletests(p, method="fdr_bh")[1], atol=1e-15
    )


def test_holm_closed_form_on_three_values():
    # sorted 0.01, 0.02, 0.04 -> 3*0.01, max(.03, 2*.02), max(.04, 1*.04)
    np.testing.assert_allclose(holm([0.04, 0.01, 0.02]), [0.04, 0.03, 0.04])


def test_properties():
    rng = np.random.default_rng(9)
    p = rng.uniform(size=20)
    for q in (holm(p), benjamini_hochberg(p)):
        assert np.all(q >= p - 1e-15) and np.all(q <= 1)
        order = np.argsort(p)
        assert np.all(np.diff(q[order]) >= -1e-15)  # monotone in p
    assert np.all(benjamini_hochberg(p) <= holm(p) + 1e-15)  # BH is the less strict
    np.testing.assert_array_equal(holm([0.3]), [0.3])


def test_bad_input():
    with pytest.raises(ValueError, match="p"):
        holm([0.5, 1.5])
    with pytest.raises(ValueError, match="method"):
        adjust_pvalues([0.1], "bonferroni")
