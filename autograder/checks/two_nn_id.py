"""Hidden checks of the exercise "Intrinsic dimension by TwoNN" (book/rankme.md).

Contract: ``two_nn_id(X)`` returns the Python float ``N / sum_i log(r2_i / r1_i)`` with
``r1, r2`` the Euclidean distances from each point to its first and second nearest
*other* points; duplicate points raise ValueError; no N x N matrix is formed.
Reference: :func:`repeval_ref.two_nn_id`.
"""

from __future__ import annotations

import numpy as np

from ._framework import StudentError, call_student, finding, register
from ._helpers import differs, frozen_copies, gate, is_plain_float, metered, mutated

EX = "two_nn_id"
#: points of the memory check: an N x N matrix of them takes 275 MB in float64 and 137 MB
#: in float32, both far over the resident-memory backstop (RSS_BACKSTOP, 64 MB) that
#: catches buffers tracemalloc does not see (torch's, a C library's)
N_MEMORY = 6000
#: the largest allocation peak allowed for N_MEMORY points (a tree or a chunked search
#: needs well under 1 MB)
PEAK_LIMIT = 16 * 2**20


def _ref(X):
    from repeval_ref import two_nn_id

    return two_nn_id(X)


def _manifold(rng, n, intrinsic, ambient):
    """Points on a curved ``intrinsic``-dimensional surface inside R^ambient."""
    t = rng.uniform(-1.0, 1.0, size=(n, intrinsic))
    lift = rng.normal(size=(intrinsic, ambient))
    return t @ lift + 0.3 * np.sin(2.0 * t) @ rng.normal(size=(intrinsic, ambient))


def _call(fn, X):
    out, _ = call_student(fn, X.copy(), what="two_nn_id")
    try:
        return float(out), out
    except (TypeError, ValueError):
        raise StudentError(f"two_nn_id should return a number, got {out!r}") from None


def _close(a, b):
    return abs(a - b) <= 1e-9 * max(1.0, abs(b))


def _not_computed(got, X):
    """Empty when ``got`` is TwoNN on ``X`` or one of its slips in the formula ((N - 1) /
    sum, squared distances, the mean of log mu), else how it differs. The checks of the
    duplicates, the memory and the properties credit such an answer: the slip is
    matches_reference's to charge; zeros, NaN and constants follow no rule."""
    want = _ref(X)
    n = len(X)
    rules = (want, want * (n - 1) / n, want / 2, 1.0 / want)
    try:
        if np.isfinite(float(got)) and any(_close(float(got), r) for r in rules):
            return ""
    except (TypeError, ValueError):
        pass
    return differs(got, want)


@register(
    f"{EX}/matches_reference",
    points=3,
    summary="N / sum log(r2 / r1) on points of a curved low-dimensional surface",
)
def matches_reference(fn, rng):
    for n, k, D in ((300, 2, 8), (200, 4, 6)):
        X = _manifold(rng, n, k, D)
        want = _ref(X)
        got, _ = _call(fn, X)
        if _close(got, want):
            continue
        msg = (
            f"on {n} points of a {k}-dimensional surface in R^{D} you returned "
            f"{got:.6g}; TwoNN gives {want:.6g}."
        )
        if _close(got, want * (n - 1) / n):
            msg += " Use N / sum(log mu), not (N - 1) / sum(log mu)."
        elif _close(got, want / 2):
            msg += (
                " Your value is half the estimate: use distances, not squared "
                "distances (log(r2^2 / r1^2) = 2 log(r2 / r1))."
            )
        elif got > 0 and _close(got, 1.0 / want):
            msg += (
                " Your value is the mean of log(r2 / r1), the inverse of the estimate: "
                "the maximum-likelihood dimension is N / sum(log mu) = 1 / mean(log mu)."
            )
        elif got == 0 or not np.isfinite(got):
            msg += (
                " Is each point its own nearest neighbour at distance 0? Exclude the "
                "point itself: r1 and r2 are the distances to the two nearest OTHER "
                "points."
            )
        return [finding("matches the reference", False, 3, msg)]
    return [finding("matches the reference", True, 3, "")]


@register(
    f"{EX}/duplicates",
    points=1,
    summary="duplicate points raise ValueError instead of returning inf or nan",
)
def duplicates(fn, rng):
    X = _manifold(rng, 50, 2, 4)
    # rejecting every input earns nothing: without the duplicate the estimate must be right
    clean, _ = _call(fn, X)
    wrong = _not_computed(clean, X)
    X[17] = X[3]
    try:
        got, _ = _call(fn, X)
    except StudentError as exc:
        ok = str(exc).startswith("two_nn_id raised ValueError")
        return gate(
            [
                finding(
                    "duplicates",
                    ok,
                    1,
                    f"with a duplicated point your function failed with something "
                    f"other than ValueError ({exc}); raise ValueError naming the "
                    "problem.",
                )
            ],
            wrong and f"the same 50 points without the duplicate: {wrong}",
        )
    return [
        finding(
            "duplicates",
            False,
            1,
            f"with two identical points you returned {got}: their r1 is 0, so "
            "log(r2 / r1) is infinite and the estimate meaningless. Check for a zero "
            "first-neighbour distance and raise ValueError.",
        )
    ]


@register(
    f"{EX}/no_n_by_n_matrix",
    points=1,
    summary=f"{N_MEMORY} points without an N x N distance matrix",
)
def no_n_by_n_matrix(fn, rng):
    X = rng.normal(size=(N_MEMORY, 3))
    meter = metered(fn)
    got, _ = _call(meter, X)
    peak = max(meter.peaks)
    if not np.isfinite(got):
        return [
            finding(
                "no N x N matrix",
                False,
                1,
                f"on {N_MEMORY} Gaussian points in R^3 you returned {got}, not a finite number.",
            )
        ]
    wrong = _not_computed(got, X)
    return gate(
        [
            finding(
                "no N x N matrix",
                peak <= PEAK_LIMIT,
                1,
                f"for {N_MEMORY} points your function allocated {peak / 2**20:.0f} MB at "
                "once: it builds all pairwise distances. On a million embeddings that "
                "matrix needs terabytes; find the two nearest neighbours with a tree "
                "(scipy.spatial.cKDTree or sklearn.neighbors.NearestNeighbors) instead.",
            )
        ],
        wrong and f"on the {N_MEMORY} points: {wrong}",
    )


@register(
    f"{EX}/properties",
    points=1,
    summary="a Python float, invariant to rotation, scale and translation",
)
def properties(fn, rng):
    X = _manifold(rng, 120, 3, 5)
    before = frozen_copies(X)
    want = _ref(before[0].copy())
    out, _ = call_student(fn, X, what="two_nn_id")
    problems = []
    if mutated(before, [X], ["X"]):
        problems.append("your function modified X in place")
    if not is_plain_float(out):
        problems.append(f"return a Python float (float(x)), got {type(out).__name__}")
    base, _ = _call(fn, before[0])
    Q, _ = np.linalg.qr(rng.normal(size=(5, 5)))
    moved, _ = _call(fn, 7.0 * before[0] @ Q + rng.normal(size=5))
    if not abs(moved - base) <= 1e-7 * max(1.0, abs(base)):
        problems.append(
            "rotating, scaling and translating the points changed the estimate; "
            "ratios of Euclidean distances ignore all three"
        )
    wrong = differs(out, want) and _not_computed(out, before[0])
    return gate([finding("properties", not problems, 1, "; ".join(problems))], wrong)
