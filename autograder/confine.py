"""OS-level confinement of a child process: one module for the sandbox and the clean room.

Both places that run a student's code in a child process of the grader
(:mod:`autograder.sandbox`, nbgrader's own run; :mod:`autograder.cleanroom_process`, the
clean-room verifier) confine it the same way when the grader runs as root:

* a user id of its own, drawn by :func:`new_uid` from a range no real account uses; the
  child drops to it (:func:`drop_to`) and every process left under it is killed
  afterwards (:func:`kill_uid`);
* a mount namespace of its own (:func:`private_mounts`) where ``/tmp`` and ``/dev/shm``
  are empty, size-limited tmpfs, the folders it still needs are bind-mounted back through
  descriptors opened before they were hidden, and closed home directories are covered;
* resource limits set between ``fork`` and ``exec`` (:func:`set_limits`, all of it
  through :func:`preexec_confined`);
* an interpreter that the sandbox user may run (:func:`sandbox_python`).

Which folders each caller keeps or covers is its own policy (:func:`private_tmp` for the
clean room; the course directory, the interpreter and the sandbox folder for nbgrader's
run, in :mod:`autograder.sandbox`); without root none of this applies (see the two
callers). Everything here works on plain paths and numbers,
so it runs in the forked child before ``exec``.
"""

from __future__ import annotations

import os
import re
import resource
import secrets
import shutil
import signal
import sys
import sysconfig
import time
from pathlib import Path

__all__ = [
    "FIRST_UID",
    "UID_COUNT",
    "TMP_DIRS",
    "load_libc",
    "new_uid",
    "uid_processes",
    "kill_uid",
    "world_can",
    "closed_ancestor",
    "sandbox_python",
    "private_mounts",
    "private_tmp",
    "sandbox_mounts",
    "loopback_up",
    "cover_empty",
    "drop_to",
    "set_limits",
    "preexec_confined",
    "join_cgroups",
    "tmp_folders",
    "make_tmp_folders",
    "mount_disk",
    "unmount_disk",
    "namespaces_allowed",
    "kernel_namespaces",
    "own_proc",
    "drop_capabilities",
    "kernel_namespaces_allowed",
    "protection_gaps",
]

#: user ids of sandboxes: ``FIRST_UID <= uid < FIRST_UID + UID_COUNT``
FIRST_UID = 200000
UID_COUNT = 700000
#: the machine's shared temporary folders, private (empty tmpfs) in a confined child
#: (those that do not exist on a machine are left alone)
TMP_DIRS = ("/tmp", "/dev/shm", "/var/tmp", "/run/lock")

# flags of unshare(2) and mount(2) (linux/sched.h, linux/mount.h)
_CLONE_NEWNS = 0x00020000
_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER, _CLONE_NEWPID, _CLONE_NEWIPC = 0x10000000, 0x20000000, 0x08000000
_PR_SET_DUMPABLE, _PR_SET_NO_NEW_PRIVS = 4, 38
_MS_RDONLY, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 0x1, 0x20, 0x1000, 0x4000, 0x40000
_MS_NOSUID, _MS_NODEV, _MNT_DETACH = 0x2, 0x4, 0x2


# ----------------------------------------------------------------- user ids and processes
def load_libc():
    """The C library (``ctypes.CDLL``) for ``unshare`` and ``mount``, or None where it
    cannot be loaded."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True)
    except (OSError, ImportError):  # pragma: no cover
        return None


def new_uid():
    """A fresh user id for one sandbox, drawn at random from
    ``[FIRST_UID, FIRST_UID + UID_COUNT)``."""
    return FIRST_UID + secrets.randbelow(UID_COUNT)


def _check_uid(uid):
    if isinstance(uid, bool) or not isinstance(uid, int):
        raise ValueError(f"uid must be an int, got {type(uid).__name__}")
    if not FIRST_UID <= uid < FIRST_UID + UID_COUNT:
        raise ValueError(
            f"uid must be a sandbox user id in [{FIRST_UID}, {FIRST_UID + UID_COUNT}), got {uid}"
        )


def uid_processes(uid):
    """Process ids (read from ``/proc``) whose real user id is ``uid``, zombies left out.

    A zombie has ended and only waits for its parent to read its exit status: it runs
    nothing, holds no memory and cannot be signalled, so it is not counted (a sandboxed run
    that has just ended is one until the grader collects it; counting it made
    :func:`kill_uid` wait out all its rounds, about 2 s, after every run).

    Parameters
    ----------
    uid : int
        A sandbox user id (see :func:`new_uid`).

    Returns
    -------
    list of int
    """
    _check_uid(uid)
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as fh:
                for line in fh:
                    if line.startswith("State:") and line.split()[1] in ("Z", "X"):
                        break
                    if line.startswith("Uid:"):
                        if int(line.split()[1]) == uid:
                            pids.append(int(entry))
                        break
        except OSError:
            continue
    return pids


def kill_uid(uid, rounds=50):
    """Kill every process of the sandbox user ``uid``: a helper that becomes ``uid`` sends
    SIGKILL to all it may signal, i.e. exactly those, until none is left (at most
    ``rounds`` times). Needs root.

    Parameters
    ----------
    uid : int
        A sandbox user id (see :func:`new_uid`); any other id is refused, so that no real
        account's processes can be killed by mistake.
    rounds : int
        Tries at most.

    Returns
    -------
    bool
        True when no process of ``uid`` is left.
    """
    _check_uid(uid)
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be a positive int, got {rounds!r}")
    for _ in range(rounds):
        if not uid_processes(uid):
            return True
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the helper
            try:
                os.setgid(uid)
                os.setuid(uid)
                os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        time.sleep(0.02)
    return not uid_processes(uid)


# ----------------------------------------------------------------- what other users reach
def world_can(path, mode):
    """True if another user may reach ``path`` (the x bit on every ancestor) and has the
    permission bits ``mode`` (``0o004`` read, ``0o001`` execute) on ``path`` itself."""
    if isinstance(mode, bool) or not isinstance(mode, int) or not 0 < mode < 8:
        raise ValueError(f"mode must be permission bits of other users (1..7), got {mode!r}")
    p = Path(path)
    for parent in [p, *p.parents]:
        try:
            m = parent.stat().st_mode
        except OSError:
            return False
        need = 0o001 if parent != p else mode
        if not m & need:
            return False
    return True


def closed_ancestor(path):
    """The top-most ancestor of ``path`` that other users may not enter (no x bit, e.g.
    ``/root``), or None (also when an ancestor cannot be read)."""
    closed = None
    for parent in reversed(Path(path).parents):
        try:
            if not parent.stat().st_mode & 0o001:
                closed = parent
                break
        except OSError:
            return None
    return closed


#: the packages no student code may read: the reference, the grader, the book's tooling
PRIVATE_PACKAGES = ("repeval_ref", "autograder", "repeval_book")


def reference_folders(repo_root):
    """What student code must not read, for the clean room and the kernels alike:
    ``(repository, packages)``. ``repository`` is ``repo_root`` when it is a checkout (it
    holds ``pyproject.toml`` and ``repeval_ref/``: the solutions, the hidden checks, the
    book), else None (an installed copy, whose root is the site-packages); ``packages``
    are the folders of :data:`PRIVATE_PACKAGES` wherever they are installed."""
    import importlib.util

    repo = os.path.realpath(repo_root)
    if not (
        os.path.isfile(os.path.join(repo, "pyproject.toml"))
        and os.path.isdir(os.path.join(repo, "repeval_ref"))
    ):
        repo = None
    packages = []
    for name in PRIVATE_PACKAGES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        for where in (spec.submodule_search_locations or []) if spec else []:
            packages.append(os.path.realpath(where))
    return repo, [p for p in dict.fromkeys(packages) if os.path.isdir(p)]


def sandbox_python():
    """The interpreter a sandbox user may run, and the site-packages it imports from.

    Returns
    -------
    (str, str, bool)
        ``(interpreter, site-packages, drop)``: this interpreter, or, when it or its
        standard library lives where another user cannot reach it (``/root``; a virtual
        environment made with ``--copies`` elsewhere holds a copy of an interpreter whose
        library stays there), a system interpreter of the same version; ``drop`` is True
        when the grader is root and both are reachable by another user, i.e. when the
        child may run under a sandbox user id.
    """
    site = sysconfig.get_paths()["purelib"]
    exe = os.path.realpath(sys.executable)
    if os.geteuid() != 0:
        return exe, site, False
    ver = f"{sys.version_info.major}.{sys.version_info.minor}"
    stdlib = sysconfig.get_paths()["stdlib"]  # this interpreter's; a system one has its own
    for cand in (exe, shutil.which(f"python{ver}") or "", f"/usr/bin/python{ver}"):
        if not cand or not world_can(os.path.realpath(cand), 0o001) or not world_can(site, 0o004):
            continue
        if os.path.realpath(cand) == exe and not world_can(stdlib, 0o005):
            continue
        return os.path.realpath(cand), site, True
    return exe, site, False


# ----------------------------------------------------------------- mounts (in the child)
def private_mounts(libc, tmp_size, keep=(), cover=(), network=True, tmp_from=None):
    """In the child, as root: a mount namespace of its own with empty ``/tmp``,
    ``/dev/shm``, ``/var/tmp`` and ``/run/lock`` (:data:`TMP_DIRS`; tmpfs of ``tmp_size``
    bytes, mode 1777), and, with ``network=False``, a network namespace of its own too:
    no interface but a loopback that is down, so nothing on the machine (a Dask scheduler,
    a database) can be reached.

    Parameters
    ----------
    libc : ctypes.CDLL
        From :func:`load_libc`.
    tmp_size : int
        Size of each private tmpfs in bytes.
    keep : sequence of (str, bool)
        Folders the child still needs, each with whether it is read-only: reached through
        a descriptor opened before anything is mounted, and bind-mounted back at the same
        path after (so one under ``/tmp`` or under a covered folder stays reachable).
    cover : sequence of str
        Folders covered by an empty tmpfs (1 MiB, mode 0755) before the kept ones are
        bound back (closed home directories that hold a kept folder, the repository).
    network : bool
        Keep the machine's network (True) or take a network namespace with none.
    tmp_from : str or None
        A folder whose subfolders (:func:`tmp_folders`) are bound onto the temporary
        folders instead of fresh tmpfs, so that what the child writes there counts
        against that folder's file system (a sandbox's size-capped tmpfs).

    Returns
    -------
    bool
        False (nothing changed) where a mount namespace is not allowed.
    """
    if int(tmp_size) <= 0:
        raise ValueError(f"tmp_size must be a positive number of bytes, got {tmp_size!r}")
    # without a network namespace (not allowed here) the mounts still apply
    if (network or libc.unshare(_CLONE_NEWNS | _CLONE_NEWNET) != 0) and libc.unshare(
        _CLONE_NEWNS
    ) != 0:
        return False
    if libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        return False
    fds = [(path, os.open(path, os.O_PATH | os.O_DIRECTORY), readonly) for path, readonly in keep]
    sources = {}
    for where, sub in tmp_folders(tmp_from).items() if tmp_from is not None else ():
        if os.path.isdir(sub) and not os.path.islink(sub):
            sources[where] = os.open(sub, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW)
    opts = f"size={int(tmp_size)},mode=1777".encode()
    for where in TMP_DIRS:
        if os.path.isdir(where) and not os.path.islink(where):
            if where in sources:
                libc.mount(
                    f"/proc/self/fd/{sources[where]}".encode(), where.encode(), None, _MS_BIND, None
                )
            else:
                libc.mount(b"tmpfs", where.encode(), b"tmpfs", 0, opts)
    for fd in sources.values():
        os.close(fd)
    for c in cover:
        libc.mount(b"tmpfs", str(c).encode(), b"tmpfs", 0, b"size=1m,mode=0755")
    for path, fd, readonly in fds:
        os.makedirs(path, exist_ok=True)
        src = f"/proc/self/fd/{fd}".encode()
        if libc.mount(src, path.encode(), None, _MS_BIND | _MS_REC, None) == 0 and readonly:
            libc.mount(b"none", path.encode(), None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY, None)
        os.close(fd)
    return True


def tmp_folders(top):
    """Where a sandbox's temporary folders live inside its folder ``top``:
    ``{"/tmp": top/tmpdirs/tmp, "/dev/shm": top/tmpdirs/dev-shm, ...}`` for each of
    :data:`TMP_DIRS` (made by :func:`make_tmp_folders`)."""
    if not isinstance(top, str) or not top:
        raise ValueError(f"top must name a folder, got {top!r}")
    return {
        where: os.path.join(top, "tmpdirs", where.strip("/").replace("/", "-"))
        for where in TMP_DIRS
    }


def make_tmp_folders(top):
    """Make the folders of :func:`tmp_folders` empty (mode 1777, owned by the caller),
    removing what a run left there without following a link (``shutil.rmtree``), so that
    nothing planted in one run (a link on the path where the next run's mounts are made)
    reaches the next. Call it before each run, once every process of the last has ended.
    """
    for sub in tmp_folders(top).values():
        if os.path.lexists(sub):
            if os.path.isdir(sub) and not os.path.islink(sub):
                shutil.rmtree(sub)
            else:
                os.unlink(sub)
        os.makedirs(sub)
        os.chmod(sub, 0o1777)


def mount_disk(libc, path, size):
    """As root, in the grader's own mount namespace: a tmpfs of ``size`` bytes (mode 0711)
    on the empty folder ``path``, so that everything written under it counts against one
    cap whatever the number of files. Returns True on success (False: not root, or the
    mount was refused; ``path`` stays a plain folder)."""
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
        raise ValueError(f"size must be a positive number of bytes, got {size!r}")
    if not os.path.isdir(path) or os.listdir(path):
        raise ValueError(f"path must be an empty folder, got {path!r}")
    if libc is None or os.geteuid() != 0:
        return False
    return (
        libc.mount(
            b"tmpfs",
            str(path).encode(),
            b"tmpfs",
            _MS_NOSUID | _MS_NODEV,
            f"size={size},mode=0711".encode(),
        )
        == 0
    )


def unmount_disk(libc, path):
    """Take the tmpfs of :func:`mount_disk` off ``path`` at once (detached: the last
    process that holds it frees it). Returns True on success."""
    if not str(path):
        raise ValueError("path must name a folder")
    return libc is not None and libc.umount2(str(path).encode(), _MNT_DETACH) == 0


def private_tmp(libc, size, keep=(), cover=(), network=False):
    """In the child (as root, before dropping to the sandbox user): :func:`private_mounts`
    with empty, size-limited temporary folders, ``cover`` (folders such as the repository
    and the course, whose files the child must not read) covered by empty tmpfs, and, by
    default, no network; nothing happens where that is not allowed.

    ``keep`` lists directories the child still needs (the site-packages it imports NumPy
    from) that may lie under a temporary folder (a clone checked out there) or under a
    covered folder (a virtual environment inside the repository): each of those is
    bind-mounted back read-only at the same path.

    Returns
    -------
    bool
        False (nothing changed) where a mount namespace is not allowed.
    """
    tops = list(TMP_DIRS) + [os.path.realpath(c) for c in cover]
    hidden = [
        os.path.realpath(k)
        for k in keep
        if any(os.path.realpath(k).startswith(w + "/") for w in tops)
    ]
    return private_mounts(
        libc,
        size,
        keep=[(k, True) for k in hidden],
        cover=[os.path.realpath(c) for c in cover if os.path.isdir(c)],
        network=network,
    )


def loopback_up():
    """In the child, after :func:`private_mounts` with ``network=False``: bring up the
    loopback interface of its new network namespace, so that processes of the child talk
    to each other over ``127.0.0.1`` (nbgrader and its kernel) while the machine's own
    loopback, where a grader's services listen, stays out of reach. Returns True on
    success."""
    import fcntl
    import socket
    import struct

    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            got = fcntl.ioctl(sock, siocgifflags, struct.pack("16sh", b"lo", 0))
            flags = struct.unpack("16sh", got[:18])[1]
            fcntl.ioctl(sock, siocsifflags, struct.pack("16sh", b"lo", flags | iff_up))
        return True
    except OSError:
        return False


def sandbox_mounts(libc, top, hide, size, readable):
    """In the child of one student's nbgrader run, as root: a network namespace whose
    only interface is a loopback of its own (no route to the machine's services), a
    mount namespace with private temporary folders (``top``, the sandbox folder,
    bind-mounted back writable; the temporary folders are those of :func:`tmp_folders`
    inside ``top`` where they exist, so that all the run writes lands on ``top``'s file
    system, else fresh tmpfs), ``hide`` covered by empty read-only tmpfs, and the
    folders ``readable`` (the interpreter's installation, the project) made reachable
    read-only under a closed home directory.

    Parameters
    ----------
    libc : ctypes.CDLL
        From :func:`load_libc`.
    top : str
        The sandbox folder.
    hide : sequence of str
        Folders to cover (the real course directory).
    size : int
        Size of each private tmpfs in bytes.
    readable : sequence of str
        Folders the run reads: kept reachable even under a covered or temporary folder.

    Returns
    -------
    bool
        False (nothing changed) where namespaces are not allowed.
    """

    def under_tmp(p):
        return any(p == w or p.startswith(w + "/") for w in TMP_DIRS)

    ro = {os.path.realpath(p) for p in readable}
    closed = {closed_ancestor(p) for p in ro} - {None}
    keep_ro = [
        p for p in sorted(ro) if under_tmp(p) or any(p.startswith(str(c) + "/") for c in closed)
    ]
    if not private_mounts(
        libc,
        size,
        keep=[(p, True) for p in keep_ro] + [(str(top), False)],
        cover=sorted(closed, key=str),
        network=False,
        tmp_from=str(top),
    ):
        return False
    loopback_up()  # nbgrader reaches its kernel on a loopback of their own
    for h in hide:
        h = os.path.realpath(h)
        inside = [p for p in [str(top), *ro] if p == h or p.startswith(h + "/")]
        if os.path.isdir(h) and not under_tmp(h) and not inside:
            cover_empty(libc, h)
    return True


def cover_empty(libc, path):
    """Cover the folder ``path`` by an empty read-only tmpfs (mode 0000) in the child's
    mount namespace (after :func:`private_mounts`). Returns True on success."""
    if not str(path):
        raise ValueError("path must name a folder")
    return libc.mount(b"tmpfs", str(path).encode(), b"tmpfs", _MS_RDONLY, b"size=4k,mode=0000") == 0


# ----------------------------------------------------------------- user id and limits
def drop_to(uid):
    """In the child, as root: become the sandbox user ``uid`` (no supplementary groups)."""
    _check_uid(uid)
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)


def join_cgroups(paths):
    """In the child, as root, before anything else runs in it: move this process into
    each cgroup folder of ``paths`` (v1: its ``cgroup.procs``; everything it starts then
    stays there). Raises ``OSError`` when a group cannot be joined, so that a child never
    runs outside the groups made for it."""
    if isinstance(paths, (str, bytes)) or not all(isinstance(p, str) and p for p in paths):
        raise ValueError(f"paths must be a sequence of cgroup folders, got {paths!r}")
    for path in paths:
        fd = os.open(os.path.join(path, "cgroup.procs"), os.O_WRONLY | os.O_NOFOLLOW)
        try:
            os.write(fd, str(os.getpid()).encode())
        finally:
            os.close(fd)


def set_limits(*, cpu_s, cpu_grace_s, memory_bytes, file_bytes, processes=None):
    """Resource limits of the calling process (and what it starts): CPU time (soft
    ``cpu_s``, hard ``cpu_s + cpu_grace_s`` seconds), address space, file size, no core
    files, and, if ``processes`` is given, the number of processes of its user."""
    resource.setrlimit(resource.RLIMIT_CPU, (int(cpu_s), int(cpu_s) + int(cpu_grace_s)))
    resource.setrlimit(resource.RLIMIT_AS, (int(memory_bytes),) * 2)
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(file_bytes),) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if processes is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (int(processes),) * 2)


def preexec_confined(
    *, uid, mount, cpu_s, cpu_grace_s, memory_bytes, file_bytes, processes, cgroups=()
):
    """The ``preexec_fn`` of a confined child (run between ``fork`` and ``exec``); every
    sandbox child, started or forked by a fork server, passes through it.

    In this order: the cgroups ``cgroups`` (:func:`join_cgroups`, before anything else),
    ``setsid()`` (so the whole process group can be killed), ``mount()`` (the caller's
    mount namespace, if not None), the sandbox user ``uid`` (if not None), then the
    limits of :func:`set_limits` (``processes`` only under a sandbox user id).

    Parameters
    ----------
    uid : int or None
        Sandbox user id (:func:`new_uid`), or None to keep the grader's.
    mount : callable or None
        Called in the child before it drops to ``uid``.
    cpu_s, cpu_grace_s : int
        Soft CPU-time limit and the extra seconds before the hard one.
    memory_bytes, file_bytes, processes : int
        Address space, largest file, processes and threads of the sandbox user.
    cgroups : sequence of str
        Folders of the sandbox's cgroups (:class:`autograder.cgroups.SandboxCgroup`), or
        none where the machine offers none.
    """
    if uid is not None:
        _check_uid(uid)
    cgroups = [str(c) for c in (cgroups or ())]
    for name, value in (
        ("cpu_s", cpu_s),
        ("memory_bytes", memory_bytes),
        ("file_bytes", file_bytes),
        ("processes", processes),
    ):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ValueError(f"{name} must be a positive number, got {value!r}")
    if isinstance(cpu_grace_s, bool) or not isinstance(cpu_grace_s, int) or cpu_grace_s < 0:
        raise ValueError(f"cpu_grace_s must be a non-negative int, got {cpu_grace_s!r}")

    def start():
        if cgroups:
            join_cgroups(cgroups)
        os.setsid()
        if mount is not None:
            mount()
        if uid is not None:
            drop_to(uid)
        set_limits(
            cpu_s=cpu_s,
            cpu_grace_s=cpu_grace_s,
            memory_bytes=memory_bytes,
            file_bytes=file_bytes,
            processes=processes if uid is not None else None,
        )

    return start


# ----------------------------------------------------------------- one notebook's kernel
def _mount_points():
    """Mount points of this process's mount namespace (``/proc/self/mountinfo``)."""
    out = []
    try:
        with open("/proc/self/mountinfo") as fh:
            for line in fh:
                field = line.split()[4]
                out.append(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field))
    except OSError:  # pragma: no cover - no /proc
        pass
    return out


def _inside(path, folder):
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _read_only(libc, path):
    """Remount the bind mount at ``path`` read-only, keeping the flags a user namespace
    may not drop (nosuid, nodev, noexec, the access-time ones)."""
    got = os.statvfs(path).f_flag
    keep = got & (0x2 | 0x4 | 0x8 | 0x400 | 0x800)  # nosuid nodev noexec noatime nodiratime
    if got & 0x1000:  # ST_RELATIME
        keep |= 1 << 21
    return (
        libc.mount(b"none", path.encode(), None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | keep, None)
        == 0
    )


def kernel_namespaces(libc, tmp_size, keep=(), private=(), hide=()):
    """In the forked child that watches one notebook's kernel, under any user id: new
    user, mount, PID and IPC namespaces, with fresh temporary folders.

    The user namespace maps only the caller's own user and group ids (to themselves), so
    nothing changes for files; it exists because it lets an unprivileged process take the
    other three. The PID namespace applies to the children of the caller: the first one
    (the kernel) is its process 1, and when it ends, the Linux kernel kills every process
    left in the namespace; no process can leave it. ``/tmp``, ``/dev/shm``, ``/var/tmp``
    and ``/run/lock`` (:data:`TMP_DIRS`) and the folders ``private`` get empty tmpfs of
    ``tmp_size`` bytes (mode 1777 and 0700); the folders ``keep`` and every mount point
    that lay under a covered folder are bound back at the same path, in the order of the
    folders that cover them, so what must stay reachable does. What the kernel writes
    there lives in tmpfs that only its namespace holds, and is gone with its last process.
    The folders ``hide`` (the repository, the reference and grading packages) get a
    read-only tmpfs holding only the files given for it; inside them only the folders
    ``keep`` are bound back (a virtual environment inside the repository), never a mount
    point that lay there.

    Parameters
    ----------
    libc : ctypes.CDLL
        From :func:`load_libc`.
    tmp_size : int
        Size of each fresh tmpfs in bytes.
    keep : sequence of (str, bool)
        Folders and files the kernel needs (its working directory, its connection file,
        the interpreter), each with whether it is bound back read-only.
    private : sequence of str
        Further folders the kernel gets empty (its home, IPython and Jupyter folders).
    hide : sequence of (str, dict)
        Folders the kernel must not read, each with the files it shows instead
        (``{relative path: text}``, :func:`autograder.checks.kernel_stub_files`).

    Returns
    -------
    bool
        False where the namespaces are refused (nothing changed then).
    """
    if int(tmp_size) <= 0:
        raise ValueError(f"tmp_size must be a positive number of bytes, got {tmp_size!r}")
    uid, gid = os.getuid(), os.getgid()
    libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)  # its own /proc/self files, to write the maps
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWPID | _CLONE_NEWIPC) != 0:
        return False
    for name, text in (
        ("setgroups", "deny"),
        ("uid_map", f"{uid} {uid} 1"),
        ("gid_map", f"{gid} {gid} 1"),
    ):
        with open(f"/proc/self/{name}", "w") as fh:
            fh.write(text)
    libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None)
    covers = [d for d in TMP_DIRS if os.path.isdir(d) and not os.path.islink(d)]
    covers += [
        os.path.realpath(p) for p in private if os.path.isdir(p) and os.path.realpath(p) != "/"
    ]
    hidden = {}
    for folder, files in hide:
        real = os.path.realpath(folder)
        if os.path.isdir(real) and real != "/":
            hidden[real] = dict(files or {})
    covers = sorted(set(covers) | set(hidden), key=lambda p: (p.count("/"), p))
    kept = {os.path.realpath(p): bool(ro) for p, ro in keep if os.path.exists(p)}
    wanted = list(kept)
    for mp in _mount_points():
        if any(_inside(mp, h) for h in hidden):
            continue  # what is mounted inside a hidden folder stays hidden
        # only a mount inside a folder the kernel keeps is bound back (as it is: a
        # read-only one stays so); any other mount under a covered folder (another
        # sandbox's disk, copied into this namespace when it was made) stays covered
        if any(_inside(mp, c) and mp != c for c in covers) and any(_inside(mp, k) for k in wanted):
            kept.setdefault(mp, False)

    def cover_of(path):
        return max(
            (c for c in covers if _inside(path, c) and path != c),
            key=lambda c: c.count("/"),
            default=None,
        )

    fds = {}
    for p in kept:
        if cover_of(p):
            try:
                fds[p] = os.open(p, os.O_PATH)
            except FileNotFoundError:
                continue  # unmounted or removed since it was listed: nothing to bind back
    try:
        for c in covers:
            if c not in TMP_DIRS:  # one inside another covered folder is there no longer
                os.makedirs(c, mode=0o700, exist_ok=True)
            mode = "1777" if c in TMP_DIRS else "0755" if c in hidden else "0700"
            libc.mount(
                b"tmpfs", c.encode(), b"tmpfs", 0, f"size={int(tmp_size)},mode={mode}".encode()
            )
            for rel, text in hidden.get(c, {}).items():
                target = os.path.join(c, rel)
                os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
                with open(target, "w") as fh:
                    fh.write(text)
            for p in sorted((p for p in fds if cover_of(p) == c), key=len):
                if any(_inside(p, q) and q != p and cover_of(q) == c for q in fds):
                    continue  # bound back with the folder above it
                if os.path.isdir(f"/proc/self/fd/{fds[p]}"):
                    os.makedirs(p, exist_ok=True)
                else:  # a file (a connection file): bound onto an empty one
                    os.makedirs(os.path.dirname(p), exist_ok=True)
                    os.close(os.open(p, os.O_WRONLY | os.O_CREAT, 0o600))
                src = f"/proc/self/fd/{fds[p]}".encode()
                if libc.mount(src, p.encode(), None, _MS_BIND | _MS_REC, None) == 0 and kept[p]:
                    _read_only(libc, p)
            if c in hidden:  # (left writable where refused: it is the kernel's own copy)
                _read_only(libc, c)
    finally:
        for fd in fds.values():
            os.close(fd)
    return True


def own_proc(libc):
    """In process 1 of the PID namespace of :func:`kernel_namespaces`: a ``/proc`` of that
    namespace, so that the kernel sees (and can name) none of the processes outside it.
    Returns True on success."""
    return libc.mount(b"proc", b"/proc", b"proc", 0, None) == 0


def drop_capabilities(libc):
    """In the kernel, last: give up the capabilities that the user namespace of
    :func:`kernel_namespaces` granted (which would let it mount over its folders), and
    never gain any again (``PR_SET_NO_NEW_PRIVS``). Returns True on success."""
    import ctypes

    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: none
    ok = libc.capset(header, data) == 0
    return libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 and ok


def kernel_namespaces_allowed():
    """True if a notebook's kernel can be given the namespaces of
    :func:`kernel_namespaces` here (tried in a forked child that exits at once, under a
    sandbox user id when the grader is root, as the kernels run)."""
    libc = load_libc()
    if libc is None:
        return False
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the probe
        ok = False
        try:
            if os.geteuid() == 0:
                drop_to(new_uid())
            ok = kernel_namespaces(libc, 1 << 20)
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


# ----------------------------------------------------------------- what is missing here
def namespaces_allowed():
    """True if a process of this grader may take a mount namespace and a network
    namespace of its own (tried in a forked child that exits at once; needs root and,
    in a container, the capability to unshare)."""
    libc = load_libc()
    if libc is None or os.geteuid() != 0:
        return False
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the probe
        try:
            ok = libc.unshare(_CLONE_NEWNS | _CLONE_NEWNET) == 0
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def protection_gaps():
    """What the confinement of student code lacks when grading here, one sentence per
    gap; an empty list when every part applies (root, a sandbox user id the interpreter
    and its packages are readable by, mount and network namespaces).

    The grader says each of these at grading time and in ``grading_issues.csv`` for every
    student (:meth:`autograder.course.Course.autograde`): without them a submission runs
    with more rights than its own folder.
    """
    kernel_gap = (
        "this machine refuses user and PID namespaces to the kernels, so a "
        "notebook's kernel shared /tmp, /dev/shm, /var/tmp, /run/lock and its "
        "home with the student's other notebooks, and its per-notebook time limit "
        "killed only its process group: a process that left the group ran on "
        "until the student's whole run ended"
    )
    if os.geteuid() != 0:
        return [
            "the grader does not run as root, so the student's code ran under the "
            "grader's own user id: it could read and write whatever the grader can "
            "(the course, the gradebook, the reference package and solutions) and reach "
            "the network; grade an untrusted class as root or in a container"
        ] + ([] if kernel_namespaces_allowed() else [kernel_gap])
    gaps = []
    python, site, drop = sandbox_python()
    if not drop:
        gaps.append(
            f"no interpreter that another user may run was found ({python}, its "
            f"packages in {site}), so the clean room ran the student's code as root, "
            "with no private folders and the network in reach; put the virtual "
            "environment where other users can read it"
        )
    if not namespaces_allowed():
        gaps.append(
            "this machine refuses mount and network namespaces (a container "
            "without the capability to unshare), so the student's code could see "
            "the course, the repository and the network"
        )
    if not kernel_namespaces_allowed():
        gaps.append(kernel_gap)
    return gaps
