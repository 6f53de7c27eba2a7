"""One cgroup per student sandbox: its memory and its number of processes, all together.

Per-process limits (``RLIMIT_AS``, ``RLIMIT_NPROC``) bound each process of a sandbox, not
the sandbox: sixteen processes of 750 MiB each stay under any per-process limit. A
:class:`SandboxCgroup` is a group of the cgroup v1 ``memory`` and ``pids`` controllers,
made by the grader (root) before the sandbox's first process starts, as a child of the
grader's own group (so a limit on the grader still covers its sandboxes):

* ``memory.limit_in_bytes`` (and ``memory.memsw.limit_in_bytes`` where swap is
  accounted) bounds what all its processes hold together, including the pages they
  write to a tmpfs; past it the kernel's OOM killer ends a process of the group, never
  one outside it;
* ``pids.max`` bounds its processes and threads together;
* the confined child joins it first thing after ``fork``, as root
  (:func:`autograder.confine.join_cgroups`, called by
  :func:`autograder.confine.apply`, which every started and every forked sandbox child
  runs), so everything it starts is in the group and cannot leave it (the
  sandbox user may not write the group's files);
* :meth:`SandboxCgroup.kill` sends SIGKILL to every process in the group until none is
  left, and :meth:`SandboxCgroup.remove` does that, then removes the group.

Where the controllers are missing (not root, no v1 hierarchy of ``memory`` and ``pids``,
a read-only ``/sys/fs/cgroup``, cgroup v2 only) or ``$AUTOGRADER_CGROUPS`` is ``0``,
:func:`make` returns None and says why once on stderr; the sandbox then has its
per-process limits only.
"""

from __future__ import annotations

import functools
import os
import secrets
import signal
import sys
import threading
import time

from . import settings

__all__ = ["CONTROLLERS", "ROOT", "SandboxCgroup", "unavailable", "make"]

#: the cgroup v1 controllers a sandbox gets a group of
CONTROLLERS = ("memory", "pids")
#: where the v1 hierarchies are mounted
ROOT = "/sys/fs/cgroup"
#: prefix of the groups the grader makes
PREFIX = "autograder-"

_said = threading.Lock()
_said_once = []


@functools.lru_cache(maxsize=1)
def _hierarchies():
    """controller -> the folder of the grader's own group in its v1 hierarchy, for each of
    :data:`CONTROLLERS` that is mounted as v1 (from ``/proc/self/mountinfo`` and
    ``/proc/self/cgroup``)."""
    mounted = {}
    try:
        with open("/proc/self/mountinfo") as fh:
            for line in fh:
                left, _, right = line.partition(" - ")
                fields, extra = left.split(), right.split()
                if len(extra) < 3 or extra[0] != "cgroup":
                    continue
                opts = set(extra[2].split(","))
                for c in CONTROLLERS:
                    if c in opts and fields[3] == "/":
                        mounted[c] = fields[4]
    except (OSError, IndexError):
        return {}
    own = {}
    try:
        with open("/proc/self/cgroup") as fh:
            for line in fh:
                parts = line.rstrip("\n").split(":", 2)
                if len(parts) == 3:
                    for c in parts[1].split(","):
                        own[c] = parts[2]
    except OSError:
        return {}
    return {
        c: os.path.join(mounted[c], own.get(c, "/").lstrip("/"))
        for c in CONTROLLERS
        if c in mounted
    }


def unavailable():
    """Why a sandbox cannot have cgroups here (one sentence), or None when it can."""
    if not settings.cgroups_wanted():
        return f"${settings.CGROUPS_ENV} is 0"
    if os.geteuid() != 0:
        return "the grader does not run as root"
    where = _hierarchies()
    missing = [c for c in CONTROLLERS if c not in where]
    if missing:
        return (
            "this machine has no cgroup v1 hierarchy of the "
            + " and ".join(missing)
            + " controller"
            + ("s" if len(missing) > 1 else "")
            + " (cgroup v2 only, or "
            "none mounted)"
        )
    for c, folder in where.items():
        if not os.access(folder, os.W_OK):
            return f"the grader's {c} cgroup ({folder}) is not writable"
    return None


def _say_once(why):
    with _said:
        if _said_once:
            return
        _said_once.append(why)
    print(
        f"autograder: no cgroup per sandbox ({why}); each sandbox is limited per process "
        "only (address space, file size, processes of its user)",
        file=sys.stderr,
    )


def _write(path, value):
    with open(path, "w") as fh:
        fh.write(str(value))


def _read(path):
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return ""


class SandboxCgroup:
    """The memory and pids groups of one sandbox (see the module docstring).

    Parameters
    ----------
    memory_bytes : int
        What all the sandbox's processes may hold together.
    processes : int
        Processes and threads of the sandbox together.
    label : str
        A few letters naming the kind of sandbox in the group's name.

    Raises
    ------
    ValueError
        If a limit is not a positive int.
    OSError
        If a group cannot be made (nothing is left behind then).
    """

    def __init__(self, memory_bytes, processes, label="sandbox"):
        for name, value in (("memory_bytes", memory_bytes), ("processes", processes)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if not isinstance(label, str) or not label.isalnum():
            raise ValueError(f"label must be letters and digits, got {label!r}")
        self.memory_bytes = memory_bytes
        self.processes = processes
        name = f"{PREFIX}{label}-{os.getpid()}-{secrets.token_hex(4)}"
        where = _hierarchies()
        #: controller -> the group's folder
        self.paths = {}
        try:
            for c in CONTROLLERS:
                path = os.path.join(where[c], name)
                os.mkdir(path, 0o755)
                self.paths[c] = path
            mem = self.paths["memory"]
            _write(os.path.join(mem, "memory.limit_in_bytes"), memory_bytes)
            if os.path.exists(os.path.join(mem, "memory.memsw.limit_in_bytes")):
                _write(os.path.join(mem, "memory.memsw.limit_in_bytes"), memory_bytes)
            _write(os.path.join(self.paths["pids"], "pids.max"), processes)
        except (OSError, KeyError) as exc:
            self.remove()
            raise OSError(f"cannot make the sandbox's cgroup: {exc}") from exc

    @property
    def join_paths(self):
        """The groups' folders, for :func:`autograder.confine.join_cgroups`."""
        return [self.paths[c] for c in CONTROLLERS if c in self.paths]

    def pids(self):
        """Process ids in the group (its memory group; the pids group holds the same)."""
        got = set()
        for path in self.paths.values():
            for line in _read(os.path.join(path, "cgroup.procs")).split():
                if line.isdigit():
                    got.add(int(line))
        return sorted(got)

    def kill(self, rounds=100):
        """SIGKILL every process in the group until none is left (at most ``rounds``
        passes, each after the processes of the pass before have had a moment to end).
        Returns True when the group is empty."""
        if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
            raise ValueError(f"rounds must be a positive int, got {rounds!r}")
        for _ in range(rounds):
            left = self.pids()
            if not left:
                return True
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.01)
        return not self.pids()

    def memory_peak(self):
        """The group's highest memory use so far in bytes (0 if unreadable)."""
        text = _read(os.path.join(self.paths.get("memory", ""), "memory.max_usage_in_bytes"))
        return int(text) if text.strip().isdigit() else 0

    def oom_kills(self):
        """How many processes the OOM killer ended in the group so far (the times the
        limit was hit where the kernel does not count kills)."""
        mem = self.paths.get("memory", "")
        for line in _read(os.path.join(mem, "memory.oom_control")).splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
        text = _read(os.path.join(mem, "memory.failcnt")).strip()
        return int(text) if text.isdigit() else 0

    def remove(self):
        """Kill what is left in the group, then remove its folders (a group the kernel
        still holds for a moment is tried again for a second)."""
        if self.paths:
            self.kill()
        for c in list(self.paths):
            path = self.paths[c]
            for _ in range(100):
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)
            if not os.path.isdir(path):
                del self.paths[c]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def make(memory_bytes, processes, label="sandbox"):
    """A :class:`SandboxCgroup` for one sandbox, or None where cgroups cannot be had here
    (said once on stderr with the reason: :func:`unavailable`, or the error making it).

    Raises
    ------
    ValueError
        If a limit is not a positive int.
    """
    for name, value in (("memory_bytes", memory_bytes), ("processes", processes)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    why = unavailable()
    if why is not None:
        _say_once(why)
        return None
    try:
        return SandboxCgroup(memory_bytes, processes, label)
    except OSError as exc:
        _say_once(str(exc))
        return None
