"""The process that forks students' kernels (standard library only; run by path).

Every notebook nbgrader grades starts a fresh IPython kernel, and most of that start is
spent importing: IPython and ipykernel, then NumPy, SciPy, scikit-learn or torch in the
answer's first cell (about 0.7 s and up to 2.5 s more per notebook on the course
machine). This program imports those libraries once, then forks one *watcher* per
kernel, which takes the kernel's namespaces (:func:`autograder.confine.kernel_namespaces`)
and forks the kernel: process 1 of its own PID namespace, which becomes the kernel exactly
as ``python -m ipykernel_launcher -f FILE`` would (:func:`runpy.run_module` with
``alter_sys``), in a session of its own, with the environment, working directory and
arguments the kernel manager asked for. The watcher waits for it and, past the request's
``limit_s``, kills it (and so everything in its namespace); why student code cannot
escape that is in :mod:`autograder.kernel_fork`. ``$AUTOGRADER_KERNEL_PRELOAD=0`` makes
the server import nothing (the kernels then import what they need, and are still
contained and limited).

What the child inherits is only the libraries' import state, never the grader's: this
program imports nothing of ``autograder``, ``repeval_ref`` or the course, and it never
runs student code itself (a fork's memory is its own, so what an answer patches dies
with its kernel). A fork is refused (the caller then starts the kernel the usual way)
whenever this process holds more than one thread, since forking a threaded process is
unsafe.

Protocol: one JSON object per line on standard input, one JSON reply per line on the
file descriptor named by ``argv[1]``; the first reply, ``{"ready": true, ...}``, comes
after the imports. Requests: ``{"op": "spawn", "argv": [...], "env": {...}, "cwd": ...,
"limit_s": float or null, "hide": [[folder, {relative path: text}], ...]}`` (``hide``: the
folders the kernel must not read and what it sees there instead, optional) -> ``{"pid": int,
"contained": bool}`` (the kernel's process
id as this server sees it; whether it got its namespaces) or ``{"error": str}``;
``{"op": "status", "pid": int}`` -> ``{"code": int or null, "timed_out": bool,
"limit_s": ...}`` (null while it runs; a negative code is the signal that ended it, as in
:attr:`subprocess.Popen.returncode`; ``timed_out`` when its watcher stopped it at
``limit_s``). End of input ends the server.
"""

import importlib
import json
import os
import sys

#: the libraries imported before the first fork (each optional)
PRELOAD = (
    "numpy",
    "scipy",
    "scipy.linalg",
    "scipy.special",
    "scipy.stats",
    "scipy.spatial",
    "sklearn",
    "sklearn.linear_model",
    "sklearn.neighbors",
    "sklearn.model_selection",
    "sklearn.metrics",
    "torch",
    "torch.nn",
    "torch.nn.functional",
    "IPython",
    "ipykernel.kernelapp",
    "ipykernel.ipkernel",
    "ipykernel.zmqshell",
    "ipykernel_launcher",
    # imported by every kernel as it starts (IPKernelApp resolves its debugger then, which
    # imports debugpy and pydevd: about 0.13 s per notebook, 2 s per student, measured)
    "ipykernel.debugger",
    "IPython.core.oinspect",
)

_HERE = os.path.dirname(os.path.abspath(__file__))
# autograder/fork_children.py, confine.py and settings.py, compiled from the files beside
# this one (no package import)
_fork_children = type(sys)("_fork_children")
with open(os.path.join(_HERE, "fork_children.py")) as _fh:
    exec(compile(_fh.read(), _fh.name, "exec"), _fork_children.__dict__)
_confine = _fork_children.load_by_path("_kernel_confine", os.path.join(_HERE, "confine.py"))
_settings = _fork_children.load_by_path("_kernel_settings", os.path.join(_HERE, "settings.py"))
_threads = _fork_children.threads
_children = _fork_children.Children()

#: environment variable: "0" imports nothing before the forks (each kernel then imports
#: what it needs itself, as one started from nothing; the containment stays)
PRELOAD_ENV = _settings.KERNEL_PRELOAD_ENV
#: size of each fresh temporary folder of a kernel (tmpfs, in bytes)
KERNEL_TMP_BYTES = 256 << 20
#: folders of the kernel's environment that it gets empty (its IPython and Jupyter state)
PRIVATE_ENV = ("IPYTHONDIR", "MPLCONFIGDIR", "TMPDIR", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR")
#: how long the server waits for a kernel's watcher to report the kernel's process id
REPORT_WAIT_S = 20.0
#: kernel pid -> its watcher: {"watcher": pid, "fd": report pipe, "buf": bytes, "end": dict}
_kernels = {}


def _private_folders(env):
    """The folders of ``env`` that a kernel gets empty: its home when that lies in a
    temporary folder (a sandbox's home, never a real account's), and its IPython,
    matplotlib, Jupyter and temporary folders."""
    out = [env[k] for k in PRIVATE_ENV if env.get(k)]
    home = env.get("HOME", "")
    real = os.path.realpath(home) if home else ""
    if real and any(real.startswith(t + "/") for t in _confine.TMP_DIRS):
        out.append(home)
    return out


def _kept_folders(req, cwd):
    """What a kernel must still reach under a covered folder: its working directory
    (writable), its connection file, the interpreter and this project (read-only; the
    project itself stays covered when the request hides it, the interpreter inside it
    does not)."""
    argv = list(req.get("argv", []))
    keep = [(cwd, False)]
    if "-f" in argv[:-1]:
        keep.append((os.path.abspath(argv[argv.index("-f") + 1]), True))
    for p in (sys.prefix, sys.base_prefix, os.path.dirname(_HERE), *sys.path):
        if p and os.path.isdir(p):
            keep.append((os.path.realpath(p), True))
    return keep


def _become_kernel(req, env, parent, libc):
    """In the kernel (the watcher's child; process 1 of its PID namespace when ``libc``
    is given): turn into ``python -m ipykernel_launcher ARGS``; never returns."""
    code = 1
    try:
        os.setsid()
        if libc is not None:
            _confine.own_proc(libc)
            libc.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL: it ends with its watcher
        env["JPY_PARENT_PID"] = str(parent)
        _fork_children.fresh_process(env)
        cwd = req.get("cwd")
        if cwd:
            os.chdir(cwd)
        if libc is not None:
            _confine.drop_capabilities(libc)
        import runpy

        # as `python -m`: the working directory first on the path, the module as __main__
        sys.path[0] = os.getcwd()
        # the parent handle is read from the environment when ipykernel is imported (here,
        # before the fork): name it on the command line instead
        sys.argv = [sys.executable] + list(req["argv"]) + [f"--IPKernelApp.parent_handle={parent}"]
        runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # pragma: no cover - reported on the kernel's stderr
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _watch(kid, limit_s, contained):
    """Wait for the kernel ``kid`` (this process's child); past ``limit_s`` seconds kill
    it with everything it started. Returns ``(exit code, timed_out)``."""
    import select
    import signal
    import time

    end = None if limit_s is None else time.monotonic() + float(limit_s)
    try:
        fd = os.pidfd_open(kid)
    except (OSError, AttributeError):  # pragma: no cover - Linux < 5.3
        fd = None
    timed_out = False
    while True:
        got, status = os.waitpid(kid, os.WNOHANG)
        if got:
            return os.waitstatus_to_exitcode(status), timed_out
        left = None if end is None else end - time.monotonic()
        if left is not None and left <= 0 and not timed_out:
            timed_out = True
            if not contained:  # its process group: all that can be reached without one
                try:
                    os.killpg(kid, signal.SIGKILL)
                except OSError:
                    pass
            os.kill(kid, signal.SIGKILL)  # process 1: the Linux kernel kills the rest
            left = None
        wait = 0.5 if left is None else min(0.5, max(left, 0.0))
        if fd is not None:
            select.select([fd], [], [], wait)
        else:  # pragma: no cover
            time.sleep(min(wait, 0.05))


def _be_watcher(req, reply_fd, report_fd):
    """In the server's child: take the kernel's namespaces, fork the kernel, tell the
    server its process id, watch it against its time limit, report how it ended; never
    returns."""
    import json

    code = 1
    try:
        os.close(reply_fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.setsid()
        parent = os.getppid()
        libc = _confine.load_libc()
        if libc is not None:
            libc.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL: it ends with the server
        env = {str(k): str(v) for k, v in req["env"].items()}
        cwd = str(req.get("cwd") or os.getcwd())
        hide = [
            (str(f), {str(k): str(v) for k, v in dict(files).items()})
            for f, files in req.get("hide") or []
        ]
        contained = libc is not None and _confine.kernel_namespaces(
            libc, KERNEL_TMP_BYTES, _kept_folders(req, cwd), _private_folders(env), hide
        )
        for k in PRIVATE_ENV:
            if env.get(k):
                os.makedirs(env[k], mode=0o700, exist_ok=True)
        kid = os.fork()
        if kid == 0:
            os.close(report_fd)
            _become_kernel(req, env, parent, libc if contained else None)
        os.write(report_fd, (json.dumps({"pid": kid, "contained": contained}) + "\n").encode())
        limit = req.get("limit_s")
        got, timed_out = _watch(kid, None if limit is None else float(limit), contained)
        os.write(
            report_fd,
            (json.dumps({"code": got, "timed_out": timed_out, "limit_s": limit}) + "\n").encode(),
        )
        code = 0
    except BaseException:  # pragma: no cover - the server reports an error
        import traceback

        traceback.print_exc()
    finally:
        os._exit(code)


def _report_lines(entry, timeout):
    """The watcher's report lines read so far (waiting at most ``timeout`` seconds for
    more); the pipe's end is marked by ``entry["eof"]``."""
    import json
    import select

    ready, _, _ = select.select([entry["fd"]], [], [], timeout)
    if ready:
        chunk = os.read(entry["fd"], 1 << 12)
        if chunk:
            entry["buf"] += chunk
        else:
            entry["eof"] = True
    lines = entry["buf"].split(b"\n")
    return [json.loads(x) for x in lines[:-1] if x.strip()]


def _spawn(req, reply_fd):
    """Fork the watcher of one kernel; ``{"pid": kernel, "contained": bool}`` or
    ``{"error": str}``."""
    import signal
    import time

    r, w = os.pipe()
    watcher = os.fork()
    if watcher == 0:
        os.close(r)
        _be_watcher(req, reply_fd, w)
    os.close(w)
    entry = {"watcher": watcher, "fd": r, "buf": b"", "eof": False, "end": None}
    end = time.monotonic() + REPORT_WAIT_S
    lines = []
    while not lines and not entry["eof"] and time.monotonic() < end:
        lines = _report_lines(entry, max(0.0, end - time.monotonic()))
    if not lines:
        try:
            os.kill(watcher, signal.SIGKILL)
        except OSError:
            pass
        os.close(r)
        return {"error": "the kernel could not be started"}
    first = lines[0]
    _kernels[int(first["pid"])] = entry
    return {"pid": int(first["pid"]), "contained": bool(first.get("contained"))}


def _status(pid):
    """``{"code": ..., "timed_out": bool, "limit_s": ...}`` of a kernel (code None while it
    runs), or of another child of this server."""
    entry = _kernels.get(pid)
    if entry is None:
        return {"code": _children.status(pid), "timed_out": False}
    if entry["end"] is None:
        if _children.status(entry["watcher"]) is None:
            return {"code": None, "timed_out": False}
        while not entry["eof"]:
            _report_lines(entry, 1.0)
        lines = _report_lines(entry, 0.0) if entry["buf"] else []
        entry["end"] = lines[1] if len(lines) > 1 else {"code": -1, "timed_out": False}
        os.close(entry["fd"])
    return {
        "code": entry["end"].get("code"),
        "timed_out": bool(entry["end"].get("timed_out")),
        "limit_s": entry["end"].get("limit_s"),
    }


def preload():
    """Import :data:`PRELOAD` (each optional; none when ``$AUTOGRADER_KERNEL_PRELOAD`` is
    ``0``); the names imported."""
    loaded = []
    if os.environ.get(PRELOAD_ENV, "1") == "0":
        return loaded
    for name in PRELOAD:
        try:
            importlib.import_module(name)
            loaded.append(name)
        except Exception:  # an optional library: the kernel imports it itself
            pass
    return loaded


def serve(reply_fd, loaded):
    """Announce ``{"ready": true}`` on ``reply_fd``, then answer the requests read from
    standard input until it ends (the protocol above)."""
    reply = os.fdopen(reply_fd, "w", buffering=1)
    reply.write(json.dumps({"ready": True, "loaded": loaded, "threads": _threads()}) + "\n")
    for line in sys.stdin:
        _children.reap()
        try:
            req = json.loads(line)
            op = req["op"]
        except (ValueError, KeyError, TypeError):
            reply.write(json.dumps({"error": "malformed request"}) + "\n")
            continue
        if op == "status":
            try:
                reply.write(json.dumps(_status(int(req["pid"]))) + "\n")
            except (KeyError, TypeError, ValueError):
                reply.write(json.dumps({"error": "a status request needs a process id"}) + "\n")
        elif op == "spawn":
            if _threads() != 1:
                reply.write(json.dumps({"error": "the server holds threads"}) + "\n")
                continue
            reply.write(json.dumps(_spawn(req, reply_fd)) + "\n")
        else:
            reply.write(json.dumps({"error": f"unknown op {op!r}"}) + "\n")


def main(argv):
    serve(int(argv[1]), preload())


if __name__ == "__main__":
    try:
        main(sys.argv)
    except (BrokenPipeError, KeyboardInterrupt):
        # the grading process is gone (or stopped it): end quietly, as its output is
        # parsed for the reason a notebook could not be graded
        os._exit(0)
