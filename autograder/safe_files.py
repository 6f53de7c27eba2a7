"""Reading what students handed in without following their links.

A submission folder is written by students (or unpacked from what they uploaded), so any
name in it may be a symbolic link (to another student's notebook, to the gradebook, to a
root-only file), a FIFO that blocks whoever opens it, a device such as ``/dev/zero`` that
never ends, or a file too large to hold in memory. The functions here read only regular
files, open them without following a link in the last component (``O_NOFOLLOW``) and check
what they opened (``fstat``) before reading at most a fixed number of bytes, and never walk
into a linked folder. A zip file is opened only once its stated number of members is
known to be small (:func:`open_zip`), and its members are read one at a time, each and
all together under a cap (:func:`zip_members`). What they refuse comes back with a reason
for ``grading_issues.csv``.
"""

from __future__ import annotations

import os
import shutil
import stat
import struct
import zipfile
from pathlib import Path

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_ZIP_BYTES",
    "MAX_ZIP_MEMBERS",
    "Refused",
    "open_regular",
    "open_zip",
    "read_regular",
    "rebuild_folder",
    "walk_regular",
    "zip_members",
]

#: the largest file of a submission that is read: a notebook with its outputs and figures
MAX_FILE_BYTES = 32 << 20
#: the most members a zip file of a submission may have (its notebooks, their data,
#: an editor's and an archiver's leftovers)
MAX_ZIP_MEMBERS = 1000
#: the most bytes that the notebooks of one zip file may unpack to, all together
MAX_ZIP_BYTES = 4 * MAX_FILE_BYTES

_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


class Refused(Exception):
    """A file of a submission that is not read; ``str()`` is the reason."""


def _kind(mode):
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a regular file"


def _check_limit(limit, name="limit"):
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f"{name} must be an integer >= 0, got {limit!r}")
    return limit


def _open(path, top):
    """A descriptor of ``path`` opened with :data:`_FLAGS`; under ``top``, every folder on
    the way is opened without following a link too (``dir_fd`` by ``dir_fd``)."""
    if top is None:
        return os.open(os.fspath(path), _FLAGS)
    parts = Path(path).parts
    if not parts or Path(path).is_absolute() or ".." in parts:
        raise ValueError(f"path must be relative to top and stay inside it, got {path!r}")
    folder = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(top, folder)
    try:
        for name in parts[:-1]:
            nxt = os.open(name, folder | getattr(os, "O_NOFOLLOW", 0), dir_fd=fd)
            os.close(fd)
            fd = nxt
        return os.open(parts[-1], _FLAGS, dir_fd=fd)
    finally:
        os.close(fd)


def _why_not_opened(path, top, exc):
    full = Path(path) if top is None else Path(top, path)
    if top is not None:  # only then are the folders on the way refused when linked
        parts = full.parts
        for i in range(len(Path(top).parts) + 1, len(parts)):
            if os.path.islink(Path(*parts[:i])):
                return "lies in a linked folder: not read"
    try:
        mode = os.lstat(full).st_mode
    except OSError:
        return f"cannot be opened ({type(exc).__name__})"
    return f"is {_kind(mode)}: not read"


def open_regular(path, limit=MAX_FILE_BYTES, *, top=None):
    """The regular file ``path`` opened for reading (binary) without following a link.

    Parameters
    ----------
    path : str or os.PathLike
        The file. A symbolic link (in the last component), a FIFO, a device or a socket is
        refused, and so is a file of more than ``limit`` bytes.
    limit : int
        Largest size accepted, ``>= 0``.
    top : str or os.PathLike, optional
        A folder that ``path`` is relative to: then no folder between ``top`` and the file
        may be a link either (for folders someone else can write into).

    Returns
    -------
    (file object, os.stat_result)
        The open file (the caller closes it) and the ``fstat`` of what was opened.

    Raises
    ------
    Refused
        With the reason, when the file is not opened.
    ValueError
        If ``limit`` is not an integer >= 0, or ``path`` leaves ``top``.
    """
    limit = _check_limit(limit)
    try:
        fd = _open(path, top)
    except OSError as exc:
        raise Refused(_why_not_opened(path, top, exc)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Refused(f"is {_kind(st.st_mode)}: not read")
        if st.st_size > limit:
            raise Refused(f"is larger than {limit:,} bytes ({st.st_size:,}): not read")
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb"), st


def read_regular(path, limit=MAX_FILE_BYTES, *, top=None, full_stat=False):
    """The bytes and modification time of the regular file ``path``, read without following
    a link (see :func:`open_regular`, which takes the same arguments); with ``full_stat``
    the whole ``os.stat_result`` of the file opened instead of its ``st_mtime``.

    Parameters
    ----------
    path : str or os.PathLike
    limit : int
        Most bytes read, ``>= 0``.
    top : str or os.PathLike, optional
        The folder ``path`` is relative to; no folder on the way may be a link.

    Returns
    -------
    (bytes, float)
        The content and ``st_mtime`` of the file opened.

    Raises
    ------
    Refused
        With the reason, when the file is not read (also when it grows past ``limit``
        while being read).
    ValueError
        If ``limit`` is not an integer >= 0, or ``path`` leaves ``top``.
    """
    fh, st = open_regular(path, limit, top=top)
    with fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise Refused(f"is larger than {limit:,} bytes: not read")
    return data, (st if full_stat else st.st_mtime)


def walk_regular(top, suffix=None):
    """Paths of the regular files under the folder ``top``, never entering a linked folder,
    and the other entries refused.

    Parameters
    ----------
    top : str or os.PathLike
        A folder; it must not itself be a symbolic link.
    suffix : str, optional
        Keep only names ending with it (for example ``".ipynb"``); the others are neither
        returned nor refused.

    Returns
    -------
    files : list of pathlib.Path
        Sorted.
    refused : list of (pathlib.Path, str)
        Links, FIFOs, devices and sockets (with the suffix, when one is given), and linked
        folders, each with its reason.

    Raises
    ------
    Refused
        If ``top`` is a symbolic link or not a folder.
    """
    top = Path(top)
    mode = os.lstat(top).st_mode
    if not stat.S_ISDIR(mode):
        raise Refused(f"is {_kind(mode)}: not read")
    files, refused = [], []
    for root, dirs, names in os.walk(top, followlinks=False):
        base = Path(root)
        for d in list(dirs):
            if os.path.islink(base / d):
                dirs.remove(d)
                refused.append((base / d, "is a symbolic link to a folder: not read"))
        dirs.sort()
        for name in sorted(names):
            if suffix is not None and not name.endswith(suffix):
                continue
            path = base / name
            mode = os.lstat(path).st_mode
            if stat.S_ISREG(mode):
                files.append(path)
            else:
                refused.append((path, f"is {_kind(mode)}: not read"))
    return sorted(files), refused


def _directory_size(fh):
    """(members, central directory bytes) that the end record of the zip file ``fh``
    states, read the way :class:`zipfile.ZipFile` reads it (its ZIP64 record included)."""
    end_record = getattr(zipfile, "_EndRecData", None)
    if end_record is None:  # pragma: no cover - a Python whose zipfile changed
        raise Refused("cannot be checked for its size before it is opened: not read")
    try:
        rec = end_record(fh)
    except (OSError, EOFError, ValueError, struct.error):
        rec = None
    if not rec:
        raise Refused("is not a readable zip file")
    return int(rec[zipfile._ECD_ENTRIES_TOTAL]), int(rec[zipfile._ECD_SIZE])


def open_zip(fh, members=MAX_ZIP_MEMBERS):
    """The zip file read from ``fh``, once its size is known to be small enough.

    :class:`zipfile.ZipFile` builds one object per member as it opens a file, from a
    central directory whose size the file states; a small file can state a million
    members. The end record is therefore read first (as ``ZipFile`` reads it), and a
    file that states more than ``members`` members, or a central directory larger than
    ``members`` KiB, is refused before it is opened.

    Parameters
    ----------
    fh : binary file object
        Open for reading, seekable.
    members : int
        Most members accepted, ``>= 0``.

    Returns
    -------
    zipfile.ZipFile

    Raises
    ------
    Refused
        When the file is not a readable zip file or has too many members.
    ValueError
        If ``members`` is not an integer >= 0 or ``fh`` is not a readable file.
    """
    members = _check_limit(members, "members")
    if not callable(getattr(fh, "read", None)) or not callable(getattr(fh, "seek", None)):
        raise ValueError(f"fh must be a binary file open for reading, got {type(fh).__name__}")
    count, size = _directory_size(fh)
    if count > members or size > members * 1024:
        raise Refused(f"has {count:,} members (at most {members:,} are read): not read")
    try:
        zf = zipfile.ZipFile(fh)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError, struct.error):
        raise Refused("is not a readable zip file") from None
    if len(zf.infolist()) > members:
        zf.close()
        raise Refused(f"has more than {members:,} members: not read")
    return zf


def zip_members(zf, suffix=None, limit=MAX_FILE_BYTES, total=MAX_ZIP_BYTES):
    """The members of an open zip file that are regular files, read one at a time.

    A generator: each member is decompressed when the caller asks for it, at most
    ``limit`` bytes of it (its header's size is not trusted), and only one is held at a
    time. Before the first is read, the sizes the members state are added up: past
    ``total`` the whole file is refused (a small file that unpacks to gigabytes). Only
    the two methods that archivers use for notebooks (stored, deflate) are read; the
    others decompress in one step whatever a chunk holds.

    Parameters
    ----------
    zf : zipfile.ZipFile
    suffix : str, optional
        Keep only names ending with it.
    limit : int
        Most bytes read of one member, ``>= 0``.
    total : int
        Most bytes read of all the members kept, ``>= 0``.

    Yields
    ------
    (zipfile.ZipInfo, bytes or None, str or None)
        The member, its content, and None; or the member, None and the reason it is
        not read (a link, too large, another compression method).

    Raises
    ------
    Refused
        Before the first member, when the members kept state more than ``total``
        bytes in all; while reading, when they unpack to more.
    ValueError
        If ``zf`` is not a ZipFile or a limit is not an integer >= 0.
    """
    if not isinstance(zf, zipfile.ZipFile):
        raise ValueError(f"zf must be a zipfile.ZipFile, got {type(zf).__name__}")
    limit = _check_limit(limit)
    total = _check_limit(total, "total")
    kept = [
        info
        for info in zf.infolist()
        if not info.is_dir() and (suffix is None or info.filename.endswith(suffix))
    ]
    stated = sum(min(info.file_size, limit + 1) for info in kept)
    if stated > total:
        raise Refused(f"unpacks to more than {total:,} bytes ({stated:,} stated): not read")
    return _read_members(zf, kept, limit, total)


def _read_members(zf, kept, limit, total):
    read = 0
    for info in kept:
        mode = info.external_attr >> 16  # Unix mode, when the zip was made on Unix
        if stat.S_IFMT(mode) and not stat.S_ISREG(mode):  # many writers set no type bits
            yield info, None, f"is {_kind(mode)} in the zip file: not read"
            continue
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            yield (
                info,
                None,
                (
                    "is compressed with a method other than deflate "
                    f"(zip method {info.compress_type}): not read"
                ),
            )
            continue
        if info.file_size > limit:
            yield info, None, f"is larger than {limit:,} bytes ({info.file_size:,}): not read"
            continue
        with zf.open(info) as fh:
            data = fh.read(limit + 1)
        read += len(data)
        if read > total:
            raise Refused(f"unpacks to more than {total:,} bytes: not read")
        if len(data) > limit:
            yield info, None, f"is larger than {limit:,} bytes: not read"
            continue
        yield info, data, None


def _fresh_folder(parent_fd, name, owner, empty):
    """A descriptor of the real folder ``name`` in ``parent_fd``: whatever else stands
    there (a link, a file) is removed first, never followed; with ``empty`` a folder that
    is there is removed too. A folder made is given to ``owner`` (a user id) if any."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
    except FileNotFoundError:
        st = None
    if st is not None and (empty or not stat.S_ISDIR(st.st_mode)):
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(name, dir_fd=parent_fd)
        else:
            os.unlink(name, dir_fd=parent_fd)
        st = None
    if st is None:
        os.mkdir(name, 0o755, dir_fd=parent_fd)
        if owner is not None:
            os.chown(name, owner, owner, dir_fd=parent_fd, follow_symlinks=False)
    return os.open(name, flags, dir_fd=parent_fd)


def rebuild_folder(top, path, files, owner=None):
    """Make ``top/path`` a new folder holding exactly ``files``, following no link.

    For a folder that someone else could write into (a sandbox's copy of a course, where
    a student's kernel may have put a link to another student's folder in place of its
    own): every folder from ``top`` down is opened without following a link, and one that
    is a link or a file is replaced by a new folder; the last folder is removed with what
    it holds and made anew; each file is created there (``O_EXCL | O_NOFOLLOW``), so
    nothing is written outside ``top``.

    Parameters
    ----------
    top : str or os.PathLike
        A folder that only the caller can change (``path`` is inside it).
    path : str or os.PathLike
        Relative, without ``..``.
    files : dict of str to bytes
        File name (no folder) -> content.
    owner : int, optional
        User id given the folders made and the files written.

    Raises
    ------
    ValueError
        If ``path`` leaves ``top``, a file name holds a folder, or a content is not bytes.
    """
    parts = Path(path).parts
    if not parts or Path(path).is_absolute() or ".." in parts:
        raise ValueError(f"path must be relative to top and stay inside it, got {path!r}")
    for name, data in files.items():
        if not name or Path(name).name != name or name in (".", ".."):
            raise ValueError(f"files must be named without a folder, got {name!r}")
        if not isinstance(data, (bytes, bytearray)):
            raise ValueError(f"files[{name!r}] must be bytes, got {type(data).__name__}")
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        for i, name in enumerate(parts):
            nxt = _fresh_folder(fd, name, owner, empty=i == len(parts) - 1)
            os.close(fd)
            fd = nxt
        for name, data in files.items():
            out = os.open(
                name,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                0o644,
                dir_fd=fd,
            )
            with os.fdopen(out, "wb") as fh:
                fh.write(data)
                if owner is not None:
                    os.fchown(fh.fileno(), owner, owner)
    finally:
        os.close(fd)
