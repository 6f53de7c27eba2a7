"""Grading one answer's source by an exercise's hidden checks, in this process.

Shared by the test files of single exercises (``test_autograder_<name>.py``): each keeps
its own answers and expectations, and these helpers do the grading and the asserts.
"""

from autograder.checks import check_points, format_findings, run_check
from autograder.exercises import load


def answer_function(source, name):
    """The function ``name`` defined by an answer's ``source``."""
    ns = {}
    exec(compile(source, "<answer>", "exec"), ns)
    return ns[name]


def scores(name, fn, seed):
    """``{aspect: (points, report)}`` over the exercise's hidden checks, each run once."""
    out = {}
    for check in load(name).HIDDEN:
        findings = run_check(check, fn, seed)
        out[check.split("/", 1)[1]] = (
            sum(f.points for f in findings),
            format_findings(check, findings, seed),
        )
    return out


def assert_full_marks(name, source, seeds):
    fn = answer_function(source, name)
    for seed in seeds:
        for aspect, (got, report) in scores(name, fn, seed).items():
            assert got == check_points(f"{name}/{aspect}"), report


def assert_loses_exactly(name, source, failing, words, seeds):
    """The answer scores 0 on the checks ``failing``, full marks on the others, and one
    of the failing reports contains ``words``."""
    fn = answer_function(source, name)
    for seed in seeds:
        reports = []
        for aspect, (got, report) in scores(name, fn, seed).items():
            if aspect in failing:
                assert got == 0, report
                reports.append(report)
            else:
                assert got == check_points(f"{name}/{aspect}"), report
        assert any(words in r for r in reports), (words, reports)


def assert_below_reference(name, sources, seed=5):
    top = sum(check_points(c) for c in load(name).HIDDEN)
    for source in sources:
        assert sum(v[0] for v in scores(name, answer_function(source, name), seed).values()) < top
