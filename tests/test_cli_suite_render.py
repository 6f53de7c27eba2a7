"""The suite report's sentence on agreement between tasks reads what the ranking holds.

The sentence is fed rankings built here from a known tau matrix, with and without bootstrap
intervals, at the edge cases (one pair of tasks, none flagged, one flagged, all flagged), and
checked against the pairs counted independently from the matrix.
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

from repeval_ref.cli._suite_render import agreement_sentence, render_markdown


def _suite(tau, lows=None, protocol="knn"):
    """A suite dict holding only the ranking the sentence reads: tasks t0.., tau, intervals."""
    tau = np.asarray(tau, dtype=float)
    n = len(tau)
    tasks = [f"t{i}" for i in range(n)]
    interval = None
    if lows is not None:
        lows = np.asarray(lows, dtype=float)
        interval = [[[lows[a, b], 1.0] for b in range(n)] for a in range(n)]
    return {"ranking": {protocol: {"tasks": tasks, "tau": tau.tolist(), "tau_interval": interval}}}


def _flagged(tau, lows):
    """Pairs an independent reading flags: the interval's low end <= 0, or tau <= 0 without one."""
    n = len(tau)
    key = tau if lows is None else lows
    return [(f"t{a}", f"t{b}") for a, b in itertools.combinations(range(n), 2) if key[a][b] <= 0]


def _sym(n, off):
    m = np.full((n, n), off, dtype=float)
    np.fill_diagonal(m, 1.0)
    return m


@pytest.mark.parametrize("n_tasks", [2, 3, 5])
@pytest.mark.parametrize("with_intervals", [True, False])
@pytest.mark.parametrize("n_bad", ["none", "one", "all"])
def test_the_sentence_names_the_flagged_pairs_and_agrees_in_number(n_tasks, with_intervals, n_bad):
    tau = _sym(n_tasks, 0.5)
    lows = _sym(n_tasks, 0.2) if with_intervals else None
    target = lows if with_intervals else tau
    pairs = list(itertools.combinations(range(n_tasks), 2))
    bad = {"none": [], "one": pairs[:1], "all": pairs}[n_bad]
    for a, b in bad:
        target[a, b] = target[b, a] = -0.1
    text = agreement_sentence(_suite(tau, lows), "knn")
    flagged = _flagged(tau, lows)
    assert len(flagged) == len(bad)
    n_pairs = len(pairs)
    # never a count followed by the wrong number of its noun, never "1 pairs" or "0 of"
    assert not re.search(r"\b1 pairs\b", text) and not re.search(r"\b0 of\b", text)
    assert not re.search(r"\b([02-9]|\d\d+) pair\b", text)
    if with_intervals and not flagged:
        assert "alike beyond the noise" in text
    else:
        assert "alike beyond the noise" not in text
    if not with_intervals:
        assert "no interval" in text  # a protocol without intervals never claims one
        assert "interval lies above" not in text and "intervals lies above" not in text
    if flagged and n_pairs > 1:
        for a, b in flagged:
            assert f"{a} / {b}" in text
        unflagged = [
            p
            for p in itertools.combinations([f"t{i}" for i in range(n_tasks)], 2)
            if p not in flagged
        ]
        for a, b in unflagged:
            assert f"{a} / {b}" not in text
        if len(flagged) == n_pairs:
            assert f"All {n_pairs} pairs" in text
        else:
            assert f"{len(flagged)} of the {n_pairs} pairs" in text
    if n_pairs == 1:
        assert text.startswith("The two tasks")


def test_a_single_task_has_no_pair_and_an_unknown_protocol_is_refused():
    assert "no pair" in agreement_sentence(_suite([[1.0]]), "knn")
    with pytest.raises(ValueError, match="p must be"):
        agreement_sentence(_suite(_sym(3, 0.5)), "probe")


def test_the_committed_report_never_claims_intervals_for_the_low_shot_protocol():
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "suite_zoo.json"
    suite = json.loads(path.read_text())
    md = render_markdown(suite)
    assert md == (path.with_suffix(".md")).read_text()  # the committed copy is this renderer's
    section = md.split("## 10-shot")[1].split("## Heat map")[0]
    assert suite["ranking"]["fewshot"]["tau_interval"] is None
    assert "no interval" in section and "interval lies above" not in section
