"""One definition of each setting (:mod:`autograder.settings`).

Each ``AUTOGRADER_*`` environment variable is given its name by one assignment in the
whole package (the other modules import it; the fork server is sent the values it
needs), and both limit tables use one key for one bound.
"""

import ast
from pathlib import Path

from autograder import PACKAGE_DIR, settings
from autograder.cleanroom_process import DEFAULT_LIMITS
from autograder.sandbox import SANDBOX_LIMITS


def _assigned_names():
    """``{variable name: [files that assign it as a string constant]}``."""
    found = {}
    for path in sorted(Path(PACKAGE_DIR).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, (ast.Assign, ast.AnnAssign))
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
                and node.value.value.startswith("AUTOGRADER_")
            ):
                found.setdefault(node.value.value, []).append(path.name)
    return found


def test_every_variable_is_named_once():
    found = _assigned_names()
    twice = {name: files for name, files in found.items() if len(files) > 1}
    assert not twice, twice
    for name in (
        "AUTOGRADER_KERNEL_FORK",
        "AUTOGRADER_KERNEL_SOCKET",
        "AUTOGRADER_KERNEL_GRADING",
        "AUTOGRADER_SEED",
        "AUTOGRADER_COURSE_ROOT",
        "AUTOGRADER_REPLY_MAX_BYTES",
        "AUTOGRADER_CELL_TIMEOUT",
        "AUTOGRADER_CLEANROOM_DISK",
        "AUTOGRADER_KERNEL_PRELOAD",
        "AUTOGRADER_NOTEBOOK_LIMIT",
        "AUTOGRADER_SANDBOX_FORK",
        "AUTOGRADER_NBGRADER_PRELOAD",
        "AUTOGRADER_CLEANROOM_FORK",
        "AUTOGRADER_SCRATCH_GRADEBOOK",
        "AUTOGRADER_SANDBOX_MEMORY",
        "AUTOGRADER_SANDBOX_DISK",
        "AUTOGRADER_CLEANROOM_MEMORY",
        "AUTOGRADER_CGROUPS",
    ):
        assert found.get(name) == ["settings.py"], (name, found.get(name))


def test_both_limit_tables_are_the_settings_and_share_their_keys():
    assert SANDBOX_LIMITS is settings.SANDBOX_LIMITS
    assert DEFAULT_LIMITS is settings.CLEANROOM_LIMITS
    shared = set(SANDBOX_LIMITS) & set(DEFAULT_LIMITS)
    assert {"processes", "memory_bytes", "cgroup_memory_bytes", "file_bytes"} <= shared
    assert SANDBOX_LIMITS["cgroup_memory_bytes"] == settings.sandbox_memory_bytes()
    assert DEFAULT_LIMITS["cgroup_memory_bytes"] == settings.cleanroom_memory_bytes()
    assert SANDBOX_LIMITS["disk_bytes"] == settings.sandbox_disk_bytes()
    assert DEFAULT_LIMITS["disk_bytes"] == settings.cleanroom_disk_bytes()
