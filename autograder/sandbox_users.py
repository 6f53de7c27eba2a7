"""The sandbox user ids of the grader: one fresh id per sandbox, its processes found and
killed afterwards (as root).

A confined child drops to its id itself (:func:`autograder.confine.drop_to`); the grader
draws the id (:func:`new_uid`), finds the child's processes while it runs (its
:func:`descendants`, every process :func:`owned_by` its id, also one that forked twice)
and, once the child has ended, ends every process left under it (:func:`kill_uid`), also
one that left the child's session or cgroup.
"""

from __future__ import annotations

import os
import secrets
import signal
import time

from .confine import FIRST_UID, UID_COUNT, check_uid

__all__ = ["new_uid", "uid_processes", "kill_uid", "descendants", "owned_by"]


def new_uid():
    """A fresh user id for one sandbox, drawn at random from
    ``[FIRST_UID, FIRST_UID + UID_COUNT)``."""
    return FIRST_UID + secrets.randbelow(UID_COUNT)


def uid_processes(uid):
    """Process ids (read from ``/proc``) whose real user id is ``uid``, zombies left out.

    A zombie has ended and only waits for its parent to read its exit status: it runs
    nothing, holds no memory and cannot be signalled, so it is not counted (a sandboxed run
    that has just ended is one until the grader collects it; counting it made
    :func:`kill_uid` wait out all its rounds, about 2 s, after every run).

    Parameters
    ----------
    uid : int
        A sandbox user id (see :func:`new_uid`).

    Returns
    -------
    list of int
    """
    check_uid(uid)
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as fh:
                for line in fh:
                    if line.startswith("State:") and line.split()[1] in ("Z", "X"):
                        break
                    if line.startswith("Uid:"):
                        if int(line.split()[1]) == uid:
                            pids.append(int(entry))
                        break
        except OSError:
            continue
    return pids


def kill_uid(uid, rounds=50):
    """Kill every process of the sandbox user ``uid``: a helper that becomes ``uid`` sends
    SIGKILL to all it may signal, i.e. exactly those, until none is left (at most
    ``rounds`` times). Needs root.

    Parameters
    ----------
    uid : int
        A sandbox user id (see :func:`new_uid`); any other id is refused, so that no real
        account's processes can be killed by mistake.
    rounds : int
        Tries at most.

    Returns
    -------
    bool
        True when no process of ``uid`` is left.
    """
    check_uid(uid)
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be a positive int, got {rounds!r}")
    for _ in range(rounds):
        if not uid_processes(uid):
            return True
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the helper
            try:
                os.setgid(uid)
                os.setuid(uid)
                os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        time.sleep(0.02)
    return not uid_processes(uid)


def descendants(pid):
    """Process ids of every descendant of process ``pid`` (through each thread's
    ``/proc/<pid>/task/<tid>/children``); unreadable parts are skipped."""
    out, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{parent}/task/{tid}/children") as fh:
                    kids = [int(k) for k in fh.read().split()]
            except (OSError, ValueError):
                continue
            out.extend(kids)
            todo.extend(kids)
    return out


def owned_by(uid):
    """Process ids whose ``/proc/<pid>`` belongs to ``uid`` (their effective user id)."""
    pids = []
    try:
        with os.scandir("/proc") as entries:
            for entry in entries:
                if entry.name.isdigit():
                    try:
                        if entry.stat(follow_symlinks=False).st_uid == uid:
                            pids.append(int(entry.name))
                    except OSError:
                        continue
    except OSError:
        pass
    return pids
