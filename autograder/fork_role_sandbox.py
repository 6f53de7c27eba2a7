"""The fork server's ``sandbox`` role: students' nbgrader runs, each with a warm kernel
server beside it (standard library only; loaded by path by :mod:`autograder.fork_server`).

Each student's notebooks are graded by ``nbgrader autograde`` in a sandbox of its own
(:mod:`autograder.sandbox`), and its kernels are forked from a server of the ``kernel``
role that has imported IPython, ipykernel, NumPy, SciPy, scikit-learn and torch. The
server of this role does those imports once per grading process, then nbgrader's own
(:data:`NBGRADER_PRELOAD`, unless ``options["nbgrader_preload"]`` is false). For each
student it forks a child that

1. confines itself with the request's specification (:func:`autograder.confine.apply`
   with ``forked=True``, as a started run's ``preexec_fn`` does), with the grader's pipe
   as its standard output and error;
2. forks the run's kernel server (a server of the ``kernel`` role on a socket pair of
   its own, a child of the run in the same sandbox, which already holds the imports),
   and names its socket and process id in the environment variable
   ``options["kernel_socket_env"]`` as ``"FD,PID"`` (:mod:`autograder.kernel_fork`
   adopts it instead of starting one);
3. runs ``python -m nbgrader ...`` in this process as that program would run it
   (:func:`run_nbgrader`: exactly the request's environment, ``sys.argv``, standard
   streams on the run's pipe, ``$TMPDIR`` read again, its own seeds, nbgrader's exit
   handlers run at the end); any other command line is executed.

The kernel server forked beside a run drops what nbgrader's imports added (the modules,
warnings filters, loggers, import hooks and path entries of :func:`snapshot`), so the
kernels forked later hold what a kernel server started inside the sandbox would hold.

Spawn request: ``{"op": "spawn", "argv": [...], "env": {...}, "confinement": spec}`` with
one descriptor attached (the write end of the run's output pipe).
"""

import os
import socket
import sys

#: nbgrader's modules that a run of ``nbgrader autograde`` imports (each optional)
NBGRADER_PRELOAD = (
    "nbgrader.apps.nbgraderapp",
    "nbgrader.apps.autogradeapp",
    "nbgrader.converters.autograde",
    "nbgrader.preprocessors",
    "nbgrader.api",
    "nbclient",
    "nbconvert.exporters",
)


def snapshot():
    """What importing nbgrader changes in the process beyond its modules: copies of the
    warnings filters, the import hooks, ``sys.path`` and the loggers' names."""
    import logging
    import warnings

    return {
        "modules": set(sys.modules),
        "filters": list(warnings.filters),
        "meta_path": list(sys.meta_path),
        "path_hooks": list(sys.path_hooks),
        "path": list(sys.path),
        "loggers": set(logging.Logger.manager.loggerDict),
    }


def restore(before):
    """Undo what was imported after :func:`snapshot` gave ``before`` (in a forked kernel
    server: the kernels it forks see the state of a kernel server started inside the
    sandbox, where nbgrader's modules are not imported)."""
    import logging
    import warnings

    for name in set(sys.modules) - before["modules"]:
        del sys.modules[name]
    warnings.filters[:] = before["filters"]
    warnings._filters_mutated()
    sys.meta_path[:] = before["meta_path"]
    sys.path_hooks[:] = before["path_hooks"]
    sys.path[:] = before["path"]
    sys.path_importer_cache.clear()
    loggers = logging.Logger.manager.loggerDict
    for name in set(loggers) - before["loggers"]:
        del loggers[name]


def run_nbgrader(args, env, fresh_process):
    """In the forked, confined child: run ``python -m nbgrader ARGS`` in this process with
    the environment ``env`` (applied by ``fresh_process``), as the program started from
    nothing would; never returns (the exit code is nbgrader's)."""
    import atexit
    import io
    import logging
    import runpy

    fresh_process(env)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(
        io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="strict"
    )
    sys.stderr = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False),
        encoding="utf-8",
        errors="backslashreplace",
        line_buffering=True,
    )
    atexit._clear()  # the server's imports' handlers; nbgrader's own run below
    atexit.register(logging.shutdown)
    if sys.path and sys.path[0] == "":
        sys.path[0] = os.getcwd()  # what ``python -m`` puts first
    sys.argv = ["-m", *args]
    code = 0
    try:
        runpy.run_module("nbgrader", run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code & 0xFF)


class Role:
    """The ``sandbox`` role (see the module's description).

    Parameters
    ----------
    tools : autograder.fork_server.Tools
        The shared server code, the confinement, and the kernel role.
    options : dict
        ``{"kernel_socket_env": str, "nbgrader_preload": bool, "kernel": {...}}``: the
        variable that names the kernel server to the run, whether nbgrader is imported
        here, and the options of the kernel role.
    """

    def __init__(self, tools, options):
        name = options.get("kernel_socket_env")
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"options must name kernel_socket_env, got {options!r:.200}")
        self.socket_env = name
        self.nbgrader = bool(options.get("nbgrader_preload", True))
        self.tools, self.common, self.confine = tools, tools.common, tools.confine
        self.kernels = tools.role("kernel", dict(options.get("kernel") or {}))
        self.children = self.common.Children()
        self.before = None
        self.loaded = []

    def preload(self):
        """Import the kernel role's libraries, then nbgrader's (when asked); the names of
        the kernel role's."""
        import importlib

        self.loaded = self.kernels.preload()
        if not self.nbgrader:
            return self.loaded
        before = snapshot()
        try:
            for name in NBGRADER_PRELOAD:
                importlib.import_module(name)
        except Exception:  # every run is then executed
            restore(before)
            return self.loaded
        self.before = before
        return self.loaded

    def spawn_error(self, req, fds):
        """Why ``req`` with the descriptors ``fds`` cannot be served (None if it can)."""
        if len(fds) != 1:
            return "a spawn request needs exactly one descriptor: the output pipe's end"
        argv, env = req.get("argv"), req.get("env")
        if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
            return "argv must be a non-empty list of strings"
        if not isinstance(env, dict):
            return "env must be a dict"
        return self.common.confinement_error(self.confine, req)

    def spawn(self, req, fds, control):
        return self.common.fork_and_become(
            self.children, lambda: self._become_run(req, fds[0], control)
        )

    def status(self, pid):
        return {"code": self.children.status(pid)}

    def _fork_kernel_server(self):
        """Fork the run's kernel server; ``(socket, pid)``: the run's end of its socket
        (inheritable) and its process id."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                ours.close()
                if self.before is not None:
                    restore(self.before)
                kernels = self.tools.role("kernel", self.kernels.options)
                kernels.loaded = self.loaded
                self.common.serve(theirs, kernels)
            except BaseException:  # the run then starts its kernels the usual way
                code = 1
            finally:
                os._exit(code)
        theirs.close()
        ours.set_inheritable(True)
        return ours, pid

    def _become_run(self, req, out, control):
        """In the forked child: confine, fork the kernel server, run nbgrader (in this
        process when its modules are loaded, else executed); never returns."""
        code = 127
        try:
            control.close()
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(out, 1)
            os.dup2(out, 2)
            os.closerange(3, os.sysconf("SC_OPEN_MAX"))
            self.confine.apply(req["confinement"], forked=True)
            env = {str(k): str(v) for k, v in req["env"].items()}
            sock, pid = self._fork_kernel_server()
            env[self.socket_env] = f"{sock.detach()},{pid}"
            argv = [str(a) for a in req["argv"]]
            if self.before is not None and _is_nbgrader(argv):
                run_nbgrader(argv[3:], env, self.common.fresh_process)
            os.execve(argv[0], argv, env)
        except BaseException as exc:  # the grader reads the output and the exit code
            try:
                os.write(2, f"[autograder] the sandboxed run could not start: {exc!r}\n".encode())
            except OSError:
                pass
        finally:
            os._exit(code)


def _is_nbgrader(argv):
    """Whether ``argv`` is ``python -m nbgrader ...`` with this server's interpreter."""
    return (
        len(argv) >= 3
        and argv[1:3] == ["-m", "nbgrader"]
        and os.path.realpath(argv[0]) == os.path.realpath(sys.executable)
    )
