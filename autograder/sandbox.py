"""One throwaway course per student for nbgrader's own (in-kernel) run.

nbgrader executes a submission and the hidden test cells in one kernel that has the
grader's rights, so the notebook could rewrite the gradebook or other students' folders.
Here nbgrader never runs in the real course directory:

* :func:`grade_in_sandbox` takes a *job* of plain data (the student's submitted notebooks
  and ``timestamp.txt`` as bytes, the non-notebook files of each assignment's source,
  the release notebooks, a gradebook holding the assignments but no student, the seed and
  the limits), writes it into a fresh temporary folder, runs ``nbgrader autograde`` there
  and returns plain data: the scratch gradebook and the autograded notebooks as bytes,
  the notebooks it had to grade as blank and why, and nbgrader's log;
* the grader (:meth:`autograder.course.Course.autograde`) merges that result into the
  real gradebook and ``autograded/`` folder itself, taking only the rows and files that
  belong to that student, clamping scores to the real gradebook's maxima; the clean-room
  verifier's scores then replace the in-kernel ones;
* when the grader runs as root, nbgrader and its kernel run under a user id of their
  own that owns only the copy, in a mount namespace of their own where ``/tmp`` and
  ``/dev/shm`` are empty size-limited tmpfs (the copy is bind-mounted back), the real
  course directory is covered by an empty read-only tmpfs, and a home directory that
  other users may not enter (``/root``, which holds this interpreter) is covered too,
  with only the interpreter's installation bind-mounted back read-only; process-count,
  address-space, file-size and CPU limits apply; every process left under that user id is
  killed afterwards;
* inside the run, each notebook's kernel is contained and limited on its own
  (:mod:`autograder.kernel_fork`): its own PID, mount and IPC namespaces with fresh
  temporary, home, IPython and Jupyter folders, and a hard wall-clock limit
  (``SANDBOX_LIMITS["notebook_s"]``, passed as ``$AUTOGRADER_NOTEBOOK_LIMIT``) past which
  it is killed with everything it started; such a notebook is graded as blank with
  :func:`time_limit_reason`, and the student's other notebooks as usual;
* before a notebook is graded again (alone, or as the blank release), the student's
  folder in the copy is made anew from the job's bytes by
  :func:`autograder.safe_files.rebuild_folder`, which follows no link: a kernel that put a
  link to another student's folder, or to the course's solutions, in place of its own
  folder and then crashed cannot make the grader (root) write through it;
* without root none of the OS-level parts are possible: nbgrader still runs in the copy
  with a scratch gradebook (so nbgrader itself never writes to the real course), but code
  in a submission runs with the grader's own rights and could write wherever the grader
  can. Grade as root (or in a container) for a class you do not trust.

Because a job and its result are plain data, the same function runs in a thread of the
grader, in a process pool, or as a task on a Dask cluster whose workers have the
project installed (no shared file system needed).
"""

from __future__ import annotations

import glob as _glob
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import PACKAGE_DIR, cgroups, confine, protection
from .fork_client import ForkServer, ServerSlot
from .safe_files import Refused, read_regular, rebuild_folder
from .sandbox_disk import make_tmp_folders, mount_disk, unmount_disk
from .sandbox_limits import (
    MEMORY_MARK,
    NOTEBOOK_LIMIT_ENV,  # noqa: F401
    SANDBOX_LIMITS,
    WALL_BASE_S,
    WALL_MARK,
    blank_with_reason,
    code_cells,
    time_budget,
    time_limit_of,
    time_limit_reason,
    why_failed,
)
from .sandbox_users import kill_uid, new_uid
from .settings import (
    CELL_TIMEOUT_ENV,
    KERNEL_FORK_ENV,
    KERNEL_LIMITS,
    KERNEL_PRELOAD_ENV,
    KERNEL_SOCKET_ENV,
    NBGRADER_PRELOAD_ENV,
    SANDBOX_FORK_ENV,
    SCRATCH_GRADEBOOK_ENV,
)

#: a student's submission of at least this many notebooks has its kernels forked from a
#: warm process (:mod:`autograder.kernel_fork`); fewer start the usual way
FORK_FROM_NOTEBOOKS = 3
#: the longest a student's run waits for the sandbox fork server's imports
SANDBOX_FORK_WAIT_S = 30.0
#: the most of nbgrader's output kept for the log of one run
MAX_LOG_BYTES = 4 << 20
#: the largest result file taken back from a sandbox
MAX_RESULT_BYTES = 64 << 20
GRADEBOOK = "gradebook.db"


def unsynced_scratch_gradebook():
    """Let SQLite skip the wait for the disk after each commit (``PRAGMA synchronous =
    OFF``) on every connection this process opens; called by ``nbgrader_config.py`` when
    :data:`SCRATCH_GRADEBOOK_ENV` is ``"1"``, that is, only inside a sandbox.

    nbgrader commits after each grade and comment it saves, a few hundred times for one
    student's notebooks, and each commit waited about 20 ms for the disk on the 2-core
    machine (0.1 ms without). The scratch gradebook is a throwaway copy read back once
    nbgrader has exited; without the wait a crash of nbgrader still cannot corrupt it
    (only one of the machine could, and the grading is then run again). The course's
    own gradebook keeps SQLite's default.
    """
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    if not event.contains(Engine, "connect", _no_sync):  # once per process
        event.listen(Engine, "connect", _no_sync)


def _no_sync(dbapi_connection, _record):
    import sqlite3

    if isinstance(dbapi_connection, sqlite3.Connection):
        dbapi_connection.execute("PRAGMA synchronous = OFF")


# ----------------------------------------------------------------- confinement
def readable_folders():
    """What a student's nbgrader run reads besides its sandbox folder: the interpreter's
    installation and the project (nbgrader's configuration and the hidden checks)."""
    return [os.path.realpath(p) for p in (sys.base_prefix, sys.prefix, PACKAGE_DIR.parent)]


def _start_server():
    """Start this process's sandbox fork server (:mod:`autograder.fork_role_sandbox`): it
    imports what a kernel server imports once, then starts each student's nbgrader run
    confined, with a warm kernel server beside it."""
    return ForkServer.start(
        "sandbox",
        {
            "kernel_socket_env": KERNEL_SOCKET_ENV,
            "nbgrader_preload": os.environ.get(NBGRADER_PRELOAD_ENV, "1") != "0",
            "kernel": {
                "preload": os.environ.get(KERNEL_PRELOAD_ENV, "1") != "0",
                "tmp_bytes": KERNEL_LIMITS["tmp_bytes"],
            },
        },
        "the sandbox fork server",
        env=lambda home: _env("", 0, 0, home),
    )


_sandbox_slot = ServerSlot(_start_server, SANDBOX_FORK_ENV)


def start_sandbox_server():
    """Start this process's sandbox fork server without waiting for its imports (a no-op
    when it runs already, or when ``$AUTOGRADER_SANDBOX_FORK`` or ``$AUTOGRADER_KERNEL_FORK``
    is ``0``). Every student's nbgrader run graded afterwards in this process starts from
    it; :func:`grade_in_sandbox` also starts it on first use (a Dask worker). Returns the
    server, or ``None``."""
    if os.environ.get(KERNEL_FORK_ENV, "1") == "0":
        return None
    return _sandbox_slot.start()


def _ready_sandbox_server(start, wait=SANDBOX_FORK_WAIT_S):
    """This process's sandbox fork server once ready (started first if ``start``), else
    None: the run then starts from nothing."""
    if os.environ.get(KERNEL_FORK_ENV, "1") == "0":
        return None
    return _sandbox_slot.ready(wait, start=start)


class Confinement:
    """How one student's nbgrader processes are started: user id, namespace, limits."""

    def __init__(self, top, hide=(), limits=None):
        self.top = str(top)
        self.hide = [str(h) for h in hide]
        self.limits = {**SANDBOX_LIMITS, **(limits or {})}
        self.root = os.geteuid() == 0
        self.uid = new_uid() if self.root else None
        #: the sandbox fork server the runs start from (None: each starts from nothing)
        self.server = None
        #: the cgroup of the run in progress (:mod:`autograder.cgroups`), or None
        self.cgroup = None

    def own(self, path):
        """Give ``path`` (a tree inside the sandbox) to the sandbox user."""
        if self.uid is None:
            return
        if not os.path.isdir(path):  # one file (os.walk yields nothing for it)
            os.chown(path, self.uid, self.uid, follow_symlinks=False)
            return
        for dirpath, _dirnames, filenames in os.walk(path):
            os.chown(dirpath, self.uid, self.uid)
            for f in filenames:
                os.chown(os.path.join(dirpath, f), self.uid, self.uid, follow_symlinks=False)

    def spec(self, cpu_s, cwd):
        """The confinement of a run in ``cwd`` with a CPU limit of ``cpu_s`` seconds
        (:func:`autograder.confine.make_spec`), joining the run's cgroup; the same whether
        the sandbox fork server forks the run or it is started from nothing."""
        lim = self.limits
        mounts = None
        if self.uid is not None:
            mounts = protection.sandbox_mounts(
                self.top, self.hide, lim["file_bytes"], readable_folders()
            )
        return confine.make_spec(
            limits={
                "cpu_s": cpu_s,
                "cpu_grace_s": lim["cpu_grace_s"],
                "memory_bytes": lim["memory_bytes"],
                "file_bytes": lim["file_bytes"],
                "processes": lim["processes"],
            },
            uid=self.uid,
            cgroups=self.cgroup.join_paths if self.cgroup is not None else (),
            mounts=mounts,
            cwd=str(cwd),
        )

    def run(self, cmd, cwd, env, wall_s):
        """Run ``cmd`` confined; returns (exit code, output). The run has a cgroup of its
        own where the machine offers one (:func:`autograder.cgroups.make`: the memory of
        all its processes together, their number), made before its first process starts
        and removed with everything left in it afterwards. Past ``wall_s`` seconds the
        whole process group, every process of its cgroup and, as root, every process of
        the sandbox user are killed; the output then ends with :data:`WALL_MARK`, and
        with :data:`MEMORY_MARK` when the memory limit ended processes of the run.

        The output is read with a deadline and kept up to :data:`MAX_LOG_BYTES`: a
        process that left the group (``setsid``) and holds the pipe open, or floods it,
        cannot keep the grader waiting or fill its memory."""
        if isinstance(wall_s, bool) or not isinstance(wall_s, (int, float)) or wall_s <= 0:
            raise ValueError(f"wall_s must be a positive number of seconds, got {wall_s!r}")
        self.cgroup = cgroups.make(
            int(self.limits["cgroup_memory_bytes"]), int(self.limits["processes"]), "sandbox"
        )
        try:
            spec = self.spec(wall_s, cwd)
            proc = None
            if self.server is not None:  # with a warm kernel server beside it
                request = {"argv": [str(c) for c in cmd], "env": env, "confinement": spec}
                proc = self.server.spawn(request, stdout=True)
            if proc is None:
                proc = subprocess.Popen(
                    cmd,
                    cwd=cwd,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    preexec_fn=confine.preexec(spec),
                    close_fds=True,
                )
            out, over = _read_until(proc, time.monotonic() + wall_s, MAX_LOG_BYTES)
            if over:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    pass
                out += f"\n{WALL_MARK} {wall_s:g} s\n".encode()
            self.cleanup()
            more, _ = _read_until(proc, time.monotonic() + 5, MAX_LOG_BYTES - len(out))
            proc.stdout.close()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover - a process that cannot die
                pass
            if self.cgroup is not None and self.cgroup.oom_kills():
                more += (
                    f"\n{MEMORY_MARK} {self.cgroup.memory_bytes / (1 << 30):g} GiB "
                    f"({self.cgroup.oom_kills()} killed)\n"
                ).encode()
            return proc.returncode, (out + more).decode("utf-8", "replace")
        finally:
            if self.cgroup is not None:
                self.cgroup.remove()
                self.cgroup = None

    def cleanup(self):
        """Kill every process of the run's cgroup and every process left under the
        sandbox user id (as root)."""
        if self.cgroup is not None:
            self.cgroup.kill()
        if self.uid is not None:
            kill_uid(self.uid)


_disk_said = []


def _own_disk(libc, top, size):
    """A tmpfs of ``size`` bytes on the empty sandbox folder ``top`` (as root), so that
    all the run may write (the course copy, its home, its temporary folders) is bounded
    by one cap, whatever the number of files; True when mounted. Where it cannot be
    (not root, mounts refused) this is said once on stderr, and the run writes to the
    grader's disk, bounded per file only."""
    if mount_disk(libc, top, size):
        return True
    if not _disk_said:
        _disk_said.append(True)
        print(
            "autograder: no size-capped tmpfs per sandbox (not root, or mounts refused); "
            "a run's writes are bounded per file only",
            file=sys.stderr,
        )
    return False


def _read_until(proc, end, cap):
    """Bytes from ``proc``'s output pipe until it closes or the monotonic time ``end``,
    at most ``cap`` of them (the rest is read and dropped); ``(data, timed_out)``."""
    fd = proc.stdout.fileno()
    data = bytearray()
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return bytes(data), True
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return bytes(data), False
        if len(data) < cap:
            data += chunk[: max(0, cap - len(data))]


# ----------------------------------------------------------------- reading results safely
def read_inside(top, *parts, limit=MAX_RESULT_BYTES):
    """Bytes of the regular file ``top/parts...``, following no symbolic link at any
    level (the sandbox user may have replaced any folder inside ``top`` by a link to
    somewhere else); None if it is missing, a link, not a regular file, or too big
    (:func:`autograder.safe_files.read_regular` with ``top``)."""
    try:
        return read_regular(Path(*parts), limit, top=top)[0]
    except Refused:
        return None


# ----------------------------------------------------------------- the task
def _env(course, timeout, seed, home):
    from .checks import KERNEL_ENV, SEED_ENV

    paths = [str(PACKAGE_DIR)] + [
        p for p in os.environ.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep) if p
    ]
    return {
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin", "/bin"]),
        "HOME": home,
        "TMPDIR": os.path.join(home, "tmp"),
        "LANG": "C.UTF-8",
        "JUPYTER_CONFIG_PATH": os.pathsep.join(paths),
        "JUPYTER_RUNTIME_DIR": os.path.join(home, "runtime"),
        "IPYTHONDIR": os.path.join(home, "ipython"),
        "MPLCONFIGDIR": os.path.join(home, "mpl"),
        CELL_TIMEOUT_ENV: str(int(timeout)),
        SEED_ENV: str(int(seed)),
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        SCRATCH_GRADEBOOK_ENV: "1",
        KERNEL_ENV: "1",  # hidden test cells run nothing here: the clean room scores them
    }


def grade_in_sandbox(job):
    """Run nbgrader's autograde for one student in a throwaway course; plain data in/out.

    Parameters
    ----------
    job : dict
        ``student`` (str); ``assignments``: ``{assignment: {"files": {name: bytes},
        "source": {relative path: bytes}, "release": {notebook: bytes}}}`` where
        ``files`` are the submitted notebooks and ``timestamp.txt``; ``gradebook``
        (bytes: the assignments, no students); ``seed``, ``timeout`` (per cell, s),
        ``late_policy`` (nbgrader's ``none`` / ``zero``); ``hide`` (paths covered inside
        the sandbox, the real course directory); ``limits`` (over :data:`SANDBOX_LIMITS`;
        the time limits are those of :func:`time_budget`);
        ``fork_server`` (optional): start this process's sandbox fork server if it does
        not run (worth it for a class; a run uses a running one anyway).

    Returns
    -------
    dict
        ``student``; ``gradebook``: the scratch gradebook after grading (bytes or None);
        ``autograded``: ``{assignment: {notebook name: bytes}}``; ``blanked``: list of
        ``(assignment, notebook, reason)`` graded as blank; ``ungraded``: list of
        ``(assignment, notebook)``; ``log``: nbgrader's output; ``confined``: whether the
        OS-level confinement applied (root).
    """
    student = str(job["student"])
    top = tempfile.mkdtemp(prefix="autograder-sandbox-")
    os.chmod(top, 0o711)
    conf = Confinement(top, job.get("hide", ()), job.get("limits"))
    libc = confine.load_libc() if conf.root else None
    disk = _own_disk(libc, top, int(conf.limits["disk_bytes"]))
    course = os.path.join(top, "course")
    home = os.path.join(top, "home")
    log = []
    blanked, ungraded = [], []
    try:
        make_tmp_folders(top)
        for d in ("tmp", "runtime", "ipython", "mpl"):
            os.makedirs(os.path.join(home, d))
        for a, parts in job["assignments"].items():
            sub = Path(course, "submitted", student, a)
            sub.mkdir(parents=True)
            for name, data in parts["files"].items():
                (sub / Path(name).name).write_bytes(data)
            src = Path(course, "solutions", a)
            src.mkdir(parents=True)
            for rel, data in parts.get("source", {}).items():
                target = src / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
        Path(course, GRADEBOOK).write_bytes(job["gradebook"])
        conf.own(course)
        conf.own(home)
        timeout = int(job["timeout"])
        wall, notebook_s = time_budget(job, conf.limits)
        deadline = time.monotonic() + wall  # one budget for all the student's runs
        env = _env(course, timeout, job["seed"], home)
        env[NOTEBOOK_LIMIT_ENV] = str(notebook_s)
        notebooks = sum(
            name.endswith(".ipynb")
            for parts in job["assignments"].values()
            for name in parts["files"]
        )
        if os.environ.get(KERNEL_FORK_ENV, "1") == "0":
            env[KERNEL_FORK_ENV] = "0"  # the grader's switch reaches the run
        else:
            # a warm kernel server comes free with a run the sandbox fork server starts;
            # one started inside the run (about 5 s of CPU) pays off from the third
            # notebook: before that it imports nothing, and only contains the kernels
            conf.server = _ready_sandbox_server(bool(job.get("fork_server", False)))
            if conf.server is None and notebooks < FORK_FROM_NOTEBOOKS:
                env[KERNEL_PRELOAD_ENV] = "0"
        policy = f"--LateSubmissionPlugin.penalty_method={job.get('late_policy', 'none')}"

        def restore_gradebook():
            # a notebook that destroyed the scratch gradebook must not stop the re-runs
            data = read_inside(top, "course", GRADEBOOK) or b""
            if not data.startswith(b"SQLite format 3\x00"):
                path = Path(course, GRADEBOOK)
                try:
                    path.unlink()
                except OSError:
                    pass
                path.write_bytes(job["gradebook"])
                conf.own(path)

        def nbgrader(*args, budget=None):
            """nbgrader's run of ``args``, within what is left of the student's budget
            (or within ``budget`` seconds: a blank release's run)."""
            restore_gradebook()
            cmd = [
                sys.executable,
                "-m",
                "nbgrader",
                *args,
                "--create",
                "--force",
                policy,
                f"--CourseDirectory.root={course}",
            ]
            make_tmp_folders(top)  # empty: nothing of the last run is left there
            t0 = time.monotonic()
            left = budget if budget is not None else deadline - t0
            if left < 1:
                out = f"{WALL_MARK} {wall:g} s\n"
                log.append(f"$ nbgrader {' '.join(args)}  (not run: no time left)\n{out}")
                return out
            code, out = conf.run(cmd, course, env, left)
            if budget is None and WALL_MARK in out:  # the student's budget, not this run's
                out = out.replace(f"{WALL_MARK} {left:g} s", f"{WALL_MARK} {wall:g} s")
            log.append(
                f"$ nbgrader {' '.join(args)}  (exit {code}, {time.monotonic() - t0:.1f} s)\n{out}"
            )
            return out

        def outcome(a, name):
            """(graded, the per-notebook limit it was stopped at or None)"""
            data = read_inside(top, "course", "autograded", student, a, name)
            return data is not None, None if data is None else time_limit_of(data)

        blanks = {}  # assignment -> {notebook file: the blank graded instead}

        def resubmit(a):
            """The student's folder of ``a`` in the copy made anew from the job's bytes
            (and the blanks given so far), following no link: a kernel may have put a
            link to another student's folder, or to the course's solutions, in its
            place. Every process of the sandbox user has ended (``Confinement.run``)."""
            rebuild_folder(
                top,
                Path("course", "submitted", student, a),
                {
                    Path(n).name: data
                    for n, data in {**job["assignments"][a]["files"], **blanks.get(a, {})}.items()
                },
                owner=conf.uid,
            )

        first = nbgrader("autograde", "*", "--student", _glob.escape(student))
        for a, parts in sorted(job["assignments"].items()):
            for name in sorted(n for n in parts["files"] if n.endswith(".ipynb")):
                graded, limit = outcome(a, name)
                if graded and limit is None:
                    continue
                stem = name[: -len(".ipynb")]
                args = (
                    "autograde",
                    a,
                    "--student",
                    _glob.escape(student),
                    "--notebook",
                    _glob.escape(stem),
                )
                text = first  # with one notebook, the first run was this notebook alone
                if not graded and notebooks > 1:
                    # alone, so that another notebook's failure cannot cost it (one stopped
                    # at its own limit is not run again: it would only hang again)
                    resubmit(a)
                    text = nbgrader(*args)
                    graded, limit = outcome(a, name)
                    if graded and limit is None:
                        continue
                if limit is not None:
                    # graded already, marked by the kernel manager: its unfinished tests
                    # score 0 and its feedback opens with the reason; the clean room grades
                    # it as blank (no second run: it would only hang again)
                    blanked.append((a, stem, time_limit_reason(limit)))
                    continue
                reason = f"While grading this notebook {why_failed(text)}."
                release = parts.get("release", {}).get(stem)
                if release is None:
                    ungraded.append((a, stem))
                    continue
                blanks.setdefault(a, {})[name] = blank_with_reason(release, reason)
                resubmit(a)
                blanked.append((a, stem, reason))
                # the release's own budget: the blank holds no code of the student's
                nbgrader(*args, budget=WALL_BASE_S + timeout * max(code_cells(release), 1))
                if not outcome(a, name)[0]:
                    ungraded.append((a, stem))
        autograded = {}
        for a, parts in job["assignments"].items():
            got = {}
            for name in parts["files"]:
                if name.endswith(".ipynb"):
                    data = read_inside(top, "course", "autograded", student, a, name)
                    if data is not None:
                        got[name] = data
            autograded[a] = got
        gradebook = read_inside(top, "course", GRADEBOOK)
        return {
            "student": student,
            "gradebook": gradebook,
            "autograded": autograded,
            "blanked": blanked,
            "ungraded": ungraded,
            "log": "".join(log),
            "confined": conf.uid is not None,
        }
    finally:
        conf.cleanup()
        if disk:
            unmount_disk(libc, top)
        shutil.rmtree(top, ignore_errors=True)
        if os.path.exists(top):  # pragma: no cover - a file the sandbox user locked
            time.sleep(0.2)
            shutil.rmtree(top, ignore_errors=True)
