"""Each verdict fires on a constructed case and stays silent on healthy features."""

import numpy as np
import pytest

from repeval_ref import labelfree
from repeval_ref import labelfree as geometry
from repeval_ref.labelfree.spectrum import gram_spectrum
from repeval_ref.verdicts import (
    chance_verdict,
    collapse_verdict,
    dropped_features_verdict,
    few_per_class_verdict,
    spectrum_cliff_verdict,
    unseen_labels_verdict,
)


@pytest.fixture(scope="module")
def healthy():
    rng = np.random.default_rng(0)
    return rng.normal(size=(600, 32))


def test_chance_fires_at_chance_and_prints_the_level():
    y = np.repeat(np.arange(10), 30)  # balanced: chance 10 %
    v = chance_verdict(33, 300, y, "weighted k-NN")
    assert v["fired"] and "10.00%" in v["message"] and v["numbers"]["chance"] == pytest.approx(0.1)
    assert "most frequent" in v["rule"]
    assert chance_verdict(0, 300, y)["message"].split(" is ")[1].startswith("below chance")
    # imbalanced: chance is the majority share, not 1 / K
    y2 = np.array([0] * 80 + [1] * 20)
    assert chance_verdict(78, 100, y2)["fired"]
    assert chance_verdict(78, 100, y2)["numbers"]["chance"] == pytest.approx(0.8)


def test_chance_silent_when_clearly_above():
    y = np.repeat(np.arange(10), 30)
    v = chance_verdict(250, 300, y)
    assert not v["fired"] and "above chance" in v["message"]


def test_collapse_fires_on_collapsed_features_and_not_on_healthy(healthy):
    rng = np.random.default_rng(1)
    direction = rng.normal(size=32)
    collapsed = np.outer(1 + 0.01 * rng.random(600), direction) + 1e-6 * rng.normal(size=(600, 32))
    v = collapse_verdict(labelfree.rankme(collapsed), geometry.mean_pairwise_cosine(collapsed), 32)
    assert v["fired"] and "collapsed" in v["message"]
    h = collapse_verdict(labelfree.rankme(healthy), geometry.mean_pairwise_cosine(healthy), 32)
    assert not h["fired"]


def test_collapse_from_a_common_offset_says_so(healthy):
    shifted = healthy + 50.0  # centred metrics unchanged, cosines near 1
    v = collapse_verdict(
        labelfree.rankme(shifted),
        geometry.mean_pairwise_cosine(shifted),
        32,
        geometry.participation_ratio(shifted),
    )
    assert v["fired"] and "offset" in v["message"]
    rng = np.random.default_rng(5)
    truly = np.outer(1 + 0.01 * rng.random(600), rng.normal(size=32))
    t = collapse_verdict(
        labelfree.rankme(truly),
        geometry.mean_pairwise_cosine(truly),
        32,
        geometry.participation_ratio(truly),
    )
    assert t["fired"] and "offset" not in t["message"]


def test_spectrum_cliff_fires_on_low_rank_plus_tiny_noise(healthy):
    rng = np.random.default_rng(2)
    low = rng.normal(size=(600, 5)) @ rng.normal(size=(5, 32)) + 1e-4 * rng.normal(size=(600, 32))
    v = spectrum_cliff_verdict(gram_spectrum(low, center=True))
    assert v["fired"] and v["numbers"]["position"] == 5 and "5 directions" in v["message"]
    exact = rng.normal(size=(600, 5)) @ rng.normal(size=(5, 32))  # exactly rank 5
    e = spectrum_cliff_verdict(gram_spectrum(exact, center=True))
    assert e["fired"] and e["numbers"]["position"] == 5
    assert not spectrum_cliff_verdict(gram_spectrum(healthy, center=True))["fired"]


def test_dropped_features_and_zero_rows():
    assert dropped_features_verdict(3, 0, 64, 100)["fired"]
    assert "3 of 64 feature columns" in dropped_features_verdict(3, 0, 64, 100)["message"]
    assert "2 of 100 rows" in dropped_features_verdict(0, 2, 64, 100)["message"]
    assert not dropped_features_verdict(0, 0, 64, 100)["fired"]


def test_few_per_class():
    y = np.array([0] * 50 + [1] * 50 + [2] * 7)
    v = few_per_class_verdict(y)
    assert v["fired"] and "class 2 with 7" in v["message"]
    assert not few_per_class_verdict(np.repeat([0, 1, 2], 20))["fired"]


def test_unseen_test_labels():
    v = unseen_labels_verdict([0, 1, 1, 2], [0, 3, 3, 1])
    assert v["fired"] and v["numbers"]["labels"] == [3] and "2 of 4 TEST rows" in v["message"]
    assert not unseen_labels_verdict([0, 1, 2], [2, 1, 0])["fired"]


@pytest.mark.parametrize(
    "call",
    [
        lambda: chance_verdict(5, 0, [0, 1]),
        lambda: chance_verdict(9, 5, [0, 1]),
        lambda: collapse_verdict(1.0, float("nan"), 3),
        lambda: collapse_verdict(1.0, 0.5, 0),
        lambda: dropped_features_verdict(-1, 0, 3, 3),
        lambda: few_per_class_verdict([]),
        lambda: unseen_labels_verdict([], [1]),
        lambda: spectrum_cliff_verdict([[1.0]]),
    ],
)
def test_bad_arguments_raise_value_error(call):
    with pytest.raises(ValueError):
        call()


@pytest.mark.slow
def test_report_prints_verdicts_for_collapsed_features(tmp_path, capsys):
    """End to end: collapsed features at chance get both verdicts, with the numbers."""
    from repeval_ref.cli import main

    rng = np.random.default_rng(4)
    y = np.repeat(np.arange(10), 30)
    X = np.outer(1 + 0.001 * rng.random(300), rng.normal(size=16)) + 1e-9 * rng.normal(
        size=(300, 16)
    )
    np.savez(tmp_path / "c.npz", features=X, labels=y)
    rc = main(
        [
            "report",
            str(tmp_path / "c.npz"),
            "--test-fraction",
            "0.3",
            "--out",
            str(tmp_path / "o"),
            "--quiet",
            "--probe-c",
            "1",
            "--draws",
            "2",
        ]
    )
    assert rc == 0
    out = capsys.readouterr().out
    verdicts = out.split("verdicts:")[1]
    assert "collapsed" in verdicts and "chance level of 10.00%" in verdicts and "Rule:" in verdicts
