"""Reading one features file: ``.npz``, ``.npy`` (with its labels file) or PyTorch ``.pt``.

Shapes, dtypes and label counts are checked from the ``.npy`` headers (of a file, or of
the members of an ``.npz`` archive) before any data is read, so a mismatch is refused at
once however large the file. A ``.npy`` file is memory-mapped, float32 features stay
float32, and the passes over the data (finite values, all-zero rows) go a block of rows
at a time. Every problem raises :class:`InputError` with one line that names the
argument and the file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


class InputError(Exception):
    """Bad user input: reported in one line with exit status 2."""


def _labels_path_for(path):
    """Sibling labels file of a ``.npy`` features file."""
    name = path.name
    stem = name[: -len(".npy")]
    i = stem.rfind("features")
    if i >= 0:
        return path.with_name(stem[:i] + "labels" + stem[i + len("features") :] + ".npy")
    return path.with_name(stem + "_labels.npy")


def _to_numpy(obj, what):
    if hasattr(obj, "detach") and hasattr(obj, "cpu"):  # a torch tensor
        obj = obj.detach().cpu()
        if str(getattr(obj, "dtype", "")) == "torch.bfloat16":
            obj = obj.float()
        return obj.numpy()
    try:
        return np.asarray(obj)
    except Exception as exc:  # noqa: BLE001 - any conversion failure is bad input
        raise InputError(f"{what} cannot be read as an array ({exc})") from None


_NPY_MAGIC = b"\x93NUMPY"


def _member_header(zf, member):
    """``(shape, dtype)`` of the ``.npy`` member ``member`` of an open zip archive, from its
    header."""
    with zf.open(member) as fh:
        version = np.lib.format.read_magic(fh)
        read = (
            np.lib.format.read_array_header_1_0
            if version == (1, 0)
            else np.lib.format.read_array_header_2_0
        )
        shape, _, dtype = read(fh)
    return shape, dtype


def _read_npz(path, arg, need_labels, announce):
    import zipfile

    if not zipfile.is_zipfile(path):
        with open(path, "rb") as fh:
            head = fh.read(len(_NPY_MAGIC))
        hint = (
            "it is a .npy array file: rename it to .npy"
            if head == _NPY_MAGIC
            else "np.savez writes a zip archive; this file is not one"
        )
        raise InputError(f"{arg} file {path} is not a valid .npz archive ({hint})")
    who = f"{arg} file {path}"
    try:
        with zipfile.ZipFile(path) as zf:
            members = set(zf.namelist())
            keys = {m[: -len(".npy")] for m in members if m.endswith(".npy")}
            if "features" not in keys:
                raise InputError(
                    f"{arg} file {path} has no array 'features' (it holds: "
                    f"{', '.join(sorted(keys)) or 'nothing'})"
                )
            shape, dtype = _member_header(zf, "features.npy")
            _check_feature_header(shape, dtype, who)
            if "labels" in keys:
                lshape, ldtype = _member_header(zf, "labels.npy")
                _check_label_header(lshape, ldtype, who, shape[0])
        announce(shape, dtype)
        with np.load(path, allow_pickle=False) as data:
            feats = data["features"]
            labels = data["labels"] if "labels" in keys else None
    except InputError:
        raise
    except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile) as exc:
        raise InputError(
            f"{arg} file {path} is not a readable .npz archive ({_short(exc)})"
        ) from None
    if labels is None and need_labels:
        raise InputError(
            f"{arg} file {path} has no array 'labels' (it holds: {', '.join(sorted(keys))})"
        )
    return feats, labels


def _labels_candidates(path):
    """Where the labels of a ``.npy`` features file may sit, in the order they are tried.

    The sibling whose name has ``features`` replaced by ``labels`` (or ``NAME_labels.npy``),
    then ``labels.npy`` in the same folder, which is how the loop's feature cache stores
    them (``MODEL/DATA/__flat.npy`` and ``MODEL/DATA/labels.npy``).
    """
    first = _labels_path_for(path)
    shared = path.with_name("labels.npy")
    return [first] if shared in (first, path) else [first, shared]


def _map_npy(path, what):
    """The array of a ``.npy`` file mapped read-only: its header is read, its data not yet."""
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise InputError(f"{what} {path} is not a readable .npy array ({_short(exc)})") from None


def _read_npy(path, arg, need_labels, announce):
    """Features and labels of a ``.npy`` pair, both memory-mapped; shapes checked from the headers.

    Nothing of the data is read before the dtypes, the shapes and the label count agree,
    so a wrong file is refused at once whatever its size.
    """
    feats = _map_npy(path, f"{arg} file")
    who = f"{arg} file {path}"
    _check_feature_header(feats.shape, feats.dtype, who)
    candidates = _labels_candidates(path)
    lpath = next((c for c in candidates if c.exists()), None)
    if lpath is None:
        if need_labels:
            raise InputError(
                f"{arg}: labels file {candidates[0]} not found (for a .npy features file the "
                f"labels are read from {candidates[0].name}"
                + (" or labels.npy in the same folder)" if len(candidates) > 1 else ")")
            )
        announce(feats.shape, feats.dtype)
        return feats, None
    labels = _map_npy(lpath, f"{arg} labels file")
    _check_label_header(labels.shape, labels.dtype, who, feats.shape[0])
    announce(feats.shape, feats.dtype)
    return feats, np.array(labels)


def _read_pt(path, arg, need_labels, announce):
    import zipfile

    import torch

    with open(path, "rb") as fh:
        head = fh.read(2)
    if not head:
        raise InputError(f"{arg} file {path} is empty")
    # torch.save writes a zip archive (the legacy format is a pickle, first byte 0x80)
    if not zipfile.is_zipfile(path) and head == b"PK":
        raise InputError(
            f"{arg} file {path} is a truncated or corrupted PyTorch file (its zip "
            "archive cannot be read)"
        )
    if not zipfile.is_zipfile(path) and head[:1] != b"\x80":
        raise InputError(
            f"{arg} file {path} is not a valid PyTorch file (torch.save writes a zip "
            "archive; this file is neither that nor a legacy pickle)"
        )
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - torch raises many kinds on bad files
        raise InputError(_pt_load_error(path, arg, exc)) from None
    if isinstance(obj, dict):
        if "features" not in obj:
            raise InputError(
                f"{arg} file {path} has no entry 'features' (it holds: "
                f"{', '.join(sorted(map(str, obj))) or 'nothing'})"
            )
        feats, labels = obj["features"], obj.get("labels")
    elif isinstance(obj, (tuple, list)) and len(obj) == 2:
        feats, labels = obj
    else:
        raise InputError(
            f"{arg} file {path} must hold a dict with 'features' and 'labels' or a pair "
            f"(features, labels), got {type(obj).__name__}"
        )
    if labels is None and need_labels:
        raise InputError(f"{arg} file {path} has no entry 'labels'")
    feats = _to_numpy(feats, f"{arg} file {path}: features")
    announce(feats.shape, feats.dtype)
    return feats, None if labels is None else _to_numpy(labels, f"{arg} file {path}: labels")


def _pt_load_error(path, arg, exc):
    """One line explaining why ``torch.load(path, weights_only=True)`` failed."""
    import re

    text = str(exc)
    found = re.search(r"GLOBAL (\S+)", text)
    if found:
        return (
            f"{arg} file {path} holds Python objects other than tensors ({found.group(1)}), "
            "which repeval does not unpickle; save torch tensors, e.g. torch.save({'features': "
            "torch.as_tensor(X), 'labels': torch.as_tensor(y)}, path)"
        )
    if "zip archive" in text or isinstance(exc, EOFError):
        return (
            f"{arg} file {path} is a truncated or corrupted PyTorch file (the archive cannot be "
            "read)"
        )
    if type(exc).__name__ == "UnpicklingError":
        return f"{arg} file {path} is a corrupted PyTorch file (its contents cannot be unpickled)"
    return f"{arg} file {path} is not a readable PyTorch file ({type(exc).__name__}: {_short(exc)})"


def _short(exc):
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def load_features(path, arg, need_labels=True):
    """Read ``(features, labels)`` from an .npz, .npy or .pt file; validate both.

    Parameters
    ----------
    path : str or os.PathLike
        A features file, or one folder of the loop's feature cache.
    arg : str
        The role of the input in the command (``TRAIN``, ``A``, an encoder's name):
        every error line starts with it and names the file.
    need_labels : bool
        Whether a missing labels array is an error.

    Returns
    -------
    features : numpy.ndarray of float32 or float64, shape (n, d)
        Float32 and float64 files keep their dtype (a ``.npy`` file stays memory-mapped);
        other numeric dtypes are read as float64.
    labels : numpy.ndarray of int64, shape (n,), or None (only when not needed)
    """
    feats, labels, _ = read_file(path, arg, need_labels)
    return feats, labels


#: the final output in a folder of the loop's feature cache
FLAT_FILE = "__flat.npy"


def feature_file_in(folder, arg):
    """The features file of one folder of the loop's feature cache.

    A cache folder ``MODEL/DATA`` holds ``meta.json``, ``labels.npy`` and one ``.npy``
    array per (block, pooling); the final output is ``__flat.npy``. A folder with
    exactly one array besides ``labels.npy`` is read too.
    """
    folder = Path(folder)
    arrays = sorted(p.name for p in folder.glob("*.npy") if p.name != "labels.npy")
    if FLAT_FILE in arrays:
        return folder / FLAT_FILE
    if len(arrays) == 1:
        return folder / arrays[0]
    if arrays:
        raise InputError(
            f"{arg} folder {folder} holds several feature arrays ({', '.join(arrays[:6])}"
            f"{', ...' if len(arrays) > 6 else ''}); name the one to evaluate"
        )
    raise InputError(
        f"{arg} is a folder without feature arrays: {folder} (give a .npz, .npy or .pt "
        "file, or a folder written by repeval loop)"
    )


def read_file(path, arg, need_labels=True, *, progress=None):
    """:func:`load_features`, plus the path of the file actually read.

    A folder of the loop's cache stands for its features file (``__flat.npy``), so
    error lines and row numbers refer to that file. With a ``progress``
    (:class:`~repeval_ref.cli._progress.Progress`), one stage line names the file, its
    shape and dtype once its header has passed the checks, before its data are read.

    Returns
    -------
    features, labels : numpy.ndarray (labels None when absent and not needed)
    file : pathlib.Path
    """
    if not isinstance(arg, str) or not arg:
        raise ValueError(f"arg must be a non-empty string, got {arg!r}")
    path = Path(path)
    if not path.exists():
        raise InputError(f"{arg} file not found: {path}")
    if path.is_dir():
        path = feature_file_in(path, arg)
    suffix = path.suffix.lower()

    def announce(shape, dtype):
        if progress is not None and len(shape) == 2:
            progress.stage(f"reading {arg} file {path}: {shape[0]} x {shape[1]} {dtype}")

    if suffix == ".npz":
        feats, labels = _read_npz(path, arg, need_labels, announce)
    elif suffix == ".npy":
        feats, labels = _read_npy(path, arg, need_labels, announce)
    elif suffix in (".pt", ".pth"):
        feats, labels = _read_pt(path, arg, need_labels, announce)
    else:
        raise InputError(
            f"{arg} file {path} has an unsupported type {suffix or '(none)'}; use .npz, .npy or .pt"
        )
    who = f"{arg} file {path}"
    feats = _check_features(feats, who)
    if labels is not None:
        labels = _check_labels(labels, who, feats.shape[0])
    return feats, labels, path


#: feature dtypes kept as they are; every other numeric dtype is read as float64
KEPT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))

#: bytes of one block of rows in the passes over the features (finite values, zero rows)
BLOCK_BYTES = 32 << 20


def _is_numeric(dtype):
    return dtype != np.dtype(object) and (np.issubdtype(dtype, np.number) or dtype == np.bool_)


def _check_feature_header(shape, dtype, who):
    """Refuse features by their dtype and shape alone (what a file header holds)."""
    if not _is_numeric(dtype):
        raise InputError(f"{who}: features must be numeric, got dtype {dtype}")
    if np.issubdtype(dtype, np.complexfloating):
        raise InputError(f"{who}: features must be real numbers, got dtype {dtype}")
    if len(shape) != 2:
        raise InputError(f"{who}: features must be a 2-D array (n, d), got shape {tuple(shape)}")
    if shape[0] == 0 or shape[1] == 0:
        raise InputError(f"{who}: features are empty (shape {tuple(shape)})")


def _check_label_header(shape, dtype, who, n):
    """Refuse labels by their dtype and shape alone, ``n`` being the number of feature rows."""
    if not _is_numeric(dtype):
        raise InputError(f"{who}: labels must be integers, got dtype {dtype}")
    if len(shape) != 1:
        raise InputError(f"{who}: labels must be a 1-D array, got shape {tuple(shape)}")
    if shape[0] != n:
        raise InputError(
            f"{who}: {n} feature rows but {shape[0]} labels; they must have the same length"
        )


def row_blocks(X, block_bytes=None):
    """Slices of consecutive rows of ``X`` holding about ``block_bytes`` each.

    Parameters
    ----------
    X : numpy.ndarray, shape (n, d)
    block_bytes : int, positive, optional
        Default :data:`BLOCK_BYTES`.

    Returns
    -------
    list of slice
        Covering ``0 .. n`` in order; at least one row each.
    """
    X = np.asanyarray(X)
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D array, got shape {X.shape}")
    block_bytes = BLOCK_BYTES if block_bytes is None else block_bytes
    if not isinstance(block_bytes, (int, np.integer)) or block_bytes < 1:
        raise ValueError(f"block_bytes must be a positive integer, got {block_bytes!r}")
    step = max(1, int(block_bytes) // max(1, X.itemsize * X.shape[1]))
    return [slice(lo, min(lo + step, X.shape[0])) for lo in range(0, X.shape[0], step)]


def rows_to_map(X, rows, block_bytes=None):
    """The rows ``rows`` of ``X`` as a read-only memory map of their own, copied a block at a time.

    The rows are written, in order, into a temporary ``.npy`` file of the system's
    temporary folder, which is mapped read-only and removed at once (the map keeps its
    data until it is released). When ``X`` is a read-only memory map its pages are
    released after each block, so a split of a feature file is held as the file itself
    is: float32 stays float32, and the passes over the rows read the map a block at a
    time.

    Parameters
    ----------
    X : numpy.ndarray, shape (n, d)
    rows : numpy.ndarray of int, shape (m,)
        Row indices into ``X``, each in ``0 .. n - 1``.
    block_bytes : int, positive, optional
        Bytes of one block of the copy (default :data:`BLOCK_BYTES`).

    Returns
    -------
    numpy.memmap, shape (m, d)
        ``X[rows]``, with the dtype of ``X``, mapped read-only.
    """
    import os
    import tempfile

    from .._blocks import release_pages

    if not isinstance(X, np.ndarray) or X.ndim != 2:
        raise ValueError(f"X must be a 2-D numpy array, got shape {getattr(X, 'shape', None)}")
    rows = np.asarray(rows)
    if rows.ndim != 1 or not np.issubdtype(rows.dtype, np.integer):
        raise ValueError(f"rows must be a 1-D array of integers, got {rows.dtype} {rows.shape}")
    if rows.size and (rows.min() < 0 or rows.max() >= X.shape[0]):
        raise ValueError(f"rows must lie in 0 .. {X.shape[0] - 1}")
    header = {
        "descr": np.lib.format.dtype_to_descr(X.dtype),
        "fortran_order": False,
        "shape": (rows.size, X.shape[1]),
    }
    fd, path = tempfile.mkstemp(prefix="repeval-rows-", suffix=".npy")
    try:
        with os.fdopen(fd, "wb") as fh:
            np.lib.format.write_array_header_1_0(fh, header)
            for block in row_blocks(np.empty((rows.size, X.shape[1]), X.dtype), block_bytes):
                np.ascontiguousarray(X[rows[block]]).tofile(fh)
                release_pages(X)
        return np.load(path, mmap_mode="r", allow_pickle=False)
    finally:
        os.remove(path)


def _check_features(X, who):
    """Check features; float32 and float64 keep their dtype (a memory map stays one).

    NaN and infinite values are looked for a block of rows at a time, so a memory-mapped
    file is never copied whole.
    """
    _check_feature_header(X.shape, X.dtype, who)
    if X.dtype not in KEPT_DTYPES:
        X = X.astype(np.float64)
    for rows in row_blocks(X):
        finite = np.isfinite(X[rows])
        if not finite.all():
            row = rows.start + int(np.flatnonzero(~finite.all(axis=1))[0])
            raise InputError(f"{who}: features contain NaN or infinite values (first in row {row})")
    return X


def _check_labels(y, who, n):
    _check_label_header(y.shape, y.dtype, who, n)
    if not np.issubdtype(y.dtype, np.integer) and y.dtype != bool:
        bad = ~np.isfinite(y) | (y != np.round(np.nan_to_num(y)))
        if bad.any():
            raise InputError(
                f"{who}: labels must be whole numbers (class ids); "
                f"row {int(np.flatnonzero(bad)[0])} is not"
            )
    return np.asarray(y).astype(np.int64)
