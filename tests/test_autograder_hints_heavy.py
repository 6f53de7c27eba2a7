"""The hint test (tests/test_autograder_hints.py) for the exercises whose checks build
torch models or fit scikit-learn probes: seconds per answer, so they are slow tests, and a
file of their own so that pytest-xdist grades them beside the other cases."""

import pytest
import test_autograder_hints as hints

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("cleanroom_fork_server")]


@pytest.mark.parametrize("exercise,variant", hints.HEAVY_CASES)
def test_first_hint_names_the_real_cause(exercise, variant):
    hints.check_first_hint(exercise, variant)
