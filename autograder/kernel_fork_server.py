"""The process that forks students' kernels (standard library only; run by path).

Every notebook nbgrader grades starts a fresh IPython kernel, and most of that start is
spent importing: IPython and ipykernel, then NumPy, SciPy, scikit-learn or torch in the
answer's first cell (about 0.7 s and up to 2.5 s more per notebook on the course
machine). This program imports those libraries once, then forks one process per kernel;
the child becomes the kernel exactly as ``python -m ipykernel_launcher -f FILE`` would
(:func:`runpy.run_module` with ``alter_sys``), in a session of its own, with the
environment, working directory and arguments the kernel manager asked for.

What the child inherits is only the libraries' import state, never the grader's: this
program imports nothing of ``autograder``, ``repeval_ref`` or the course, and it never
runs student code itself (a fork's memory is its own, so what an answer patches dies
with its kernel). A fork is refused (the caller then starts the kernel the usual way)
whenever this process holds more than one thread, since forking a threaded process is
unsafe.

Protocol: one JSON object per line on standard input, one JSON reply per line on the
file descriptor named by ``argv[1]``; the first reply, ``{"ready": true, ...}``, comes
after the imports. Requests: ``{"op": "spawn", "argv": [...], "env": {...}, "cwd": ...}``
-> ``{"pid": int}`` or ``{"error": str}``; ``{"op": "status", "pid": int}`` ->
``{"code": int or null}`` (null while it runs; a negative code is the signal that ended
it, as in :attr:`subprocess.Popen.returncode`). End of input ends the server.
"""
import importlib
import json
import os
import sys

#: the libraries imported before the first fork (each optional)
PRELOAD = (
    "numpy", "scipy", "scipy.linalg", "scipy.special", "scipy.stats", "scipy.spatial",
    "sklearn", "sklearn.linear_model", "sklearn.neighbors", "sklearn.model_selection",
    "sklearn.metrics", "torch", "torch.nn", "torch.nn.functional",
    "IPython", "ipykernel.kernelapp", "ipykernel.ipkernel", "ipykernel.zmqshell",
    "ipykernel_launcher",
    # imported by every kernel as it starts (IPKernelApp resolves its debugger then, which
    # imports debugpy and pydevd: about 0.13 s per notebook, 2 s per student, measured)
    "ipykernel.debugger", "IPython.core.oinspect",
)

# autograder/fork_children.py, compiled from the file beside this one (no package import)
_fork_children = type(sys)("_fork_children")
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fork_children.py")) as _fh:
    exec(compile(_fh.read(), _fh.name, "exec"), _fork_children.__dict__)
_threads = _fork_children.threads
_children = _fork_children.Children()


def _become_kernel(req, reply_fd):
    """In the forked child: turn into ``python -m ipykernel_launcher ARGS``; never returns."""
    code = 1
    try:
        os.close(reply_fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.setsid()
        env = {str(k): str(v) for k, v in req["env"].items()}
        env["JPY_PARENT_PID"] = str(os.getppid())  # this server: the kernel exits with it
        _fork_children.fresh_process(env)
        cwd = req.get("cwd")
        if cwd:
            os.chdir(cwd)
        import runpy
        # as `python -m`: the working directory first on the path, the module as __main__
        sys.path[0] = os.getcwd()
        # the parent handle is read from the environment when ipykernel is imported (here,
        # before the fork): name it on the command line instead
        sys.argv = ([sys.executable] + list(req["argv"])
                    + [f"--IPKernelApp.parent_handle={os.getppid()}"])
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


def preload():
    """Import :data:`PRELOAD` (each optional); the names imported."""
    loaded = []
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
            reply.write(json.dumps({"code": _children.status(int(req["pid"]))}) + "\n")
        elif op == "spawn":
            if _threads() != 1:
                reply.write(json.dumps({"error": "the server holds threads"}) + "\n")
                continue
            pid = os.fork()
            if pid == 0:
                _become_kernel(req, reply_fd)
            reply.write(json.dumps({"pid": pid}) + "\n")
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
