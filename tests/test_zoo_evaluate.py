"""The plateau check of the zoo's manifest (repeval_ref/zoo/evaluate.py: plateau_evidence,
plateau_verdict)."""

import numpy as np
import pytest

from repeval_ref.zoo import evaluate


def _gain(hi):
    return {"from": "x", "gain": hi / 2, "lo": -0.01, "hi": hi}


def test_the_verdict_reads_the_last_quarters_upper_end():
    assert evaluate.plateau_verdict([_gain(0.05), _gain(0.02), _gain(0.009)]) == "at its plateau"
    assert evaluate.plateau_verdict([_gain(0.05), _gain(0.02), _gain(0.011)]) == "still rising"
    assert evaluate.plateau_verdict([_gain(0.011)], max_gain=0.02) == "at its plateau"
    assert (
        evaluate.plateau_verdict([_gain(0.01)]) == "at its plateau"
    )  # the bound itself is included
    assert evaluate.plateau_verdict([]) == "no earlier checkpoint"
    for bad in ["x", [{"gain": 0.0}], [1.0]]:
        with pytest.raises(ValueError, match="gains must be"):
            evaluate.plateau_verdict(bad)
    for bad in [1.0, -0.1, True, "0.01"]:
        with pytest.raises(ValueError, match="max_gain must be"):
            evaluate.plateau_verdict([_gain(0.0)], max_gain=bad)


@pytest.mark.slow  # four checkpoints, 20,000 images each, four probes
@pytest.mark.recompute
def test_the_evidence_of_a_shipped_encoder_against_an_independent_computation(
    tmp_path, record_property
):
    """supervised_cnn's checkpoints: each probe accuracy as cold-started fits give it, each
    gain the difference of the two accuracies, and its interval a paired bootstrap that
    covers it.

    The evidence's probe starts each fit from the previous solution, the independent one
    from zero, so the two may pick different ``C`` where validation scores nearly tie, and
    end at different points within the solver's tolerance. The accuracy must match that
    of a ``C`` whose validation accuracy is within the noise of the best
    (``tests/helpers/reproduce.py``), within three binomial standard errors of the
    disagreement that reversing the order of the fitting rows produces.
    """
    from helpers import reproduce

    from repeval_ref import zoo
    from repeval_ref.linear_probe import _standardiser

    out = evaluate.plateau_evidence("supervised_cnn", cache_dir=str(tmp_path))
    cks = zoo.checkpoints("supervised_cnn")
    assert list(out["probe"]) == cks and [g["from"] for g in out["gains"]] == cks[:-1]
    p = evaluate.PROTOCOL["test"]
    tr = evaluate.subset_indices(60000, p["train"], p["subset_seed"])
    for ck in (cks[0], cks[-1]):
        htr, ytr = zoo.features(
            "supervised_cnn", "train", "cls", checkpoint=ck, indices=tr, cache_dir=str(tmp_path)
        )
        hte, yte = zoo.features(
            "supervised_cnn", "test", "cls", checkpoint=ck, cache_dir=str(tmp_path)
        )
        assert yte.size == 10000
        correct = reproduce.validation_correct(
            htr, ytr, evaluate.PROTOCOL["Cs"], evaluate.PROTOCOL["probe_seed"]
        )
        best = reproduce.first_best(correct)
        mean, std = _standardiser(htr, "the training rows")
        candidates = []  # (accuracy, allowed) of every C as good as the best within noise
        for C in correct:
            if reproduce.choice_within_noise(correct, C, best):
                fits = reproduce.probe_predictions((htr - mean) / std, ytr, (hte - mean) / std, C)
                candidates.append(
                    (
                        np.mean(fits[0] == yte),
                        reproduce.allowed_difference(reproduce.reach(*fits), yte.size),
                    )
                )
        acc, allowed = min(candidates, key=lambda c: abs(out["probe"][ck] - c[0]) - c[1])
        reproduce.assert_within(
            record_property, f"plateau/probe/supervised_cnn:{ck}", out["probe"][ck], acc, allowed
        )
    final = out["probe"][cks[-1]]
    for g in out["gains"]:
        assert g["gain"] == pytest.approx(final - out["probe"][g["from"]], abs=1e-12)
        assert g["lo"] <= g["gain"] <= g["hi"] and g["hi"] - g["lo"] < 0.05
    assert out["verdict"] == evaluate.plateau_verdict(out["gains"])
    assert out["protocol"]["test"] == 10000
