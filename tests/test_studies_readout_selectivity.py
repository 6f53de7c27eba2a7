"""Read-out gains over the random initialisation: committed record, small rerun, intervals."""

from __future__ import annotations

import numpy as np
import pytest

from repeval_ref.studies import flags_to_array, load_result
from repeval_ref.studies import readout_selectivity as R


def test_committed_record_holds_the_runs_and_seeds_it_claims():
    rec = load_result("readout_selectivity")
    s = rec["settings"]
    assert s == R.SETTINGS["full"]
    assert list(rec["encoders"]) == ["random_vit", "mae_vit", "simclr_vit", "dino_vit"]
    assert rec["n_test"] == s["test"] == 10000 and rec["n_train"] == s["train"]
    assert rec["n_fit"] == s["last_block"]["fit"] and rec["n_val"] == s["last_block"]["val"]
    for entry in rec["encoders"].values():
        assert flags_to_array(entry["linear"]["correct"]).size == rec["n_test"]
        assert entry["cpu_seconds"] > 0
        for readout in ("attentive", "last_block"):
            assert [r["seed"] for r in entry[readout]["runs"]] == s["seeds"] == [0, 1, 2]
            for run in entry[readout]["runs"]:
                assert flags_to_array(run["correct"]).size == rec["n_test"]
        search = entry["last_block"]["search"]
        assert search["lr"] in s["last_block"]["lrs"]
        assert 0 <= search["steps"] <= s["last_block"]["steps"]
        for run in entry["last_block"]["runs"]:
            assert run["lr"] == search["lr"] and run["steps"] == search["steps"]


def test_small_rerun_reproduces_the_committed_small_record():
    from repeval_ref.studies._runner import run_study

    ref = load_result("readout_selectivity", "small")
    new = run_study("readout_selectivity", "small")
    assert new["settings"] == ref["settings"]
    assert list(new["encoders"]) == list(ref["encoders"])
    for name in ref["encoders"]:
        a, b = new["encoders"][name], ref["encoders"][name]
        assert (
            np.mean(
                flags_to_array(a["linear"]["correct"]) != flags_to_array(b["linear"]["correct"])
            )
            <= 0.01
        )
        for readout in ("attentive", "last_block"):
            for ra, rb in zip(a[readout]["runs"], b[readout]["runs"]):
                assert ra["seed"] == rb["seed"]
                fa, fb = flags_to_array(ra["correct"]), flags_to_array(rb["correct"])
                assert np.mean(fa != fb) <= 0.01


def _brute_force(arrays, weights, n_boot, rng, seeds_too):
    m, n = arrays[0].shape
    out = []
    for _ in range(n_boot):
        idx = rng.integers(0, n, size=n)
        rows = rng.integers(0, m, size=m) if seeds_too else np.arange(m)
        out.append(
            np.mean([sum(w * a[s, idx].mean() for w, a in zip(weights, arrays)) for s in rows])
        )
    return np.percentile(out, [2.5, 97.5])


def test_contrast_interval_against_a_brute_force_bootstrap():
    rng = np.random.default_rng(0)
    m, n = 3, 300
    arrays = [rng.random((m, n)) < p for p in (0.8, 0.7, 0.5, 0.45)]
    weights = [1, -1, -1, 1]
    out = R.contrast_interval(arrays, weights, 4000, 1)
    per_seed = sum(w * a.mean(axis=1) for w, a in zip(weights, arrays))
    assert out["estimate"] == pytest.approx(per_seed.mean())
    assert out["per_seed"] == pytest.approx(list(per_seed))
    assert out["seed_sd"] == pytest.approx(np.std(per_seed, ddof=1))
    for key, seeds_too in (("images", False), ("images_and_seeds", True)):
        lo, hi = _brute_force(arrays, weights, 4000, np.random.default_rng(2), seeds_too)
        # with three seeds the seed draw is coarse, so its quantiles move more between draws
        tol = 0.008 if key == "images" else 0.02
        assert out[key][0] == pytest.approx(lo, abs=tol)
        assert out[key][1] == pytest.approx(hi, abs=tol)


def test_summarise_contrasts_agree_with_the_accuracies():
    rec = load_result("readout_selectivity", "small")
    out = R.summarise(rec, n_boot=200)
    acc = out["acc"]
    rand = out["random"]
    for name in list(rec["encoders"])[1:]:
        for readout in ("attentive", "last_block"):
            c = out[name][readout]
            gain = acc[name][readout] - acc[name]["linear"]
            rgain = acc[rand][readout] - acc[rand]["linear"]
            assert c["gain"]["estimate"] == pytest.approx(gain)
            assert c["random_gain"]["estimate"] == pytest.approx(rgain)
            assert c["selectivity"]["estimate"] == pytest.approx(gain - rgain)
            assert c["over_random"]["estimate"] == pytest.approx(
                acc[name][readout] - acc[rand][readout]
            )


@pytest.mark.parametrize(
    "flags, weights, n_boot, word",
    [
        ([], [], 10, "flags"),
        ([np.ones((2, 3)), np.ones((2, 4))], [1, -1], 10, "shape"),
        ([np.full((2, 3), 3)], [1], 10, "0/1"),
        ([np.ones((2, 3))], [1, 2], 10, "weights"),
        ([np.ones((2, 3))], [1], 0, "n_boot"),
    ],
)
def test_contrast_interval_rejects_bad_input(flags, weights, n_boot, word):
    with pytest.raises(ValueError, match=word):
        R.contrast_interval(flags, weights, n_boot, 0)


def test_run_rejects_bad_settings():
    small = R.SETTINGS["small"]
    with pytest.raises(ValueError, match="lacks"):
        R.run({"encoders": ["mae_vit"]})
    with pytest.raises(ValueError, match="fit \\+ val"):
        R.run({**small, "train": 100})
