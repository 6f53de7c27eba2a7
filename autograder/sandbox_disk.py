"""The size-capped disk of a sandbox: one tmpfs that holds all a sandbox may write.

The grader (as root, in its own mount namespace) mounts a tmpfs of the sandbox's size on
its empty folder (:func:`mount_disk`) before anything is written there, and takes it off
afterwards (:func:`unmount_disk`); the confined child binds the temporary folders inside
it onto ``/tmp``, ``/dev/shm`` and the rest (:func:`autograder.confine.tmp_folders`,
made empty before each run by :func:`make_tmp_folders`), so that what it writes anywhere
counts against one cap, whatever the number of files.
"""

from __future__ import annotations

import os
import shutil

from .confine import tmp_folders

__all__ = ["make_tmp_folders", "mount_disk", "unmount_disk"]

# flags of mount(2) and umount2(2) (linux/mount.h)
_MS_NOSUID, _MS_NODEV, _MNT_DETACH = 0x2, 0x4, 0x2


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
