"""LP-FT against fine-tuning over seeds: the committed record, a small rerun, the intervals."""

from __future__ import annotations

import numpy as np
import pytest

from repeval_ref.studies import flags_to_array, load_result
from repeval_ref.studies import lpft_kumar as K


def _entries(rec):
    return [(part, e) for part in ("zoo", "kumar") for e in rec[part]]


def test_committed_record_holds_the_runs_and_seeds_it_claims():
    rec = load_result("lpft_kumar")
    assert rec["settings"] == K.SETTINGS["full"]
    assert [e["encoder"] for e in rec["zoo"]] == ["simclr_vit", "dino_vit"]
    assert [e["encoder"] for e in rec["kumar"]] == ["efficientnet_lite0"]
    for part, entry in _entries(rec):
        s = rec["settings"][part]
        assert [r["seed"] for r in entry["runs"]] == s["seeds"] == [0, 1, 2]
        assert entry["n_fit"] == s["fit"] and entry["n_val"] == s["val"]
        assert entry["n_test"] == s["test"] and entry["ood"] == s["ood"]
        assert entry["cpu_seconds"] > 0
        for m in ("ft", "lpft"):
            assert entry["rates"][m] in s["lrs"]
        assert entry["rates"]["probe"] in s["probe_lrs"]
        for run in entry["runs"]:
            # LP-FT is forced to fine-tune: the same fixed number of steps as fine-tuning
            assert run["val_curves"]["lpft"][-1][0] == run["val_curves"]["ft"][-1][0] == s["steps"]
            assert run["val_curves"]["probe"][-1][0] == s["probe_steps"]
            for m in K.METHODS:
                for d in ("id", "ood"):
                    flags = flags_to_array(run[m][d]["correct"])
                    assert flags.size == entry["n_test"]
                    assert run[m][d]["acc"] == pytest.approx(flags.mean(), abs=1e-12)


def test_each_rate_is_the_best_final_validation_accuracy_of_its_grid():
    rec = load_result("lpft_kumar")
    for _, entry in _entries(rec):
        for m in K.METHODS:
            search = entry["search"][m]
            finals = [c[-1][1] for c in search["curves"]]
            best = max(finals)
            expected = min(lr for lr, v in zip(search["lrs"], finals) if v == best)
            assert search["lr"] == entry["rates"][m] == expected


def test_small_rerun_reproduces_the_committed_small_record():
    from repeval_ref.studies._runner import run_study

    ref = load_result("lpft_kumar", "small")
    new = run_study("lpft_kumar", "small")
    assert new["settings"] == ref["settings"]
    for (_, a), (_, b) in zip(_entries(new), _entries(ref)):
        assert a["encoder"] == b["encoder"] and a["rates"] == b["rates"]
        assert [r["seed"] for r in a["runs"]] == [r["seed"] for r in b["runs"]]
        for ra, rb in zip(a["runs"], b["runs"]):
            for m in K.METHODS:
                for d in ("id", "ood"):
                    fa = flags_to_array(ra[m][d]["correct"])
                    fb = flags_to_array(rb[m][d]["correct"])
                    assert fa.size == fb.size
                    assert np.mean(fa != fb) <= 0.01


def _brute_force(a, b, n_boot, rng, seeds_too):
    m, n = a.shape
    out = []
    for _ in range(n_boot):
        idx = rng.integers(0, n, size=n)
        rows = rng.integers(0, m, size=m) if seeds_too else np.arange(m)
        out.append(np.mean([b[s, idx].mean() - a[s, idx].mean() for s in rows]))
    return np.percentile(out, [2.5, 97.5])


def test_seed_image_interval_against_a_brute_force_bootstrap():
    rng = np.random.default_rng(0)
    m, n = 3, 400
    a = rng.random((m, n)) < 0.7
    b = rng.random((m, n)) < np.array([[0.75], [0.8], [0.72]])
    out = K.seed_image_interval(a, b, 4000, 1)
    assert out["gain"] == pytest.approx(np.mean(b.mean(1) - a.mean(1)))
    assert out["per_seed"] == pytest.approx(list(b.mean(1) - a.mean(1)))
    assert out["seed_sd"] == pytest.approx(np.std(b.mean(1) - a.mean(1), ddof=1))
    for key, seeds_too in (("images", False), ("images_and_seeds", True)):
        lo, hi = _brute_force(a, b, 4000, np.random.default_rng(2), seeds_too)
        # with three seeds the seed draw is coarse, so its quantiles move more between draws
        tol = 0.006 if key == "images" else 0.02
        assert out[key][0] == pytest.approx(lo, abs=tol)
        assert out[key][1] == pytest.approx(hi, abs=tol)
    assert out["images_and_seeds"][1] - out["images_and_seeds"][0] >= (
        out["images"][1] - out["images"][0]
    )


def test_one_seed_interval_matches_the_paired_bootstrap_of_the_package():
    from repeval_ref.uncertainty import paired_bootstrap_ci

    rng = np.random.default_rng(3)
    a, b = rng.random(2000) < 0.8, rng.random(2000) < 0.83
    out = K.seed_image_interval(a[None], b[None], 4000, 4)
    gain, lo, hi = paired_bootstrap_ci(a, b, 4000, np.random.default_rng(5))
    assert out["gain"] == pytest.approx(gain)
    assert out["images"] == pytest.approx([lo, hi], abs=0.004)
    assert out["images"] == out["images_and_seeds"]


def test_summarise_reads_every_comparison():
    rec = load_result("lpft_kumar", "small")
    out = K.summarise(rec["zoo"][0], n_boot=200)
    for name in ("lpft_vs_ft", "probe_vs_ft", "lpft_vs_probe"):
        for d in ("id", "ood"):
            r = out[name][d]
            assert r["images"][0] <= r["images"][1]
            assert r["images_and_seeds"][0] <= r["gain"] <= r["images_and_seeds"][1]
    assert out["lpft_vs_ft"]["id"]["gain"] == pytest.approx(
        out["acc"]["lpft"]["id"] - out["acc"]["ft"]["id"]
    )


@pytest.mark.parametrize(
    "a, b, n_boot, level, word",
    [
        (np.ones((2, 3)), np.ones((3, 2)), 10, 0.95, "shape"),
        (np.full((2, 3), 2), np.ones((2, 3)), 10, 0.95, "a_correct"),
        (np.ones((2, 3)), np.ones((2, 3)), 0, 0.95, "n_boot"),
        (np.ones((2, 3)), np.ones((2, 3)), 10, 1.5, "level"),
    ],
)
def test_seed_image_interval_rejects_bad_input(a, b, n_boot, level, word):
    with pytest.raises(ValueError, match=word):
        K.seed_image_interval(a, b, n_boot, 0, level)


def test_run_rejects_bad_settings():
    with pytest.raises(ValueError, match="zoo"):
        K.run({"zoo": K.SETTINGS["small"]["zoo"]})
    with pytest.raises(ValueError, match="steps"):
        K.run({**K.SETTINGS["small"], "zoo": {**K.SETTINGS["small"]["zoo"], "steps": 0}})
