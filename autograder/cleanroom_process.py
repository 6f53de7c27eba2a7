"""One clean-room process holding one answer, and stand-ins that call its functions.

:class:`Sandbox` writes the answer's source, alone with a copy of the child program
(:mod:`autograder.cleanroom_child`) and of the codec (:mod:`autograder.codec`), into an
empty temporary folder (the *room*) and starts ``python -I -S cleanroom_child.py SITE``
there with a minimal environment:

* ``-I -S``: no user site, no ``.pth`` files, so the project's editable install of
  ``repeval_ref`` and ``autograder`` is not on the path; the venv's site-packages is
  appended by the child for NumPy, SciPy, scikit-learn and torch, after its import hook
  that refuses both packages;
* CPU-time, address-space and file-size limits (``resource.setrlimit`` before it
  starts, :data:`DEFAULT_LIMITS`) and a wall-clock limit per call; when the grader runs
  as root, also a user id of its own that owns only the room (with a process-count
  limit) and an empty ``/tmp`` and ``/dev/shm`` of its own (:mod:`autograder.confine`);
  every process left under that id is killed afterwards. The private ``/tmp`` covers the
  room itself when it lies there, so the program is then named through the child's own
  working directory (``/proc/self/cwd/cleanroom_child.py``), which stays the room.

:func:`remote_function` is the stand-in a check calls instead of the student's function:
it sends the arguments (:func:`autograder.codec.encode`), copies the arguments after the
call back into the grader's objects (:func:`autograder.codec.write_back`) and returns the
result, or raises the child's exception as the same builtin class.
"""
from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from . import cleanroom_child, codec, confine

__all__ = ["DEFAULT_LIMITS", "Sandbox", "remote_function"]

#: limits of one clean-room process (one exercise of one student)
DEFAULT_LIMITS = {
    "cpu_s": 120,              # CPU seconds of the whole child (RLIMIT_CPU)
    "memory_bytes": 4 << 30,   # address space (RLIMIT_AS)
    "processes": 16,           # processes and threads of the sandbox user (RLIMIT_NPROC)
    "file_bytes": 64 << 20,    # largest file it may write (RLIMIT_FSIZE)
    "call_s": 30.0,            # wall clock of one call of the student's function
    "start_s": 60.0,           # wall clock to start and run the answer's top level
}

#: the files of the child's program copied into every room (read-only)
_PROGRAM = (Path(cleanroom_child.__file__), Path(codec.__file__))
#: the child's program inside the room, named through the child's working directory
_PROGRAM_VIA_CWD = "/proc/self/cwd/" + _PROGRAM[0].name


class Sandbox:
    """One clean-room process holding one answer; call it through :meth:`request`.

    Parameters
    ----------
    source : str
        The answer's Python source (``answer.py`` in the room).
    limits : dict, optional
        Over :data:`DEFAULT_LIMITS`.

    Attributes
    ----------
    started : dict
        The child's first message: ``{"ok": True}``, ``{"error": ...}`` (the answer's top
        level raised) or ``{"dead": reason}``.
    forbidden : list of str
        Forbidden imports the answer attempted so far.
    dead : str or None
        Why the child is gone (it is then closed).
    unsupported : str or None
        Set by :func:`remote_function` when an argument could not travel.
    """

    def __init__(self, source, limits=None):
        if not isinstance(source, str):
            raise ValueError(f"source must be Python source text, got {type(source).__name__}")
        self.limits = {**DEFAULT_LIMITS, **(limits or {})}
        self.dir = Path(tempfile.mkdtemp(prefix="autograder-cleanroom-"))
        (self.dir / "answer.py").write_text(source)
        for path in _PROGRAM:
            shutil.copyfile(path, self.dir / path.name)
            os.chmod(self.dir / path.name, 0o444)
        python, site, drop = confine.sandbox_python()
        self.uid = confine.new_uid() if drop else None
        if self.uid is not None:
            for p in (self.dir, self.dir / "answer.py"):
                os.chown(p, self.uid, self.uid)
        env = {"PATH": "/usr/bin:/bin", "HOME": str(self.dir), "TMPDIR": str(self.dir),
               "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
               "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
        lim = self.limits
        libc = confine.load_libc() if self.uid is not None else None

        def mount():  # in the child, as root, before it drops to the sandbox user
            confine.private_tmp(libc, lim["file_bytes"], keep=(site,))

        program = _PROGRAM_VIA_CWD if libc is not None else str(self.dir / _PROGRAM[0].name)
        start = confine.preexec_confined(
            uid=self.uid, mount=mount if libc is not None else None,
            cpu_s=lim["cpu_s"], cpu_grace_s=1, memory_bytes=lim["memory_bytes"],
            file_bytes=lim["file_bytes"], processes=lim["processes"])
        self.proc = subprocess.Popen(
            [python, "-I", "-S", program, site], cwd=str(self.dir), env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, preexec_fn=start, close_fds=True)
        self.forbidden = []
        self.dead = None
        self.unsupported = None
        self.started = self._receive(self.limits["start_s"])

    def _receive(self, seconds):
        """The child's next message, or a dict ``{"dead": reason}``."""
        if self.dead:
            return {"dead": self.dead}
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        ready = sel.select(timeout=seconds)
        sel.close()
        line = self.proc.stdout.readline() if ready else None
        if not line:
            if ready:
                self.proc.wait(timeout=5)
                code = self.proc.returncode
                why = (f"your code ended the grading process (exit code {code}"
                       + (", killed: CPU-time limit" if code == -signal.SIGXCPU else
                          ", killed by a signal" if code and code < 0 else "") + ")")
            else:
                why = (f"your code did not return within {seconds:g} s (an infinite loop, "
                       "or far too slow for these small inputs)")
            self.dead = why
            self.close()
            return {"dead": why}
        try:
            msg = json.loads(line)
        except ValueError:
            self.dead = "the grading process sent something that is not a result"
            self.close()
            return {"dead": self.dead}
        for name in msg.get("forbidden", []):
            if name not in self.forbidden:
                self.forbidden.append(name)
        return msg

    def request(self, req, seconds):
        """Send the request ``req`` (a JSON-ready dict) and return the child's reply, or
        ``{"dead": reason}`` when it is gone or does not answer within ``seconds``."""
        if self.dead:
            return {"dead": self.dead}
        try:
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass
        return self._receive(seconds)

    def close(self):
        """Kill the child's process group (and, as root, every process of its user id)
        and remove the room."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        if self.uid is not None:
            confine.kill_uid(self.uid)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _raise_like(error):
    """Re-raise the child's exception as the same builtin class (else a stand-in)."""
    import builtins

    name, message = error["type"], error["message"]
    if error.get("where"):
        message = message + "\n" + error["where"].rstrip()
    cls = getattr(builtins, name, None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        cls = type(name, (Exception,), {})
    try:
        exc = cls(message)
    except Exception:
        exc = type(name, (Exception,), {})(message)
    raise exc


def remote_function(box, name):
    """A stand-in for the student's function ``name`` that runs it in ``box``.

    Parameters
    ----------
    box : Sandbox
        The process holding the answer.
    name : str
        The function's name in the answer.

    Returns
    -------
    callable
        Raises :class:`autograder.codec.Unsupported` (and sets ``box.unsupported``) for
        an argument that cannot travel, :class:`autograder.checks.CheckTimeout` when the
        call runs past ``box.limits["call_s"]``, ``RuntimeError`` when the child died.
    """
    from .checks import CheckTimeout

    if not isinstance(box, Sandbox):
        raise ValueError(f"box must be a Sandbox, got {type(box).__name__}")
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a function's name, got {name!r}")

    def student_function(*args, **kwargs):
        try:
            req = {"op": "call", "name": name, "args": [codec.encode(a) for a in args],
                   "kwargs": {k: codec.encode(v) for k, v in kwargs.items()}}
        except codec.Unsupported as exc:
            box.unsupported = str(exc)
            raise
        msg = box.request(req, box.limits["call_s"])
        if "dead" in msg:
            if "did not return" in msg["dead"]:
                raise CheckTimeout()
            raise RuntimeError(msg["dead"])
        if "error" in msg:
            _raise_like(msg["error"])
        for s, g in zip(args, msg.get("args", [])):
            codec.write_back(s, codec.decode(g))
        for k, g in msg.get("kwargs", {}).items():
            codec.write_back(kwargs[k], codec.decode(g))
        return codec.decode(msg["result"])

    student_function.__name__ = name
    return student_function
