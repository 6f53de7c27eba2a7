"""The part of :class:`subprocess.Popen` the grader uses, for a process that a fork
server started (a child of the server, not of the grader: watched through a pidfd, its
exit code asked of the server). Used for forked kernels (:mod:`autograder.kernel_fork`)
and forked clean-room children (:mod:`autograder.cleanroom_process`)."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time

__all__ = ["ForkedProcess"]


class ForkedProcess:
    """A forked process ``pid`` whose exit code ``exit_code(pid)`` reads from its server.

    Parameters
    ----------
    pid : int
        The process id.
    exit_code : callable
        ``exit_code(pid)``: the exit code once the server has reaped it, ``None`` while
        it runs (a negative code is the signal that ended it); raises ``OSError`` when
        the server cannot answer (the code is then taken as -1).
    stdin, stdout : file objects, optional
        The grader's ends of the process's standard input and output.
    """

    stderr = None

    def __init__(self, pid, exit_code, stdin=None, stdout=None):
        if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
            raise ValueError(f"pid must be a process id, got {pid!r}")
        if not callable(exit_code):
            raise ValueError("exit_code must be callable")
        self.pid = pid
        self._exit_code = exit_code
        self.stdin, self.stdout = stdin, stdout
        self.returncode = None
        try:
            self._fd = os.pidfd_open(pid)
        except (OSError, AttributeError):
            self._fd = None

    def _exited(self, timeout=0.0):
        if self._fd is None:
            return True
        ready, _, _ = select.select([self._fd], [], [], timeout)
        return bool(ready)

    def poll(self):
        if self.returncode is not None:
            return self.returncode
        if not self._exited():
            return None
        try:
            code = self._exit_code(self.pid)
        except (OSError, ValueError):
            code = -1
        if code is None:  # exited but not reaped yet: ask again shortly
            return None
        self.returncode = int(code)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        return self.returncode

    def wait(self, timeout=None):
        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = 0.05 if end is None else min(0.05, end - time.monotonic())
            if left <= 0:
                raise subprocess.TimeoutExpired([str(self.pid)], timeout)
            self._exited(left)
        return self.returncode

    def send_signal(self, signum):
        if self.returncode is not None:
            return
        if self._fd is not None:
            signal.pidfd_send_signal(self._fd, signum)
        else:
            os.kill(self.pid, signum)

    def terminate(self):
        self.send_signal(signal.SIGTERM)

    def kill(self):
        self.send_signal(signal.SIGKILL)
