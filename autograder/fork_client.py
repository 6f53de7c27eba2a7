"""The grader's side of the fork server (:mod:`autograder.fork_server`): one client for
every role (clean-room children, students' nbgrader runs, notebook kernels).

The protocol is that of :mod:`autograder.fork_children` on a Unix socket pair
(``SOCK_SEQPACKET``, one JSON object per datagram, descriptors attached with
``SCM_RIGHTS``). A server runs under the sandbox user in a sandbox that student code
reaches (a kernel server sits beside a student's nbgrader run), so every reply is read
as hostile: at most :data:`autograder.wire.FORK_REPLY_MAX_BYTES`, bounded, and checked
against the schema of its kind (:func:`autograder.wire.fork_reply`); a reply that breaks
it is an ``OSError`` here, and the caller starts its child the usual way or not at all.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from . import wire
from .forked_process import ForkedProcess

__all__ = ["RUN_BY_PATH", "SERVER_FILE", "ForkServer", "ServerSlot"]

#: ``python -c RUN_BY_PATH FILE ARGS...`` runs the program ``FILE`` as ``__main__`` with
#: ``sys.argv == [FILE, ARGS...]`` (and no package of its folder on the path)
RUN_BY_PATH = (
    "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)
#: the fork server's program, run by path
SERVER_FILE = Path(__file__).with_name("fork_server.py")


def _child_exit_code(pid):
    """Exit code of this process's child ``pid``, None while it runs."""
    try:
        got, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return -1
    return os.waitstatus_to_exitcode(status) if got else None


class ForkServer:
    """A fork server of one role, speaking to this process on the socket ``sock``; made
    by :meth:`start` (a server this process starts) or :meth:`adopt` (one forked beside
    this process). It ends with this process (the end of its socket ends it).

    Parameters
    ----------
    sock : socket.socket
        This process's end of the server's socket.
    proc : subprocess.Popen or ForkedProcess
        The server's process.
    label : str
        What the server is, for error messages ("the clean-room fork server").
    home : str or None
        The server's working directory, removed by :meth:`close`.
    """

    def __init__(self, sock, proc, label, home=None):
        self.sock, self.proc, self.label, self.home = sock, proc, str(label), home
        self.lock = threading.Lock()
        self.is_ready = False
        #: the server's first message once read (None before)
        self.first = None
        self.loaded = []
        atexit.register(self.close)

    @classmethod
    def start(cls, role, options, label, *, python=None, isolated=False, env=None, output=False):
        """Start a server of ``role`` (``"cleanroom"``, ``"sandbox"``, ``"kernel"``).

        Parameters
        ----------
        role : str
            The server's role.
        options : dict
            The role's settings (JSON-ready; see the role's module).
        label : str
            What the server is, for error messages.
        python : str, optional
            The interpreter (default this one).
        isolated : bool
            Run it as ``python -I -S`` (no user site, no ``.pth`` files), else through
            :data:`RUN_BY_PATH` with this interpreter's path.
        env : callable, optional
            ``env(home)``: the server's whole environment, given a fresh empty folder that
            is its working directory; None keeps this process's.
        output : bool
            The server's standard output and error are this process's (else discarded),
            and it stays in this process's session.

        Raises
        ------
        OSError
            If it cannot be started.
        """
        if env is not None and not callable(env):
            raise ValueError("env must be a callable or None")
        python = python or sys.executable
        head = [python, "-I", "-S"] if isolated else [python, "-c", RUN_BY_PATH]
        home = tempfile.mkdtemp(prefix="autograder-fork-server-")
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sink = None if output else subprocess.DEVNULL
        try:
            proc = subprocess.Popen(
                [*head, str(SERVER_FILE), role, str(theirs.fileno()), json.dumps(options)],
                env=None if env is None else env(home),
                cwd=home,
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=sink,
                close_fds=True,
                start_new_session=not output,
            )
        except OSError:
            ours.close()
            shutil.rmtree(home, ignore_errors=True)
            raise
        finally:
            theirs.close()
        return cls(ours, proc, label, home)

    @classmethod
    def adopt(cls, fd, pid, label):
        """The server forked beside this process (a child of it) on the socket ``fd``."""
        os.set_inheritable(fd, False)  # no process started the usual way inherits it
        return cls(socket.socket(fileno=fd), ForkedProcess(pid, _child_exit_code), label)

    def _read(self, timeout, kind):
        ready, _, _ = select.select([self.sock], [], [], timeout)
        if not ready:
            raise TimeoutError(f"{self.label} did not answer")
        msg = self.sock.recv(wire.FORK_REPLY_MAX_BYTES + 1)
        if not msg:
            raise OSError(f"{self.label} ended")
        try:
            return wire.fork_reply(msg, kind)
        except wire.ProtocolError as exc:
            raise OSError(f"{self.label} broke the protocol: {exc}") from None

    def ready(self, timeout=0.0):
        """Whether the imports are done (waits at most ``timeout`` seconds); raises
        ``OSError`` when the server started but cannot fork (it holds threads) or broke
        the protocol."""
        with self.lock:
            if self.first is None:
                try:
                    self.first = self._read(timeout, "ready")
                except TimeoutError:
                    return False
                self.loaded = list(self.first["loaded"])
                self.is_ready = self.first["threads"] == 1
            if not self.is_ready:
                raise OSError(f"{self.label} cannot fork")
            return True

    def ask(self, request, fds=(), timeout=30.0):
        """Send ``request`` (a dict with ``"op"``, or any JSON value, which the server
        refuses; the descriptors ``fds`` attached) and return the reply, checked against
        the schema of its kind. Raises ``OSError`` when the server is gone, does not
        answer, or breaks the protocol."""
        op = request.get("op") if isinstance(request, dict) else None
        kind = op if op in ("spawn", "status") else "other"
        data = json.dumps(request).encode()
        with self.lock:
            if self.first is None:
                self.first = self._read(timeout, "ready")
                self.loaded = list(self.first["loaded"])
                self.is_ready = self.first["threads"] == 1
            if fds:
                socket.send_fds(self.sock, [data], list(fds))
            else:
                self.sock.send(data)
            try:
                return self._read(timeout, kind)
            except TimeoutError as exc:
                raise OSError(str(exc)) from None

    def status(self, pid):
        """The server's status reply for its child ``pid`` (``{"code": ...}``, and for a
        kernel ``"timed_out"`` and ``"limit_s"``). Raises ``OSError`` on an error reply."""
        reply = self.ask({"op": "status", "pid": pid})
        if "error" in reply:
            raise OSError(f"{self.label}: {reply['error']}")
        return reply

    def exit_code(self, pid):
        """Exit code of the server's child ``pid`` (None while it runs)."""
        return self.status(pid)["code"]

    def spawn(self, request, stdin=False, stdout=False, exit_code=None):
        """A :class:`~autograder.forked_process.ForkedProcess` for a child the server forks
        with ``request`` (the role's spawn request, without ``"op"``), or None when the
        server cannot.

        Parameters
        ----------
        request : dict
            The spawn request.
        stdin, stdout : bool
            Pipe the child's standard input (the read end attached first) and standard
            output (its write end attached next) to this process.
        exit_code : callable, optional
            ``exit_code(pid)`` for the process (default :meth:`exit_code`).
        """
        ends, ours = [], {}
        if stdin:
            child_in, ours["stdin"] = os.pipe()
            ends.append(child_in)
        if stdout:
            ours["stdout"], child_out = os.pipe()
            ends.append(child_out)
        try:
            reply = self.ask({"op": "spawn", **request}, fds=ends)
        except (OSError, ValueError):
            reply = {}
        finally:
            for fd in ends:
                os.close(fd)
        if "pid" not in reply:
            for fd in ours.values():
                os.close(fd)
            return None
        return ForkedProcess(
            reply["pid"],
            exit_code or self.exit_code,
            stdin=os.fdopen(ours["stdin"], "wb", buffering=0) if stdin else None,
            stdout=os.fdopen(ours["stdout"], "rb", buffering=0) if stdout else None,
        )

    def close(self):
        try:
            self.sock.close()
        finally:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:  # pragma: no cover
                self.proc.kill()
            if self.home is not None:
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
