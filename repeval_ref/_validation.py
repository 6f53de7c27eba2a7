"""Argument checks shared by every public function of :mod:`repeval_ref`.

Each helper raises ``ValueError`` (or ``TypeError`` for a wrong kind of object)
with a message that names the argument and the problem, so that a student or a
user sees at once which input is wrong. None of them modifies its input: they
return a (possibly new) NumPy array of the requested dtype.
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = [
    "as_float_array",
    "as_labels",
    "check_same_length",
    "check_same_width",
    "as_train_test",
    "check_bool",
    "as_sequence",
    "check_int",
    "check_divisor",
    "check_positive",
    "check_center",
    "check_probability_level",
    "check_rng",
    "check_split",
    "check_bool_vector",
    "unit_rows",
    "all_finite",
    "as_finite_numbers",
]


def as_float_array(
    x, name, *, ndim=2, min_rows=1, min_cols=1, allow_nonfinite=False, dtype=np.float64
):
    """Return ``x`` as a floating array after checking its shape and values.

    Parameters
    ----------
    x : array_like
        The input.
    name : str
        Argument name used in error messages.
    ndim : int or tuple of int
        Allowed number(s) of dimensions.
    min_rows : int
        Minimum length of the first axis.
    min_cols : int
        Minimum length of the second axis (only checked when ``ndim >= 2``).
    allow_nonfinite : bool
        If False (default), NaN and infinite entries raise ``ValueError``.
    dtype : numpy floating dtype or None
        The dtype returned (float64 by default; float32 lets large banks stay small).
        ``None`` keeps float32 and float64 input as it is (a memory map stays one) and
        converts every other numeric dtype to float64.

    Returns
    -------
    numpy.ndarray of ``dtype``
        A view or copy of ``x``; never the caller's array modified in place. The values
        are checked a block of rows at a time, so no temporary of the input's size is
        made.
    """
    if isinstance(x, (str, bytes)) or x is None:
        raise TypeError(f"{name} must be a numeric array, got {type(x).__name__}")
    try:
        arr = np.asarray(x)
    except Exception as exc:  # pragma: no cover - exotic objects
        raise TypeError(f"{name} must be a numeric array: {exc}") from exc
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise TypeError(f"{name} must hold numbers, got dtype {arr.dtype}")
    if np.iscomplexobj(arr):
        raise TypeError(f"{name} must be real-valued, got complex dtype {arr.dtype}")
    if dtype is None:
        dtype = arr.dtype if arr.dtype in _KEPT_DTYPES else np.dtype(np.float64)
    arr = arr.astype(dtype, copy=False)
    allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
    if arr.ndim not in allowed:
        want = " or ".join(str(a) for a in allowed)
        raise ValueError(f"{name} must be {want}-dimensional, got shape {arr.shape}")
    if arr.ndim >= 1 and arr.shape[0] < min_rows:
        raise ValueError(f"{name} needs at least {min_rows} row(s), got shape {arr.shape}")
    if arr.ndim >= 2 and arr.shape[1] < min_cols:
        raise ValueError(f"{name} needs at least {min_cols} column(s), got shape {arr.shape}")
    if arr.ndim >= 2 and any(s == 0 for s in arr.shape[1:]):
        raise ValueError(f"{name} has an empty axis, got shape {arr.shape}")
    if not allow_nonfinite and not all_finite(arr):
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


_KEPT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def all_finite(arr):
    """Whether every entry of ``arr`` is finite, checked a block of rows at a time.

    Parameters
    ----------
    arr : numpy.ndarray of a numeric dtype

    Returns
    -------
    bool
    """
    from ._blocks import iter_rows

    if arr.ndim < 2 or arr.size == 0:
        return bool(np.all(np.isfinite(arr)))
    flat = arr.reshape(arr.shape[0], -1)
    return all(bool(np.isfinite(block).all()) for _, block in iter_rows(flat))


def as_labels(y, name, *, n=None, n_classes=None, min_len=1):
    """Return integer class labels as an int64 vector.

    Parameters
    ----------
    y : array_like of shape (n,)
        Labels; floats are accepted only when they hold whole numbers.
    name : str
        Argument name used in error messages.
    n : int, optional
        Required length.
    n_classes : int, optional
        If given, every label must lie in ``0 .. n_classes - 1``.
    min_len : int
        Minimum length.

    Returns
    -------
    numpy.ndarray of int64, shape (n,)
    """
    if isinstance(y, (str, bytes)) or y is None:
        raise TypeError(f"{name} must be an array of integer labels, got {type(y).__name__}")
    arr = np.asarray(y)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise TypeError(f"{name} must hold integer labels, got dtype {arr.dtype}")
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-dimensional, got shape {arr.shape}")
    if arr.shape[0] < min_len:
        raise ValueError(f"{name} needs at least {min_len} label(s), got {arr.shape[0]}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} entries but {n} were expected")
    if not np.issubdtype(arr.dtype, np.integer) and arr.dtype != bool:
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} contains NaN or infinite values")
        if not np.all(arr == np.round(arr)):
            raise ValueError(f"{name} must hold whole-number class labels")
    arr = arr.astype(np.int64)
    if arr.size and arr.min() < 0:
        raise ValueError(f"{name} contains negative labels (smallest {arr.min()})")
    if n_classes is not None and arr.size and arr.max() >= n_classes:
        raise ValueError(
            f"{name} contains label {arr.max()}, outside 0..{n_classes - 1} for "
            f"n_classes={n_classes}"
        )
    return arr


def check_same_length(**arrays):
    """Raise ``ValueError`` unless all given arrays have the same first dimension."""
    lengths = {k: np.shape(v)[0] for k, v in arrays.items()}
    if len(set(lengths.values())) > 1:
        desc = ", ".join(f"{k} has {v}" for k, v in lengths.items())
        raise ValueError(f"mismatched lengths: {desc}")


def check_same_width(a, b, name_a, name_b):
    """Raise ``ValueError`` unless ``a`` and ``b`` have the same number of columns.

    Parameters
    ----------
    a, b : array of shape (n_a, d_a) and (n_b, d_b)
        Already validated 2-D arrays (NumPy arrays or PyTorch tensors: only
        ``.shape`` is read).
    name_a, name_b : str
        Argument names used in the message, which reads
        ``"{name_a} has {d_a} features but {name_b} has {d_b}"``.
    """
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"{name_a} has {a.shape[1]} features but {name_b} has {b.shape[1]}")


def as_train_test(train_h, train_y, test_h, test_y, dtype=np.float64):
    """Validate a labelled training set and a labelled test set of features.

    Parameters
    ----------
    train_h : array_like of shape (n, d)
    train_y : array_like of int, shape (n,)
    test_h : array_like of shape (n_test, d)
    test_y : array_like of int, shape (n_test,)
    dtype : numpy floating dtype or None, default float64
        The features' dtype, as in :func:`as_float_array` (``None``: float32 and
        float64 kept as they are).

    Returns
    -------
    (train_h, train_y, test_h, test_y)
        Features of ``dtype`` (:func:`as_float_array`) and int64 labels
        (:func:`as_labels`), checked in the order ``train_h``, ``test_h``, their widths
        (:func:`check_same_width`), ``train_y``, ``test_y``.
    """
    train_h = as_float_array(train_h, "train_h", dtype=dtype)
    test_h = as_float_array(test_h, "test_h", dtype=dtype)
    check_same_width(test_h, train_h, "test_h", "train_h")
    train_y = as_labels(train_y, "train_y", n=train_h.shape[0])
    test_y = as_labels(test_y, "test_y", n=test_h.shape[0])
    return train_h, train_y, test_h, test_y


def check_bool(value, name):
    """Return ``value`` as a Python bool; anything but a bool raises ``TypeError``.

    ``True``/``False`` and NumPy booleans are accepted; ``1``, ``"yes"`` or ``None``
    are not (a switch given as a number is usually an argument in the wrong place).
    """
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def as_sequence(value, name, kind):
    """Return ``value`` as a list, rejecting strings and objects that cannot be iterated.

    Parameters
    ----------
    value : iterable
        A list, tuple, array or other finite iterable.
    name : str
        Argument name used in the message.
    kind : str
        What the entries should be, for the message ``"{name} must be a sequence of
        {kind}, got {value!r}"`` (``TypeError``). The entries are not checked here.
    """
    if isinstance(value, (str, bytes)) or value is None:
        raise TypeError(f"{name} must be a sequence of {kind}, got {value!r}")
    try:
        return list(value)
    except TypeError as exc:
        raise TypeError(f"{name} must be a sequence of {kind}, got {value!r}") from exc


def check_int(value, name, *, minimum=None, maximum=None):
    """Return ``value`` as a Python int, checking its type and range."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer, got the boolean {value!r}")
    if not isinstance(value, numbers.Integral):
        if isinstance(value, numbers.Real) and float(value).is_integer():
            value = int(value)
        else:
            raise TypeError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return value


def as_finite_numbers(x, name, *, ndim=1, n=None, what="entries"):
    """Return ``x`` as a finite float64 array of ``ndim`` dimensions.

    Parameters
    ----------
    x : array_like of numbers or booleans
    name : str
        Argument name used in error messages.
    ndim : int
        The number of dimensions required.
    n : int, optional
        The length the first axis must have.
    what : str
        What the first axis counts, for the message of a wrong length.

    Returns
    -------
    numpy.ndarray of float64

    Raises
    ------
    ValueError
        Naming ``name``: a non-numeric dtype, another number of dimensions, another
        length, a NaN or infinite entry.
    """
    arr = np.asarray(x)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise ValueError(f"{name} must be numeric, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name} must have {n} {what}, got {arr.shape[0]}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    return arr


def check_divisor(divisor, name, value, value_name):
    """Return ``divisor`` as an int ``>= 1`` that divides the int ``value``.

    Raises ValueError naming both (``"heads=3 does not divide dim=16"``), TypeError for a
    non-integer ``divisor``.
    """
    divisor = check_int(divisor, name, minimum=1)
    if value % divisor:
        raise ValueError(f"{name}={divisor} does not divide {value_name}={value}")
    return divisor


def check_positive(value, name, *, allow_zero=False):
    """Return ``value`` as a finite float, checking that it is > 0 (or >= 0)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if allow_zero:
        if value < 0:
            raise ValueError(f"{name} must be >= 0, got {value}")
    elif value <= 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    return value


def check_center(center):
    """Return the ``center`` flag of a label-free metric as a Python bool (see :func:`check_bool`).

    ``center=True`` subtracts the column means of the features before their spectrum
    is taken (book ``book/rankme.md`` states each metric's convention).
    """
    return check_bool(center, "center")


def check_probability_level(level, name="level"):
    """Return a confidence level, checking that it lies strictly inside (0, 1)."""
    if isinstance(level, bool) or not isinstance(level, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {level!r}")
    level = float(level)
    if not (0.0 < level < 1.0):
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {level}")
    return level


def check_rng(rng, name="rng"):
    """Return a ``numpy.random.Generator``; an int seed or None is turned into one."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or (isinstance(rng, numbers.Integral) and not isinstance(rng, bool)):
        return np.random.default_rng(rng)
    raise TypeError(
        f"{name} must be a numpy.random.Generator or an integer seed, got {type(rng).__name__}"
    )


def check_split(split, name="split"):
    """Return ``split`` if it is ``"train"`` or ``"test"``; anything else raises ``ValueError``."""
    if not isinstance(split, str) or split not in ("train", "test"):
        raise ValueError(f"{name} must be 'train' or 'test', got {split!r}")
    return split


def check_bool_vector(x, name, *, n=None):
    """Return a 0/1 correctness vector as a bool array, rejecting other values."""
    arr = np.asarray(x)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise TypeError(f"{name} must hold 0/1 or booleans, got dtype {arr.dtype}")
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-dimensional, got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError(f"{name} is empty")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} entries but {n} were expected")
    if arr.dtype != bool:
        if not np.all(np.isin(arr, (0, 1))):
            raise ValueError(f"{name} must hold only 0 and 1 (or booleans)")
        arr = arr.astype(bool)
    return arr


def unit_rows(X, name):
    """Divide each row by its Euclidean norm; a zero row raises ``ValueError``.

    Parameters
    ----------
    X : numpy.ndarray of shape (n, d)
        Already validated float array.
    name : str
        Argument name used in error messages.

    Returns
    -------
    numpy.ndarray of shape (n, d)
        A new array with unit-length rows.
    """
    with np.errstate(over="ignore", under="ignore"):
        norms = np.linalg.norm(X, axis=1)
    # ``sum x^2`` underflows for rows of tiny entries (below about 1e-154 in float64)
    # and overflows for huge ones (above about 1e154): such rows are first divided by
    # their largest absolute entry, which leaves the direction unchanged. Other rows
    # take the plain ``x / ||x||``.
    info = np.finfo(X.dtype)
    ok = np.isfinite(norms) & (norms >= np.sqrt(info.tiny) / info.eps)
    if np.all(ok):
        return X / norms[:, None]
    scale = np.max(np.abs(X), axis=1)
    bad = np.flatnonzero(scale == 0)
    if bad.size:
        raise ValueError(f"{name} has a zero vector at row {bad[0]}; it cannot be unit-normalised")
    out = np.empty_like(X)
    out[ok] = X[ok] / norms[ok, None]
    scaled = X[~ok] / scale[~ok, None]
    out[~ok] = scaled / np.linalg.norm(scaled, axis=1, keepdims=True)
    return out
