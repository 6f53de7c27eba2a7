"""nbgrader's kernels forked from a warm process (the fork server's kernel role,
:mod:`autograder.fork_role_kernel`).

:class:`ForkExecute` is nbgrader's ``Execute`` preprocessor with a kernel manager whose
provisioner asks one fork server per grading process for each kernel instead of starting
``python -m ipykernel_launcher`` from nothing. The kernel is the same program in the same
sandbox (the server is a child of the grading process and inherits its user, namespaces
and limits); only the imports are already done. Anything the server cannot do (another
kernel command, a server that failed to start or holds threads) falls back to the usual
launch, so grading never depends on it. ``$AUTOGRADER_KERNEL_FORK=0`` turns it off.

In a class, the server is not started here: the sandbox's own fork server
(:mod:`autograder.fork_role_sandbox`) forks one that has done its imports already beside
this process and names its socket in :data:`SOCKET_ENV`; this process adopts it. Both
speak the fork server's one protocol through :class:`autograder.fork_client.ForkServer`.

**Each kernel is contained, and has a hard wall-clock limit** (``$AUTOGRADER_NOTEBOOK_LIMIT``
seconds, set by :mod:`autograder.sandbox`). The server forks a *watcher* per kernel, and
the watcher forks the kernel (:func:`autograder.confine.kernel_namespaces`): the kernel
is process 1 of a PID namespace of its own, with its own mount and IPC namespaces, where
``/tmp``, ``/dev/shm``, ``/var/tmp``, ``/run/lock``, its home (in a sandbox) and its
IPython, matplotlib and Jupyter folders are empty tmpfs. Past the limit the watcher
sends SIGKILL to the kernel, and the Linux kernel then kills every process left in its
namespace; the same happens whenever the kernel ends, so nothing a notebook started
outlives it, and what it wrote in those folders is gone with the namespace. Why student
code cannot escape this:

* a fork, a double fork, ``setsid`` or a new process group stays in the PID namespace:
  no process can leave one, and the end of its process 1 kills all of them;
* SIGKILL cannot be blocked, caught or ignored, and it is sent by the watcher, which is
  outside the namespace: code inside cannot name it (``kill``, ``ptrace`` and pidfds
  take process ids of the caller's namespace, and the kernel's ``/proc`` is that of its
  namespace), so it cannot stop, kill or slow the watcher or the server;
* the kernel gives up the capabilities its user namespace granted
  (:func:`autograder.confine.drop_capabilities`, with ``no_new_privs``) before any
  student code runs, so it cannot unmount or cover its folders; the mounts it inherited
  are locked;
* if the watcher itself ends (the server ended), the kernel gets SIGKILL as its parent
  dies (``PR_SET_PDEATHSIG``), and with it the whole namespace.

The watcher reports whether it stopped the kernel for time; :class:`ForkExecute` then
marks the notebook (:data:`TIME_LIMIT_KEY` in its metadata) instead of failing the
student's other notebooks, and the sandbox grades it as blank with that reason.

Where the machine refuses user namespaces (:func:`autograder.protection.kernel_namespaces_allowed`
is False, said by :func:`autograder.protection.protection_gaps`), the watcher still applies
the limit, but to the kernel's process group only, and the folders are shared. A kernel
launched the usual way (``$AUTOGRADER_KERNEL_FORK=0``, or a server that failed) has no
per-notebook limit and no private folders: only the student's whole run is limited.
"""

from __future__ import annotations

import os
import sys
import threading
import uuid

from jupyter_client import AsyncKernelManager
from jupyter_client.provisioning import LocalProvisioner
from nbgrader.preprocessors import Execute

from .fork_client import ForkServer
from .settings import (
    KERNEL_FORK_ENV,
    KERNEL_LIMITS,
    KERNEL_PRELOAD_ENV,
    KERNEL_SOCKET_ENV,
    NOTEBOOK_LIMIT_ENV,
)

__all__ = [
    "ENV",
    "SOCKET_ENV",
    "LIMIT_ENV",
    "TIME_LIMIT_KEY",
    "ForkExecute",
    "ForkKernelManager",
    "ForkProvisioner",
    "fork_enabled",
    "notebook_limit",
    "start_server",
    "time_limit_hit",
]

#: environment variable: "0" turns the fork server off
ENV = KERNEL_FORK_ENV
#: environment variable: "FD,PID" of a warm kernel server forked beside this process
#: (:mod:`autograder.fork_role_sandbox`): its socket and process id; read, and removed, on
#: import
SOCKET_ENV = KERNEL_SOCKET_ENV
#: environment variable: the wall-clock limit of one notebook's kernel, in seconds
LIMIT_ENV = NOTEBOOK_LIMIT_ENV
#: key of a notebook's metadata: the limit (s) its kernel ran past and was stopped at
TIME_LIMIT_KEY = "autograder_time_limit_s"
_ADOPT = os.environ.pop(SOCKET_ENV, None)  # never handed on to a kernel


def _adopted():
    """The kernel server forked beside this process (:mod:`autograder.fork_role_sandbox`),
    once (the second call gets None), or None when there is none or the value of
    :data:`SOCKET_ENV` is unusable."""
    global _ADOPT
    value, _ADOPT = _ADOPT, None
    if not value:
        return None
    try:
        fd, pid = (int(x) for x in value.split(","))
        return ForkServer.adopt(fd, pid, "the kernel fork server")
    except (ValueError, OSError):
        return None


def notebook_limit():
    """The per-notebook limit in seconds from ``$AUTOGRADER_NOTEBOOK_LIMIT`` (None when
    unset, empty or not a positive number)."""
    try:
        value = float(os.environ.get(LIMIT_ENV, ""))
    except ValueError:
        return None
    return value if value > 0 else None


#: (server, kernel pid) of every kernel the servers started, in order
_spawned = []
#: kernel pid -> the limit (s) at which its watcher stopped it
_timed_out = {}


def _exit_code(server, pid):
    """Exit code of the forked kernel ``pid`` as its server reports it; remembers a
    kernel its watcher stopped for time."""
    reply = server.status(pid)
    if reply["code"] is not None and reply.get("timed_out"):
        _timed_out[pid] = reply.get("limit_s")
    return reply["code"]


def time_limit_hit(pid, wait=5.0):
    """The limit (s) at which the watcher of kernel ``pid`` stopped it, or None (it ended
    otherwise, runs, or is unknown). Waits at most ``wait`` seconds for the watcher's
    report of a kernel that has ended."""
    import time

    if pid in _timed_out:
        return _timed_out[pid]
    server = next((srv for srv, p in _spawned if p == pid), None)
    end = time.monotonic() + wait
    while server is not None:
        try:
            code = _exit_code(server, pid)
        except (OSError, ValueError):
            return None
        if code is not None or time.monotonic() >= end:
            break
        time.sleep(0.05)
    return _timed_out.get(pid)


def fork_enabled():
    """Whether kernels are forked (``$AUTOGRADER_KERNEL_FORK`` is not ``0``)."""
    return os.environ.get(ENV, "1") != "0"


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
                _server = _adopted() or ForkServer.start(
                    "kernel",
                    {
                        "preload": os.environ.get(KERNEL_PRELOAD_ENV, "1") != "0",
                        "tmp_bytes": KERNEL_LIMITS["tmp_bytes"],
                    },
                    "the kernel fork server",
                    output=True,
                )
            except (OSError, ValueError):
                _server = None
        return _server


#: the longest a kernel waits for the server's imports before it is launched the usual way
READY_WAIT_S = 20.0

#: the longest a graded submission's kernel waits for the server (it has no other way to
#: start: launched the usual way it could read the reference and print it into its outputs)
GRADED_READY_WAIT_S = 180.0

_NOT_CONFINED = (
    "the kernel fork server could not start this graded kernel in its own namespaces, and a "
    "graded kernel is never started without them"
)


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


def _graded(env):
    """Whether the kernel runs a submission graded by the sandbox (``KERNEL_ENV`` set):
    only such a kernel gets the reference and the grader hidden. A plain ``nbgrader
    autograde`` of a course (hidden tests run in the kernel) keeps reading them."""
    from .checks import KERNEL_ENV

    return env.get(KERNEL_ENV) == "1"


def hidden_folders():
    """``[[folder, {relative path: text}], ...]``: what the kernel of a graded submission
    must not read, and the only files it sees there instead
    (:func:`autograder.checks.kernel_stub_files`): the repository when this package lies
    in one (a checkout or an editable install: its reference package, solutions, hidden
    checks and book), and the folders of the ``autograder``, ``repeval_ref`` and
    ``repeval_book`` packages wherever they are installed. The interpreter and its
    packages stay readable (:func:`autograder.confine.kernel_namespaces` binds them back)."""
    from . import REPO_ROOT
    from .checks import kernel_stub_files
    from .protection import reference_folders

    stubs = kernel_stub_files()
    repo, packages = reference_folders(REPO_ROOT)
    out = [[repo, stubs]] if repo is not None else []
    for folder in packages:
        if repo is not None and (folder == repo or folder.startswith(repo + os.sep)):
            continue  # covered with the repository
        name = os.path.basename(folder)
        out.append(
            [
                folder,
                {
                    rel.split("/", 1)[1]: text
                    for rel, text in stubs.items()
                    if rel.startswith(name + "/")
                },
            ]
        )
    return out


def _is_ipykernel(cmd):
    return (
        len(cmd) >= 3
        and cmd[1:3] == ["-m", "ipykernel_launcher"]
        and os.path.realpath(cmd[0]) == os.path.realpath(sys.executable)
    )


class ForkProvisioner(LocalProvisioner):
    """:class:`~jupyter_client.provisioning.LocalProvisioner` whose Python kernels are
    forked by the server; every other command is launched as usual."""

    async def launch_kernel(self, cmd, **kwargs):
        env = dict(kwargs.get("env") or os.environ)
        forked = fork_enabled() and _is_ipykernel(cmd)
        # a graded submission's kernel is hidden from the reference only when forked into
        # its namespaces: it waits longer for the server and is never started the usual way
        graded = forked and _graded(env)
        server = _ready_server(GRADED_READY_WAIT_S if graded else READY_WAIT_S) if forked else None
        if server is None:
            if graded:
                raise RuntimeError(_NOT_CONFINED)
            return await super().launch_kernel(cmd, **kwargs)
        cwd = str(kwargs.get("cwd") or os.getcwd())
        request = {
            "argv": list(cmd[3:]),
            "env": env,
            "cwd": cwd,
            "limit_s": notebook_limit(),
            "hide": hidden_folders() if _graded(env) else [],
        }
        self.process = server.spawn(request, exit_code=lambda pid: _exit_code(server, pid))
        if self.process is None:
            if graded:
                raise RuntimeError(_NOT_CONFINED)
            return await super().launch_kernel(cmd, **kwargs)
        _spawned.append((server, self.process.pid))
        self.pid = self.process.pid
        self.pgid = self.process.pid  # the child called setsid()
        self.cwd = cwd
        return self.connection_info


class ForkKernelManager(AsyncKernelManager):
    """An :class:`~jupyter_client.AsyncKernelManager` that uses :class:`ForkProvisioner`."""

    async def _async_pre_start_kernel(self, **kw):
        self.kernel_id = self.kernel_id or kw.pop("kernel_id", str(uuid.uuid4()))
        if self.provisioner is None:
            self.provisioner = ForkProvisioner(
                kernel_id=self.kernel_id, kernel_spec=self.kernel_spec, parent=self
            )
        return await super()._async_pre_start_kernel(**kw)


class ForkExecute(Execute):
    """nbgrader's ``Execute`` preprocessor with :class:`ForkKernelManager`."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("kernel_manager_class", ForkKernelManager)
        super().__init__(*args, **kwargs)

    def preprocess(self, nb, resources=None, km=None):
        """Execute ``nb``; a notebook whose kernel its watcher stopped at the per-notebook
        limit is returned as far as it ran, marked with :data:`TIME_LIMIT_KEY`, instead of
        failing (which would cost the student's other notebooks of that assignment)."""
        first = len(_spawned)
        try:
            return super().preprocess(nb, resources, km)
        except Exception:
            limit = next(
                (
                    got
                    for got in (time_limit_hit(pid) for _, pid in _spawned[first:])
                    if got is not None
                ),
                None,
            )
            if limit is None:
                raise
            self.log.error(
                "The kernel ran past the per-notebook limit of %s s and was "
                "stopped with everything it started",
                limit,
            )
            _mark_stopped(nb, float(limit))
            return nb, resources


def _mark_stopped(nb, limit):
    """Mark ``nb``, stopped at the per-notebook limit ``limit`` (s): the limit in its
    metadata, an error in every graded cell that did not finish (so nbgrader records 0
    for it), and a note at the top with the reason, which its feedback opens with."""
    from nbformat.v4 import new_markdown_cell, new_output

    from .sandbox import time_limit_reason

    reason = time_limit_reason(limit)
    for cell in nb.cells:
        graded = cell.get("metadata", {}).get("nbgrader", {}).get("grade")
        if cell.cell_type == "code" and graded and cell.get("execution_count") is None:
            cell.outputs = [
                new_output(
                    "error",
                    ename="NotebookTimeLimit",
                    evalue=reason,
                    traceback=[f"NotebookTimeLimit: {reason}"],
                )
            ]
    note = new_markdown_cell(
        f"**Grading note.** {reason} This exercise scores no points. "
        "Ask your instructor if you think this is wrong."
    )
    note["id"] = "autograder-grading-note"
    nb.cells = [c for c in nb.cells if c.get("id") != "autograder-grading-note"]
    nb.cells.insert(0, note)
    nb.metadata[TIME_LIMIT_KEY] = limit
