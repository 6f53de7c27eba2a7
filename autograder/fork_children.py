"""What both fork servers keep of their children (standard library only, loaded by path:
:mod:`autograder.kernel_fork_server` and :mod:`autograder.cleanroom_fork_server` import
nothing of the ``autograder`` package)."""

import os


def threads():
    """Threads of this process (1 when it is safe to fork; 0 where unknown)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:  # pragma: no cover - not Linux
        return 0


class Children:
    """Exit codes of this process's children, reaped without waiting."""

    def __init__(self):
        self.exited = {}

    def reap(self):
        """Collect every child that has ended (no zombie stays behind)."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.exited[pid] = os.waitstatus_to_exitcode(status)

    def status(self, pid):
        """``None`` while child ``pid`` runs, else its exit code (negative: the signal
        that ended it, as in :attr:`subprocess.Popen.returncode`; -1 for a process that
        is not a child of this one)."""
        if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
            raise ValueError(f"pid must be a process id, got {pid!r}")
        self.reap()
        if pid in self.exited:
            return self.exited[pid]
        try:
            got, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return -1
        if got == 0:
            return None
        self.exited[pid] = os.waitstatus_to_exitcode(status)
        return self.exited[pid]


def cgroup_list(value):
    """Whether ``value``, the ``cgroups`` of a spawn request, is absent (None) or a list
    of absolute folder names (the groups the child joins first)."""
    return value is None or (
        isinstance(value, list)
        and all(isinstance(v, str) and v.startswith("/") and "\0" not in v for v in value)
    )


def load_by_path(name, path):
    """The module compiled from the file ``path`` under ``name``, not registered in
    :data:`sys.modules` (no package is imported to reach it)."""
    import sys

    if not os.path.isfile(path):
        raise ValueError(f"path must name a Python file, got {path!r}")
    module = type(sys)(name)
    module.__file__ = path
    with open(path) as fh:
        exec(compile(fh.read(), path, "exec"), module.__dict__)
    return module


def fresh_process(env):
    """In a forked child: what a process started from nothing would have, as far as the
    preloaded libraries go: exactly the environment ``env``, ``$TMPDIR`` read again by
    :mod:`tempfile`, and its own seeds for :mod:`random`, NumPy's and torch's global
    generators (a fork would otherwise repeat its server's draws)."""
    import random
    import sys
    import tempfile

    if not isinstance(env, dict):
        raise ValueError(f"env must be a dict, got {type(env).__name__}")
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in env.items()})
    tempfile.tempdir = None
    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    if "torch" in sys.modules:
        sys.modules["torch"].seed()


def announce_ready(control, loaded):
    """Tell the grader on ``control`` that the imports ``loaded`` are done (the first
    message of a fork server)."""
    import json

    control.send(json.dumps({"ready": True, "loaded": list(loaded), "threads": threads()}).encode())


def serve_requests(control, children, spawn_error, become, max_request=1 << 16, max_fds=4):
    """The request loop of a fork server on the socket ``control`` (the protocol of
    :mod:`autograder.fork_client`), until the socket ends.

    Parameters
    ----------
    control : socket.socket
        The server's end (``SOCK_SEQPACKET``; one JSON object per datagram).
    children : Children
        Where the exit codes of the forked children are kept.
    spawn_error : callable
        ``spawn_error(request, fds)``: why a spawn request with the descriptors ``fds``
        cannot be served, or None.
    become : callable
        ``become(request, fds)``: run in the forked child; never returns.
    max_request, max_fds : int
        The largest datagram and the most descriptors taken with one.
    """
    import json
    import socket

    def send(msg):
        control.send(json.dumps(msg).encode())

    while True:
        msg, fds, _, _ = socket.recv_fds(control, max_request, max_fds)
        if not msg:
            return
        try:
            req = json.loads(msg)
            op = req["op"] if isinstance(req, dict) else None
        except (ValueError, KeyError, TypeError):
            op = None
        error = None
        if op == "spawn":
            error = spawn_error(req, fds)
            if error is None:
                children.reap()
                pid = os.fork()
                if pid == 0:
                    become(req, fds)
        for f in fds:
            os.close(f)
        if op == "spawn":
            send({"error": error} if error is not None else {"pid": pid})
        elif op == "status":
            try:
                send({"code": children.status(int(req["pid"]))})
            except (KeyError, TypeError, ValueError):
                send({"error": "a status request needs a process id"})
        else:
            send({"error": "malformed request" if op is None else f"unknown op {op!r}"})
