"""Unit tests of the hidden checks from attentive probes to CKA (fast: no nbgrader).

The exercises' own solutions must pass every check in full for several grading seeds;
each typical wrong solution of ``autograder_cases_more.WRONG_MORE`` must lose exactly the
checks it is listed with, for several seeds, with feedback that names the mistake; and
the generic properties (mutated inputs, NumPy scalars instead of Python floats) must be
caught by the ``properties`` checks alone.
"""

import numpy as np
import pytest
from helpers.autograder_cases_more import FEEDBACK_WORDS_MORE, ISSUE_CASES, WRONG_MORE

from autograder.build import solution_source
from autograder.checks import check_points, format_findings, run_check
from autograder.exercises import load

MINE = [
    "attentive_probe",
    "transfer",
    "low_shot_eval",
    "wilson_interval",
    "rankme",
    "two_nn_id",
    "retrieval_metrics",
    "linear_cka",
]
SEEDS = (1, 77, 4242)


def _namespace(source):
    ns = {}
    exec(compile(source, "<solution>", "exec"), ns)
    return ns


def _target(check):
    return check.split("/", 1)[0]


def _scores(spec, namespace, seed):
    out = {}
    for check in spec.HIDDEN:
        findings = run_check(check, namespace[_target(check)], seed)
        out[check] = (sum(f.points for f in findings), format_findings(check, findings, seed))
    return out


@pytest.mark.parametrize("name", MINE)
def test_solution_full_marks_for_several_seeds(name):
    spec = load(name)
    ns = _namespace(solution_source(spec))
    for seed in SEEDS:
        for check, (got, report) in _scores(spec, ns, seed).items():
            assert got == check_points(check), report


CASES = [(ex, var) for ex, variants in WRONG_MORE.items() for var in variants]


@pytest.mark.parametrize(
    "exercise,variant",
    [
        pytest.param(*case, marks=pytest.mark.slow)
        if case in {("linear_cka", "gram_matrices"), ("two_nn_id", "distance_matrix")}
        else case
        for case in CASES
    ],
)
def test_wrong_solution_loses_exactly_its_checks(exercise, variant):
    source, failing = WRONG_MORE[exercise][variant]
    spec = load(exercise)
    assert failing <= set(spec.HIDDEN), failing - set(spec.HIDDEN)
    ns = _namespace(solution_source(spec))
    ns.update(_namespace(source))  # the wrong function replaces its namesake
    for seed in SEEDS[:2]:
        reports = []
        for check, (got, report) in _scores(spec, ns, seed).items():
            if check in failing:
                assert got == 0, report
                reports.append(report)
            else:
                assert got == check_points(check), report
        word = FEEDBACK_WORDS_MORE[(exercise, variant)]
        assert any(word in r for r in reports), (word, reports)


def test_every_case_has_feedback_words_and_issue_cases_exist():
    assert set(FEEDBACK_WORDS_MORE) == set(CASES)
    assert set(ISSUE_CASES) <= set(CASES)


def _mutating(fn):
    """The right function, which afterwards scribbles on its first array argument."""

    def wrapper(*args, **kwargs):
        out = fn(*args, **kwargs)
        for a in args:
            if isinstance(a, np.ndarray) and a.size:
                a.flat[0] = a.flat[0] + 1
                break
        return out

    wrapper.__name__ = fn.__name__
    return wrapper


def _numpy_scalars(fn):
    """The right function returning NumPy scalars instead of Python floats."""

    def wrapper(*args, **kwargs):
        out = fn(*args, **kwargs)
        if isinstance(out, tuple):
            return tuple(np.float64(x) for x in out)
        if isinstance(out, dict):
            return {k: np.float64(v) for k, v in out.items()}
        return np.float64(out)

    wrapper.__name__ = fn.__name__
    return wrapper


@pytest.mark.parametrize("wrap", [_mutating, _numpy_scalars])
@pytest.mark.parametrize(
    "target,name",
    [
        ("low_shot_eval", "low_shot_eval"),
        ("paired_bootstrap_ci", "wilson_interval"),
        ("rankme", "rankme"),
        ("two_nn_id", "two_nn_id"),
        ("retrieval_metrics", "retrieval_metrics"),
        ("linear_cka", "linear_cka"),
    ],
)
def test_properties_checks_alone_catch_mutation_and_numpy_scalars(wrap, target, name):
    spec = load(name)
    ns = _namespace(solution_source(spec))
    ns[target] = wrap(ns[target])
    for check, (got, report) in _scores(spec, ns, 5).items():
        if _target(check) != target:
            continue
        if check == f"{target}/properties":
            assert got == 0, report
        else:
            assert got == check_points(check), report


def test_attentive_and_transfer_properties_catch_mutation():
    for name, aspect in (("attentive_probe", "properties"), ("transfer", "properties")):
        spec = load(name)
        fn = _mutating(_namespace(solution_source(spec))[name])
        findings = run_check(f"{name}/{aspect}", fn, 3)
        assert sum(f.points for f in findings) == 0
        assert "modified" in findings[0].message


def test_low_shot_ddof_check_reads_the_formula_from_two_draws():
    """A function whose supports are not the prescribed ones (its two accuracies come
    from its own use of the generator) is judged by the spread of what it reports, in
    either convention; the same numbers reported whatever the generator earn nothing."""

    def reporter(ddof, fixed=False):
        def low_shot_eval(pool_h, pool_y, query_h, query_y, shots, draws, rng):
            n = len(query_y)
            hits = [round(0.5 * n), round(0.7 * n)] if fixed else rng.integers(0, n + 1, 2)
            acc = np.array(hits) / n
            return float(acc.mean()), float(acc.std(ddof=ddof))

        return low_shot_eval

    for seed in (9, 10, 11):
        ok = run_check("low_shot_eval/ddof", reporter(1), seed)
        bad = run_check("low_shot_eval/ddof", reporter(0), seed)
        assert ok[0].passed and not bad[0].passed
        assert "ddof=1" in bad[0].message
        assert not run_check("low_shot_eval/ddof", reporter(1, fixed=True), seed)[0].passed


def test_transfer_sequential_helper_differs_from_simultaneous_by_hand():
    from autograder.checks.transfer import _sequential

    X = np.array([[1.0, 0.0], [0.0, 2.0]])
    y = np.array([1.0, -1.0])
    B0 = np.array([[1.0, 1.0]])
    v0 = np.array([0.5])
    lr = 0.1
    # one simultaneous step, by hand: r = X B^T v - y = (-0.5, 2), X^T r = (-0.5, 4)
    Xr = np.array([-0.5, 4.0])
    want_v = v0 - lr * (B0 @ Xr)  # (2 / n) = 1
    want_B = B0 - lr * np.outer(v0, Xr)
    from repeval_ref import transfer

    ft = transfer(X, y, B0, v0, lr, 1)["ft"]
    assert np.allclose(ft[0], want_v) and np.allclose(ft[1], want_B)
    seq = _sequential(X, y, B0, v0, lr, 1, "v")["ft"]
    assert np.allclose(seq[0], want_v) and not np.allclose(seq[1], want_B)


def test_full_cell_source_keeps_the_other_functions_of_the_notebook():
    from helpers.autograder_cases_more import full_cell_source

    ns = _namespace(full_cell_source("wilson_interval", "wald"))
    spec = load("wilson_interval")
    lost = {c for c, (got, _) in _scores(spec, ns, 2).items() if got == 0}
    assert lost == WRONG_MORE["wilson_interval"]["wald"][1]
