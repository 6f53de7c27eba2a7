"""Hints that name the real cause (issue 30, item 6).

Every typical mistake of ``hint_mistakes.MISTAKES`` is graded in the clean room
(:func:`autograder.cleanroom.verify_source`, one sandbox per answer and seed) on each seed
of :data:`SEEDS`. It must lose points; the first failing hidden check's hint must name the
mistake's cause; and no hint may name the cause of another mistake of the table that the
answer does not have. The visible tests' assertion texts are the exercise's own and are
not hints, so they are left out.
"""
import sys
from pathlib import Path

import pytest

from autograder.build import solution_source
from autograder.cleanroom import verify_source
from autograder.exercises import load

sys.path.insert(0, str(Path(__file__).parent))
from hint_mistakes import MISTAKES  # noqa: E402

#: the course's test seed and two more: the checks draw their inputs from the seed
SEEDS = (20240611, 7, 1234)
FAST = {"call_s": 5.0, "start_s": 30.0, "cpu_s": 30, "memory_bytes": 2 << 30}

CASES = [(ex, var) for ex, table in MISTAKES.items() for var in table]


def _hints(spec, source, seed):
    """The clean room's verdicts: (points, max points, [failing hidden checks' texts])."""
    verdicts = verify_source(spec, solution_source(spec) + "\n" + source, seed, FAST)
    hidden = [v for v in verdicts if not v.grade_id.endswith("_visible_tests")]
    got = sum(v.points or 0.0 for v in verdicts)
    top = sum(v.max_points for v in verdicts)
    return got, top, [v.message for v in hidden if (v.points or 0.0) < v.max_points]


@pytest.mark.parametrize("exercise,variant", CASES)
def test_first_hint_names_the_real_cause(exercise, variant):
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
