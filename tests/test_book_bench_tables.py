"""The performance appendix's tables read the benchmark files right, at the edge cases too."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from repeval_book.bench_tables import (
    TABLE_COLUMNS,
    benchmark_table,
    gpu_knn_line,
    machine_sentence,
    open_goals,
    ratio_text,
    result_word,
)

ROOT = Path(__file__).resolve().parents[1]


def _line(**kw):
    base = {
        "what": "time",
        "status": "measured",
        "subject_value": "1 s",
        "competitor": "loop",
        "competitor_value": "2 s",
        "ratio": 2.0,
        "goal": ">= 1x",
        "met": True,
    }
    base.update(kw)
    return base


def test_the_ratio_cell_shows_the_lowest_and_highest_paired_ratio():
    paired = [2.188, 3.037, 2.5, 2.6, 2.7]
    text = ratio_text(_line(ratio=2.6468, paired_ratios=paired))
    lo, hi = (float(v) for v in re.search(r"\[(\S+), (\S+)\]", text).groups())
    assert (lo, hi) == (round(min(paired), 2), round(max(paired), 2))
    assert text.startswith("2.65 ") and "(5 paired)" in text
    assert ratio_text(_line(ratio=9.1778)) == "9.18 (one comparison)"
    assert ratio_text(_line(ratio=9.1778, paired_ratios=[9.1])) == "9.18 (one comparison)"
    assert ratio_text(_line(ratio=None)) == "—"
    with pytest.raises(ValueError, match="ratio"):
        ratio_text(_line(ratio=float("nan")))
    with pytest.raises(ValueError, match="line"):
        ratio_text({"ratio": 1.0})


@pytest.mark.parametrize(
    ("met", "goal", "status", "word"),
    [
        (True, "g", "measured", "met"),
        (False, "g", "measured", "not met"),
        ("median", "g", "measured", "met on the median only"),
        (None, None, "measured", "no goal (for reference)"),
        (True, None, "measured", "no goal (for reference)"),
        (None, None, "pending", "pending"),
    ],
)
def test_the_result_word_follows_met_goal_and_status(met, goal, status, word):
    assert result_word(_line(met=met, goal=goal, status=status)) == word


def test_an_unknown_met_value_is_refused():
    with pytest.raises(ValueError, match="met"):
        result_word(_line(met="yes"))
    with pytest.raises(ValueError, match="met"):
        result_word(_line(met=1))


def test_the_gpu_line_is_the_search_time_over_the_bound_and_judged_against_two():
    pending = _line(what="GPU: search", status="pending", ratio=None, goal=None, met=None)
    assert gpu_knn_line(pending, None) == pending
    for total, bound, met in ((0.28, 0.14, True), (0.52, 0.14, False), (0.1, 0.2, True)):
        gpu = {
            "device_name": "GPU X",
            "knn": {"seconds_total": total, "seconds_at_matmul_bound": bound},
        }
        out = gpu_knn_line(pending, gpu)
        assert out["ratio"] == pytest.approx(total / bound) and out["met"] is met
        assert out["status"] == "measured" and "GPU X" in out["subject_value"]
    with pytest.raises(ValueError, match="gpu"):
        gpu_knn_line(pending, {"knn": {}})
    with pytest.raises(ValueError, match="bound"):
        gpu_knn_line(
            pending,
            {"device_name": "g", "knn": {"seconds_total": 1.0, "seconds_at_matmul_bound": 0}},
        )


def test_every_line_of_the_committed_file_becomes_one_row_of_six_cells_that_agree_with_it():
    results = json.loads((ROOT / "benchmarks" / "results.json").read_text())
    gpu = json.loads((ROOT / "benchmarks" / "gpu" / "results_h200.json").read_text())
    for row in results["rows"]:
        table = benchmark_table(row, gpu)
        assert len(table) == len(row["lines"])
        for cells, line in zip(table, row["lines"]):
            assert len(cells) == len(TABLE_COLUMNS)
            assert cells[0] == line["what"]
            if line["status"] == "measured" and line["ratio"] is not None:
                assert cells[3].startswith(f"{line['ratio']:.2f}")
            if line["met"] is False:
                assert cells[5] == "not met"
            # process words never reach the reader
            assert not re.search(r"\bissue\b|\blent\b", " ".join(cells))
        assert machine_sentence(row, results["machine"]).startswith("Measured on ")
    # the GPU line, measured by the GPU script, is read from its file
    knn = next(r for r in results["rows"] if r["id"] == "knn")
    gpu_cells = next(c for c in benchmark_table(knn, gpu) if c[0].startswith("GPU"))
    ratio = gpu["knn"]["seconds_total"] / gpu["knn"]["seconds_at_matmul_bound"]
    assert gpu_cells[5] == ("met" if ratio <= 2 else "not met")


def test_open_goals_counts_what_an_independent_pass_over_the_file_counts():
    results = json.loads((ROOT / "benchmarks" / "results.json").read_text())
    n_goals = sum(ln["goal"] is not None for r in results["rows"] for ln in r["lines"])
    unmet = sum(
        ln["status"] == "measured" and ln["goal"] is not None and ln["met"] is False
        for r in results["rows"]
        for ln in r["lines"]
    )
    median = sum(ln["met"] == "median" for r in results["rows"] for ln in r["lines"])
    text = open_goals(results)
    assert text.startswith(f"Of the {n_goals} stated goals")
    assert (f"{median} is met on the median only" in text) == (median == 1)
    assert ("not met" in text) == (unmet > 0)


def _results(lines):
    return {"rows": [{"title": "T", "lines": lines}]}


def test_open_goals_reads_right_for_none_one_and_many():
    assert (
        open_goals(_results([_line(goal=None, met=None)]))
        == "No line states a goal; every line is measured."
    )
    assert open_goals(_results([_line()])).startswith("The one stated goal is met")
    assert open_goals(_results([_line(), _line()])).startswith("All 2 stated goals are met")
    two_bad = open_goals(_results([_line(met=False), _line(met=False), _line(met="median")]))
    assert "2 are not met" in two_bad and "1 is met on the median only" in two_bad
    assert "Of the 3 stated goals" in two_bad
    with pytest.raises(ValueError, match="results"):
        open_goals({"rows": None})


def test_the_machine_sentence_spells_one_core_and_a_busy_machine():
    machine = {
        "date_utc": "2026-11-30 23:41 UTC",
        "cpu_model": "AMD EPYC",
        "logical_cores": 1,
        "memory_gb": 23.5,
        "load_average_at_start": [2.5, 1, 1],
    }
    text = machine_sentence({}, machine)
    assert "1 logical core " in text and "23.5 GiB" in text and "2026-11-30" in text
    assert "other work shared the machine" in text
    quiet = dict(machine, logical_cores=2, load_average_at_start=[0.5, 1, 1])
    assert "shared" not in machine_sentence({}, quiet) and "2 logical cores" in machine_sentence(
        {}, quiet
    )
    run = {"date_utc": "2026-12-02 01:00 UTC", "cpu_model": "Other CPU", "logical_cores": 4}
    assert "Other CPU" in machine_sentence({"run": run}, machine)
    with pytest.raises(ValueError, match="machine"):
        machine_sentence({}, {"cpu_model": "x"})
