"""Which grading traces (processes, temporary folders) belong to this test worker.

Under pytest-xdist each worker has its own temporary folder (``tests/conftest.py`` sets
``TMPDIR`` and ``REPEVAL_WORKER_TMPDIR``); every sandbox and clean-room child is given a
``TMPDIR`` inside its own folder there, so its environment says which worker started it.
"""

import os
import tempfile


def started_here(pid):
    """Whether process ``pid`` was started by this worker's grading (always True in a
    serial run, where every such process counts)."""
    base = os.environ.get("REPEVAL_WORKER_TMPDIR")
    if not base:
        return True
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            env = fh.read().split(b"\0")
    except OSError:  # gone, or not ours to read
        return False
    prefix = b"TMPDIR=" + base.encode()
    return any(v.startswith(prefix) for v in env)


def temp_root():
    """The temporary folder grading writes into (this worker's, or the machine's)."""
    return tempfile.gettempdir()


def sandbox_user_processes():
    """This worker's processes running under a sandbox user id (the range
    :func:`autograder.sandbox_users.new_uid` draws from)."""
    from autograder.confine import FIRST_UID, UID_COUNT

    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/status") as fh:
                    uid = next(int(line.split()[1]) for line in fh if line.startswith("Uid:"))
            except (OSError, StopIteration):
                continue
            if FIRST_UID <= uid < FIRST_UID + UID_COUNT and started_here(entry):
                found.append(int(entry))
    return found
