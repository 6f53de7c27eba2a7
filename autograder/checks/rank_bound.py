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
from ._helpers import differs, frozen_copies, gate, is_plain_float, is_plain_int, mutated, unpack

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


def _call(fn, H, y, K):
    out, _ = call_student(fn, H.copy(), y.copy(), K, what="rank_bound")
    res, floor = unpack(out, 2, "rank_bound")
    try:
        return float(res), float(floor), out
    except (TypeError, ValueError):
        raise StudentError(f"rank_bound should return two numbers, got {out!r}") from None


@register(f"{EX}/matches_reference", points=3,
          summary="least-squares residual and floor equal the reference")
def matches_reference(fn, rng):
    K = int(rng.integers(6, 10))
    r = int(rng.integers(1, K - 2))
    H, y = _low_rank(rng, 120, 12, r, K)
    want_res, want_floor = _ref(H, y, K)
    res, floor, _ = _call(fn, H, y, K)
    problems = []
    if not np.isclose(res, want_res, rtol=1e-7, atol=1e-9):
        msg = f"the residual is {res:.6g}, the least-squares minimum is {want_res:.6g}"
        if res > want_res:
            msg += (" (yours is larger: is the bias column included and unpenalised? Use "
                    "numpy.linalg.lstsq on [H, 1] against the one-hot Y)")
        problems.append(msg)
    if floor != want_floor:
        r_h = int(np.linalg.matrix_rank(H))
        msg = (f"the floor is {floor:g}, expected {want_floor} for rank {r_h} and {K} "
               "classes (sum of the K - r - 1 smallest class counts)")
        m = max(K - r_h - 1, 0)
        if m and floor in (m * len(y) // K, m * len(y) / K):   # the balanced-class count
            msg += (f"; yours is (K - r - 1) n / K = {floor:g}, which holds only for "
                    "balanced classes: sum the K - r - 1 SMALLEST counts (sort the counts)")
        problems.append(msg)
    return [finding("matches the reference", not problems, 3, "; ".join(problems))]


@register(f"{EX}/unbalanced_floor", points=1,
          summary="floor sums the smallest class counts (unbalanced classes)")
def unbalanced_floor(fn, rng):
    K = 6
    counts = rng.permutation([5, 9, 14, 20, 27, 33])
    H, y = _low_rank(rng, int(np.sum(counts)), 8, 2, K, counts=counts)
    _, want = _ref(H, y, K)
    _, floor, _ = _call(fn, H, y, K)
    return [finding("unbalanced classes", floor == want, 1,
                    f"with class counts {sorted(int(c) for c in counts)} and rank 2 the floor "
                    f"is {want}, you returned {floor:g}: sum the K - r - 1 SMALLEST counts "
                    "(sort the counts), not (K - r - 1) n / K.")]


@register(f"{EX}/full_rank_floor_zero", points=1,
          summary="floor is 0 when r + 1 >= K")
def full_rank_floor_zero(fn, rng):
    K = 4
    H, y = _low_rank(rng, 60, 5, 3, K)  # r + 1 = K
    res, floor, _ = _call(fn, H, y, K)
    H2, y2 = _low_rank(rng, 60, 9, K, K)  # r + 1 = K + 1: K - r - 1 = -1
    res2, floor2, _ = _call(fn, H2, y2, K)
    ok = floor == 0 and floor2 == 0
    # a constant 0 floor earns nothing: the residuals on the same inputs must be right
    wrong = (differs(res, _ref(H, y, K)[0], rtol=1e-7, atol=1e-9)
             or differs(res2, _ref(H2, y2, K)[0], rtol=1e-7, atol=1e-9))
    return gate([finding("no floor when r + 1 >= K", ok, 1,
                         f"with rank 3 and 4 classes (and rank 4, 4 classes) the floor must "
                         f"be 0, you returned {floor:g} and {floor2:g}: the sum is empty when "
                         "K - r - 1 <= 0 (a negative slice count must not wrap around).")],
                wrong and f"the residual: {wrong}")


@register(f"{EX}/properties", points=1,
          summary="a Python float and a Python int, inputs untouched")
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
    return gate([finding("properties", not problems, 1, "; ".join(problems))],
                differs(out, want, rtol=1e-7, atol=1e-9))
