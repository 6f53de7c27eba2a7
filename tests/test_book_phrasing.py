"""Generated sentences read right at the edges: zero, one, many, equal ends, no difference."""

import math

import numpy as np
import pytest

from repeval_book.phrasing import count_noun, count_of, difference, number, series, span, verb


@pytest.mark.parametrize(
    "n, expected",
    [
        (0, "no encoders"),
        (1, "1 encoder"),
        (2, "2 encoders"),
        (1234, "1,234 encoders"),
        (np.int64(1), "1 encoder"),
        (3.0, "3 encoders"),
    ],
)
def test_count_noun_zero_one_many(n, expected):
    assert count_noun(n, "encoder") == expected


def test_count_noun_irregular_plural_and_zero_word():
    assert count_noun(2, "query", "queries") == "2 queries"
    assert count_noun(0, "task", zero="none of the") == "none of the tasks"
    assert count_noun(0, "task", zero="0") == "0 tasks"


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True, None])
def test_count_noun_refuses(bad):
    with pytest.raises(ValueError, match="n"):
        count_noun(bad, "encoder")


def test_verb_agrees():
    assert [verb(n, "has", "have") for n in (0, 1, 2)] == ["have", "has", "have"]


@pytest.mark.parametrize(
    "items, expected",
    [([], "none"), (["a"], "a"), (["a", "b"], "a and b"), (["a", "b", "c"], "a, b and c")],
)
def test_series(items, expected):
    assert series(items) == expected


def test_number_integers_and_floats():
    assert number(3) == "3"
    assert number(3.0) == "3"
    assert number(np.float32(12.0)) == "12"
    assert number(1024.0) == "1,024"
    assert number(0.376, 2) == "0.38"
    assert number(-0.0001, 2) == "0.00"
    assert number(float("nan")) == "undefined"
    assert number(math.inf) == "infinite"
    with pytest.raises(ValueError, match="digits"):
        number(1.5, -1)
    with pytest.raises(ValueError, match="value"):
        number("1")


def test_span_equal_and_distinct_ends():
    assert span(1.0, 1.0, 3) == "exactly 1"
    assert span(0.5, 0.5, 3) == "exactly 0.500"
    assert span(0.5001, 0.5004, 3) == "about 0.500"
    assert span(0.31, 0.45) == "between 0.31 and 0.45"
    with pytest.raises(ValueError, match="lo"):
        span(2, 1)


def test_difference_reads_zero_as_the_same():
    assert difference(50.03, 50.03) == "the same"
    assert difference(50.031, 50.03) == "the same"
    assert difference(51.0, 50.5, 1, "points") == "0.5 points higher"
    assert difference(1.0, 1.25) == "0.25 lower"
    with pytest.raises(ValueError, match="a"):
        difference(float("nan"), 1.0)


def test_count_of_reads_none_one_some_both_and_all():
    assert count_of(0, 15, "pair") == "none of the 15 pairs"
    assert count_of(1, 15, "pair") == "1 of the 15 pairs"
    assert count_of(14, 15, "pair") == "14 of the 15 pairs"
    assert count_of(15, 15, "pair") == "all 15 pairs"
    assert count_of(2, 2, "task") == "both tasks"
    assert count_of(1, 1, "task") == "the one task"
    assert count_of(0, 1, "task") == "none of the tasks"
    assert count_of(3.0, 1200, "cell") == "3 of the 1,200 cells"
    assert count_of(1, 3, "analysis", "analyses") == "1 of the 3 analyses"
    # with verb() on the part, every count reads in agreement
    for n, total in ((0, 5), (1, 5), (2, 5), (5, 5)):
        text = f"{count_of(n, total, 'pair')} {verb(n, 'is', 'are')} separated"
        assert not text.startswith("1 of the 5 pairs are") and "0 of" not in text
    for bad in ((2, 1), (-1, 3), (1.5, 3)):
        with pytest.raises(ValueError):
            count_of(*bad, "pair")
    with pytest.raises(ValueError, match="noun"):
        count_of(1, 2, "")
