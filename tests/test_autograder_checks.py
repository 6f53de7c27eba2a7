"""Unit tests of the hidden checks and the check framework (fast: no nbgrader, no kernel).

Every exercise's own solution (from its spec) must pass every hidden check in full, and
each typical wrong solution of ``autograder_cases.WRONG`` must lose exactly the checks it
is listed with, with a message that names the problem.
"""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from helpers.autograder_cases import FEEDBACK_WORDS, WRONG

from autograder.build import build_notebook, notebook_path, notebook_text, solution_source
from autograder.checks import (
    Finding,
    check_points,
    format_findings,
    grade,
    registry,
    rng_for,
    run_check,
    run_check_isolated,
)
from autograder.exercises import EXERCISES, all_specs, load

SEED = 20240611


def _function(source, name):
    namespace = {}
    exec(compile(source, f"<{name}>", "exec"), namespace)
    return namespace[name]


def _functions(source):
    namespace = {}
    exec(compile(source, "<solution>", "exec"), namespace)
    return namespace


def _target(check):
    """The function a check grades (a notebook may define several)."""
    return check.split("/", 1)[0]


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.slow) if n == "linear_probe_done_right" else n
        for n in EXERCISES
    ],
)
def test_solution_passes_every_hidden_check(name):
    spec = load(name)
    namespace = _functions(solution_source(spec))
    for check in spec.HIDDEN:
        findings = run_check(check, namespace[_target(check)], SEED)
        assert all(f.passed for f in findings), format_findings(check, findings, SEED)
        assert sum(f.points for f in findings) == check_points(check)


@pytest.mark.parametrize("name", EXERCISES)
def test_solution_passes_visible_tests(name):
    spec = load(name)
    namespace = {}
    exec(solution_source(spec), namespace)
    exec(spec.VISIBLE_TESTS, namespace)


@pytest.mark.parametrize("name", EXERCISES)
def test_stub_scores_zero_and_says_so(name):
    spec = load(name)

    def stub(*args, **kwargs):
        raise NotImplementedError()

    for check in spec.HIDDEN:
        stub.__name__ = _target(check)
        findings = run_check(check, stub, SEED)
        assert sum(f.points for f in findings) == 0
        assert "NotImplementedError" in findings[0].message


CASES = [(ex, var) for ex, variants in WRONG.items() for var in variants]


@pytest.mark.parametrize("exercise,variant", CASES)
def test_wrong_solution_loses_exactly_its_checks(exercise, variant):
    source, failing = WRONG[exercise][variant]
    spec = load(exercise)
    # the wrong function replaces its namesake; the notebook's other functions stay right
    namespace = _functions(solution_source(spec))
    namespace.update(_functions(source))
    messages = []
    for check in spec.HIDDEN:
        findings = run_check(check, namespace[_target(check)], SEED)
        got = sum(f.points for f in findings)
        if check in failing:
            assert got == 0, format_findings(check, findings, SEED)
            messages.append(format_findings(check, findings, SEED))
        else:
            assert got == check_points(check), format_findings(check, findings, SEED)
    word = FEEDBACK_WORDS.get((exercise, variant))
    if word:
        assert any(word in m for m in messages), (word, messages)


# ----------------------------------------------------------------- the framework itself
def test_registry_points_and_specs_agree():
    reg = registry()
    for spec in all_specs():
        assert spec.HIDDEN, spec.NAME
        defined = _functions(solution_source(spec))
        for check in spec.HIDDEN:
            assert check in reg and callable(defined.get(_target(check))), check
        hidden = sum(reg[c][0] for c in spec.HIDDEN)
        assert hidden > spec.VISIBLE_POINTS, f"{spec.NAME}: hidden tests must weigh most"


def test_one_list_of_exercises_names_the_specs_and_the_check_modules():
    """``EXERCISES`` is the only list: ``CHECK_MODULES`` is it, every exercise has a check
    module of its name, every module there is one of them (or a helper), and each module
    defines the hidden checks of its exercise (wilson_interval also those of its two
    other functions)."""
    import importlib
    from pathlib import Path

    from autograder import checks as checks_pkg
    from autograder import exercises as exercises_pkg
    from autograder.checks import CHECK_MODULES, checks_for

    assert CHECK_MODULES == EXERCISES and len(set(EXERCISES)) == len(EXERCISES) == 16
    modules = {p.stem for p in Path(checks_pkg.__file__).parent.glob("[a-z]*.py")}
    assert modules - {"worker"} == set(EXERCISES)
    specs = {p.stem for p in Path(exercises_pkg.__file__).parent.glob("[a-z]*.py")}
    assert specs == set(EXERCISES)
    for name in EXERCISES:
        module = importlib.import_module(f"autograder.checks.{name}")
        defined = {getattr(f, "check_name", None) for f in vars(module).values()} - {None}
        assert checks_for(name) and set(load(name).HIDDEN) <= defined, name


def test_findings_are_plain_and_roundtrip():
    f = run_check("knn_classify/ties", lambda *a: np.zeros(5, dtype=int), 3)
    d = [x.to_dict() for x in f]
    assert json.loads(json.dumps(d)) == d
    assert [Finding.from_dict(x) for x in d] == f
    for x in d:
        assert type(x["points"]) is float and type(x["passed"]) is bool


def test_same_seed_same_findings_and_checks_draw_independently():
    bad = _function(WRONG["knn_classify"]["no_normalisation"][0], "knn_classify")
    a = run_check("knn_classify/matches_reference", bad, 7)
    b = run_check("knn_classify/matches_reference", bad, 7)
    assert a == b
    r1 = rng_for("knn_classify/ties", 7).random(3)
    r2 = rng_for("knn_classify/properties", 7).random(3)
    assert not np.allclose(r1, r2)
    assert np.allclose(r1, rng_for("knn_classify/ties", 7).random(3))


def test_missing_function_and_crash_are_explained():
    f = run_check("fold_batchnorm/matches_reference", None, 1)
    assert f[0].points == 0 and "not defined" in f[0].message

    def crashes(W, b, mu, s):
        return W[:, 99]

    f = run_check("fold_batchnorm/matches_reference", crashes, 1)
    assert f[0].points == 0 and "IndexError" in f[0].message
    assert "fold_batchnorm" in f[0].message


def test_time_limit_stops_an_infinite_loop():
    def loops(*args):
        while True:
            pass

    f = run_check("rank_bound/properties", loops, 1, time_limit=0.5)
    assert f[0].points == 0 and "did not return in time" in f[0].message


def test_grade_prints_findings_and_returns_a_float(capsys, monkeypatch):
    monkeypatch.setenv("AUTOGRADER_SEED", "11")
    spec = load("fold_batchnorm")
    fold_batchnorm = _function(solution_source(spec), "fold_batchnorm")  # noqa: F841
    score = grade("fold_batchnorm/matches_reference", "fold_batchnorm")
    out = capsys.readouterr().out
    assert score == 3.0 and type(score) is float
    assert "grading seed 11" in out and "[PASS]" in out
    # looked up by name in the caller's namespace; a missing name scores 0 and says so
    assert grade("rank_bound/properties", "rank_bound") == 0.0
    assert "not defined" in capsys.readouterr().out


@pytest.mark.slow
def test_isolated_run_matches_in_process_and_survives_crashes():
    spec = load("knn_classify")
    source = solution_source(spec)
    inside = run_check("knn_classify/ties", _function(source, "knn_classify"), 5)
    outside = run_check_isolated("knn_classify/ties", source, "knn_classify", 5)
    assert outside == inside
    bad = WRONG["knn_classify"]["ties_to_larger"][0]
    assert run_check_isolated("knn_classify/ties", bad, "knn_classify", 5)[0].points == 0
    crash = "import os\ndef knn_classify(*a):\n    os._exit(3)\n"
    f = run_check_isolated("knn_classify/ties", crash, "knn_classify", 5)
    assert f[0].points == 0 and "exit code 3" in f[0].message
    f = run_check_isolated("knn_classify/ties", "def knn_classify(:\n", "knn_classify", 5)
    assert f[0].points == 0 and "syntax error" in f[0].message
    loop = "def knn_classify(*a):\n    while True:\n        pass\n"
    f = run_check_isolated("knn_classify/ties", loop, "knn_classify", 5, timeout=3)
    assert f[0].points == 0 and "did not finish" in f[0].message


def test_worker_speaks_only_json():
    payload = json.dumps(
        {
            "name": "rank_bound/properties",
            "func_name": "rank_bound",
            "source": "print('noise')\ndef rank_bound(H, y, K):\n    return 0.0, 0\n",
            "seed": 1,
        }
    )
    proc = subprocess.run(
        [sys.executable, "-m", "autograder.checks.worker"],
        input=payload,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("AUTOGRADER-FINDINGS:")]
    assert len(lines) == 1
    data = json.loads(lines[0].split(":", 1)[1])
    assert data[0]["max_points"] == check_points("rank_bound/properties")


# ----------------------------------------------------------------- specs and notebooks
@pytest.mark.parametrize("name", EXERCISES)
def test_committed_solution_notebook_matches_its_spec(name):
    spec = load(name)
    path = notebook_path(spec)
    assert path.exists(), f"{path} missing: run `python -m autograder build`"
    assert path.read_text() == notebook_text(build_notebook(spec)), (
        f"{path} is out of date with autograder/exercises/{name}.py: run "
        "`python -m autograder build` (then `python -m autograder release`)"
    )


def test_hidden_cells_call_the_framework_only():
    for spec in all_specs():
        nb = build_notebook(spec)
        hidden = [c for c in nb.cells if "BEGIN HIDDEN TESTS" in c.source]
        assert len(hidden) == len(spec.HIDDEN)
        for cell, check in zip(hidden, spec.HIDDEN):
            assert cell.metadata.nbgrader["points"] == check_points(check)
            body = cell.source.split("### BEGIN HIDDEN TESTS")[1]
            assert f"grade({check!r}" in body
        begins = textwrap.dedent(spec.SOLUTION).count("### BEGIN SOLUTION")
        assert begins >= 1 and begins == spec.SOLUTION.count("### END SOLUTION")


# ----------------------------------------------------------------- feedback helpers
def test_feedback_page_loses_its_cdn_mathjax(tmp_path):
    from autograder.feedback import MATHJAX_FILE, make_maths_offline, mathjax_source

    page = tmp_path / "nb.html"
    page.write_text(
        '<head>\n<!-- Load mathjax -->\n<script src="https://cdnjs.cloudflare.com/'
        'ajax/libs/mathjax/2.7.7/latest.js?config=TeX-AMS_CHTML-full,Safe"> '
        '</script>\n<script type="text/x-mathjax-config">MathJax.Hub.Config({});'
        "</script>\n<!-- End of mathjax configuration -->\n</head><body>$x^2$</body>"
    )
    assert make_maths_offline(page)
    html = page.read_text()
    assert "cdnjs" not in html and f'src="{MATHJAX_FILE}"' in html and "$x^2$" in html
    assert mathjax_source() is not None
    assert (tmp_path / MATHJAX_FILE).read_bytes() == mathjax_source().read_bytes()
    assert not make_maths_offline(page)  # idempotent


def test_scrub_keeps_only_the_last_line_of_test_errors():
    import nbformat

    from autograder.feedback import ScrubTestTracebacks

    test = nbformat.v4.new_code_cell("x")
    test.metadata = {
        "nbgrader": {
            "grade": True,
            "solution": False,
            "grade_id": "t",
            "points": 1,
            "schema_version": 3,
        }
    }
    test.outputs = [
        nbformat.v4.new_output(
            "error",
            ename="AssertionError",
            evalue="boom",
            traceback=["line with hidden source", "more"],
        )
    ]
    mine = nbformat.v4.new_code_cell("y")
    mine.metadata = {
        "nbgrader": {"grade": False, "solution": True, "grade_id": "s", "schema_version": 3}
    }
    mine.outputs = [
        nbformat.v4.new_output(
            "error", ename="ValueError", evalue="v", traceback=["student frame", "last"]
        )
    ]
    nb = nbformat.v4.new_notebook(cells=[test, mine])
    nb, _ = ScrubTestTracebacks().preprocess(nb, {})
    assert nb.cells[0].outputs[0].traceback == ["AssertionError: boom"]
    assert nb.cells[1].outputs[0].traceback == ["student frame", "last"]
