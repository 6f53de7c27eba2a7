"""The sandboxes' limits and the grader's switches, each defined once with its
environment variable (standard library only).

:data:`SANDBOX_LIMITS` (one student's nbgrader run) and :data:`CLEANROOM_LIMITS` (one
clean-room child) use the same key for the same bound. Every size below is read from its
environment variable by the functions here (by the grader; a job sent to a Dask worker
carries the values the grader read), falling back to its default when the variable is
unset or empty. A value that is not a positive whole number (or ``0``/``1`` for a switch)
raises ``ValueError`` naming the variable, so a typo cannot silently lift a limit.

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
``AUTOGRADER_CLEANROOM_DISK``  all a clean-room child may write: its room   256 MiB
                               and its ``/tmp`` (one size-capped tmpfs)
=============================  ===========================================  ===========

The switches and the variables the grader sets for the processes it starts are named
here too (:data:`KERNEL_FORK_ENV` and the rest), so that the grader and the programs that
read them use one spelling. The fork server (:mod:`autograder.fork_server`) reads none of
them: the grader sends it the values, and the names, it needs.
"""

from __future__ import annotations

import os

__all__ = [
    "CGROUPS_ENV",
    "SANDBOX_MEMORY_ENV",
    "SANDBOX_DISK_ENV",
    "CLEANROOM_MEMORY_ENV",
    "KERNEL_FORK_ENV",
    "KERNEL_SOCKET_ENV",
    "KERNEL_PRELOAD_ENV",
    "NOTEBOOK_LIMIT_ENV",
    "SANDBOX_FORK_ENV",
    "NBGRADER_PRELOAD_ENV",
    "CLEANROOM_FORK_ENV",
    "SCRATCH_GRADEBOOK_ENV",
    "CELL_TIMEOUT_ENV",
    "KERNEL_GRADING_ENV",
    "SEED_ENV",
    "COURSE_ROOT_ENV",
    "REPLY_MAX_ENV",
    "SANDBOX_LIMITS",
    "CLEANROOM_LIMITS",
    "KERNEL_LIMITS",
    "cgroups_wanted",
    "sandbox_memory_bytes",
    "sandbox_disk_bytes",
    "cleanroom_memory_bytes",
    "positive_bytes",
    "reply_max_bytes",
    "cleanroom_disk_bytes",
    "CLEANROOM_DISK_ENV",
]

#: ``0``: no cgroups per sandbox (its per-process limits only)
CGROUPS_ENV = "AUTOGRADER_CGROUPS"
#: bytes of memory of one student's nbgrader run (all its processes)
SANDBOX_MEMORY_ENV = "AUTOGRADER_SANDBOX_MEMORY"
#: bytes one student's nbgrader run may write in all (its tmpfs)
SANDBOX_DISK_ENV = "AUTOGRADER_SANDBOX_DISK"
#: bytes of memory of one clean-room child with everything it starts
CLEANROOM_MEMORY_ENV = "AUTOGRADER_CLEANROOM_MEMORY"
#: bytes one clean-room child may write in all (its room and temporary folders: a tmpfs)
CLEANROOM_DISK_ENV = "AUTOGRADER_CLEANROOM_DISK"

#: ``0``: every kernel of an nbgrader run starts from nothing (no kernel fork server)
KERNEL_FORK_ENV = "AUTOGRADER_KERNEL_FORK"
#: ``0``: a kernel fork server imports nothing before it forks kernels
KERNEL_PRELOAD_ENV = "AUTOGRADER_KERNEL_PRELOAD"
#: the wall-clock limit of one notebook's kernel, in seconds (set by the sandbox)
NOTEBOOK_LIMIT_ENV = "AUTOGRADER_NOTEBOOK_LIMIT"
#: ``0``: every nbgrader run starts from nothing instead of the sandbox fork server
SANDBOX_FORK_ENV = "AUTOGRADER_SANDBOX_FORK"
#: ``0``: the sandbox fork server does not import nbgrader's modules
NBGRADER_PRELOAD_ENV = "AUTOGRADER_NBGRADER_PRELOAD"
#: ``0``: every clean-room child starts from nothing instead of the clean-room fork server
CLEANROOM_FORK_ENV = "AUTOGRADER_CLEANROOM_FORK"
#: ``1`` inside a sandbox: nbgrader's gradebook is a throwaway copy (no waits for the disk)
SCRATCH_GRADEBOOK_ENV = "AUTOGRADER_SCRATCH_GRADEBOOK"
#: the per-cell time limit in seconds that nbgrader's run is given
CELL_TIMEOUT_ENV = "AUTOGRADER_CELL_TIMEOUT"
#: ``1`` in the kernel of a graded submission: hidden checks run nothing there
KERNEL_GRADING_ENV = "AUTOGRADER_KERNEL_GRADING"
#: the seed of a grading run (drawn and logged by ``autograder autograde``)
SEED_ENV = "AUTOGRADER_SEED"
#: the course directory nbgrader's configuration takes (default: the repository)
COURSE_ROOT_ENV = "AUTOGRADER_COURSE_ROOT"
#: the largest message taken from a clean-room child, in bytes (at least 64 KiB)
REPLY_MAX_ENV = "AUTOGRADER_REPLY_MAX_BYTES"
#: "FD,PID" of a warm kernel server forked beside an nbgrader run: its socket and process
KERNEL_SOCKET_ENV = "AUTOGRADER_KERNEL_SOCKET"

_DEFAULTS = {
    SANDBOX_MEMORY_ENV: 4 << 30,
    SANDBOX_DISK_ENV: 1 << 30,
    CLEANROOM_MEMORY_ENV: 4 << 30,
    CLEANROOM_DISK_ENV: 256 << 20,
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
            raise ValueError(f"{name} must be a positive number of bytes (e.g. 4G), got {value!r}")
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


def cleanroom_disk_bytes():
    """What one clean-room child may write in all (``$AUTOGRADER_CLEANROOM_DISK``)."""
    return _bytes_setting(CLEANROOM_DISK_ENV)


def reply_max_bytes():
    """The largest message taken from a clean-room child (``$AUTOGRADER_REPLY_MAX_BYTES``,
    default 4 MiB, at least 64 KiB).

    Raises
    ------
    ValueError
        Naming the variable when its value is not such a number of bytes.
    """
    text = os.environ.get(REPLY_MAX_ENV, "").strip()
    if not text:
        return 4 << 20
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{REPLY_MAX_ENV} must be a number of bytes, got {text!r}") from None
    if value < 1 << 16:
        raise ValueError(f"{REPLY_MAX_ENV} must be at least 65536 bytes, got {value}")
    return value


def cleanroom_memory_bytes():
    """Memory of one clean-room child and what it starts (``$AUTOGRADER_CLEANROOM_MEMORY``)."""
    return _bytes_setting(CLEANROOM_MEMORY_ENV)


#: limits of one student's nbgrader run (nbgrader, its kernels and all they start); the
#: time limits are computed from the release notebooks, never from what was handed in
#: (:func:`autograder.sandbox_limits.time_budget`)
SANDBOX_LIMITS = {
    "processes": 512,  # processes and threads of the sandbox user (RLIMIT_NPROC)
    # and of its cgroup together (pids.max)
    "memory_bytes": 8 << 30,  # address space of each process (RLIMIT_AS)
    "cpu_grace_s": 5,  # CPU seconds past the soft limit before the hard one (RLIMIT_CPU)
    "cgroup_memory_bytes": sandbox_memory_bytes(),  # all its processes together
    "file_bytes": 256 << 20,  # largest file written (RLIMIT_FSIZE)
    "disk_bytes": sandbox_disk_bytes(),  # all it writes: course copy, home, /tmp
    "wall_s": None,  # the student's whole budget; None: WALL_BASE_S + the cell
    # timeout per code cell of the release notebooks of the
    # notebooks handed in
    "notebook_s": None,  # one notebook's kernel and all it starts; None:
    # NOTEBOOK_BASE_S + the cell timeout per code cell of
    # the longest of those release notebooks
}

#: limits of one notebook's kernel (the fork server's kernel role is sent them)
KERNEL_LIMITS = {
    "tmp_bytes": 256 << 20,  # each of its fresh temporary folders (tmpfs)
}

#: limits of one clean-room child (one exercise of one student)
CLEANROOM_LIMITS = {
    "cpu_s": 120,  # CPU seconds of the whole child (RLIMIT_CPU)
    "cpu_grace_s": 1,  # CPU seconds past the soft limit before the hard one
    "memory_bytes": 4 << 30,  # address space (RLIMIT_AS)
    "cgroup_memory_bytes": cleanroom_memory_bytes(),  # the child and all it starts
    "processes": 16,  # processes and threads of the sandbox user (RLIMIT_NPROC)
    # and of its cgroup together (pids.max)
    "file_bytes": 64 << 20,  # largest file it may write (RLIMIT_FSIZE)
    "disk_bytes": cleanroom_disk_bytes(),  # all it writes: its room, /tmp (one tmpfs)
    "call_s": 30.0,  # wall clock of one call of the student's function
    "start_s": 60.0,  # wall clock to start and run the answer's top level
    "total_s": 600.0,  # wall clock of the whole exercise: start, visible tests, checks
}
