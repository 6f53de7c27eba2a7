"""The inputs of the commands: the loop's folders, the split rule, the checks across files.

Accepted: the files :mod:`._files` reads, and folders written by ``repeval loop``
(``--save-features DIR`` writes ``DIR/train.npz`` and ``DIR/test.npz``; ``--cache-dir``
writes ``MODEL/DATA-train/__flat.npy`` with ``labels.npy`` beside it). One split rule
serves every command (:func:`split_rows`, :func:`prepare_split`). Every problem raises
:class:`InputError` with one line that names the argument and the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ._files import (
    BLOCK_BYTES,
    KEPT_DTYPES,
    InputError,
    _check_features,
    _check_labels,
    _short,
    feature_file_in,
    load_features,
    read_file,
    row_blocks,
    rows_to_map,
)


def _check_classes(y, arg, *, min_per_class=2, why="the probe's model selection splits it"):
    classes, counts = np.unique(y, return_counts=True)
    if classes.size < 2:
        raise InputError(
            f"{arg}: only one class ({classes[0]}) in the labels; at least 2 are needed"
        )
    small = np.flatnonzero(counts < min_per_class)
    if small.size:
        c = small[0]
        raise InputError(
            f"{arg}: class {classes[c]} has {counts[c]} sample(s); every class needs at least "
            f"{min_per_class} ({why})"
        )
    return classes, counts


#: Why an all-zero feature row is refused rather than skipped or dropped.
ZERO_ROW_REASON = (
    "cosine similarity (weighted k-NN, low-shot nearest class mean, the cosine "
    "label-free metrics) is undefined for it, and repeval neither drops images nor "
    "switches a protocol off: remove such rows from every input of these images"
)


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
    return np.concatenate(
        [rows.start + np.flatnonzero(~X[rows].any(axis=1)) for rows in row_blocks(X)]
        + [np.empty(0, dtype=np.int64)]
    ).astype(np.int64)


def zero_rows_message(who, rows, n):
    """The one-line refusal of all-zero rows ``rows`` (numbered in the file ``who`` names)."""
    rows = np.asarray(rows, dtype=np.int64)
    if rows.ndim != 1 or rows.size == 0:
        raise ValueError("rows must be a non-empty 1-D array of row numbers")
    shown = ", ".join(str(int(r)) for r in rows[:8]) + (", ..." if rows.size > 8 else "")
    noun = f"feature row {shown} is" if rows.size == 1 else f"feature rows {shown} are"
    return f"{who}: {noun} all zeros ({rows.size} of {n} rows); {ZERO_ROW_REASON}"


# ------------------------------------------------------------------- the loop's folders


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
        raise InputError(
            f"folder {folder} holds features of several data sets "
            f"({', '.join(a.name[:-6] for a, _ in pairs)}); name the -train and -test "
            "folders of one of them"
        )
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
        return [
            (role, f, slice(int(a), int(b)))
            for role, f, a, b in zip(self.roles, self.files, bounds[:-1], bounds[1:])
        ]


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
    if part_roles is not None and (
        len(part_roles) != 2 or not all(isinstance(r, str) for r in part_roles)
    ):
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
        raise InputError(
            f"{arg}: the train and test features in {path} have different dimensions "
            f"({fa}: {xa.shape[1]}, {fb}: {xb.shape[1]})"
        )
    return Input(
        np.vstack([xa, xb]),
        np.concatenate([ya, yb]),
        (fa, fb),
        (xa.shape[0], xb.shape[0]),
        roles,
        path,
    )


def refuse_zero_rows(inp):
    """Raise :class:`InputError` naming the file and rows if any feature row of ``inp`` is all
    zeros.

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
        split = {
            "rule": "the train and test parts of the folder",
            "files": [str(f) for f in inp.files],
        }
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
        raise InputError(
            f"{context}test label {unseen[0]} never occurs in the training part ({inp.files[-1]})"
        )
    classes, counts = _check_classes(inp.y[tr], f"the training part of {inp.path}")
    return tr, te, split, classes, counts


def split_text(split):
    """The split in words, for the commands' printed output."""
    if not isinstance(split, dict) or "rule" not in split:
        raise ValueError(f"split must be a dict from split_rows, got {split!r}")
    if split["rule"] == "stratified":
        how = (
            f"split once, stratified by class, test fraction {split['test_fraction']:g}, "
            f"seed {split['seed']}"
        )
    else:
        how = "the folder's own train and test parts, not re-split"
    return f"{split['n_train']} training and {split['n_test']} test images ({how})"


def load_split(
    train, test, *, test_fraction=None, seed=0, arg_train="TRAIN", arg_test="TEST", progress=None
):
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
            raise InputError(
                "--test-fraction splits a single file; it cannot be combined with a TEST input"
            )
        parts = [
            read_input(p, a, progress=progress) for p, a in ((train, arg_train), (test, arg_test))
        ]
        for inp, a in zip(parts, (arg_train, arg_test)):
            if inp.n_train is not None:
                raise InputError(
                    f"{a} {inp.path} is a folder with train and test parts; give it alone"
                )
            refuse_zero_rows(inp)
        (a, b) = parts
        return (
            a.x,
            a.y,
            b.x,
            b.y,
            {
                "train": str(a.files[0]),
                "test": str(b.files[0]),
                "split": None,
                "who": (f"{arg_train} file {a.files[0]}", f"{arg_test} file {b.files[0]}"),
                "test_rows": np.arange(b.x.shape[0]),
            },
        )
    if not Path(train).exists():
        raise InputError(f"{arg_train} file not found: {train}")
    inp = read_input(train, arg_train, part_roles=(arg_train, arg_test), progress=progress)
    if inp.n_train is not None and test_fraction is not None:
        raise InputError(
            f"{train} holds its own train and test parts ({inp.files[0].name}, "
            f"{inp.files[1].name}), which are never re-split; leave out --test-fraction"
        )
    if inp.n_train is None and test_fraction is None:
        raise InputError(
            f"give a TEST input, or --test-fraction to split {train} into train and test"
        )
    refuse_zero_rows(inp)
    tr, te, split = split_rows(inp, test_fraction, seed, f"{arg_train} file {inp.files[0]}")
    if inp.n_train is not None:
        src = {
            "train": str(inp.files[0]),
            "test": str(inp.files[1]),
            "split": split,
            "who": tuple(f"{r} file {f}" for r, f in zip(inp.roles, inp.files)),
            "test_rows": te - inp.n_train,
        }
    else:
        src = {
            "train": str(inp.files[0]),
            "test": None,
            "split": split,
            "who": (f"the training part of {inp.files[0]}", f"the test part of {inp.files[0]}"),
            "test_rows": te,
        }
    return _rows(inp.x, tr), inp.y[tr], _rows(inp.x, te), inp.y[te], src


def _rows(X, rows):
    """``X[rows]``; a memory-mapped file's rows mapped in turn (:func:`rows_to_map`)."""
    from .._blocks import is_read_only_map

    return rows_to_map(X, rows) if is_read_only_map(X) else X[rows]


def check_out_dir(outdir):
    """``outdir`` as a path; :class:`InputError` when it exists and is not a folder."""
    outdir = Path(outdir)
    if outdir.exists() and not outdir.is_dir():
        raise InputError(f"cannot create output directory {outdir}: a file of that name exists")
    return outdir


def check_encoder_list(entries, twice, command, key):
    """Raise :class:`InputError` when two encoders share a name, or fewer than two are given.

    Parameters
    ----------
    entries : list of dict
        The encoders of a command, each with a ``name``.
    twice : str
        The message for a repeated name, a format string with the field ``name``.
    command : str
        The command as the message names it (``"a suite"``).
    key : str
        The field of an entry that the message shows for a lone encoder.
    """
    names = [e["name"] for e in entries]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise InputError(twice.format(name=dup))
    if len(entries) < 2:
        raise InputError(
            f"{command} needs at least 2 encoders, got {len(entries)}"
            + (f" ({entries[0][key]})" if entries else "")
        )


def stratified_split(y, test_fraction, seed, arg="labels"):
    """Sorted train and test row indices of a stratified, seeded split of labels ``y``."""
    from sklearn.model_selection import train_test_split

    classes = _check_classes(y, arg, why="the images are split into train and test")[0]
    yi = np.searchsorted(classes, y)
    try:
        tr, te = train_test_split(
            np.arange(y.shape[0]), test_size=test_fraction, stratify=yi, random_state=seed
        )
    except ValueError as exc:
        raise InputError(
            f"cannot split the images of {arg} into train and test: {_short(exc)}"
        ) from None
    return np.sort(tr), np.sort(te)


__all__ = [
    "InputError",
    "Input",
    "check_encoder_list",
    "check_out_dir",
    "load_features",
    "read_file",
    "read_input",
    "load_split",
    "split_rows",
    "prepare_split",
    "split_text",
    "stratified_split",
    "refuse_zero_rows",
    "zero_rows",
    "zero_rows_message",
    "feature_file_in",
    "split_folder",
    "row_blocks",
    "rows_to_map",
    "KEPT_DTYPES",
    "BLOCK_BYTES",
    "_check_features",
    "_check_labels",
    "_short",
]
