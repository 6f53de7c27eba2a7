"""The grader's side of a fork server: one warm process per grading process that forks
children on request (:mod:`autograder.cleanroom_fork_server` for clean-room children,
:mod:`autograder.sandbox_fork_server` for students' nbgrader runs).

Both servers speak the same protocol on a Unix socket pair (``SOCK_SEQPACKET``, one JSON
object per datagram, file descriptors attached with ``SCM_RIGHTS``): the first message,
``{"ready": true, "loaded": [...], "threads": n}``, comes once the server's imports are
done; ``{"op": "status", "pid": int}`` is answered ``{"code": int or null}`` (null while
the child runs, a negative code for the signal that ended it, as in
:attr:`subprocess.Popen.returncode`); a spawn request is answered ``{"pid": int}`` or
``{"error": str}``. The end of the socket ends the server.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import socket
import subprocess
import tempfile
import threading

__all__ = ["RUN_BY_PATH", "ForkServer", "ServerSlot"]

#: ``python -c RUN_BY_PATH FILE ARGS...`` runs the program ``FILE`` as ``__main__`` with
#: ``sys.argv == [FILE, ARGS...]`` (and no package of its folder on the path)
RUN_BY_PATH = (
    "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)


class ForkServer:
    """A fork server started by this process; it ends with this process.

    Parameters
    ----------
    argv : callable
        ``argv(fd)``: the server's command line, given the number of its end of the socket.
    env : callable
        ``env(home)``: the server's whole environment, given a fresh empty folder that is
        its working directory (removed when the server is closed).
    label : str
        What the server is, for error messages ("the clean-room fork server").
    """

    def __init__(self, argv, env, label):
        if not (callable(argv) and callable(env)):
            raise ValueError("argv and env must be callables")
        self.label = str(label)
        self.home = tempfile.mkdtemp(prefix="autograder-fork-server-")
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen(
                argv(theirs.fileno()),
                env=env(self.home),
                cwd=self.home,
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                close_fds=True,
                start_new_session=True,
            )
        except OSError:
            ours.close()
            shutil.rmtree(self.home, ignore_errors=True)
            raise
        finally:
            theirs.close()
        self.sock = ours
        self.lock = threading.Lock()
        self.is_ready = False
        self.loaded = []
        atexit.register(self.close)

    def _read(self, timeout):
        ready, _, _ = select.select([self.sock], [], [], timeout)
        if not ready:
            raise TimeoutError(f"{self.label} did not answer")
        msg = self.sock.recv(1 << 16)
        if not msg:
            raise OSError(f"{self.label} ended")
        return json.loads(msg)

    def ready(self, timeout=0.0):
        """Whether the imports are done (waits at most ``timeout`` seconds); raises
        ``OSError`` when the server started but cannot fork."""
        with self.lock:
            if not self.is_ready:
                try:
                    first = self._read(timeout)
                except TimeoutError:
                    return False
                if not first.get("ready") or first.get("threads") != 1:
                    raise OSError(f"{self.label} cannot fork")
                self.loaded = list(first.get("loaded", []))
                self.is_ready = True
            return True

    def ask(self, request, fds=(), timeout=30.0):
        """Send ``request`` (with the descriptors ``fds`` attached) and return the reply."""
        data = json.dumps(request).encode()
        with self.lock:
            if fds:
                socket.send_fds(self.sock, [data], list(fds))
            else:
                self.sock.send(data)
            return self._read(timeout)

    def exit_code(self, pid):
        """Exit code of the server's child ``pid`` (None while it runs)."""
        return self.ask({"op": "status", "pid": pid}).get("code")

    def close(self):
        try:
            self.sock.close()
        finally:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:  # pragma: no cover
                self.proc.kill()
            shutil.rmtree(self.home, ignore_errors=True)


class ServerSlot:
    """The one fork server of a kind in this process: started on demand, started again
    when it ended, left alone when the environment variable ``switch`` is ``"0"``.

    Parameters
    ----------
    make : callable
        ``make()`` starts a server (a :class:`ForkServer`); it may raise ``OSError`` or
        ``ValueError``, and the slot then stays empty.
    switch : str
        Name of the environment variable that turns this kind of server off.
    """

    def __init__(self, make, switch):
        if not callable(make):
            raise ValueError("make must be callable")
        self.make = make
        self.switch = str(switch)
        self.server = None
        self.lock = threading.Lock()

    def enabled(self):
        return os.environ.get(self.switch, "1") != "0"

    def start(self):
        """The running server, or a new one (not waiting for its imports); ``None`` when
        turned off or when it cannot start."""
        if not self.enabled():
            return None
        with self.lock:
            if self.server is None or self.server.proc.poll() is not None:
                try:
                    self.server = self.make()
                except (OSError, ValueError):
                    self.server = None
            return self.server

    def ready(self, wait, start=False):
        """The server once its imports are done (waiting at most ``wait`` seconds), else
        ``None``: none was started (and ``start`` is false), it is turned off, it cannot
        fork, or it is still importing. One that ended is started again."""
        server = self.server
        if not self.enabled() or (server is None and not start):
            return None
        if server is None or server.proc.poll() is not None:
            server = self.start()
            if server is None:
                return None
        try:
            return server if server.ready(wait) else None
        except (OSError, ValueError):
            return None
