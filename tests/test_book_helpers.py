"""Tests of the book plumbing in repeval_book.glue (glue_all, plain, the palette)."""

from __future__ import annotations

import numpy as np
import pytest

from repeval_book import glue as _book


def test_glue_all_glues_plain_values_with_the_prefix_and_no_display():
    calls = []
    out = _book.glue_all(
        {
            "acc": np.float64(0.75),
            "n": np.int64(400),
            "name": "ridge",
            "flag": np.bool_(True),
            "zero_d": np.array(2.5),
        },
        prefix="p_",
        glue=lambda *a, **k: calls.append((a, k)),
    )
    assert out == {"p_acc": 0.75, "p_n": 400, "p_name": "ridge", "p_flag": True, "p_zero_d": 2.5}
    assert [a for a, _ in calls] == list(out.items())
    assert all(k == {"display": False} for _, k in calls)
    # NumPy scalars became Python ones, so format specs such as ",d" work on them
    assert type(out["p_n"]) is int and type(out["p_acc"]) is float and type(out["p_flag"]) is bool
    assert f"{out['p_n']:,d}" == "400"


@pytest.mark.parametrize(
    "mapping, word",
    [
        ([("a", 1)], "mapping"),
        ({"a b": 1}, "name"),
        ({"": 1}, "name"),
        ({"a": np.ones(3)}, "mapping\\['a'\\]"),
        ({"a": [1, 2]}, "mapping\\['a'\\]"),
    ],
)
def test_glue_all_rejects_bad_input_before_gluing_anything(mapping, word):
    calls = []
    with pytest.raises(ValueError, match=word):
        _book.glue_all(mapping, glue=lambda *a, **k: calls.append(a))
    assert calls == []


def test_palette_is_okabe_ito_and_the_colormap_checks_its_size():
    assert len(_book.OKABE_ITO) == 8 and len(set(_book.OKABE_ITO)) == 8
    cmap = _book.okabe_ito_cmap(3)
    assert [tuple(round(c * 255) for c in cmap(i)[:3]) for i in range(3)] == [
        (0xE6, 0x9F, 0x00),
        (0x56, 0xB4, 0xE9),
        (0x00, 0x9E, 0x73),
    ]
    for bad in (0, 8, 2.0, True):
        with pytest.raises(ValueError, match="n"):
            _book.okabe_ito_cmap(bad)


@pytest.mark.parametrize(
    "lo, hi, predicted, words",
    [
        (0.01, 0.03, None, "shown"),
        (-0.03, -0.01, None, "shown"),
        (-0.01, 0.02, None, "not shown at this scale"),
        (0.01, 0.03, 0.07, "shown"),
        (-0.03, -0.01, 0.07, "opposite"),
        (-0.006, 0.009, 0.07, "contradicted in size"),
        (-0.01, 0.09, 0.07, "not detected"),
        (0.01, 0.03, -0.02, "opposite"),
    ],
)
def test_interval_verdict_reads_the_interval_with_or_without_a_prediction(lo, hi, predicted, words):
    assert _book.interval_verdict(lo, hi, predicted) == words


@pytest.mark.parametrize(
    "args, name", [((0.2, 0.1), "lo"), ((np.nan, 0.1), "lo"), ((0.0, 0.1, 0.0), "predicted")]
)
def test_interval_verdict_rejects_bad_input_naming_it(args, name):
    with pytest.raises(ValueError, match=name):
        _book.interval_verdict(*args)
