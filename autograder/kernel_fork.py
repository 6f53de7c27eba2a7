"""nbgrader's kernels forked from a warm process (:mod:`autograder.kernel_fork_server`).

:class:`ForkExecute` is nbgrader's ``Execute`` preprocessor with a kernel manager whose
provisioner asks one fork server per grading process for each kernel instead of starting
``python -m ipykernel_launcher`` from nothing. The kernel is the same program in the same
sandbox (the server is a child of the grading process and inherits its user, namespaces
and limits); only the imports are already done. Anything the server cannot do (another
kernel command, a server that failed to start or holds threads) falls back to the usual
launch, so grading never depends on it. ``$AUTOGRADER_KERNEL_FORK=0`` turns it off.

In a class, the server is not started here: the sandbox's own fork server
(:mod:`autograder.sandbox_fork_server`) forks one that has done its imports already beside
this process and names its pipes in ``$AUTOGRADER_KERNEL_FORK_FDS``; this process adopts it.
"""
from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import uuid
from pathlib import Path

from jupyter_client import AsyncKernelManager
from jupyter_client.provisioning import LocalProvisioner
from nbgrader.preprocessors import Execute

from .fork_client import RUN_BY_PATH
from .forked_process import ForkedProcess

__all__ = ["ENV", "FDS_ENV", "ForkExecute", "ForkKernelManager", "ForkProvisioner", "fork_enabled",
           "start_server"]

#: environment variable: "0" turns the fork server off
ENV = "AUTOGRADER_KERNEL_FORK"
#: environment variable: "REQUESTS,REPLIES,PID" of a warm kernel server forked beside this
#: process (:mod:`autograder.sandbox_fork_server`); read, and removed, on import
FDS_ENV = "AUTOGRADER_KERNEL_FORK_FDS"
_SERVER_FILE = Path(__file__).with_name("kernel_fork_server.py")
_BOOT = RUN_BY_PATH
_ADOPT = os.environ.pop(FDS_ENV, None)  # never handed on to a kernel


def _adoptable():
    """``(requests, replies, pid)`` of the kernel server forked beside this process, once
    (the second call gets None), or None when there is none or the value is unusable."""
    global _ADOPT
    value, _ADOPT = _ADOPT, None
    if not value:
        return None
    try:
        requests, replies, pid = (int(x) for x in value.split(","))
        for fd in (requests, replies):
            os.set_inheritable(fd, False)  # no kernel started the usual way inherits them
    except (ValueError, OSError):
        return None
    return requests, replies, pid


def _child_exit_code(pid):
    """Exit code of this process's child ``pid``, None while it runs."""
    try:
        got, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return -1
    return os.waitstatus_to_exitcode(status) if got else None


def fork_enabled():
    """Whether kernels are forked (``$AUTOGRADER_KERNEL_FORK`` is not ``0``)."""
    return os.environ.get(ENV, "1") != "0"


class _Server:
    """The fork server of this process (started on first use, ended with it)."""

    def __init__(self):
        adopted = _adoptable()
        if adopted is not None:  # already warm, forked beside this process
            requests, read_fd, pid = adopted
            self.proc = ForkedProcess(pid, _child_exit_code, stdin=os.fdopen(requests, "w"))
        else:
            read_fd, write_fd = os.pipe()
            try:
                self.proc = subprocess.Popen(
                    [sys.executable, "-c", _BOOT, str(_SERVER_FILE), str(write_fd)],
                    stdin=subprocess.PIPE, pass_fds=(write_fd,), close_fds=True, text=True)
            finally:
                os.close(write_fd)
        self.replies = os.fdopen(read_fd, "r")
        self.lock = threading.Lock()
        self.is_ready = False

    def ready(self, timeout=0.0):
        """Whether the imports are done (waits at most ``timeout`` seconds)."""
        if not self.is_ready:
            first = self._read(timeout)
            if not first:
                return False
            if not first.get("ready"):
                raise OSError("the kernel fork server did not start")
            self.is_ready = True
        return True

    def _read(self, timeout):
        ready, _, _ = select.select([self.replies], [], [], timeout)
        if not ready:
            if not self.is_ready:
                return {}
            raise OSError("the kernel fork server did not answer")
        line = self.replies.readline()
        if not line:
            raise OSError("the kernel fork server ended")
        return json.loads(line)

    def ask(self, request, timeout=30.0):
        with self.lock:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            return self._read(timeout)


_server = None
_server_lock = threading.Lock()


def start_server():
    """Start this process's fork server without waiting for its imports (a no-op when
    it runs already or forking is off); :class:`ForkProvisioner` uses it once ready."""
    global _server
    if not fork_enabled():
        return None
    with _server_lock:
        if _server is None or _server.proc.poll() is not None:
            try:
                _server = _Server()
            except (OSError, ValueError):
                _server = None
        return _server


#: the longest a kernel waits for the server's imports before it is launched the usual way
READY_WAIT_S = 20.0


def _ready_server(wait=READY_WAIT_S):
    """The server once its imports are done (waiting at most ``wait`` seconds), else None:
    the kernel is then launched the usual way. Waiting is the cheaper choice: the server
    started first, with the grading process, so its imports end sooner than those of a
    kernel started from nothing now, and a kernel that did not wait would do the same
    imports a second time on the same cores (three of sixteen kernels of one student
    did, on a loaded 2-core machine, before this wait)."""
    server = start_server()  # the running one, or a new one if it ended
    if server is None:
        return None
    try:
        return server if server.ready(wait) else None
    except (OSError, ValueError):
        return None


def _is_ipykernel(cmd):
    return (len(cmd) >= 3 and cmd[1:3] == ["-m", "ipykernel_launcher"]
            and os.path.realpath(cmd[0]) == os.path.realpath(sys.executable))


class ForkProvisioner(LocalProvisioner):
    """:class:`~jupyter_client.provisioning.LocalProvisioner` whose Python kernels are
    forked by the server; every other command is launched as usual."""

    async def launch_kernel(self, cmd, **kwargs):
        server = _ready_server() if fork_enabled() and _is_ipykernel(cmd) else None
        if server is None:
            return await super().launch_kernel(cmd, **kwargs)
        env = dict(kwargs.get("env") or os.environ)
        cwd = str(kwargs.get("cwd") or os.getcwd())
        try:
            reply = server.ask({"op": "spawn", "argv": list(cmd[3:]), "env": env,
                                "cwd": cwd})
        except (OSError, ValueError):
            reply = {}
        if "pid" not in reply:
            return await super().launch_kernel(cmd, **kwargs)
        self.process = ForkedProcess(
            int(reply["pid"]), lambda pid: server.ask({"op": "status", "pid": pid}).get("code"))
        self.pid = self.process.pid
        self.pgid = self.process.pid  # the child called setsid()
        self.cwd = cwd
        return self.connection_info


class ForkKernelManager(AsyncKernelManager):
    """An :class:`~jupyter_client.AsyncKernelManager` that uses :class:`ForkProvisioner`."""

    async def _async_pre_start_kernel(self, **kw):
        self.kernel_id = self.kernel_id or kw.pop("kernel_id", str(uuid.uuid4()))
        if self.provisioner is None:
            self.provisioner = ForkProvisioner(kernel_id=self.kernel_id,
                                               kernel_spec=self.kernel_spec, parent=self)
        return await super()._async_pre_start_kernel(**kw)


class ForkExecute(Execute):
    """nbgrader's ``Execute`` preprocessor with :class:`ForkKernelManager`."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("kernel_manager_class", ForkKernelManager)
        super().__init__(*args, **kwargs)
