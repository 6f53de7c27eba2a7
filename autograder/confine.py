"""What a process does to itself to be confined (standard library only; loaded by path).

Every process that runs a student's code, whether the grader starts it
(``subprocess.Popen(..., preexec_fn=preexec(spec))``) or the fork server forks it
(:mod:`autograder.fork_server`), is confined by one *specification* (:func:`make_spec`, a
dict of plain values that travels to the fork server as JSON) applied by one function,
:func:`apply`, in this order: the working directory ``cwd``; the cgroups ``cgroups``
(:func:`join_cgroups`, before anything else runs); a session of its own (``setsid``);
the mounts ``mounts`` (:func:`apply_mounts`: private temporary folders, the folders it
needs bound back, the reference and the course covered, and no network of the
machine's); the sandbox user id ``uid`` (:func:`drop_to`); the resource limits
``limits`` (:func:`set_limits`; the number of processes only under a sandbox user id).

A forked process differs from a started one only where a fork must make up for the
missing ``exec``: after the drop to ``uid`` it is made dumpable again, so that its
``/proc/self`` is its own, as after ``exec``, and one that runs on in its server's image
has its address-space limit counted from what it maps already (the libraries the server
imported).

Which folders are kept or covered is the grader's policy (:mod:`autograder.protection`).
A notebook's kernel takes namespaces of its own (:func:`kernel_namespaces`, applied by its
watcher). Nothing here imports ``autograder``: the fork server loads it by its path.
"""

from __future__ import annotations

import os
import re
import resource

__all__ = [
    "FIRST_UID",
    "UID_COUNT",
    "TMP_DIRS",
    "LIMIT_KEYS",
    "MOUNT_KEYS",
    "load_libc",
    "check_uid",
    "private_mounts",
    "tmp_folders",
    "loopback_up",
    "cover_empty",
    "drop_to",
    "join_cgroups",
    "set_limits",
    "mapped_bytes",
    "make_spec",
    "apply_mounts",
    "apply",
    "preexec",
    "kernel_namespaces",
    "own_proc",
    "drop_capabilities",
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


def load_libc():
    """The C library (``ctypes.CDLL``) for ``unshare`` and ``mount``, or None where it
    cannot be loaded."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True)
    except (OSError, ImportError):  # pragma: no cover
        return None


def check_uid(uid):
    """Raise ``ValueError`` unless ``uid`` is a sandbox user id (an int in
    ``[FIRST_UID, FIRST_UID + UID_COUNT)``)."""
    if isinstance(uid, bool) or not isinstance(uid, int):
        raise ValueError(f"uid must be an int, got {type(uid).__name__}")
    if not FIRST_UID <= uid < FIRST_UID + UID_COUNT:
        raise ValueError(
            f"uid must be a sandbox user id in [{FIRST_UID}, {FIRST_UID + UID_COUNT}), got {uid}"
        )


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


def cover_empty(libc, path):
    """Cover the folder ``path`` by an empty read-only tmpfs (mode 0000) in the child's
    mount namespace (after :func:`private_mounts`). Returns True on success."""
    if not str(path):
        raise ValueError("path must name a folder")
    return libc.mount(b"tmpfs", str(path).encode(), b"tmpfs", _MS_RDONLY, b"size=4k,mode=0000") == 0


def drop_to(uid):
    """In the child, as root: become the sandbox user ``uid`` (no supplementary groups)."""
    check_uid(uid)
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


def mapped_bytes():
    """This process's mapped address space in bytes (``VmSize``; 0 if unreadable)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


# ----------------------------------------------------------------- the specification
#: the limits of a specification (see :func:`make_spec`)
LIMIT_KEYS = ("cpu_s", "cpu_grace_s", "memory_bytes", "file_bytes", "processes")
#: the mounts of a specification (see :func:`apply_mounts`)
MOUNT_KEYS = ("tmp_bytes", "keep", "cover", "network", "loopback", "tmp_from", "hide")


def _folder(value, what):
    if not isinstance(value, str) or not value.startswith("/") or "\0" in value:
        raise ValueError(f"{what} must be an absolute folder name, got {value!r}")
    return value


def _check_mounts(mounts):
    if not isinstance(mounts, dict) or set(mounts) != set(MOUNT_KEYS):
        raise ValueError(f"mounts must be a dict with the keys {MOUNT_KEYS}, got {mounts!r:.200}")
    size = mounts["tmp_bytes"]
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
        raise ValueError(f"mounts' tmp_bytes must be a positive int, got {size!r}")
    for item in mounts["keep"]:
        if not (isinstance(item, (list, tuple)) and len(item) == 2 and type(item[1]) is bool):
            raise ValueError(f"mounts' keep must hold [folder, read-only] pairs, got {item!r}")
        _folder(item[0], "a kept folder")
    for key in ("cover", "hide"):
        for folder in mounts[key]:
            _folder(folder, f"a folder of mounts' {key}")
    for key in ("network", "loopback"):
        if not isinstance(mounts[key], bool):
            raise ValueError(f"mounts' {key} must be a bool, got {mounts[key]!r}")
    if mounts["tmp_from"] is not None:
        _folder(mounts["tmp_from"], "mounts' tmp_from")


def make_spec(*, limits, uid=None, cgroups=(), mounts=None, cwd=None):
    """The confinement of one process, checked: a dict of plain values (JSON-ready).

    Parameters
    ----------
    limits : dict
        :data:`LIMIT_KEYS`: ``cpu_s``, ``memory_bytes``, ``file_bytes``, ``processes``
        positive numbers, ``cpu_grace_s`` a non-negative int.
    uid : int or None
        Sandbox user id (:func:`autograder.sandbox_users.new_uid`), or None to keep the
        grader's.
    cgroups : sequence of str
        Folders of the process's cgroups (:class:`autograder.cgroups.SandboxCgroup`),
        or none where the machine offers none.
    mounts : dict or None
        :data:`MOUNT_KEYS` (made by :mod:`autograder.protection`), or None for no
        namespace of its own.
    cwd : str or None
        Working directory taken first.

    Returns
    -------
    dict
        ``{"cwd", "cgroups", "mounts", "uid", "limits"}`` (what :func:`apply` takes).

    Raises
    ------
    ValueError
        Naming the first value that is not of its kind.
    """
    if uid is not None:
        check_uid(uid)
    if not isinstance(limits, dict) or not set(LIMIT_KEYS) <= set(limits):
        raise ValueError(f"limits must give {LIMIT_KEYS}, got {limits!r:.200}")
    for name in ("cpu_s", "memory_bytes", "file_bytes", "processes"):
        value = limits[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ValueError(f"{name} must be a positive number, got {value!r}")
    grace = limits["cpu_grace_s"]
    if isinstance(grace, bool) or not isinstance(grace, int) or grace < 0:
        raise ValueError(f"cpu_grace_s must be a non-negative int, got {grace!r}")
    if isinstance(cgroups, (str, bytes)):
        raise ValueError(f"cgroups must be a sequence of folders, got {cgroups!r}")
    groups = [_folder(c, "a cgroup") for c in (cgroups or ())]
    if mounts is not None:
        _check_mounts(mounts)
    if cwd is not None:
        _folder(cwd, "cwd")
    return {
        "cwd": cwd,
        "cgroups": groups,
        "mounts": None if mounts is None else {k: mounts[k] for k in MOUNT_KEYS},
        "uid": uid,
        "limits": {k: limits[k] for k in LIMIT_KEYS},
    }


def _checked(spec):
    """``spec`` checked again (:func:`make_spec`); ``ValueError`` if it is none."""
    if not isinstance(spec, dict) or set(spec) != {"cwd", "cgroups", "mounts", "uid", "limits"}:
        raise ValueError(f"spec must come from make_spec, got {spec!r:.200}")
    return make_spec(**spec)


def apply_mounts(libc, mounts):
    """In the child, as root: the mounts of a specification. :func:`private_mounts` with
    ``tmp_bytes``, ``keep``, ``cover``, ``network`` and ``tmp_from``; then, if they
    applied, the loopback brought up (``loopback``: processes of the child talk to each
    other, nbgrader and its kernel, over a ``127.0.0.1`` of their own) and each folder of
    ``hide`` covered by an empty read-only tmpfs (:func:`cover_empty`).

    Returns
    -------
    bool
        False (nothing changed) where a mount namespace is not allowed.
    """
    _check_mounts(mounts)
    if not private_mounts(
        libc,
        mounts["tmp_bytes"],
        keep=[(str(p), bool(ro)) for p, ro in mounts["keep"]],
        cover=mounts["cover"],
        network=mounts["network"],
        tmp_from=mounts["tmp_from"],
    ):
        return False
    if mounts["loopback"]:
        loopback_up()
    for folder in mounts["hide"]:
        cover_empty(libc, folder)
    return True


def apply(spec, forked=False, memory_base=0):
    """In the child (between ``fork`` and ``exec``, or in a forked child that runs on
    without one): confine this process as ``spec`` says (:func:`make_spec`), in the order
    of this module's description.

    Parameters
    ----------
    spec : dict
        From :func:`make_spec` (checked again here).
    forked : bool
        True in a child forked without ``exec``: it is made dumpable again after the drop
        to ``uid``.
    memory_base : int
        Bytes added to the address-space limit: what this process maps already
        (:func:`mapped_bytes`) in a forked child that runs on in its server's image, so
        that its own data gets the room a started child's gets.

    Raises
    ------
    ValueError
        If ``spec`` is not a specification.
    OSError
        If a cgroup cannot be joined or the user id taken (the child must not run then).
    """
    spec = _checked(spec)
    uid, lim = spec["uid"], spec["limits"]
    libc = load_libc() if spec["mounts"] is not None or (forked and uid is not None) else None
    if spec["cwd"] is not None:
        os.chdir(spec["cwd"])
    if spec["cgroups"]:
        join_cgroups(spec["cgroups"])
    os.setsid()
    if spec["mounts"] is not None and libc is not None:
        apply_mounts(libc, spec["mounts"])
    if uid is not None:
        drop_to(uid)
    set_limits(
        cpu_s=lim["cpu_s"],
        cpu_grace_s=lim["cpu_grace_s"],
        memory_bytes=int(lim["memory_bytes"]) + int(memory_base),
        file_bytes=lim["file_bytes"],
        processes=lim["processes"] if uid is not None else None,
    )
    if forked and uid is not None and libc is not None:
        libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)


def preexec(spec):
    """The ``preexec_fn`` of a started child confined by ``spec`` (:func:`make_spec`,
    checked now): :func:`apply` between ``fork`` and ``exec``."""
    spec = _checked(spec)

    def start():
        apply(spec)

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
