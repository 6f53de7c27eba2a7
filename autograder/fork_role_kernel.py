"""The fork server's ``kernel`` role: students' notebook kernels (standard library only;
loaded by path by :mod:`autograder.fork_server`).

Every notebook nbgrader grades starts a fresh IPython kernel, and most of that start is
spent importing IPython and ipykernel, then NumPy, SciPy, scikit-learn or torch. The
server of this role imports :data:`PRELOAD` once (nothing when ``options["preload"]`` is
false), then forks one *watcher* per kernel, which takes the kernel's namespaces
(:func:`autograder.confine.kernel_namespaces`) and forks the kernel: process 1 of its own
PID namespace, which becomes the kernel exactly as ``python -m ipykernel_launcher -f
FILE`` would (:func:`runpy.run_module` with ``alter_sys``), in a session of its own, with
the environment, working directory and arguments the kernel manager asked for. The
watcher waits for it and, past the request's ``limit_s``, kills it (and so everything in
its namespace); why student code cannot escape that is in :mod:`autograder.kernel_fork`.

What the child inherits is only the libraries' import state, never the grader's, and the
server never runs student code itself (a fork's memory is its own, so what an answer
patches dies with its kernel).

Spawn request: ``{"op": "spawn", "argv": [...], "env": {...}, "cwd": str, "limit_s":
float or null, "hide": [[folder, {relative path: text}], ...]}`` (``hide``: the folders the
kernel must not read and what it sees there instead) -> ``{"pid": int, "contained":
bool}`` (the kernel's process id as this server sees it; whether it got its namespaces).
Status -> ``{"code": int or null, "timed_out": bool, "limit_s": ...}`` (``timed_out``
when its watcher stopped it at ``limit_s``).
"""

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
    # imports debugpy and pydevd)
    "ipykernel.debugger",
    "IPython.core.oinspect",
)

_HERE = os.path.dirname(os.path.abspath(__file__))
#: folders of the kernel's environment that it gets empty (its IPython and Jupyter state)
PRIVATE_ENV = ("IPYTHONDIR", "MPLCONFIGDIR", "TMPDIR", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR")
#: how long the server waits for a kernel's watcher to report the kernel's process id
REPORT_WAIT_S = 20.0


def _private_folders(env, tmp_dirs):
    """The folders of ``env`` that a kernel gets empty: its home when that lies in a
    temporary folder (a sandbox's home, never a real account's), and its IPython,
    matplotlib, Jupyter and temporary folders."""
    out = [env[k] for k in PRIVATE_ENV if env.get(k)]
    home = env.get("HOME", "")
    real = os.path.realpath(home) if home else ""
    if real and any(real.startswith(t + "/") for t in tmp_dirs):
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


def _become_kernel(req, env, parent, libc, confine, fresh_process):
    """In the kernel (the watcher's child; process 1 of its PID namespace when ``libc``
    is given): turn into ``python -m ipykernel_launcher ARGS``; never returns."""
    code = 1
    try:
        os.setsid()
        if libc is not None:
            confine.own_proc(libc)
            libc.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL: it ends with its watcher
        env["JPY_PARENT_PID"] = str(parent)
        fresh_process(env)
        cwd = req.get("cwd")
        if cwd:
            os.chdir(cwd)
        if libc is not None:
            confine.drop_capabilities(libc)
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


def _be_watcher(req, control, report_fd, confine, fresh_process, tmp_bytes):
    """In the server's child: take the kernel's namespaces, fork the kernel, tell the
    server its process id, watch it against its time limit, report how it ended; never
    returns."""
    import json

    code = 1
    try:
        control.close()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.setsid()
        parent = os.getppid()
        libc = confine.load_libc()
        if libc is not None:
            libc.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL: it ends with the server
        env = {str(k): str(v) for k, v in req["env"].items()}
        cwd = str(req.get("cwd") or os.getcwd())
        hide = [
            (str(f), {str(k): str(v) for k, v in dict(files).items()})
            for f, files in req.get("hide") or []
        ]
        contained = libc is not None and confine.kernel_namespaces(
            libc,
            tmp_bytes,
            _kept_folders(req, cwd),
            _private_folders(env, confine.TMP_DIRS),
            hide,
        )
        for k in PRIVATE_ENV:
            if env.get(k):
                os.makedirs(env[k], mode=0o700, exist_ok=True)
        kid = os.fork()
        if kid == 0:
            os.close(report_fd)
            _become_kernel(req, env, parent, libc if contained else None, confine, fresh_process)
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


class Role:
    """The ``kernel`` role (see the module's description).

    Parameters
    ----------
    tools : autograder.fork_server.Tools
        The shared server code and the confinement.
    options : dict
        ``{"preload": bool, "tmp_bytes": int}``: whether :data:`PRELOAD` is imported
        before the forks, and the size of each fresh temporary folder of a kernel
        (:data:`autograder.settings.KERNEL_LIMITS`).
    """

    def __init__(self, tools, options):
        tmp_bytes = options.get("tmp_bytes")
        if isinstance(tmp_bytes, bool) or not isinstance(tmp_bytes, int) or tmp_bytes <= 0:
            raise ValueError(f"options must give tmp_bytes, got {options!r:.200}")
        self.options = {"preload": bool(options.get("preload", True)), "tmp_bytes": tmp_bytes}
        self.common, self.confine = tools.common, tools.confine
        self.children = self.common.Children()
        #: kernel pid -> its watcher: {"watcher": pid, "fd": report pipe, "buf", "eof", "end"}
        self.kernels = {}
        #: the names imported, once :meth:`preload` ran (or its server's, when forked)
        self.loaded = None

    def preload(self):
        """Import :data:`PRELOAD` (each optional; none when ``preload`` is off); the names
        imported."""
        if self.loaded is None:
            self.loaded = self.common.import_optional(PRELOAD if self.options["preload"] else ())
        return self.loaded

    def spawn_error(self, req, fds):
        """Why ``req`` cannot be served (None if it can)."""
        argv, env = req.get("argv"), req.get("env")
        if fds:
            return "a kernel's spawn request takes no descriptor"
        if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
            return "argv must be a list of strings"
        if not isinstance(env, dict):
            return "env must be a dict"
        return None

    def spawn(self, req, fds, control):
        """Fork the watcher of one kernel; ``{"pid": kernel, "contained": bool}`` or
        ``{"error": str}``."""
        import signal
        import time

        self.children.reap()
        r, w = os.pipe()
        watcher = os.fork()
        if watcher == 0:
            os.close(r)
            _be_watcher(
                req, control, w, self.confine, self.common.fresh_process, self.options["tmp_bytes"]
            )
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
        self.kernels[int(first["pid"])] = entry
        return {"pid": int(first["pid"]), "contained": bool(first.get("contained"))}

    def status(self, pid):
        """``{"code": ..., "timed_out": bool, "limit_s": ...}`` of a kernel (code None while it
        runs), or of another child of this server."""
        entry = self.kernels.get(pid)
        if entry is None:
            return {"code": self.children.status(pid), "timed_out": False, "limit_s": None}
        if entry["end"] is None:
            if self.children.status(entry["watcher"]) is None:
                return {"code": None, "timed_out": False, "limit_s": None}
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
