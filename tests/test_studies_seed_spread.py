"""The training-seed study: its committed record, a small rerun, and its statistics."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
from scipy import stats

from repeval_ref.studies import array_to_flags, flags_to_array, load_result
from repeval_ref.studies import seed_spread as S


def test_committed_record_holds_the_runs_and_seeds_it_claims():
    rec = load_result("seed_spread")
    assert rec["study"] == "seed_spread" and rec["budget"] == "full"
    assert rec["settings"] == S.SETTINGS["full"]
    assert [r["seed"] for r in rec["runs"]] == S.SETTINGS["full"]["seeds"] == [0, 1, 2]
    assert rec["encoder"] == "supervised_cnn"
    assert rec["eval_test_rows"] == 10000 and rec["eval_train_rows"] == 10000
    for run in rec["runs"]:
        assert run["train_images"] == 60000 and run["epochs"] == 3
        assert run["steps"] == 3 * (60000 // 256)
        assert run["train_cpu_seconds"] > 0
        for readout in S.READOUTS:
            flags = flags_to_array(run[readout]["correct"])
            assert flags.size == rec["eval_test_rows"]
            assert run[readout]["acc"] == pytest.approx(flags.mean(), abs=1e-12)
    assert rec["code_version"]["module_sha256"]


def test_seed_zero_reproduces_the_shipped_encoder_knn():
    """Seed 0 is the shipped recipe's own seed: its 20-NN accuracy is the manifest's."""
    from repeval_ref import zoo

    rec = load_result("seed_spread")
    shipped = zoo.manifest()["encoders"]["supervised_cnn"]["test"]["knn20"]
    assert rec["runs"][0]["knn20"]["acc"] == pytest.approx(shipped, abs=5e-5)


def test_small_rerun_reproduces_the_committed_small_record():
    from repeval_ref.studies._runner import run_study

    ref = load_result("seed_spread", "small")
    new = run_study("seed_spread", "small")
    assert new["settings"] == ref["settings"]
    assert [r["seed"] for r in new["runs"]] == [r["seed"] for r in ref["runs"]]
    assert new["test_labels_sha256"] == ref["test_labels_sha256"]
    for a, b in zip(new["runs"], ref["runs"]):
        assert a["steps"] == b["steps"] and a["train_images"] == b["train_images"]
        for readout in S.READOUTS:
            fa, fb = flags_to_array(a[readout]["correct"]), flags_to_array(b[readout]["correct"])
            assert fa.size == fb.size
            # one thread, deterministic kernels: the same run; a BLAS of another machine may
            # move a handful of probe decisions near a boundary
            assert np.mean(fa != fb) <= 0.005
            assert a[readout]["acc"] == pytest.approx(b[readout]["acc"], abs=0.003)


def test_seed_sd_against_numpy_and_the_chi_square_quantiles():
    accs = [0.8666, 0.8703, 0.8623]
    out = S.seed_sd(accs)
    s = np.std(accs, ddof=1)
    assert out["sd"] == pytest.approx(s)
    assert out["lo"] == pytest.approx(s * np.sqrt(2 / stats.chi2.ppf(0.975, 2)))
    assert out["hi"] == pytest.approx(s * np.sqrt(2 / stats.chi2.ppf(0.025, 2)))
    assert out["lo"] < out["sd"] < out["hi"] and out["df"] == 2 and out["m"] == 3


def test_seed_sd_interval_covers_at_its_level():
    rng = np.random.default_rng(0)
    sigma, hits, trials = 0.004, 0, 4000
    for _ in range(trials):
        out = S.seed_sd(0.86 + sigma * rng.standard_normal(3))
        hits += out["lo"] <= sigma <= out["hi"]
    assert abs(hits / trials - 0.95) < 0.015


def test_summarise_against_a_brute_force_count():
    rec = load_result("seed_spread")
    out = S.summarise(rec)
    for readout in S.READOUTS:
        flags = [flags_to_array(r[readout]["correct"]) for r in rec["runs"]]
        disc = np.mean([np.sum(a != b) / a.size for a, b in combinations(flags, 2)])
        assert out[readout]["discordance"] == pytest.approx(disc)
        p = np.mean([f.mean() for f in flags])
        assert out[readout]["test_se"] == pytest.approx(np.sqrt(p * (1 - p) / flags[0].size))
        assert out[readout]["ratio"] == pytest.approx(
            out[readout]["seed"]["sd"] / out[readout]["test_se"]
        )


@pytest.mark.parametrize(
    "accs, level, word",
    [([0.9], 0.95, "accuracies"), ([0.9, np.nan], 0.95, "accuracies"), ([0.8, 0.9], 1.0, "level")],
)
def test_seed_sd_rejects_bad_input(accs, level, word):
    with pytest.raises(ValueError, match=word):
        S.seed_sd(accs, level)


def test_run_rejects_bad_settings():
    with pytest.raises(ValueError, match="seeds"):
        S.run({**S.SETTINGS["small"], "seeds": [1]})
    with pytest.raises(ValueError, match="lacks"):
        S.run({"encoder": "supervised_cnn"})


def test_flags_round_trip():
    a = np.array([True, False, True, True])
    assert array_to_flags(a) == "1011"
    assert np.array_equal(flags_to_array("1011"), a)
    with pytest.raises(ValueError, match="flags"):
        flags_to_array("10x1")
