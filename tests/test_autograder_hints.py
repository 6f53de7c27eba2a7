"""Hints that name the real cause.

Every typical mistake of ``hint_mistakes.MISTAKES`` is graded in the clean room
(:func:`autograder.cleanroom.verify_source`, one sandbox per answer and seed) on each seed
of :data:`SEEDS`. It must lose points; the first failing hidden check's hint must name the
mistake's cause; and no hint may name the cause of another mistake of the table that the
answer does not have. The visible tests' assertion texts are the exercise's own and are
not hints, so they are left out.

The same answer graded in process (what a hidden cell's ``grade`` prints on the feedback
page, run in the student's kernel) must print exactly what the clean room reports (what
``autograder check --hidden`` prints), warnings included.
"""

import dataclasses
import linecache
import re

import pytest
from helpers.hint_mistakes import MISTAKES

from autograder.build import grade_ids, solution_source
from autograder.checks import format_findings, run_check
from autograder.cleanroom import verify_source
from autograder.exercises import load

# : every typical mistake graded in the clean room on three seeds: left out of make test-fast (make
# test and CI run it)
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("cleanroom_fork_server")]

#: the course's test seed and two more: the checks draw their inputs from the seed
SEEDS = (20240611, 7, 1234)
FAST = {"call_s": 5.0, "start_s": 30.0, "cpu_s": 30, "memory_bytes": 2 << 30}

#: exercises whose checks build torch models or fit scikit-learn probes: seconds per
# : answer, so their cases are in a file of their own (the whole hint test is left out of `make
# test-fast`)
HEAVY = {"frozen_features", "linear_probe_done_right", "attentive_probe", "transfer"}

#: known gaps, kept visible as strict xfails: (exercise, variant) -> why the hint test
#: cannot pass yet (none at present)
KNOWN_GAPS = {}


def _case(exercise, variant):
    marks = []
    if (exercise, variant) in KNOWN_GAPS:
        marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_GAPS[exercise, variant]))
    return pytest.param(exercise, variant, marks=marks, id=f"{exercise}-{variant}")


CASES = [_case(ex, var) for ex, table in MISTAKES.items() for var in table if ex not in HEAVY]
#: the heavy exercises' cases: tests/test_autograder_hints_heavy.py (a file of their own, so
#: that pytest-xdist runs them on another worker than these)
HEAVY_CASES = [_case(ex, var) for ex, table in MISTAKES.items() for var in table if ex in HEAVY]


def _in_kernel(spec, source, seed):
    """What each hidden cell prints in the kernel: {grade id: format_findings text}."""
    code = solution_source(spec) + "\n" + source
    # the clean room runs the answer as answer.py: the same name and lines here, so that
    # the traceback lines of a failing call read the same (the kernel names its cell)
    linecache.cache["answer.py"] = (len(code), None, code.splitlines(True), "answer.py")
    namespace = {}
    exec(compile(code, "answer.py", "exec"), namespace)
    ids = grade_ids(spec)
    return {
        ids[c]: format_findings(c, run_check(c, namespace.get(c.split("/", 1)[0]), seed), seed)
        for c in spec.HIDDEN
    }


def _points(text):
    """The points of a ``format_findings`` text ("name: 1 / 3 points ...")."""
    return float(text.split(": ", 1)[1].split(" / ", 1)[0])


def _hints(spec, source, seed):
    """The clean room's verdicts: (points, max points, [failing hidden checks' texts]);
    asserts that they print what the kernel's hidden cells print."""
    verdicts = verify_source(spec, solution_source(spec) + "\n" + source, seed, FAST)
    kernel = _in_kernel(spec, source, seed)
    for v in verdicts:
        if v.grade_id in kernel and v.points is not None:
            assert v.message == kernel[v.grade_id], (seed, v.message, kernel[v.grade_id])
    # a check that passes a model cannot travel to the clean room: `check --hidden` runs
    # it on the answer in a separate process, with the findings printed here
    verdicts = [
        v
        if v.points is not None
        else dataclasses.replace(v, points=_points(kernel[v.grade_id]), message=kernel[v.grade_id])
        for v in verdicts
    ]
    hidden = [v for v in verdicts if not v.grade_id.endswith("_visible_tests")]
    got = sum(v.points or 0.0 for v in verdicts)
    top = sum(v.max_points for v in verdicts)
    return got, top, [_said(v.message) for v in hidden if (v.points or 0.0) < v.max_points]


def _said(text):
    """A check's text without the names of its findings (a check's summary names what it
    tests, e.g. "(unpenalised bias)", whatever the answer did): the hints alone."""
    return re.sub(r"\[FAIL\] .*? \(\d+(?:\.\d+)?/\d+(?:\.\d+)?\): ", "[FAIL] ", text)


@pytest.mark.parametrize("exercise,variant", CASES)
def test_first_hint_names_the_real_cause(exercise, variant):
    check_first_hint(exercise, variant)


def check_first_hint(exercise, variant):
    """Grade one mistake on every seed: it loses points, its first hint names its cause
    and no hint names a cause of another mistake of the exercise."""
    source, cause = MISTAKES[exercise][variant]
    others = {c for v, (_, c) in MISTAKES[exercise].items() if c != cause}
    spec = load(exercise)
    for seed in SEEDS:
        got, top, hints = _hints(spec, source, seed)
        assert got < top, (seed, "the mistake kept every point")
        assert hints, (seed, "no hidden check failed")
        assert cause in hints[0], (seed, cause, hints[0])
        for text in hints:
            wrong = [c for c in others if c in text]
            assert not wrong, (seed, wrong, text)
