"""tests/slow_tests.txt names real tests: a renamed test must not slip back into
`make test-fast` unnoticed, nor a stale line hide nothing."""
import re
from pathlib import Path

from conftest import slow_node_ids

ROOT = Path(__file__).resolve().parents[1]


def test_every_listed_slow_test_exists():
    ids = slow_node_ids()
    assert ids
    missing = []
    for node in sorted(ids):
        path, _, name = node.partition("::")
        function = re.sub(r"\[.*\]$", "", name)
        source = (ROOT / path).read_text() if (ROOT / path).is_file() else ""
        if not re.search(rf"^(async )?def {re.escape(function)}\(", source, re.M):
            missing.append(node)
    assert not missing, f"tests/slow_tests.txt names tests that do not exist: {missing}"


def test_listed_tests_are_marked_slow(request):
    """The hook marks exactly the listed ids (this test itself is not listed)."""
    assert request.node.get_closest_marker("slow") is None
    assert request.node.nodeid not in slow_node_ids()
