"""What student code may reach here: the grader's policy and the probes that say what
this machine allows.

* which folders a confined child keeps, covers and hides (:func:`cleanroom_mounts`,
  :func:`sandbox_mounts`: the ``mounts`` of :func:`autograder.confine.make_spec`), from
  what other users may reach (:func:`world_can`, :func:`closed_ancestor`) and where the
  reference and the grader lie (:func:`reference_folders`);
* the interpreter a sandbox user may run (:func:`sandbox_python`);
* whether the machine grants the namespaces (:func:`namespaces_allowed`,
  :func:`kernel_namespaces_allowed`), and what the confinement lacks where it does not
  (:func:`protection_gaps`, said at grading time and in ``grading_issues.csv``).
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

from .confine import TMP_DIRS, drop_to, kernel_namespaces, load_libc
from .sandbox_users import new_uid

__all__ = [
    "PRIVATE_PACKAGES",
    "world_can",
    "closed_ancestor",
    "reference_folders",
    "sandbox_python",
    "cleanroom_mounts",
    "sandbox_mounts",
    "namespaces_allowed",
    "kernel_namespaces_allowed",
    "protection_gaps",
]

# flags of unshare(2) (linux/sched.h)
_CLONE_NEWNS, _CLONE_NEWNET = 0x00020000, 0x40000000


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


# ----------------------------------------------------------------- what a child mounts
def cleanroom_mounts(tmp_bytes, keep=(), cover=(), hide=(), tmp_from=None):
    """The mounts of a clean-room child (:func:`autograder.confine.make_spec`): private,
    size-limited temporary folders (those inside ``tmp_from``, the room's size-capped
    disk, where given), ``cover`` (the repository, the course) covered by empty tmpfs,
    no network, and ``hide`` (the reference and grading packages wherever installed)
    covered by empty read-only tmpfs once the rest is in place.

    Parameters
    ----------
    tmp_bytes : int
        Size of each fresh private tmpfs in bytes.
    keep : sequence of str
        Folders the child still needs (the site-packages it imports NumPy from, the
        interpreter's folder); those that lie under a temporary or a covered folder (a
        clone checked out in ``/tmp``, a virtual environment inside the repository) are
        bound back read-only at the same path.
    cover, hide : sequence of str
        Folders covered (only those that exist).
    tmp_from : str or None
        A folder holding :func:`autograder.confine.tmp_folders`, or None for fresh tmpfs.

    Returns
    -------
    dict
        The ``mounts`` of a specification.
    """
    cover = [os.path.realpath(c) for c in cover]
    tops = list(TMP_DIRS) + cover
    kept = [os.path.realpath(k) for k in keep]
    return {
        "tmp_bytes": int(tmp_bytes),
        "keep": [[k, True] for k in kept if any(k.startswith(w + "/") for w in tops)],
        "cover": [c for c in cover if os.path.isdir(c)],
        "network": False,
        "loopback": False,
        "tmp_from": None if tmp_from is None else str(tmp_from),
        "hide": [str(h) for h in hide],
    }


def sandbox_mounts(top, hide, tmp_bytes, readable):
    """The mounts of one student's nbgrader run (:func:`autograder.confine.make_spec`): a
    network namespace whose only interface is a loopback of its own (no route to the
    machine's services), private temporary folders (those of
    :func:`autograder.confine.tmp_folders` inside ``top``, the sandbox folder, which is
    bound back writable, so that all the run writes lands on ``top``'s file system),
    ``hide`` covered by empty read-only tmpfs, and the folders ``readable`` (the
    interpreter's installation, the project) kept reachable read-only under a closed home
    directory or a temporary folder.

    Parameters
    ----------
    top : str
        The sandbox folder.
    hide : sequence of str
        Folders to cover (the real course directory); one that holds ``top`` or a
        readable folder, or lies in a temporary folder, is left alone.
    tmp_bytes : int
        Size of each fresh private tmpfs in bytes.
    readable : sequence of str
        Folders the run reads.

    Returns
    -------
    dict
        The ``mounts`` of a specification.
    """

    def under_tmp(p):
        return any(p == w or p.startswith(w + "/") for w in TMP_DIRS)

    ro = {os.path.realpath(p) for p in readable}
    closed = {str(c) for c in {closed_ancestor(p) for p in ro} - {None}}
    keep_ro = [p for p in sorted(ro) if under_tmp(p) or any(p.startswith(c + "/") for c in closed)]
    covered = []
    for h in hide:
        h = os.path.realpath(h)
        inside = [p for p in [str(top), *ro] if p == h or p.startswith(h + "/")]
        if os.path.isdir(h) and not under_tmp(h) and not inside:
            covered.append(h)
    return {
        "tmp_bytes": int(tmp_bytes),
        "keep": [[p, True] for p in keep_ro] + [[str(top), False]],
        "cover": sorted(closed),
        "network": False,
        "loopback": True,
        "tmp_from": str(top),
        "hide": covered,
    }


def kernel_namespaces_allowed():
    """True if a notebook's kernel can be given the namespaces of
    :func:`autograder.confine.kernel_namespaces` here (tried in a forked child that exits
    at once, under a sandbox user id when the grader is root, as the kernels run)."""
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
