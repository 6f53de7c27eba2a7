"""The benchmark harness end to end with tiny sizes (``python -m benchmarks.run --quick``).

Checks the JSON schema, that every ratio is computed from the two medians it compares,
that a row whose code is missing is written as pending (not measured), and the pieces
that do not need a full run: the child process's memory accounting, the faiss-side vote
against ``knn_classify`` and the naive spectral fit against ``alpha_req``.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import pathlib

import numpy as np
import pytest

pytest.importorskip("psutil")
pytest.importorskip("faiss")

from benchmarks import _harness, bench_knn, bench_labelfree, run  # noqa: E402
from repeval_ref import knn_classify  # noqa: E402


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "results.json"
    real_exists = run._exists
    # pretend the grid module has not landed: its row must be pending, not faked
    run._exists = lambda m: False if m == "repeval_ref.torch.grid" else real_exists(m)
    try:
        assert run.main(["--quick", "--out", str(out)]) == 0
    finally:
        run._exists = real_exists
    return json.loads(out.read_text())


@pytest.mark.slow  # runs the quick benchmark rows
def test_schema_and_machine(quick):
    assert quick["schema"] == run.SCHEMA and quick["mode"] == "quick"
    m = quick["machine"]
    for key in ("date_utc", "cpu_model", "logical_cores", "memory_gb", "os", "python", "versions"):
        assert m[key], key
    assert m["versions"]["numpy"] == np.__version__
    assert [r["id"] for r in quick["rows"]] == list(run.ROW_IDS)
    for row in quick["rows"]:
        assert row["status"] in {"measured", "pending", "failed", "not run", "partial"}
        assert row["lines"], row["id"]
        for ln in row["lines"]:
            # the per-repetition ratios ride along where the two sides ran in pairs
            paired = ln.get("paired_ratios")
            if paired is not None:
                assert paired and all(isinstance(r, float) and r > 0 for r in paired)
            assert set(ln) - {"paired_ratios"} == {
                "row",
                "what",
                "competitor",
                "subject_value",
                "competitor_value",
                "ratio",
                "goal",
                "met",
                "status",
                "note",
            }
            assert ln["row"] == row["id"]
            if ln["goal"] is None:
                assert ln["met"] is None
            if ln["status"] == "measured" and ln["goal"] is not None:
                assert ln["met"] in (True, False, "median")
                if ln["met"] == "median":
                    assert paired, ln["what"]


@pytest.mark.slow  # reads the quick benchmark run (about a minute)
def test_rows_that_exist_are_measured(quick):
    rows = {r["id"]: r for r in quick["rows"]}
    for rid in ("knn", "ridge", "labelfree"):
        assert rows[rid]["status"] == "measured", rows[rid].get("traceback")


@pytest.mark.slow  # reads the quick benchmark run (about a minute)
def test_ratios_are_computed_from_the_medians(quick):
    rows = {r["id"]: r for r in quick["rows"]}
    knn = rows["knn"]
    S = knn["measurements"]
    for t in ("repeval", "faiss_flat", "sklearn_brute"):
        assert S[t]["repetitions"] >= 1 and S[t]["seconds_median"] > 0
        assert S[t]["seconds_median"] == pytest.approx(
            float(np.median(S[t]["seconds_all"])), rel=1e-3
        )
        assert S[t]["peak_rss_mb_median"] > 0
    speed = knn["lines"][0]
    assert speed["ratio"] == pytest.approx(
        S["faiss_flat"]["seconds_median"] / S["repeval"]["seconds_median"]
    )
    assert speed["met"] == (speed["ratio"] >= 1.0)
    # knn_classify against the faster of the two bare-product floors
    floor = min(S["products_blas"]["seconds_median"], S["products_tiles"]["seconds_median"])
    assert knn["lines"][1]["ratio"] == pytest.approx(S["repeval"]["seconds_median"] / floor)
    # the tiny clustered data have no ties: knn_classify and faiss + vote agree
    assert knn["differing_rows_without_tie"] == 0
    ridge = rows["ridge"]
    R = ridge["measurements"]
    assert ridge["lines"][0]["ratio"] == pytest.approx(
        R["sklearn_ridgecv"]["seconds_median"] / R["repeval"]["seconds_median"]
    )
    assert ridge["press_max_rel_diff"]["sklearn_ridgecv"] < 1e-8
    assert ridge["lines"][1]["met"] is True


@pytest.mark.slow  # reads the quick benchmark run (about a minute)
def test_missing_code_is_pending_and_listed(quick):
    rows = {r["id"]: r for r in quick["rows"]}
    assert rows["grid"]["status"] == "pending" and rows["grid"]["measurements"] == {}
    assert all(ln["ratio"] is None and ln["status"] == "pending" for ln in rows["grid"]["lines"])
    # the clean-room verifier's line is there, not measured in quick mode (minutes per run)
    verifier = [ln for ln in rows["autograder"]["lines"] if "clean-room verifier" in ln["what"]]
    assert len(verifier) == 1 and verifier[0]["status"] == "not run"
    assert verifier[0]["ratio"] is None
    assert any(u.startswith("grid:") and "pending" in u for u in quick["unmet"])
    # every goal not met appears in the closing list
    for row in quick["rows"]:
        for ln in row["lines"]:
            if ln["met"] is False:
                assert any(u.startswith(f"{ln['row']}: {ln['what']}") for u in quick["unmet"])


@pytest.mark.slow  # reads the quick benchmark run (about a minute)
def test_table_has_one_line_per_comparison(quick):
    text = run.table(quick)
    n_lines = sum(len(r["lines"]) for r in quick["rows"])
    assert len(text.splitlines()) == n_lines + 2
    assert "pending" in text


def test_child_reports_peak_memory_of_the_call():
    # a 200 MB allocation inside the measured call shows in the child's peak, not before it
    res = _harness.run_child("_selftest:allocate", {"mb": 200})
    assert res["peak_rss_mb"] - res["rss_before_mb"] >= 180
    assert res["beyond_inputs_mb"] == pytest.approx(res["peak_rss_mb"] - res["rss_before_mb"])
    assert res["peak_anon_beyond_inputs_mb"] >= 150
    assert res["out"] == {"sum": 0.0}


def test_child_failure_is_reported():
    with pytest.raises(_harness.ChildError, match="exited"):
        _harness.run_child("_selftest:fail", {})


def test_faiss_side_vote_matches_knn_classify():
    rng = np.random.default_rng(3)
    bank = rng.normal(size=(300, 12))
    y = rng.integers(0, 4, size=300)
    q = rng.normal(size=(40, 12))
    k, tau = 7, 0.1
    bu = bank / np.linalg.norm(bank, axis=1, keepdims=True)
    qu = q / np.linalg.norm(q, axis=1, keepdims=True)
    sims = qu @ bu.T
    order = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    got = bench_knn.vote(y[order], np.take_along_axis(sims, order, axis=1), tau, 4)
    np.testing.assert_array_equal(got, knn_classify(bank, y, q, k, tau, 4))


def test_naive_fit_matches_alpha_req():
    from repeval_ref.labelfree.spectral import alpha_req

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 40)) * np.arange(1, 41) ** -0.7
    lam = np.linalg.svd(X - X.mean(axis=0), compute_uv=False) ** 2
    assert bench_labelfree._fit(lam) == pytest.approx(alpha_req(X), rel=1e-8)


def _fake_ridge_row(cfg, reps, tmp):
    """A canned row in place of a measurement: the merge logic is what is under test."""
    return {
        "id": "ridge",
        "title": "Ridge (re-measured)",
        "status": "measured",
        "note": "",
        "measurements": {},
        "lines": [run._line("ridge", "fake line", "nobody", "1 s", "2 s", 2.0, ">= 3x", False)],
    }


@pytest.mark.slow  # reads the quick benchmark run (about a minute)
def test_merge_replaces_only_the_rerun_rows(quick, tmp_path, monkeypatch):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(quick))
    monkeypatch.setitem(run.ROWS, "ridge", _fake_ridge_row)
    assert run.main(["--quick", "--rows", "ridge", "--merge", "--out", str(path)]) == 0
    merged = json.loads(path.read_text())
    assert merged["machine"] == quick["machine"] and merged["mode"] == quick["mode"]
    assert [r["id"] for r in merged["rows"]] == [r["id"] for r in quick["rows"]]
    for old, new in zip(quick["rows"], merged["rows"]):
        if old["id"] != "ridge":
            assert new == old
    ridge = next(r for r in merged["rows"] if r["id"] == "ridge")
    assert ridge["title"] == "Ridge (re-measured)"
    assert ridge["run"]["settings"]["size"] == run.QUICK["ridge"]
    assert ridge["run"]["date_utc"] and ridge["run"]["mode"] == "quick"
    assert [m["rows"] for m in merged["merges"]] == [["ridge"]]
    # the closing list and the total follow the merged rows
    assert merged["unmet"] == run.unmet(merged)
    assert any(u.startswith("ridge: fake line") for u in merged["unmet"])
    assert not any(u.startswith("ridge:") and "fake" not in u for u in merged["unmet"])
    assert merged["total_seconds"] == pytest.approx(
        sum(r["row_seconds"] for r in merged["rows"]), abs=0.1
    )


def test_class_size_option():
    cfg = run._config(run._parse(["--rows", "autograder", "--students", "20", "--reps", "1"]))
    assert cfg["autograder"]["students"] == 20 and cfg["autograder"]["reps_class"] == 1
    assert run.FULL["autograder"]["students"] == 2  # the defaults are not modified
    assert run._config(run._parse(["--quick"]))["autograder"] is None  # minutes: not run
    quick_class = run._config(run._parse(["--quick", "--students", "3"]))["autograder"]
    assert quick_class["students"] == 3 and quick_class["assignments"]
    for bad in ("0", "-1", "two"):
        with pytest.raises(SystemExit):
            run._parse(["--students", bad])


# ----------------------------------------------------------------------------- report row: old code
# from git
def test_the_report_before_is_rebuilt_from_git_history(tmp_path):
    from benchmarks import bench_report

    try:
        module = bench_report.write_before(tmp_path / "old")
    except bench_report.HistoryUnavailable as exc:  # a tarball or a shallow clone
        pytest.skip(f"no git history here: {exc}")
    source = pathlib.Path(module).read_text(encoding="utf-8")
    # the command line of that commit: one module, its relative imports absolute and its
    # renamed modules taken from their homes, nothing else
    assert source == bench_report.absolute_imports(
        bench_report.old_source(bench_report.BEFORE_COMMIT), renamed=bench_report.RENAMED
    )
    assert "from repeval_ref.knn import knn_classify" in source
    assert "from repeval_ref import __version__" in source and "from ." not in source
    # every module it imports from the package exists and has the names asked for
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("repeval_ref"):
            home = importlib.import_module(node.module)
            for alias in node.names:
                assert (
                    hasattr(home, alias.name)
                    or importlib.util.find_spec(f"{node.module}.{alias.name}") is not None
                ), (node.lineno, node.module, alias.name)
    old = bench_report.load_before(module)
    assert old.__file__ == module and callable(old.main)
    assert old.build_parser().parse_args(["report", "a.npz", "b.npz"]).test == "b.npz"


def test_absolute_imports_rewrites_only_the_relative_imports():
    from benchmarks import bench_report

    src = (
        "import os\nfrom .knn import knn_classify\nfrom . import geometry, spectral\n"
        "def f():\n    from .uncertainty import (wilson_interval,\n        x)\n    return '.knn'\n"
    )
    assert bench_report.absolute_imports(src) == (
        "import os\nfrom repeval_ref.knn import knn_classify\nfrom repeval_ref import geometry, "
        "spectral\n"
        "def f():\n    from repeval_ref.uncertainty import (wilson_interval,\n        x)\n    "
        "return '.knn'\n"
    )
    with pytest.raises(ValueError, match="levels up"):
        bench_report.absolute_imports("from ..x import y\n")
    with pytest.raises(ValueError, match="source"):
        bench_report.absolute_imports("def broken(:\n")
    with pytest.raises(ValueError, match="package"):
        bench_report.absolute_imports("import os\n", package="not a name")


def test_absolute_imports_takes_renamed_modules_from_their_homes():
    from benchmarks import bench_report

    renamed = {
        "noise": "uncertainty",
        "geometry": "labelfree",
        "manifold": "labelfree.intrinsic_dimension",
    }
    src = (
        "from .noise import wilson_interval\nfrom .noisy import x\n"
        "def f():\n    from . import geometry, knn, manifold as m\n    return geometry\n"
    )
    got = bench_report.absolute_imports(src, renamed=renamed)
    assert got == (
        "from repeval_ref.uncertainty import wilson_interval\nfrom repeval_ref.noisy import x\n"
        "def f():\n    from repeval_ref import labelfree as geometry; from repeval_ref import knn; "
        "from repeval_ref.labelfree import intrinsic_dimension as m\n    return geometry\n"
    )
    scope = {}
    source = got.split("def f")[0].replace("from repeval_ref.noisy import x\n", "")
    exec(source, scope)  # noqa: S102
    from repeval_ref.uncertainty import wilson_interval

    assert scope["wilson_interval"] is wilson_interval
    with pytest.raises(ValueError, match="several lines"):
        bench_report.absolute_imports("from . import (geometry,\n    knn)\n", renamed=renamed)
    with pytest.raises(ValueError, match="renamed"):
        bench_report.absolute_imports("import os\n", renamed={"noise": "not a name"})


@pytest.mark.parametrize("where", ["missing commit", "not a repository", "no git"])
def test_report_row_without_the_history_is_skipped_with_the_reason(where, tmp_path, monkeypatch):
    from benchmarks import bench_report

    cfg = dict(run.QUICK["report"])
    if where == "missing commit":
        cfg["before_commit"] = "0" * 40
        expect = "0" * 40
    elif where == "not a repository":
        (tmp_path / "tarball").mkdir()
        cfg["git_repo"] = str(tmp_path / "tarball")
        expect = "not a git repository"
    else:
        monkeypatch.setenv("PATH", str(tmp_path))  # no git on the PATH
        expect = "git is not installed"
    with pytest.raises(bench_report.HistoryUnavailable, match=expect):
        bench_report.write_before(
            tmp_path / "old",
            cfg.get("before_commit", bench_report.BEFORE_COMMIT),
            cfg.get("git_repo", bench_report.REPO),
        )
    row = run.row_report(cfg, 1, str(tmp_path))
    assert row["id"] == "report" and row["status"] == "not run"
    assert row["note"].startswith("skipped: ") and expect in row["note"]
    assert bench_report.BEFORE_PATH in row["note"]
    [line] = row["lines"]
    assert line["status"] == "not run" and line["met"] is None and line["note"] == row["note"]
    assert not list(tmp_path.glob("report_*"))  # skipped before any data or child
    assert run.unmet({"rows": [row]}) == [f"report: repeval report — not run ({row['note']})"]


def test_old_source_validates_its_arguments(tmp_path):
    from benchmarks import bench_report

    for bad in ("", "--output=x", None):
        with pytest.raises(ValueError, match="commit"):
            bench_report.old_source(bad)
    with pytest.raises(ValueError, match="path"):
        bench_report.old_source(bench_report.BEFORE_COMMIT, path="")
    with pytest.raises(bench_report.HistoryUnavailable, match="not a folder"):
        bench_report.old_source(bench_report.BEFORE_COMMIT, repo=tmp_path / "absent")
    with pytest.raises(ValueError, match="module"):
        bench_report.load_before(str(tmp_path / "absent.py"))


def test_the_suite_row_keeps_the_cold_run_s_tables(tmp_path):
    out = tmp_path / "cold"
    out.mkdir()
    for ext in ("json", "md", "csv", "html"):
        (out / f"suite.{ext}").write_text(f"table as {ext}\n")
    kept = run._keep_suite_tables(out, "suite_zoo", dest=tmp_path / "kept")
    assert sorted(p.name for p in (tmp_path / "kept").iterdir()) == [
        "suite_zoo.csv",
        "suite_zoo.json",
        "suite_zoo.md",
    ]
    assert (tmp_path / "kept" / "suite_zoo.md").read_text() == "table as md\n"
    assert len(kept) == 3
    assert run._keep_suite_tables(out, None, dest=tmp_path / "none") == []
    assert not (tmp_path / "none").exists()
    assert run.FULL["suite"]["keep_as"] == "suite_zoo" and run.QUICK["suite"]["keep_as"] is None


def test_the_term_row_runs_only_when_named():
    assert run._config(run._parse([]))["term"] is None  # make bench: not run
    assert run._config(run._parse(["--quick", "--rows", "term"]))["term"] is None
    cfg = run._config(run._parse(["--rows", "term"]))["term"]
    assert cfg == run.TERM and cfg is not run.TERM
    small = run._config(run._parse(["--rows", "autograder,term", "--students", "4"]))["term"]
    assert small["students"] == 4 and small["sample"] == 4 and run.TERM["students"] == 200
    assert run.row_term(None, 1, None)["lines"][0]["status"] == "not run"


def test_the_term_row_reads_the_childs_grading(monkeypatch):
    """The row's lines from what ``bench_autograder.term_on_dask`` returns (its calls, a
    class graded on a TLS LocalCluster and serially, are those of
    tests/test_autograder_dask.py; ``make bench-term`` runs it for real)."""
    calls = []

    def child(task, kwargs, timeout=None):
        calls.append((task, kwargs))
        out = {
            "students": 3,
            "workers": 2,
            "notebooks_per_student": 1,
            "grading_issues": 0,
            "sample": 2,
            "sample_notebooks": 2,
            "sample_differ": 0,
            "graded_notebooks": 3,
        }
        return {
            "seconds": 90.0,
            "rss_before_mb": 1.0,
            "peak_rss_mb": 2.0,
            "beyond_inputs_mb": 1.0,
            "peak_anon_beyond_inputs_mb": 1.0,
            "peak_rss_grandchildren_mb": 3.0,
            "out": out,
        }

    monkeypatch.setattr(run.H, "run_child", child)
    cfg = {**run.TERM, "students": 3, "sample": 2, "assignments": ["rank"]}
    row = run.row_term(cfg, 1, None)
    assert calls == [
        (
            "bench_autograder:term_on_dask",
            {
                "n_students": 3,
                "workers": 2,
                "threads": 2,
                "sample": 2,
                "cell_timeout": 60,
                "assignments": ["rank"],
            },
        )
    ]
    timed, full, grades = row["lines"]
    assert (full["subject_value"], full["met"]) == ("3 of 3", True)
    assert timed["what"].startswith("3 students, 1 notebook each")
    assert "2 workers (TLS, 1 thread each)" in timed["what"]  # the child's own count
    assert (timed["subject_value"], timed["met"]) == ("1.5 min", True)
    assert "30.0 s per student" in timed["note"]
    assert "verification" not in timed["note"]  # the child did not time it
    assert (grades["subject_value"], grades["competitor_value"], grades["met"]) == (
        "0 differ",
        "2 notebooks",
        True,
    )

    def timed_child(*a, **k):
        res = child(*a, **k)
        return {**res, "out": {**res["out"], "verify_seconds": 30.0}}

    monkeypatch.setattr(run.H, "run_child", timed_child)
    assert (
        "(of which the clean room's verification on this machine 0.5 min)"
        in run.row_term(cfg, 1, None)["lines"][0]["note"]
    )

    def failing_child(*a, **k):  # every clean-room child died: visible points lost
        res = child(*a, **k)
        return {**res, "out": {**res["out"], "below_full": 3, "grading_issues": 3}}

    monkeypatch.setattr(run.H, "run_child", failing_child)
    full = run.row_term(cfg, 1, None)["lines"][1]
    assert (full["subject_value"], full["met"]) == ("0 of 3", False)
    monkeypatch.setattr(run.H, "run_child", lambda *a, **k: {**child(*a, **k), "seconds": 3600.0})
    assert run.row_term(cfg, 1, None)["lines"][0]["met"] is False  # past 40 minutes


def test_the_autograder_row_times_the_serial_class_on_one_core(monkeypatch):
    """The serial class runs pinned to one core (``one_core``), and its time per student
    carries the goal of 20 s when every chapter is graded; the children are stubbed
    (``make bench-class`` runs them for real)."""
    calls = []

    def child(task, kwargs, timeout=None):
        calls.append(kwargs)
        n = kwargs["n_students"]
        seconds = {1: 15.0}.get(n, 18.0 * n if kwargs["workers"] == 1 else 10.0 * n)
        out = {
            "notebooks_per_student": 16,
            "students": n,
            "workers": kwargs["workers"],
            "grading_issues": 0,
            "peak_tree_rss_mb": 100.0,
            "scores": {f"s{i}/nb{j}": 1.0 for i in range(n) for j in range(16)},
        }
        return {
            "seconds": seconds,
            "rss_before_mb": 1.0,
            "peak_rss_mb": 2.0,
            "beyond_inputs_mb": 1.0,
            "peak_anon_beyond_inputs_mb": 1.0,
            "peak_rss_grandchildren_mb": 3.0,
            "out": out,
        }

    monkeypatch.setattr(run.H, "run_child", child)
    cfg = {
        "reps": 1,
        "students": 4,
        "workers": 2,
        "reps_class": 1,
        "cell_timeout": 60,
        "timeout": 600,
        "assignments": None,
    }
    row = run.row_autograder(cfg, 1, None)
    serial = [k for k in calls if k["n_students"] == 4 and k["workers"] == 1]
    assert serial and all(k["one_core"] for k in serial)
    assert not any(k["one_core"] for k in calls if k not in serial)
    per = next(x for x in row["lines"] if x["what"].endswith("time per student"))
    assert (per["subject_value"], per["goal"], per["met"]) == ("18 s", "<= 20 s per student", True)
    speed = next(x for x in row["lines"] if x["what"] == "4 students with 2 workers")
    assert speed["competitor"] == "4 students serially on one core"
    assert speed["ratio"] == pytest.approx(1.8)
    one_chapter = run.row_autograder({**cfg, "assignments": ["rank"]}, 1, None)
    per = next(x for x in one_chapter["lines"] if x["what"].endswith("time per student"))
    assert per["goal"] is None and per["met"] is None  # the goal is for all 16 notebooks


def test_a_goal_is_met_only_when_every_paired_repetition_meets_it():
    summaries = {
        "subject": {"seconds_all": [1.126, 1.117, 1.082, 1.080, 1.071]},
        "floor": {"seconds_all": [1.0, 1.0, 1.0, 1.0, 1.0]},
    }
    ratios = run.paired_ratios(summaries, "subject", "floor")
    np.testing.assert_allclose(ratios, [1.126, 1.117, 1.082, 1.080, 1.071])

    def at_most(r):
        return r <= 1.1

    median = float(np.median(ratios))
    assert run.judge_goal(median, ratios, at_most) == "median"
    assert run.judge_goal(median, [1.05, 1.08], at_most) is True
    assert run.judge_goal(1.2, [1.05], at_most) is False
    note = run.paired_note(ratios, at_most)
    assert "1.071 to 1.126" in note and "2 of 5 miss" in note
    assert run.paired_note([], at_most) == ""


def test_a_goal_met_on_the_median_only_is_listed_and_named():
    line = run._line("knn", "time", "products", ratio=1.085, goal="<= 1.1x", met="median")
    results = {"rows": [{"lines": [line]}]}
    assert run.unmet(results) == ["knn: time — goal <= 1.1x met on the median only"]
    assert "met on the median only" in run.table(results)


def test_the_committed_ratio_goals_agree_with_their_paired_repetitions():
    import operator
    import re

    path = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "results.json"
    committed = json.loads(path.read_text())
    judged = 0
    for row in committed["rows"]:
        for line in row["lines"]:
            if "paired_ratios" not in line:
                continue
            op, bound = re.match(r"(<=|>=)\s*([0-9.]+)", line["goal"]).groups()
            compare = {"<=": operator.le, ">=": operator.ge}[op]

            def meets(r, compare=compare, bound=float(bound)):
                return compare(r, bound)

            expected = run.judge_goal(line["ratio"], line["paired_ratios"], meets)
            assert line["met"] == expected, line["what"]
            judged += 1
    assert judged >= 4
