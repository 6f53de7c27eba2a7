"""RankMe within a sweep of SimCLR runs: the committed record, a small rerun, the intervals."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from repeval_ref.studies import load_result
from repeval_ref.studies import rankme_family as F


def test_committed_record_holds_the_runs_it_claims():
    rec = load_result("rankme_family")
    s = rec["settings"]
    assert s == F.SETTINGS["full"]
    grid = list(itertools.product(s["temperatures"], s["proj_dims"]))
    assert len(grid) >= 8
    assert [(r["temperature"], r["proj_dim"]) for r in rec["runs"]] == grid
    for r in rec["runs"]:
        assert r["train_images"] == s["train_images"] and r["epochs"] == s["epochs"]
        assert r["train_cpu_seconds"] > 0
        assert 1 <= r["rankme_projector"] <= r_max(r["proj_dim"], rec["eval_train_rows"])
        assert 1 <= r["rankme_backbone"] <= 64
        assert 0 <= r["probe"] <= 1
    assert {z["objective"] for z in rec["zoo"]} >= {"supervised", "simclr", "dino", "mae"}


def r_max(width, rows):
    return min(width, rows)


def test_small_rerun_reproduces_the_committed_small_record():
    from repeval_ref.studies._runner import run_study

    ref = load_result("rankme_family", "small")
    new = run_study("rankme_family", "small")
    assert new["settings"] == ref["settings"]
    for a, b in zip(new["runs"], ref["runs"]):
        assert (a["temperature"], a["proj_dim"], a["steps"]) == (
            b["temperature"],
            b["proj_dim"],
            b["steps"],
        )
        assert a["rankme_backbone"] == pytest.approx(b["rankme_backbone"], rel=1e-3)
        assert a["rankme_projector"] == pytest.approx(b["rankme_projector"], rel=1e-3)
        assert a["probe"] == pytest.approx(b["probe"], abs=0.01)
    for a, b in zip(new["zoo"], ref["zoo"]):
        assert a["encoder"] == b["encoder"]
        assert a["rankme_backbone"] == pytest.approx(b["rankme_backbone"], rel=1e-3)


def test_spearman_interval_against_a_brute_force_bootstrap():
    rng = np.random.default_rng(0)
    x = rng.normal(size=12)
    y = x + rng.normal(size=12)
    out = F.spearman_interval(x, y, 3000, 1)
    assert out["rho"] == pytest.approx(stats.spearmanr(x, y).statistic)
    brute, g = [], np.random.default_rng(2)
    for _ in range(3000):
        i = g.integers(0, 12, size=12)
        if np.ptp(x[i]) and np.ptp(y[i]):
            brute.append(stats.spearmanr(x[i], y[i]).statistic)
    lo, hi = np.percentile(brute, [2.5, 97.5])
    assert out["lo"] == pytest.approx(lo, abs=0.05)
    assert out["hi"] == pytest.approx(hi, abs=0.05)


@pytest.mark.parametrize(
    "x, y, n_boot, word",
    [([1, 2], [1, 2], 10, "length"), ([1, 2, np.nan], [1, 2, 3], 10, "finite"),
     ([1, 2, 3], [1, 2, 3], 0, "n_boot")],
)  # fmt: skip
def test_spearman_interval_rejects_bad_input(x, y, n_boot, word):
    with pytest.raises(ValueError, match=word):
        F.spearman_interval(x, y, n_boot, 0)


def test_run_rejects_a_sweep_too_small_for_a_rank_correlation():
    with pytest.raises(ValueError, match="runs"):
        F.run({**F.SETTINGS["small"], "temperatures": [0.1], "proj_dims": [16]})
