"""Small helpers shared by the check modules (comparisons phrased for students)."""
from __future__ import annotations

import tracemalloc

import numpy as np

from ._framework import StudentError


def frozen_copies(*arrays):
    """Copies of the inputs, to detect later whether the student's function mutated them."""
    return [np.array(a, copy=True) for a in arrays]


def mutated(originals, arrays, names):
    """Names of the arguments whose values changed during the call."""
    return [n for o, a, n in zip(originals, arrays, names)
            if o.shape != np.shape(a) or not np.array_equal(o, a, equal_nan=True)]


def as_array(result, what, ndim=None):
    """Convert a student's result to an ndarray or raise StudentError explaining why not."""
    try:
        arr = np.asarray(result)
    except Exception as exc:
        raise StudentError(f"{what} could not be read as an array ({exc})") from None
    if arr.dtype == object:
        raise StudentError(f"{what} should be a numeric array, got {type(result).__name__}")
    if ndim is not None and arr.ndim != ndim:
        raise StudentError(f"{what} should be {ndim}-dimensional, got shape {arr.shape}")
    return arr


def unpack(result, n, what):
    """Check that a student's result is a tuple/list of ``n`` items and return it."""
    if not isinstance(result, (tuple, list)) or len(result) != n:
        kind = type(result).__name__
        size = f" of length {len(result)}" if isinstance(result, (tuple, list)) else ""
        raise StudentError(f"{what} should return a tuple of {n} items, got a {kind}{size}")
    return result


def is_plain_float(x):
    return isinstance(x, float) and not isinstance(x, np.floating)


def is_plain_int(x):
    return isinstance(x, int) and not isinstance(x, (bool, np.integer))


def count_mismatches(a, b):
    a = np.asarray(a)
    b = np.asarray(b)
    if a.shape != b.shape:
        return None
    return int(np.sum(a != b))

def peak_memory_during(func):
    """Run ``func()``; return its result and the largest memory it held at once (bytes).

    Uses :mod:`tracemalloc` (NumPy reports its buffers to it); a trace that was already
    running is left running.
    """
    running = tracemalloc.is_tracing()
    if not running:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    try:
        result = func()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        if not running:
            tracemalloc.stop()
    return result, peak
