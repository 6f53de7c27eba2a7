"""What the fork server keeps of its children and how it answers (standard library only;
loaded by path by :mod:`autograder.fork_server`, which imports nothing of the
``autograder`` package).

The protocol, on a Unix socket pair (``SOCK_SEQPACKET``, one JSON object per datagram,
file descriptors attached with ``SCM_RIGHTS``), read by :mod:`autograder.fork_client`
through :mod:`autograder.wire`:

* first, once the role's imports are done: ``{"ready": true, "loaded": [...],
  "threads": n}``;
* ``{"op": "spawn", ...}`` (the role's request) -> ``{"pid": int}`` or ``{"pid": int,
  "contained": bool}`` (a kernel: whether it got its namespaces), or ``{"error": str}``;
* ``{"op": "status", "pid": int}`` -> ``{"code": int or null}`` or, from the kernel role,
  ``{"code": ..., "timed_out": bool, "limit_s": number or null}`` (null while the child
  runs, a negative code for the signal that ended it, as in
  :attr:`subprocess.Popen.returncode`), or ``{"error": str}``.

The end of the socket ends the server.
"""

import json
import os
import socket

#: the largest request taken (a spawn request holds an environment and a few paths)
MAX_REQUEST = 1 << 16
#: the most descriptors taken with one request
MAX_FDS = 4


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


def import_optional(names):
    """Import each module of ``names`` that is installed (an answer or a kernel imports a
    missing one itself); the names imported, in order."""
    import importlib

    loaded = []
    for name in names:
        try:
            importlib.import_module(name)
            loaded.append(name)
        except Exception:  # an optional library
            pass
    return loaded


def confinement_error(confine, req):
    """Why the confinement a spawn request ``req`` asks for is refused by
    ``confine.make_spec`` (None if it is taken)."""
    try:
        confine.make_spec(**req.get("confinement"))
    except (TypeError, ValueError) as exc:
        return f"confinement: {str(exc)[:200]}"
    return None


def fork_and_become(children, become):
    """Fork a child that runs ``become()`` (which never returns); ``{"pid": int}``."""
    children.reap()
    pid = os.fork()
    if pid == 0:
        try:
            become()
        finally:
            os._exit(127)
    return {"pid": pid}


def announce_ready(control, loaded):
    """Tell the grader on ``control`` that the imports ``loaded`` are done (the first
    message of a fork server)."""
    control.send(json.dumps({"ready": True, "loaded": list(loaded), "threads": threads()}).encode())


def _answer(role, req, fds, control):
    """The reply to one request ``req`` (a parsed datagram) with the descriptors ``fds``."""
    op = req.get("op") if isinstance(req, dict) else None
    if op == "spawn":
        error = role.spawn_error(req, fds)
        if error is None and threads() != 1:
            error = "the server holds threads"
        return {"error": error} if error is not None else role.spawn(req, fds, control)
    if op == "status":
        pid = req.get("pid")
        if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
            return {"error": "a status request needs a process id"}
        return role.status(pid)
    return {"error": "malformed request" if op is None else f"unknown op {str(op)[:40]!r}"}


def serve(control, role):
    """Announce the role's imports (``role.preload()``), then answer requests on the
    socket ``control`` until it ends (the protocol above).

    Parameters
    ----------
    control : socket.socket
        The server's end (``SOCK_SEQPACKET``).
    role : object
        ``preload()`` -> names imported; ``spawn_error(req, fds)`` -> why a spawn request
        cannot be served, or None; ``spawn(req, fds, control)`` -> the reply (a forked
        child closes ``control``); ``status(pid)`` -> the reply.
    """
    announce_ready(control, role.preload())
    while True:
        msg, fds, _, _ = socket.recv_fds(control, MAX_REQUEST, MAX_FDS)
        if not msg:
            return
        try:
            req = json.loads(msg)
        except ValueError:
            req = None
        try:
            reply = _answer(role, req, fds, control)
        finally:
            for f in fds:
                os.close(f)
        control.send(json.dumps(reply).encode())
