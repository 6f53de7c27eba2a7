"""The studies' command line and writer: one JSON record per study, with its code version."""

from __future__ import annotations

import json

import pytest

from repeval_ref.studies import STUDIES, load_result, study_module
from repeval_ref.studies.__main__ import main


def test_every_study_has_settings_run_and_summarise():
    for name in STUDIES:
        mod = study_module(name)
        assert set(mod.SETTINGS) == {"full", "small"}
        assert callable(mod.run) and callable(mod.summarise)


def test_command_writes_a_small_record(tmp_path):
    assert main(["run", "rankme_family", "--budget", "small", "--out", str(tmp_path)]) == 0
    rec = json.loads((tmp_path / "rankme_family.small.json").read_text())
    assert rec["study"] == "rankme_family" and rec["budget"] == "small"
    assert len(rec["code_version"]["module_sha256"]) == 64
    assert rec["cpu_seconds"] > 0 and rec["runs"]


def test_committed_records_name_their_study_and_budget():
    for name in STUDIES:
        for budget in ("full", "small"):
            rec = load_result(name, budget)
            assert rec["study"] == name and rec["budget"] == budget
            assert rec["settings"] == study_module(name).SETTINGS[budget]


@pytest.mark.parametrize("name, budget", [("nope", "full"), ("seed_spread", "medium")])
def test_load_result_rejects_unknown_names(name, budget):
    with pytest.raises(ValueError):
        load_result(name, budget)
