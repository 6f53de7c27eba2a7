"""The process that forks clean-room children (standard library only; run by path).

A clean-room child (:mod:`autograder.cleanroom_child`) started from nothing spends most of
its start importing what the answer imports: NumPy, SciPy, scikit-learn, torch (about 0.5
to 3 s per notebook on the course machine, sixteen notebooks per student). This program
is started the way a child is (``python -I -S cleanroom_fork_server.py SITE CONFINE FD``,
same interpreter, same minimal environment), imports those libraries once, then forks one
child per answer. The forked child confines itself exactly as a started child is confined
before it runs (:func:`autograder.confine.preexec_confined`: a session of its own, the
mount and network namespaces, the sandbox user id, the limits), takes the room as its
working directory, the pipes the grader passed as its standard input and output, fresh
seeds, and then runs the room's copy of the child program as ``__main__``.

It never imports ``autograder`` or ``repeval_ref``: the confinement helpers are compiled
from the file ``CONFINE`` into a module object that is not in :data:`sys.modules`, and
the child program's import hook refuses both packages as it does in a started child.

Protocol, on the Unix socket ``FD`` (datagrams, one JSON object each): the first message,
``{"ready": true, "loaded": [...], "threads": n}``, comes after the imports. Requests:
``{"op": "spawn", ...}`` with the child's two pipe ends attached (SCM_RIGHTS: its standard
input, then its standard output) -> ``{"pid": int}`` or ``{"error": str}``;
``{"op": "status", "pid": int}`` -> ``{"code": int or null}`` (null while it runs; a
negative code is the signal that ended it, as in :attr:`subprocess.Popen.returncode`).
The end of the socket ends the server.
"""

import importlib
import os
import socket
import sys

#: the libraries imported before the first fork (each optional)
PRELOAD = (
    "numpy",
    "scipy",
    "scipy.linalg",
    "scipy.special",
    "scipy.stats",
    "scipy.spatial",
    "scipy.spatial.distance",
    "sklearn",
    "sklearn.linear_model",
    "sklearn.neighbors",
    "sklearn.model_selection",
    "sklearn.metrics",
    "sklearn.preprocessing",
    "sklearn.svm",
    "torch",
    "torch.nn",
    "torch.nn.functional",
)
#: the largest request taken (a spawn request holds an environment and a few paths)
MAX_REQUEST = 1 << 16

# autograder/fork_children.py, compiled from the file beside this one (no package import)
_fork_children = type(sys)("_fork_children")
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fork_children.py")) as _fh:
    exec(compile(_fh.read(), _fh.name, "exec"), _fork_children.__dict__)
_children = _fork_children.Children()


def _vm_size():
    """This process's mapped address space in bytes (0 if unreadable)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _confine(confine, req):
    """In the forked child: what :func:`preexec_confined` does for a started child, in
    the same order (working directory first, as :class:`subprocess.Popen` sets it before
    its ``preexec_fn``). The address-space limit counts from what this process maps
    already (the preloaded libraries), so that an answer gets the same room for its own
    data as in a started child that imported them itself."""
    os.chdir(req["room"])
    lim = req["limits"]
    mounts = req.get("mounts")
    libc = confine.load_libc() if mounts is not None else None

    def mount():
        if confine.private_tmp(
            libc, int(mounts["file_bytes"]), keep=mounts["keep"], cover=mounts["cover"]
        ):
            for folder in mounts["packages"]:
                confine.cover_empty(libc, folder)

    start = confine.preexec_confined(
        uid=req.get("uid"),
        mount=mount if mounts is not None else None,
        cpu_s=lim["cpu_s"],
        cpu_grace_s=lim["cpu_grace_s"],
        memory_bytes=int(lim["memory_bytes"]) + _vm_size(),
        file_bytes=lim["file_bytes"],
        processes=lim["processes"],
        cgroups=req.get("cgroups") or (),
    )
    start()
    if req.get("uid") is not None and libc is not None:
        libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE: as after exec, /proc/self is its own


def _become_child(req, fds, control, confine):
    """In the forked child: confine, then run the room's child program; never returns."""
    code = 1
    try:
        control.close()
        child_in, child_out = fds
        os.dup2(child_in, 0)
        os.dup2(child_out, 1)
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 2)
        os.closerange(3, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 1024)
        _confine(confine, req)
        _fork_children.fresh_process(req["env"])
        program = req["program"]
        main = type(sys)("__main__")
        main.__file__ = program
        main.__builtins__ = __builtins__
        sys.modules["__main__"] = main
        sys.argv = [program, req["site"]]
        with open(program) as fh:
            source = fh.read()
        exec(compile(source, program, "exec"), main.__dict__)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # pragma: no cover - the grader reads the exit code
        code = 1
    finally:
        try:
            sys.stdout.flush()
        finally:
            os._exit(code)


def _spawn_error(req, fds):
    """Why the spawn request ``req`` with the descriptors ``fds`` cannot be served."""
    if len(fds) != 2:
        return "a spawn request needs two pipe ends"
    if not _fork_children.cgroup_list(req.get("cgroups")):
        return "cgroups must be a list of folder names"
    if _fork_children.threads() != 1:
        return "the server holds threads"
    return None


def main(argv):
    site, confine_path, fd = argv[1], argv[2], int(argv[3])
    control = socket.socket(fileno=fd)
    # as in a started child: the site-packages last, never the repository
    sys.path[:] = [p for p in sys.path if p and "site-packages" not in p] + [site]
    confine = _fork_children.load_by_path("_cleanroom_confine", confine_path)
    loaded = []
    for name in PRELOAD:
        try:
            importlib.import_module(name)
            loaded.append(name)
        except Exception:  # an optional library: the answer imports it itself
            pass
    _fork_children.announce_ready(control, loaded)
    _fork_children.serve_requests(
        control,
        _children,
        _spawn_error,
        lambda req, fds: _become_child(req, fds, control, confine),
        MAX_REQUEST,
    )


if __name__ == "__main__":
    try:
        main(sys.argv)
    except (BrokenPipeError, ConnectionResetError, KeyboardInterrupt):
        os._exit(0)
