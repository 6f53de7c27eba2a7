"""Reading the user's inputs: feature files, the loop's feature folders, and their checks.

Accepted: ``.npz`` archives with ``features`` and ``labels``; ``.npy`` feature arrays
with a sibling labels file; PyTorch ``.pt``/``.pth`` files; and folders written by
``python -m repeval_ref.loop`` (``--save-features DIR`` writes ``DIR/train.npz`` and
``DIR/test.npz``; ``--cache-dir`` writes ``MODEL/DATA-train/__flat.npy`` with
``labels.npy`` beside it). Every problem raises :class:`InputError` with one line
that names the argument and the file.

Shapes, dtypes and label counts are checked from the ``.npy`` headers (of a file, or of
the members of an ``.npz`` archive) before any data is read, so a mismatch is refused at
once however large the file. A ``.npy`` file is memory-mapped, float32 features stay
float32, and the passes over the data (finite values, all-zero rows) go a block of rows
at a time.
"""
from __future__ import annotations

from dataclasses import dataclass
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
        return path.with_name(stem[:i] + "labels" + stem[i + len("features"):] + ".npy")
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
    """``(shape, dtype)`` of the ``.npy`` member ``member`` of an open zip archive, from its header."""
    with zf.open(member) as fh:
        version = np.lib.format.read_magic(fh)
        read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                else np.lib.format.read_array_header_2_0)
        shape, _, dtype = read(fh)
    return shape, dtype


def _read_npz(path, arg, need_labels, announce):
    import zipfile

    if not zipfile.is_zipfile(path):
        with open(path, "rb") as fh:
            head = fh.read(len(_NPY_MAGIC))
        hint = ("it is a .npy array file: rename it to .npy" if head == _NPY_MAGIC
                else "np.savez writes a zip archive; this file is not one")
        raise InputError(f"{arg} file {path} is not a valid .npz archive ({hint})")
    who = f"{arg} file {path}"
    try:
        with zipfile.ZipFile(path) as zf:
            members = set(zf.namelist())
            keys = {m[:-len(".npy")] for m in members if m.endswith(".npy")}
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
        raise InputError(f"{arg} file {path} is not a readable .npz archive ({_short(exc)})") from None
    if labels is None and need_labels:
        raise InputError(f"{arg} file {path} has no array 'labels' (it holds: {', '.join(sorted(keys))})")
    return feats, labels


def _labels_candidates(path):
    """Where the labels of a ``.npy`` features file may sit, in the order they are tried.

    The sibling whose name has ``features`` replaced by ``labels`` (or ``NAME_labels.npy``),
    then ``labels.npy`` in the same folder, which is how the loop's feature cache stores
    them (``MODEL/DATA/__flat.npy`` and ``MODEL/DATA/labels.npy``).
    """
    first = _labels_path_for(path)
    shared = path.with_name("labels.npy")
    return [first] if shared == first or shared == path else [first, shared]


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
                f"{arg}: labels file {candidates[0]} not found (for a .npy features file the labels "
                f"are read from {candidates[0].name}"
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
        raise InputError(f"{arg} file {path} is a truncated or corrupted PyTorch file (its zip "
                         "archive cannot be read)")
    if not zipfile.is_zipfile(path) and head[:1] != b"\x80":
        raise InputError(f"{arg} file {path} is not a valid PyTorch file (torch.save writes a zip "
                         "archive; this file is neither that nor a legacy pickle)")
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
        return (f"{arg} file {path} holds Python objects other than tensors ({found.group(1)}), "
                "which repeval does not unpickle; save torch tensors, e.g. torch.save({'features': "
                "torch.as_tensor(X), 'labels': torch.as_tensor(y)}, path)")
    if "zip archive" in text or isinstance(exc, EOFError):
        return f"{arg} file {path} is a truncated or corrupted PyTorch file (the archive cannot be read)"
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
        raise InputError(f"{arg} file {path} has an unsupported type {suffix or '(none)'}; "
                         "use .npz, .npy or .pt")
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
    return dtype != object and (np.issubdtype(dtype, np.number) or dtype == bool)


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
        raise InputError(f"{who}: {n} feature rows but {shape[0]} labels; they must have the same length")


def row_blocks(X, block_bytes=BLOCK_BYTES):
    """Slices of consecutive rows of ``X`` holding about ``block_bytes`` each.

    Parameters
    ----------
    X : numpy.ndarray, shape (n, d)
    block_bytes : int, positive

    Returns
    -------
    list of slice
        Covering ``0 .. n`` in order; at least one row each.
    """
    X = np.asanyarray(X)
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D array, got shape {X.shape}")
    if not isinstance(block_bytes, (int, np.integer)) or block_bytes < 1:
        raise ValueError(f"block_bytes must be a positive integer, got {block_bytes!r}")
    step = max(1, int(block_bytes) // max(1, X.itemsize * X.shape[1]))
    return [slice(lo, min(lo + step, X.shape[0])) for lo in range(0, X.shape[0], step)]


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
            raise InputError(f"{who}: labels must be whole numbers (class ids); "
                             f"row {int(np.flatnonzero(bad)[0])} is not")
    return np.asarray(y).astype(np.int64)


def _check_classes(y, arg, *, min_per_class=2, why="the probe's model selection splits it"):
    classes, counts = np.unique(y, return_counts=True)
    if classes.size < 2:
        raise InputError(f"{arg}: only one class ({classes[0]}) in the labels; at least 2 are needed")
    small = np.flatnonzero(counts < min_per_class)
    if small.size:
        c = small[0]
        raise InputError(
            f"{arg}: class {classes[c]} has {counts[c]} sample(s); every class needs at least "
            f"{min_per_class} ({why})"
        )
    return classes, counts


#: Why an all-zero feature row is refused rather than skipped or dropped.
ZERO_ROW_REASON = ("cosine similarity (weighted k-NN, low-shot nearest class mean, the cosine "
                   "label-free metrics) is undefined for it, and repeval neither drops images nor "
                   "switches a protocol off: remove such rows from every input of these images")


def zero_rows(X):
    """Indices of the rows of ``X`` that are all zeros.

    Parameters
    ----------
    X : numpy.ndarray, shape (n, d)

    Returns
    -------
    numpy.ndarray of int64
    """
    X = np.asanyarray(X)
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D array, got shape {X.shape}")
    return np.concatenate([rows.start + np.flatnonzero(~X[rows].any(axis=1)) for rows in row_blocks(X)]
                          + [np.empty(0, dtype=np.int64)]).astype(np.int64)


def zero_rows_message(who, rows, n):
    """The one-line refusal of all-zero rows ``rows`` (numbered in the file ``who`` names)."""
    rows = np.asarray(rows, dtype=np.int64)
    if rows.ndim != 1 or rows.size == 0:
        raise ValueError("rows must be a non-empty 1-D array of row numbers")
    shown = ", ".join(str(int(r)) for r in rows[:8]) + (", ..." if rows.size > 8 else "")
    noun = f"feature row {shown} is" if rows.size == 1 else f"feature rows {shown} are"
    return f"{who}: {noun} all zeros ({rows.size} of {n} rows); {ZERO_ROW_REASON}"


# ------------------------------------------------------------------- the loop's folders

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
        raise InputError(f"{arg} folder {folder} holds several feature arrays ({', '.join(arrays[:6])}"
                         f"{', ...' if len(arrays) > 6 else ''}); name the one to evaluate")
    raise InputError(f"{arg} is a folder without feature arrays: {folder} (give a .npz, .npy or .pt "
                     "file, or a folder written by python -m repeval_ref.loop)")


def split_folder(folder):
    """``(train, test)`` paths inside a folder the loop wrote for one model, or None.

    ``--save-features DIR`` writes ``DIR/train.npz`` and ``DIR/test.npz``;
    ``--cache-dir C`` writes ``C/MODEL/DATA-train/`` and ``C/MODEL/DATA-test/``.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return None
    if (folder / "train.npz").is_file() and (folder / "test.npz").is_file():
        return folder / "train.npz", folder / "test.npz"
    trains = sorted(p for p in folder.iterdir() if p.is_dir() and p.name.endswith("-train"))
    pairs = [(p, p.with_name(p.name[: -len("-train")] + "-test")) for p in trains]
    pairs = [(a, b) for a, b in pairs if b.is_dir()]
    if len(pairs) == 1:
        return pairs[0]
    if len(pairs) > 1:
        raise InputError(f"folder {folder} holds features of several data sets "
                         f"({', '.join(a.name[:-6] for a, _ in pairs)}); name the -train and -test "
                         "folders of one of them")
    return None


@dataclass(frozen=True)
class Input:
    """One input as read: the rows of its parts stacked, the training part first.

    Attributes
    ----------
    x : numpy.ndarray of float32 or float64, shape (n, d)
        A ``.npy`` file's memory map when the input is one such file.
    y : numpy.ndarray of int64, shape (n,), or None
    files : tuple of pathlib.Path
        The file read for each part: one for a features file, two (train, test) for a
        folder the loop wrote for one model.
    sizes : tuple of int
        Rows of each part.
    roles : tuple of str
        The role named in error lines for each part (``TRAIN``, ``TEST``, ``A``, ...).
    path : pathlib.Path
        The path as the user gave it.
    """

    x: np.ndarray
    y: np.ndarray | None
    files: tuple
    sizes: tuple
    roles: tuple
    path: Path

    @property
    def n_train(self):
        """Rows of the training part when the input has train and test parts, else None."""
        return self.sizes[0] if len(self.sizes) == 2 else None

    def parts(self):
        """``(role, file, rows)`` of each part, ``rows`` the slice of :attr:`x` it fills."""
        bounds = np.cumsum((0,) + tuple(self.sizes))
        return [(role, f, slice(int(a), int(b)))
                for role, f, a, b in zip(self.roles, self.files, bounds[:-1], bounds[1:])]


def read_input(path, arg, need_labels=True, *, part_roles=None, progress=None):
    """Read one input of a command: a features file, a cache folder, or a loop folder.

    Parameters
    ----------
    path : str or os.PathLike
    arg : str
        The input's role in error lines.
    need_labels : bool
        Whether a single file without labels is an error (the loop's train and test
        parts always need theirs).
    part_roles : (str, str), optional
        The roles of the train and test parts of a loop folder in error lines
        (default: ``arg`` for both).
    progress : Progress, optional
        Where each file's stage line goes (:func:`read_file`).

    Returns
    -------
    Input
    """
    if not isinstance(arg, str) or not arg:
        raise ValueError(f"arg must be a non-empty string, got {arg!r}")
    if part_roles is not None and (len(part_roles) != 2 or not all(isinstance(r, str) for r in part_roles)):
        raise ValueError(f"part_roles must be two strings, got {part_roles!r}")
    path = Path(path)
    if not path.exists():
        raise InputError(f"{arg} file not found: {path}")
    pair = split_folder(path) if path.is_dir() else None
    if pair is None:
        x, y, f = read_file(path, arg, need_labels, progress=progress)
        return Input(x, y, (f,), (x.shape[0],), (arg,), path)
    roles = tuple(part_roles or (arg, arg))
    (xa, ya, fa), (xb, yb, fb) = (read_file(p, r, progress=progress) for p, r in zip(pair, roles))
    if xa.shape[1] != xb.shape[1]:
        raise InputError(f"{arg}: the train and test features in {path} have different dimensions "
                         f"({fa}: {xa.shape[1]}, {fb}: {xb.shape[1]})")
    return Input(np.vstack([xa, xb]), np.concatenate([ya, yb]), (fa, fb),
                 (xa.shape[0], xb.shape[0]), roles, path)


def refuse_zero_rows(inp):
    """Raise :class:`InputError` naming the file and rows if any feature row of ``inp`` is all zeros.

    Rows are numbered within the file that holds them (from 0, as NumPy indexes them).
    """
    if not isinstance(inp, Input):
        raise ValueError(f"inp must be an Input, got {type(inp).__name__}")
    for role, f, rows in inp.parts():
        zero = zero_rows(inp.x[rows])
        if zero.size:
            raise InputError(zero_rows_message(f"{role} file {f}", zero, rows.stop - rows.start))


def split_rows(inp, test_fraction, seed, who):
    """Training and test rows of ``inp`` under the one split rule of every command.

    An input with train and test parts (a loop folder) is never re-split: its parts
    are the split. A single file is split once, stratified by class and seeded
    (:func:`stratified_split`), the same way by every command.

    Returns
    -------
    train, test : numpy.ndarray of int64
        Sorted row indices into ``inp.x``.
    split : dict
        The rule applied, its sizes and, for a stratified split, its fraction and seed.
    """
    if not isinstance(inp, Input) or inp.y is None:
        raise ValueError("inp must be an Input with labels")
    if inp.n_train is not None:
        tr, te = np.arange(inp.n_train), np.arange(inp.n_train, inp.x.shape[0])
        split = {"rule": "the train and test parts of the folder", "files": [str(f) for f in inp.files]}
    else:
        tr, te = stratified_split(inp.y, test_fraction, seed, who)
        split = {"rule": "stratified", "test_fraction": test_fraction, "seed": seed}
    return tr, te, {**split, "n_train": int(tr.size), "n_test": int(te.size)}


def prepare_split(inp, test_fraction, seed, who, context=""):
    """The split of every command, its test labels seen in training, its classes checked.

    Parameters
    ----------
    inp : Input
        The input whose labels decide the split (a command's first input).
    test_fraction : float in (0, 1)
        Share of a single file held out (:func:`split_rows`).
    seed : int
    who : str
        The labels as the split's error lines name them.
    context : str
        Prefix of the error lines (``"task fashion: "``), empty by default.

    Returns
    -------
    train, test : numpy.ndarray of int64
        Sorted row indices into ``inp.x``.
    split : dict
        As :func:`split_rows` returns it.
    classes, counts : numpy.ndarray
        The classes of the training part and their sizes.

    Raises
    ------
    InputError
        When a test label never occurs in the training part, or a class of the training
        part is too small for the probe's model selection.
    """
    tr, te, split = split_rows(inp, test_fraction, seed, who)
    unseen = np.setdiff1d(np.unique(inp.y[te]), np.unique(inp.y[tr]))
    if unseen.size:
        raise InputError(f"{context}test label {unseen[0]} never occurs in the training part ({inp.files[-1]})")
    classes, counts = _check_classes(inp.y[tr], f"the training part of {inp.path}")
    return tr, te, split, classes, counts


def split_text(split):
    """The split in words, for the commands' printed output."""
    if not isinstance(split, dict) or "rule" not in split:
        raise ValueError(f"split must be a dict from split_rows, got {split!r}")
    if split["rule"] == "stratified":
        how = (f"split once, stratified by class, test fraction {split['test_fraction']:g}, "
               f"seed {split['seed']}")
    else:
        how = "the folder's own train and test parts, not re-split"
    return f"{split['n_train']} training and {split['n_test']} test images ({how})"


def load_split(train, test, *, test_fraction=None, seed=0, arg_train="TRAIN", arg_test="TEST",
               progress=None):
    """Training and test features with labels, from two inputs, a loop folder, or one split file.

    Parameters
    ----------
    train : path
        A features file or folder; alone (``test`` None), a folder the loop wrote
        for one model (its parts are the split, never re-split), or a labelled file
        that is split with ``test_fraction``.
    test : path or None
    test_fraction : float in (0, 1), optional
        Share of the rows of ``train`` held out (stratified, seeded), when ``test``
        is None.
    seed : int
    progress : Progress, optional
        Where each file's stage line goes (:func:`read_file`).

    Returns
    -------
    train_x, train_y, test_x, test_y : numpy.ndarray
    sources : dict
        ``train``, ``test`` (the files read, as text), ``split`` (None or a
        description of the split), ``who`` (the training and test parts as error
        lines name them) and ``test_rows`` (each test row's number in its file).
    """
    if test is not None:
        if test_fraction is not None:
            raise InputError("--test-fraction splits a single file; it cannot be combined with a TEST input")
        parts = [read_input(p, a, progress=progress) for p, a in ((train, arg_train), (test, arg_test))]
        for inp, a in zip(parts, (arg_train, arg_test)):
            if inp.n_train is not None:
                raise InputError(f"{a} {inp.path} is a folder with train and test parts; give it alone")
            refuse_zero_rows(inp)
        (a, b) = parts
        return a.x, a.y, b.x, b.y, {"train": str(a.files[0]), "test": str(b.files[0]), "split": None,
                                    "who": (f"{arg_train} file {a.files[0]}", f"{arg_test} file {b.files[0]}"),
                                    "test_rows": np.arange(b.x.shape[0])}
    if not Path(train).exists():
        raise InputError(f"{arg_train} file not found: {train}")
    inp = read_input(train, arg_train, part_roles=(arg_train, arg_test), progress=progress)
    if inp.n_train is not None and test_fraction is not None:
        raise InputError(f"{train} holds its own train and test parts ({inp.files[0].name}, "
                         f"{inp.files[1].name}), which are never re-split; leave out --test-fraction")
    if inp.n_train is None and test_fraction is None:
        raise InputError(f"give a TEST input, or --test-fraction to split {train} into train and test")
    refuse_zero_rows(inp)
    tr, te, split = split_rows(inp, test_fraction, seed, f"{arg_train} file {inp.files[0]}")
    if inp.n_train is not None:
        src = {"train": str(inp.files[0]), "test": str(inp.files[1]), "split": split,
               "who": tuple(f"{r} file {f}" for r, f in zip(inp.roles, inp.files)),
               "test_rows": te - inp.n_train}
    else:
        src = {"train": str(inp.files[0]), "test": None, "split": split,
               "who": (f"the training part of {inp.files[0]}", f"the test part of {inp.files[0]}"),
               "test_rows": te}
    return inp.x[tr], inp.y[tr], inp.x[te], inp.y[te], src


def stratified_split(y, test_fraction, seed, arg="labels"):
    """Sorted train and test row indices of a stratified, seeded split of labels ``y``."""
    from sklearn.model_selection import train_test_split

    classes = _check_classes(y, arg, why="the images are split into train and test")[0]
    yi = np.searchsorted(classes, y)
    try:
        tr, te = train_test_split(np.arange(y.shape[0]), test_size=test_fraction, stratify=yi,
                                  random_state=seed)
    except ValueError as exc:
        raise InputError(f"cannot split the images of {arg} into train and test: {_short(exc)}") from None
    return np.sort(tr), np.sort(te)
