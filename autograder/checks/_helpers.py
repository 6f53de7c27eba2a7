"""Small helpers shared by the check modules (comparisons phrased for students)."""

from __future__ import annotations

import numpy as np

from ._framework import StudentError


def frozen_copies(*arrays):
    """Copies of the inputs, to detect later whether the student's function mutated them."""
    return [np.array(a, copy=True) for a in arrays]


def mutated(originals, arrays, names):
    """Names of the arguments whose values changed during the call."""
    return [
        n
        for o, a, n in zip(originals, arrays, names)
        if o.shape != np.shape(a) or not np.array_equal(o, a, equal_nan=True)
    ]


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


#: a rise of the clean-room child's resident memory that counts although tracemalloc saw
#: under a quarter of it: memory taken outside Python's allocators (torch, a C library),
#: or a trace the answer stopped or reset
RSS_BACKSTOP = 64 * 2**20


def _status_bytes(pid, field):
    """The ``field`` line (in kB) of ``/proc/<pid>/status`` in bytes, or ``None``."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _check_pid(pid):
    if pid != "self" and not (isinstance(pid, int) and pid > 0):
        raise ValueError(f"pid must be a process id or 'self', got {pid!r}")


def reset_peak_rss(pid="self"):
    """Reset the resident-memory high-water mark of process ``pid`` (``"self"``: this
    one) to its present resident memory, by writing 5 to ``/proc/<pid>/clear_refs``;
    return that level in bytes, or ``None`` where this is not allowed (another user's
    process without root) or there is no ``/proc``."""
    _check_pid(pid)
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        return None
    return _status_bytes(pid, "VmRSS")


def resident(pid="self"):
    """The present resident memory (``VmRSS``) of process ``pid`` in bytes, or ``None``."""
    _check_pid(pid)
    return _status_bytes(pid, "VmRSS")


def private_memory(pid="self"):
    """The memory that process ``pid`` holds on its own in bytes (``Private_Clean`` plus
    ``Private_Dirty`` of ``/proc/<pid>/smaps_rollup``: pages it shares with no other
    process, so a forked process does not count what it inherited and only reads), or
    ``None`` where unreadable."""
    _check_pid(pid)
    total = None
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith(("Private_Clean:", "Private_Dirty:")):
                    total = (total or 0) + int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return total


def peak_rss(pid="self"):
    """The resident-memory high-water mark (``VmHWM``) of process ``pid`` in bytes, or
    ``None``."""
    _check_pid(pid)
    return _status_bytes(pid, "VmHWM")


def _measured_here(call):
    """``(result, cost)`` of ``call()`` run in this process: what the clean room's
    :meth:`~autograder.cleanroom_calls.RemoteFunction.measured_call` reports for a
    call in the child, measured the same way."""
    from ..cleanroom_child import traced_peak

    before = reset_peak_rss()
    result, traced = traced_peak(call)
    high = peak_rss() if before is not None else None
    return result, {"traced": traced, "rss": None if high is None else max(0, high - before)}


def call_peak(cost):
    """The memory a clean-room call held at once (bytes), from the ``cost`` dict of
    :meth:`autograder.cleanroom_calls.RemoteFunction.measured_call`.

    The traced peak (the kernel's measure, so both places print the same number), unless
    the child's resident memory rose by more than :data:`RSS_BACKSTOP` and by more than
    four times that: then the rise, which the answer's code cannot hide."""
    if not isinstance(cost, dict) or "traced" not in cost:
        raise ValueError(f"cost must be a dict with a 'traced' entry, got {cost!r}")
    traced, rss = int(cost["traced"]), cost.get("rss")
    if rss is not None and rss > RSS_BACKSTOP and rss > 4 * traced:
        return int(rss)
    return traced


def metered(fn):
    """``fn`` wrapped so that each call records the memory it held at once where it ran.

    In the kernel the call is traced in this process (:func:`autograder.cleanroom_child.
    traced_peak`) while this process's resident memory is watched; for the clean room's
    stand-in (a class with ``measured_call``) the child traces the call and the grader
    watches the child's resident memory. Both are read by :func:`call_peak`, so a memory
    check judges the process that ran the student's code, the same way in both places.

    Returns
    -------
    callable
        Called like ``fn``; its ``peaks`` list holds one number of bytes per call that
        returned.
    """
    if not callable(fn):
        raise ValueError(f"fn must be callable, got {type(fn).__name__}")
    remote = getattr(type(fn), "measured_call", None)

    def call(*args, **kwargs):
        if remote is not None:
            result, cost = remote(fn, *args, **kwargs)
        else:
            result, cost = _measured_here(lambda: fn(*args, **kwargs))
        call.peaks.append(call_peak(cost))
        return result

    call.peaks = []
    call.__name__ = getattr(fn, "__name__", "your function")
    return call


#: appended to a property's findings when the main result on the same inputs is wrong
NOT_EARNED = (
    "Not credited: on the inputs of this test your result itself differs from "
    "the reference ({detail}); a property earns its points only together with "
    "the right result."
)


def gate(findings, wrong_detail):
    """Withhold every point of ``findings`` unless the main result was right.

    ``wrong_detail`` is ``None`` (or empty) when the student's result on the property's
    own inputs equalled the reference's; otherwise it describes the discrepancy and
    every finding fails with :data:`NOT_EARNED` added to its message. This keeps a
    constant answer, the returned input or ``None`` from collecting points for an
    invariance, a return type or untouched inputs, which all hold for them trivially.
    """
    from ._framework import Finding

    if not wrong_detail:
        return findings
    note = NOT_EARNED.format(detail=wrong_detail)
    out = []
    for f in findings:
        msg = note if f.passed or not f.message else f"{f.message} {note}"
        out.append(Finding(f.name, 0.0, f.max_points, False, msg))
    return out


def differs(got, want, rtol=1e-9, atol=1e-12):
    """``None`` if ``got`` equals ``want`` (numbers, arrays, tuples, dicts; within the
    tolerances), else a short description of the first difference."""
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return f"returned a {type(got).__name__}, expected a dict"
        for k in want:
            if k not in got:
                return f"key {k!r} missing"
            d = differs(got[k], want[k], rtol, atol)
            if d:
                return f"{k}: {d}"
        return None
    if isinstance(want, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(want):
            return f"returned {_short(got)}, expected {len(want)} items"
        for i, (g, w) in enumerate(zip(got, want)):
            d = differs(g, w, rtol, atol)
            if d:
                return f"item {i + 1}: {d}"
        return None
    try:
        g = np.asarray(got, dtype=float)
        w = np.asarray(want, dtype=float)
    except (TypeError, ValueError):
        return f"returned {_short(got)}, expected a number or numeric array"
    if g.shape != w.shape:
        return f"shape {g.shape}, expected {w.shape}"
    bad = ~_close_mask(g, w, rtol, atol)
    if bad.any():
        if g.ndim == 0:
            return f"{float(g):.8g} instead of {float(w):.8g}"
        return f"{int(np.sum(bad))} of {g.size} values differ"
    return None


def _close_mask(g, w, rtol, atol):
    """Elementwise ``|g - w| <= atol + rtol |w|`` where ``w`` is finite; where ``w`` is
    not finite (NaN, +inf, -inf), ``g`` must be the same non-finite value. A NaN or an
    infinity of the answer never passes against a finite reference."""
    finite = np.isfinite(w)
    with np.errstate(invalid="ignore", over="ignore"):
        near = np.abs(g - w) <= atol + rtol * np.abs(w)
    same = (np.isnan(g) & np.isnan(w)) | (np.isinf(w) & (g == w))
    return np.where(finite, near & np.isfinite(g), same)


def close(got, want, atol=1e-12, rtol=0.0):
    """Whether the number(s) ``got`` equal ``want`` within ``atol + rtol |want|``,
    elementwise and of the same shape.

    The tolerance test of every check: a non-finite value of ``got`` (NaN, inf) passes
    only where ``want`` holds the same non-finite value, so an answer of NaNs is never
    "within tolerance" (``abs(nan - w) > tol`` is False, which a test written as
    "differs when the gap exceeds tol" would take for agreement).

    Parameters
    ----------
    got, want : float or array_like
        The answer's and the reference's values.
    atol, rtol : float
        Absolute and relative tolerances, both >= 0.

    Returns
    -------
    bool
        False also when ``got`` is not numeric or its shape differs.
    """
    if atol < 0 or rtol < 0:
        raise ValueError(f"atol and rtol must be >= 0, got {atol!r} and {rtol!r}")
    try:
        g = np.asarray(got, dtype=float)
        w = np.asarray(want, dtype=float)
    except (TypeError, ValueError):
        return False
    if g.shape != w.shape:
        return False
    return bool(np.all(_close_mask(g, w, rtol, atol)))


def _short(x):
    text = repr(x)
    return text if len(text) <= 60 else type(x).__name__
