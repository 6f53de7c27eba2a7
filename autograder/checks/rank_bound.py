"""Hidden checks of the exercise "The rank bound of a linear probe" (book/rank.md).

Contract: ``rank_bound(H, y, n_classes)`` returns ``(residual, floor)``: residual =
min over W, b of ||Y - H W - 1 b^T||_F^2 with one-hot Y (least squares, unpenalised
bias), a Python float; floor = sum of the K - r - 1 smallest class counts with
r = numpy.linalg.matrix_rank(H), 0 when r + 1 >= K, a Python int.
Reference: :func:`repeval_ref.rank_bound`.
"""

from __future__ import annotations

import numpy as np

from ._framework import StudentError, call_student, finding, register
from ._helpers import (
    close,
    differs,
    frozen_copies,
    gate,
    is_plain_float,
    is_plain_int,
    mutated,
    unpack,
)

EX = "rank_bound"


def _ref(*args):
    from repeval_ref import rank_bound

    return rank_bound(*args)


def _low_rank(rng, n, d, r, K, counts=None):
    if counts is None:
        y = rng.integers(0, K, size=n)
        y[:K] = np.arange(K)
    else:
        y = np.repeat(np.arange(K), counts)
        rng.shuffle(y)
    centres = rng.normal(size=(K, r))
    z = centres[y] + 0.5 * rng.normal(size=(len(y), r))
    H = z @ rng.normal(size=(r, d))  # rank r (almost surely)
    return H, y


def _no_bias(H, y, K):
    """The least-squares residual without the bias column (the common slip)."""
    Y = np.eye(K)[y]
    return float(np.sum((Y - H @ np.linalg.lstsq(H, Y, rcond=None)[0]) ** 2))


def _show(x):
    try:
        return f"{float(x):g}"
    except (TypeError, ValueError):
        return repr(x)[:40]


def _call(fn, H, y, K):
    out, _ = call_student(fn, H.copy(), y.copy(), K, what="rank_bound")
    res, floor = unpack(out, 2, "rank_bound")
    try:
        return float(res), float(floor), out
    except (TypeError, ValueError):
        raise StudentError(f"rank_bound should return two numbers, got {out!r}") from None


def _floor_cause(floor, H, y, K):
    """Which typical mistake gives the student's floor on these inputs (or a neutral
    reminder of the rule): found from the value alone."""
    n = len(y)
    r = int(np.linalg.matrix_rank(H))
    counts = np.sort(np.bincount(y, minlength=K))
    m = K - r - 1

    def smallest(j):
        return int(counts[:j].sum()) if j > 0 else 0

    if m > 0 and floor in (m * n // K, m * n / K):
        return (
            f"yours is (K - r - 1) n / K = {floor:g}, which holds only for balanced "
            "classes: sum the K - r - 1 SMALLEST counts (sort the counts)"
        )
    if m > 0 and floor == int(counts[::-1][:m].sum()):
        return (
            "yours sums the K - r - 1 LARGEST counts; the floor is what the probe "
            "cannot fit, the classes it gives up on: the smallest ones"
        )
    if floor == smallest(m + 1):
        return (
            "yours sums K - r counts: the bias adds one to the rank of the scores, so "
            "K - r - 1 classes are left out"
        )
    if m > 0 and floor == smallest(K - H.shape[1] - 1):
        return (
            f"yours is what r = {H.shape[1]}, the number of columns of H, gives; r is "
            f"the rank of H (numpy.linalg.matrix_rank, here {r}), not its number of "
            "columns"
        )
    return f"the sum of the K - r - 1 = {m} smallest class counts"


@register(
    f"{EX}/matches_reference",
    points=3,
    summary="least-squares residual and floor equal the reference",
)
def matches_reference(fn, rng):
    K = int(rng.integers(6, 10))
    r = int(rng.integers(1, K - 2))
    H, y = _low_rank(rng, 120, 12, r, K)
    want_res, want_floor = _ref(H, y, K)
    res, floor, _ = _call(fn, H, y, K)
    problems = []
    if not np.isclose(res, want_res, rtol=1e-7, atol=1e-9):
        msg = f"the residual is {res:.6g}, the least-squares minimum is {want_res:.6g}"
        if np.isclose(res, _no_bias(H, y, K), rtol=1e-7, atol=1e-9):
            msg += (
                " (yours is the fit without the bias column: append a column of ones "
                "to H, as the bias is fitted and not penalised)"
            )
        elif res > want_res:
            msg += (
                " (yours is larger: fit every column of the one-hot Y by "
                "numpy.linalg.lstsq on [H, 1])"
            )
        problems.append(msg)
    if floor != want_floor:
        r_h = int(np.linalg.matrix_rank(H))
        problems.append(
            f"the floor is {floor:g}, expected {want_floor} for rank {r_h} and "
            f"{K} classes: {_floor_cause(floor, H, y, K)}"
        )
    return [finding("matches the reference", not problems, 3, "; ".join(problems))]


@register(
    f"{EX}/unbalanced_floor",
    points=1,
    summary="floor sums the smallest class counts (unbalanced classes)",
)
def unbalanced_floor(fn, rng):
    K = 6
    counts = rng.permutation([5, 9, 14, 20, 27, 33])
    H, y = _low_rank(rng, int(np.sum(counts)), 8, 2, K, counts=counts)
    _, want = _ref(H, y, K)
    _, floor, _ = _call(fn, H, y, K)
    return [
        finding(
            "unbalanced classes",
            floor == want,
            1,
            f"with class counts {sorted(int(c) for c in counts)} and rank 2 the floor "
            f"is {want}, you returned {floor:g}: {_floor_cause(floor, H, y, K)}.",
        )
    ]


@register(f"{EX}/full_rank_floor_zero", points=1, summary="floor is 0 when r + 1 >= K")
def full_rank_floor_zero(fn, rng):
    K = 4
    H, y = _low_rank(rng, 60, 5, 3, K)  # r + 1 = K
    _, floor, _ = _call(fn, H, y, K)
    H2, y2 = _low_rank(rng, 60, 9, K, K)  # r + 1 = K + 1: K - r - 1 = -1
    _, floor2, _ = _call(fn, H2, y2, K)
    ok = floor == 0 and floor2 == 0
    # a constant 0 floor earns nothing: with rank 3 and 7 classes (a positive floor) the
    # floor or the residual (with or without the bias column) must be right, so that a
    # mistake in the other part is charged by that part's checks only
    H3, y3 = _low_rank(rng, 70, 5, 3, 7)
    res3, floor3, _ = _call(fn, H3, y3, 7)
    want_res3, want3 = _ref(H3, y3, 7)
    wrong = (
        floor3 != want3
        and not close(res3, want_res3, 1e-9, 1e-7)
        and not close(res3, _no_bias(H3, y3, 7), 1e-9, 1e-7)
        and f"with rank 3 and 7 classes, ({res3:.6g}, {floor3:g}) instead of "
        f"({want_res3:.6g}, {want3})"
    )
    if floor != 0:
        why = (
            f"with rank 3 and 4 classes no class is left out (K - r - 1 = 0), so the "
            f"floor is 0; you returned {floor:g}: {_floor_cause(floor, H, y, K)}."
        )
    else:
        why = (
            f"with rank 4 and 4 classes the floor must be 0, you returned {floor2:g}: the "
            "sum is empty when K - r - 1 <= 0 (a negative slice count must not wrap "
            "around)."
        )
    return gate([finding("no floor when r + 1 >= K", ok, 1, why)], wrong)


@register(f"{EX}/properties", points=1, summary="a Python float and a Python int, inputs untouched")
def properties(fn, rng):
    K = 5
    H, y = _low_rank(rng, 50, 6, 1, K)
    args = [H, y]
    before = frozen_copies(*args)
    want = _ref(*before, K)
    out, _ = call_student(fn, H, y, K, what="rank_bound")
    res, floor = unpack(out, 2, "rank_bound")
    problems = []
    changed = mutated(before, args, ["H", "y"])
    if changed:
        problems.append(f"your function modified {', '.join(changed)} in place")
    if not is_plain_float(res):
        problems.append(f"the residual should be a Python float, got {type(res).__name__}")
    if not is_plain_int(floor):
        problems.append(f"the floor should be a Python int, got {type(floor).__name__}")
    # credited with either part right on these inputs (the floor is positive here): a
    # mistake in one part is charged by that part's checks, not here as well
    wrong_res = differs(res, want[0], rtol=1e-7, atol=1e-9)
    wrong_floor = floor != want[1] and f"{_show(floor)} instead of {want[1]}"
    return gate(
        [finding("properties", not problems, 1, "; ".join(problems))],
        wrong_res and wrong_floor and f"the residual: {wrong_res}; the floor: {wrong_floor}",
    )


@register(
    f"{EX}/absent_class",
    points=1,
    summary="a class with no example counts 0 among the smallest counts",
)
def absent_class(fn, rng):
    K = 6
    counts = np.array([7, 11, 16, 22, 30, 0])  # the last class has no example
    H, y = _low_rank(rng, int(counts.sum()), 8, 1, K, counts=counts)
    # the same features with the last class present: there the answer must be right, so
    # that the finding below is about the absent class alone
    full = np.where(np.arange(len(y)) < 9, K - 1, y)
    # (the floor alone: the residual is the same with or without the empty class and
    # is scored by matches_reference)
    _, floor0, _ = _call(fn, H, full, K)
    want0 = _ref(H, full, K)[1]
    if floor0 != want0:
        return gate(
            [finding("absent class", False, 1, "")],
            f"with every class present, the floor is {floor0:g} instead of {want0}",
        )
    res, floor, _ = _call(fn, H, y, K)
    want_res, want = _ref(H, y, K)
    ok = floor == want
    return [
        finding(
            "absent class",
            ok,
            1,
            f"with K = {K} classes of which class {K - 1} has no example (counts "
            f"{counts.tolist()}) and rank 1 you returned ({res:.6g}, {floor:g}), "
            f"expected ({want_res:.6g}, {want}). A class that counts 0 is the "
            "smallest of all: count with np.bincount(y, minlength=n_classes), not "
            "only the labels that occur.",
        )
    ]
