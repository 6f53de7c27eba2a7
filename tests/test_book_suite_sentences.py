"""The suite and encoder chapters' generated sentences, fed zero, one, many and equal values."""

from __future__ import annotations

import itertools
import re

import pytest

from repeval_book.suite_sentences import (
    best_block_sentence,
    flip_sentence,
    leader_sentence,
    near_chance_sentence,
    others_reaching,
    protocol_flip_sentence,
    range_counts,
    tau_interval_counts,
)

#: agreement errors and empty quantities a generated sentence must never contain
BAD = [
    r"\b1 (pairs|tasks|cells|encoders|flips|other encoders)\b",
    r"\b1 (pair|task|cell|encoder|flip)s? (have|fall|lie|reach)\b",
    r"\b1 have\b",
    r"\b([02-9]|\d{2,}) (pair|task|cell|encoder|flip) ",
    r"\b0 (of|encoders|pairs|cells|tasks|flips|other)\b",
    r"\bnone\.$",
    r": none\b",
    r"\.0\b",
]


def clean(text):
    for pattern in BAD:
        assert not re.search(pattern, text), (pattern, text)
    return text


@pytest.mark.parametrize(
    ("above", "zero", "below"), list(itertools.product([0, 1, 3], repeat=3))[1:]
)
def test_tau_interval_counts_reads_right_and_adds_up(above, zero, below):
    text = clean(tau_interval_counts(above, zero, below))
    total = above + zero + below
    assert f"{total} pairs" in text or (total == 1 and "pair" in text) or f"all {total}" in text
    assert ("contains zero, so the data do not" in text) == (zero > 0)
    assert ("a reversal" in text and "which would be" not in text) == (below > 0)
    assert text[0].isupper() and text.endswith(".")


def test_tau_interval_counts_takes_a_lead():
    text = tau_interval_counts(2, 1, 0, lead="Under the k-NN")
    assert text.startswith("Under the k-NN, of the 3 pairs of tasks, 2 have an interval")
    with pytest.raises(ValueError, match="lead"):
        tau_interval_counts(1, 0, 0, lead="")


def test_tau_interval_counts_refuses_nothing_and_negatives():
    with pytest.raises(ValueError):
        tau_interval_counts(0, 0, 0)
    with pytest.raises(ValueError, match="n_zero"):
        tau_interval_counts(1, -1, 0)


@pytest.mark.parametrize("names", [[], ["a"], ["a", "b"], ["a", "b", "c"]])
def test_others_reaching_names_them_with_the_right_verb(names):
    text = clean(others_reaching(names))
    for n in names:
        assert n in text
    if not names:
        assert text.startswith("no other encoder has")
    else:
        assert (" has an " in text) == (len(names) == 1)


@pytest.mark.parametrize(
    ("overlap", "in_flips", "flips"),
    [(0, 0, 0), (0, 0, 1), (0, 0, 4), (1, 0, 2), (2, 0, 0), (0, 1, 1), (0, 1, 5), (3, 2, 5)],
)
def test_leader_sentence_is_clear_only_without_overlap_or_flips(overlap, in_flips, flips):
    text = clean(leader_sentence("enc", "probe", overlap, in_flips, flips))
    assert ("is a clear leader" in text) == (overlap == 0 and in_flips == 0)
    assert "none of the 0" not in text
    if overlap == 1:
        assert "1 other encoder reaches" in text
    if in_flips and in_flips == flips:
        assert "it is in " in text and (
            "the one flip" in text or f"all {flips}" in text or "both" in text
        )
    with pytest.raises(ValueError):
        leader_sentence("enc", "probe", 0, 3, 2)


@pytest.mark.parametrize(
    "cells",
    [[], [("t1", "e1")], [("t1", "e1"), ("t1", "e1")], [("t1", "e1"), ("t2", "e2"), ("t2", "e1")]],
)
def test_near_chance_sentence_reads_the_cells(cells):
    text = clean(near_chance_sentence(cells, 156))
    if not cells:
        assert "is that close to chance" in text and "those" not in text
        return
    assert f"{len(cells)} of the 156 cells" in text
    for t, e in cells:
        assert t in text and e in text
    encoders = {e for _, e in cells}
    assert ("that encoder" in text) == (len(encoders) == 1)
    with pytest.raises(ValueError, match="outnumber"):
        near_chance_sentence(cells, len(cells) - 1)


@pytest.mark.parametrize(("flips", "pairs"), [(0, 0), (1, 1), (2, 1), (5, 3)])
def test_flip_sentence(flips, pairs):
    text = clean(flip_sentence(flips, pairs))
    assert ("no flip" in text) == (flips == 0)
    assert text.startswith("there is " if flips <= 1 else "there are ")
    if flips > 1:
        assert f"{flips} flips" in text
    with pytest.raises(ValueError):
        flip_sentence(1, 0)


@pytest.mark.parametrize(
    ("with_", "tasks", "flips"), [(0, 6, 0), (1, 6, 1), (1, 6, 3), (3, 6, 7), (6, 6, 9), (1, 1, 2)]
)
def test_protocol_flip_sentence(with_, tasks, flips):
    text = clean(protocol_flip_sentence(with_, tasks, flips, 468))
    assert "468 comparisons" in text
    assert ("do the two protocols reverse" in text) == (flips == 0)
    with pytest.raises(ValueError):
        protocol_flip_sentence(2, 6, 1, 468)


@pytest.mark.parametrize(("a", "b"), [(0, 0), (1, 6), (6, 1), (3, 3)])
def test_range_counts(a, b):
    text = clean(range_counts(a, b, 6))
    assert text.count("6 tasks") == 2 or "all 6 tasks" in text or "1 of the 6" in text


def test_best_block_sentence_names_the_last_block_when_it_is_best():
    assert best_block_sentence("mae_vit", 4, 4, 50.03, 50.03) == (
        "for mae_vit the last block, block 4, is best (50.03)"
    )
    text = best_block_sentence("simclr_vit", 2, 4, 54.0, 53.1, interval=(0.2, 1.6))
    assert "block 2, at 54 against 53.10" in text and "from 0.20 to 1.60" in text
    assert "against" not in best_block_sentence("a", 1, 1, 3.0, 3.0)
    with pytest.raises(ValueError):
        best_block_sentence("a", 5, 4, 1.0, 1.0)
