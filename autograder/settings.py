"""The limits of a student's sandboxes, each defined once with its environment variable.

Every value is read from its environment variable when this module is imported (by the
grader; a job sent to a Dask worker carries the values the grader read), and falls back
to its default when the variable is unset or empty. A value that is not a positive whole
number (or ``0``/``1`` for a switch) raises ``ValueError`` naming the variable, so a typo
cannot silently lift a limit.

=============================  ===========================================  ===========
variable                       what it bounds                               default
=============================  ===========================================  ===========
``AUTOGRADER_CGROUPS``         ``0`` turns the per-sandbox cgroups off      ``1``
``AUTOGRADER_SANDBOX_MEMORY``  memory of one student's nbgrader run, all    4 GiB
                               its processes together (memory cgroup)
``AUTOGRADER_SANDBOX_DISK``    all a student's nbgrader run may write: the  1 GiB
                               copy of the course, its home, its ``/tmp``
                               (one size-capped tmpfs)
``AUTOGRADER_CLEANROOM_MEMORY``  memory of one clean-room child with all    4 GiB
                               it starts (memory cgroup)
=============================  ===========================================  ===========
"""
from __future__ import annotations

import os

__all__ = ["CGROUPS_ENV", "SANDBOX_MEMORY_ENV", "SANDBOX_DISK_ENV", "CLEANROOM_MEMORY_ENV",
           "cgroups_wanted", "sandbox_memory_bytes", "sandbox_disk_bytes",
           "cleanroom_memory_bytes", "positive_bytes"]

#: ``0``: no cgroups per sandbox (today's per-process limits only)
CGROUPS_ENV = "AUTOGRADER_CGROUPS"
#: bytes of memory of one student's nbgrader run (all its processes)
SANDBOX_MEMORY_ENV = "AUTOGRADER_SANDBOX_MEMORY"
#: bytes one student's nbgrader run may write in all (its tmpfs)
SANDBOX_DISK_ENV = "AUTOGRADER_SANDBOX_DISK"
#: bytes of memory of one clean-room child with everything it starts
CLEANROOM_MEMORY_ENV = "AUTOGRADER_CLEANROOM_MEMORY"

_DEFAULTS = {
    SANDBOX_MEMORY_ENV: 4 << 30,
    SANDBOX_DISK_ENV: 1 << 30,
    CLEANROOM_MEMORY_ENV: 4 << 30,
}


def positive_bytes(name, value):
    """``value`` (an int, or a string of digits with an optional ``K``, ``M`` or ``G``
    suffix, binary units) as a positive number of bytes.

    Raises
    ------
    ValueError
        Naming ``name`` when ``value`` is not such a number.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a positive number of bytes, got {value!r}")
    if isinstance(value, int):
        got = value
    elif isinstance(value, str):
        text = value.strip().upper().removesuffix("B").removesuffix("I")
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text[:-1] if scale > 1 else text
        if not digits.isdigit():
            raise ValueError(f"{name} must be a positive number of bytes (e.g. 4G), "
                             f"got {value!r}")
        got = int(digits) * scale
    else:
        raise ValueError(f"{name} must be a positive number of bytes, got {value!r}")
    if got <= 0:
        raise ValueError(f"{name} must be a positive number of bytes, got {value!r}")
    return got


def _bytes_setting(env):
    raw = os.environ.get(env, "")
    return _DEFAULTS[env] if not raw.strip() else positive_bytes(env, raw)


def cgroups_wanted():
    """Whether each sandbox gets cgroups of its own (``$AUTOGRADER_CGROUPS``, default 1)."""
    raw = os.environ.get(CGROUPS_ENV, "1").strip() or "1"
    if raw not in ("0", "1"):
        raise ValueError(f"{CGROUPS_ENV} must be 0 or 1, got {raw!r}")
    return raw == "1"


def sandbox_memory_bytes():
    """Memory of one student's nbgrader run, all its processes together
    (``$AUTOGRADER_SANDBOX_MEMORY``)."""
    return _bytes_setting(SANDBOX_MEMORY_ENV)


def sandbox_disk_bytes():
    """What one student's nbgrader run may write in all (``$AUTOGRADER_SANDBOX_DISK``)."""
    return _bytes_setting(SANDBOX_DISK_ENV)


def cleanroom_memory_bytes():
    """Memory of one clean-room child and what it starts (``$AUTOGRADER_CLEANROOM_MEMORY``)."""
    return _bytes_setting(CLEANROOM_MEMORY_ENV)
