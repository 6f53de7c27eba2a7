"""The process that starts students' nbgrader runs with a warm kernel server beside them
(standard library only; run by path).

Each student's notebooks are graded by ``nbgrader autograde`` in a sandbox of its own
(:mod:`autograder.sandbox`), and its kernels are forked from a kernel fork server
(:mod:`autograder.kernel_fork_server`) that imports IPython, ipykernel, NumPy, SciPy,
scikit-learn and torch first: about 5 s of CPU, paid once per student when that server
is started inside the sandbox. This program does those imports once per grading
process. For each student it forks a child that

1. confines itself exactly as :meth:`autograder.sandbox.Confinement.preexec` confines a
   started nbgrader run (working directory first, then a session of its own, the mount
   and network namespaces of :func:`autograder.confine.sandbox_mounts`, the sandbox
   user id, the limits), with the grader's pipe as its standard output and error;
2. forks the student's kernel fork server, which already holds the imports and so serves
   at once (it is a child of the run, in the same sandbox, as before);
3. runs nbgrader's command line, telling it the kernel server's pipes and process id
   in ``$AUTOGRADER_KERNEL_FORK_FDS`` (:mod:`autograder.kernel_fork` adopts it instead of
   starting one).

nbgrader's own modules (:data:`NBGRADER_PRELOAD`: about 2 s of CPU for each run started
from nothing) are imported here too, after the kernel server's, and a run of
``python -m nbgrader ...`` is then run in the forked child itself, as the program
``python -m nbgrader`` would run it: exactly the request's environment, ``sys.argv``,
standard streams on the run's pipe, ``$TMPDIR`` read again, its own seeds, the exit
handlers that nbgrader registers run at the end (:func:`_run_nbgrader`). Any other
command line is executed as before. ``$AUTOGRADER_NBGRADER_PRELOAD=0`` (read by the
server when it starts) executes every command line.

It never imports ``autograder`` or ``repeval_ref``: the kernel server's code and the
confinement helpers are compiled from their files into module objects that are not in
:data:`sys.modules`. The kernel server forked beside a run drops what nbgrader's imports
added (the modules, warnings filters, loggers, import hooks and path entries of
:func:`_snapshot`), so the kernels forked later hold what a kernel server started inside
the sandbox would hold.

Usage: ``python -c BOOT sandbox_fork_server.py CONFINE KERNEL_SERVER FD``. Protocol on the
Unix socket ``FD``: that of :mod:`autograder.fork_client`, with ``{"op": "spawn", "argv":
[...], "env": {...}, "cwd": str, "uid": int or null, "limits": {...}, "mounts": {"top":
str, "hide": [...], "readable": [...]} or null, "cgroups": [...]}`` (the folders of the
run's cgroups, joined first; optional) and one descriptor attached (the write
end of the run's output pipe).
"""

import os
import socket
import sys

#: the largest request taken (a spawn request holds an environment and a few paths)
MAX_REQUEST = 1 << 16
_here = os.path.dirname(os.path.abspath(__file__))
_fork_children = type(sys)("_fork_children")
with open(os.path.join(_here, "fork_children.py")) as _fh:
    exec(compile(_fh.read(), _fh.name, "exec"), _fork_children.__dict__)
_children = _fork_children.Children()
# autograder/settings.py, compiled from its file (no package import)
_settings = _fork_children.load_by_path("_sandbox_settings", os.path.join(_here, "settings.py"))

#: environment variable naming the kernel server's pipes: "REQUESTS,REPLIES,PID"
FDS_ENV = _settings.KERNEL_FORK_FDS_ENV

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
#: ``0``: execute every command line (nbgrader's modules are not imported here)
NBGRADER_PRELOAD_ENV = _settings.NBGRADER_PRELOAD_ENV


def _confine(confine, req):
    """In the forked child: what ``Confinement.preexec`` does for a started run, in the
    same order (the working directory first, as :class:`subprocess.Popen` sets it before
    its ``preexec_fn``)."""
    os.chdir(req["cwd"])
    lim = req["limits"]
    mounts = req.get("mounts")
    libc = confine.load_libc() if mounts is not None else None

    def mount():
        confine.sandbox_mounts(
            libc, mounts["top"], mounts["hide"], int(lim["file_bytes"]), mounts["readable"]
        )

    start = confine.preexec_confined(
        uid=req.get("uid"),
        mount=mount if libc is not None else None,
        cpu_s=lim["cpu_s"],
        cpu_grace_s=lim["cpu_grace_s"],
        memory_bytes=int(lim["memory_bytes"]),
        file_bytes=lim["file_bytes"],
        processes=lim["processes"],
        cgroups=req.get("cgroups") or (),
    )
    start()
    if req.get("uid") is not None and libc is not None:
        libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE: as after exec, /proc/self is its own


def _snapshot():
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


def _restore(before):
    """Undo, in a forked kernel server, what was imported after :func:`_snapshot` gave
    ``before``: the kernels it forks see the state a kernel server started inside the
    sandbox would have (nbgrader's modules are not imported there)."""
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


def _preload_nbgrader():
    """Import :data:`NBGRADER_PRELOAD`; the state before them (:func:`_snapshot`), or
    None when switched off or when nbgrader cannot be imported (runs are then executed)."""
    import importlib

    if os.environ.get(NBGRADER_PRELOAD_ENV, "1") == "0":
        return None
    before = _snapshot()
    try:
        for name in NBGRADER_PRELOAD:
            importlib.import_module(name)
    except Exception:
        _restore(before)
        return None
    return before


def _is_nbgrader(argv):
    """Whether ``argv`` is ``python -m nbgrader ...`` with this server's interpreter."""
    return (
        len(argv) >= 3
        and argv[1:3] == ["-m", "nbgrader"]
        and os.path.realpath(argv[0]) == os.path.realpath(sys.executable)
    )


def _run_nbgrader(args, env):
    """In the forked, confined child: run ``python -m nbgrader ARGS`` in this process with
    the environment ``env``, as the program started from nothing would; never returns
    (the exit code is nbgrader's)."""
    import atexit
    import io
    import logging
    import runpy

    _fork_children.fresh_process(env)
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


def _fork_kernel_server(kernels, loaded, before=None):
    """Fork the run's kernel fork server; ``(requests, replies, pid)``: the run's ends of
    its pipes (inheritable) and its process id."""
    req_r, req_w = os.pipe()
    rep_r, rep_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(req_w)
            os.close(rep_r)
            if before is not None:
                _restore(before)
            os.dup2(req_r, 0)  # the kernel server reads its requests on standard input
            os.close(req_r)
            # stays open as the kernel server's standard input, the process's whole life
            sys.stdin = open(0, closefd=False)  # noqa: SIM115
            kernels.serve(rep_w, loaded)
        except BaseException:  # the run then starts its kernels the usual way
            code = 1
        finally:
            os._exit(code)
    os.close(req_r)
    os.close(rep_w)
    os.set_inheritable(req_w, True)
    os.set_inheritable(rep_r, True)
    return req_w, rep_r, pid


def _become_run(req, out, control, confine, kernels, loaded, before=None):
    """In the forked child: confine, fork the kernel server, run nbgrader (in this process
    when ``before`` says its modules are loaded, else executed); never returns."""
    code = 127
    try:
        control.close()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.closerange(3, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 1024)
        _confine(confine, req)
        env = {str(k): str(v) for k, v in req["env"].items()}
        requests, replies, pid = _fork_kernel_server(kernels, loaded, before)
        env[FDS_ENV] = f"{requests},{replies},{pid}"
        argv = [str(a) for a in req["argv"]]
        if before is not None and _is_nbgrader(argv):
            _run_nbgrader(argv[3:], env)
        os.execve(argv[0], argv, env)
    except BaseException as exc:  # the grader reads the output and the exit code
        try:
            os.write(2, f"[autograder] the sandboxed run could not start: {exc!r}\n".encode())
        except OSError:
            pass
    finally:
        os._exit(code)


def _spawn_error(req, fds):
    """Why ``req`` with the descriptors ``fds`` cannot be served (None if it can)."""
    if len(fds) != 1:
        return "a spawn request needs exactly one descriptor: the output pipe's end"
    argv, env, lim = req.get("argv"), req.get("env"), req.get("limits")
    if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
        return "argv must be a non-empty list of strings"
    if not isinstance(env, dict) or not isinstance(req.get("cwd"), str):
        return "env must be a dict and cwd a string"
    if not isinstance(lim, dict) or not all(
        k in lim for k in ("cpu_s", "cpu_grace_s", "memory_bytes", "file_bytes", "processes")
    ):
        return "limits must give cpu_s, cpu_grace_s, memory_bytes, file_bytes, processes"
    if not _fork_children.cgroup_list(req.get("cgroups")):
        return "cgroups must be a list of folder names"
    if _fork_children.threads() != 1:
        return "the server holds threads"
    return None


def main(argv):
    confine_path, kernel_server_path, fd = argv[1], argv[2], int(argv[3])
    control = socket.socket(fileno=fd)
    confine = _fork_children.load_by_path("_sandbox_confine", confine_path)
    kernels = _fork_children.load_by_path("_kernel_fork_server", kernel_server_path)
    loaded = kernels.preload()
    before = _preload_nbgrader()
    _fork_children.announce_ready(control, loaded)
    _fork_children.serve_requests(
        control,
        _children,
        _spawn_error,
        lambda req, fds: _become_run(req, fds[0], control, confine, kernels, loaded, before),
        MAX_REQUEST,
    )


if __name__ == "__main__":
    try:
        main(sys.argv)
    except (BrokenPipeError, ConnectionResetError, KeyboardInterrupt):
        os._exit(0)
