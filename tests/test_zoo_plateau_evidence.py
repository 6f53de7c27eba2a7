"""The plateau check of the zoo's manifest (repeval_ref/zoo/evaluate.py: plateau_evidence, plateau_verdict)."""
import numpy as np
import pytest

from repeval_ref.zoo import evaluate


def _gain(hi):
    return {"from": "x", "gain": hi / 2, "lo": -0.01, "hi": hi}


def test_the_verdict_reads_the_last_quarters_upper_end():
    assert evaluate.plateau_verdict([_gain(0.05), _gain(0.02), _gain(0.009)]) == "at its plateau"
    assert evaluate.plateau_verdict([_gain(0.05), _gain(0.02), _gain(0.011)]) == "still rising"
    assert evaluate.plateau_verdict([_gain(0.011)], max_gain=0.02) == "at its plateau"
    assert evaluate.plateau_verdict([_gain(0.01)]) == "at its plateau"   # the bound itself is included
    assert evaluate.plateau_verdict([]) == "no earlier checkpoint"
    for bad in ["x", [{"gain": 0.0}], [1.0]]:
        with pytest.raises(ValueError, match="gains must be"):
            evaluate.plateau_verdict(bad)
    for bad in [1.0, -0.1, True, "0.01"]:
        with pytest.raises(ValueError, match="max_gain must be"):
            evaluate.plateau_verdict([_gain(0.0)], max_gain=bad)


@pytest.mark.slow  # four checkpoints, 20,000 images each, four probes
def test_the_evidence_of_a_shipped_encoder_against_an_independent_computation(tmp_path):
    """supervised_cnn's checkpoints: each probe accuracy as linear_probe_done_right gives it
    (the warm path agrees up to the solver's tolerance, which moves a few test images lying
    at a decision boundary: six of 10,000 on the first checkpoint here), each gain the
    difference of the two accuracies, and its interval a paired bootstrap that covers it."""
    from repeval_ref import zoo
    from repeval_ref.linear_probe import linear_probe_done_right

    out = evaluate.plateau_evidence("supervised_cnn", cache_dir=str(tmp_path))
    cks = zoo.checkpoints("supervised_cnn")
    assert list(out["probe"]) == cks and [g["from"] for g in out["gains"]] == cks[:-1]
    p = evaluate.PROTOCOL["test"]
    tr = evaluate.subset_indices(60000, p["train"], p["subset_seed"])
    for ck in (cks[0], cks[-1]):
        htr, ytr = zoo.features("supervised_cnn", "train", "cls", checkpoint=ck, indices=tr, cache_dir=str(tmp_path))
        hte, yte = zoo.features("supervised_cnn", "test", "cls", checkpoint=ck, cache_dir=str(tmp_path))
        assert yte.size == 10000
        _, acc = linear_probe_done_right(htr, ytr, hte, yte, evaluate.PROTOCOL["Cs"], seed=0)
        assert out["probe"][ck] == pytest.approx(acc, abs=1e-3)
    final = out["probe"][cks[-1]]
    for g in out["gains"]:
        assert g["gain"] == pytest.approx(final - out["probe"][g["from"]], abs=1e-12)
        assert g["lo"] <= g["gain"] <= g["hi"] and g["hi"] - g["lo"] < 0.05
    assert out["verdict"] == evaluate.plateau_verdict(out["gains"])
    assert out["protocol"]["test"] == 10000
