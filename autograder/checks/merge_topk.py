"""Hidden checks of the exercise "Exact top-k from a sharded bank" (book/torchloop.md).

Contract: ``merge_topk(shard_vals, shard_idx, offsets, k)`` pools the shards' candidates
(local index + the shard's offset = global index) and returns ``(vals, idx)`` of shape
(m, min(k, total)): similarities decreasing, ties to the smaller global index (also at the
k-th place); shards may be shorter than k or empty, columns within a shard in any order.
Reference: :func:`repeval_ref.merge_topk`.

The inputs are built the way a sharded k-NN produces them: a similarity matrix of m
queries against a bank, cut into contiguous shards, each shard's own top-k (stable sort,
local row numbers), with its columns shuffled.
"""

from __future__ import annotations

import numpy as np

from ._framework import StudentError, call_student, finding, register
from ._helpers import as_array, differs, frozen_copies, gate, mutated, unpack

EX = "merge_topk"


def _ref(*args):
    from repeval_ref import merge_topk

    return merge_topk(*args)


def _cut(n, sizes):
    """Contiguous shards of the given sizes (they sum to n): list of (start, stop)."""
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int)
    assert int(np.sum(sizes)) == n
    return [(int(a), int(a + s)) for a, s in zip(starts, sizes)]


def _shard_lists(sims, bounds, k, rng, shuffle=True):
    """Each shard's own top-k of ``sims`` (local indices), columns shuffled."""
    vals, idx, offsets = [], [], []
    for start, stop in bounds:
        part = sims[:, start:stop]
        order = np.argsort(-part, axis=1, kind="stable")[:, : min(k, stop - start)]
        v = np.take_along_axis(part, order, axis=1)
        if shuffle and order.shape[1] > 1:
            perm = rng.permutation(order.shape[1])
            v, order = v[:, perm], order[:, perm]
        vals.append(np.ascontiguousarray(v))
        idx.append(np.ascontiguousarray(order.astype(np.int64)))
        offsets.append(start)
    return vals, idx, offsets


def _merge(fn, vals, idx, offsets, k):
    args = ([v.copy() for v in vals], [i.copy() for i in idx], list(offsets), k)
    out, _ = call_student(fn, *args, what="merge_topk")
    got_v, got_i = unpack(out, 2, "merge_topk")
    return (
        as_array(got_v, "merge_topk's vals", ndim=2),
        as_array(got_i, "merge_topk's idx", ndim=2),
    )


def _same(got, want):
    return (
        got[0].shape == want[0].shape
        and got[1].shape == want[1].shape
        and np.array_equal(got[1], want[1])
        and np.allclose(got[0], want[0], rtol=0, atol=1e-12)
    )


def _without_offsets(got, vals, idx, k):
    """Whether ``got`` is the merge that keeps the shards' local row numbers (no offset
    added; ties then fall to the smaller local number)."""
    v = np.concatenate(vals, axis=1)
    loc = np.concatenate(idx, axis=1)
    order = np.lexsort((loc, -v), axis=1)[:, : min(k, v.shape[1])]
    return _same(
        got, (np.take_along_axis(v, order, axis=1), np.take_along_axis(loc, order, axis=1))
    )


_OFFSET_HINT = (
    " Your indices are the shards' local row numbers: add each shard's offset "
    "(global index = offsets[s] + local index)."
)


@register(
    f"{EX}/matches_whole_bank",
    points=3,
    summary="the merged lists equal the top-k of the whole bank (uneven shards, shuffled columns)",
)
def matches_whole_bank(fn, rng):
    m, sizes, k = 12, [9, 14, 6, 11], 6
    n = sum(sizes)
    sims = rng.normal(size=(m, n))
    bounds = _cut(n, sizes)
    vals, idx, offsets = _shard_lists(sims, bounds, k, rng)
    want = _ref(vals, idx, offsets, k)
    got = _merge(fn, vals, idx, offsets, k)
    if _same(got, want):
        return [finding("matches the whole bank", True, 3, "")]
    if got[0].shape != want[0].shape:
        raise StudentError(
            f"merge_topk returned arrays of shape {got[0].shape}, expected "
            f"{want[0].shape}: {m} queries, k = {k} neighbours each"
        )
    msg = (
        f"on {m} queries against a bank of {n} rows cut into {len(sizes)} shards of "
        f"{', '.join(map(str, sizes))} rows (k = {k}), your result differs from the top-k "
        f"of the whole bank: {differs(got, want, rtol=0, atol=1e-12)}."
    )
    if np.allclose(np.sort(got[0], axis=1), np.sort(want[0], axis=1), atol=1e-12):
        if not np.allclose(got[0], want[0], atol=1e-12):
            msg += " The right similarities are there but not in decreasing order."
        else:
            # the values are right; are the indices the local ones?
            local = np.concatenate(idx, axis=1)
            if _without_offsets(got, vals, idx, k):
                msg += _OFFSET_HINT
            elif got[1].max(initial=0) < local.max(initial=0) + 1:
                msg += (
                    " Check that every index is turned into a global one with its shard's offset."
                )
    elif np.allclose(got[0], np.sort(np.concatenate(vals, axis=1), axis=1)[:, :k], atol=1e-12):
        msg += (
            " You kept the k smallest similarities, in increasing order: the most "
            "similar rows come first, so sort on -vals."
        )
    else:
        try:
            pre = _shard_lists(sims, bounds, k, rng, shuffle=False)
            if _same(_merge(fn, *pre, k), _ref(*pre, k)):
                msg += (
                    " With each shard's columns already sorted your merge is right: the "
                    "columns of a shard may come in any order, so sort the pooled "
                    "candidates yourself."
                )
        except StudentError:
            pass
    return [finding("matches the whole bank", False, 3, msg)]


@register(
    f"{EX}/ties_across_shards",
    points=2,
    summary=(
        "equal similarities in different shards: the smaller global index first, also at the "
        "k-th place"
    ),
)
def ties_across_shards(fn, rng):
    # four similarity levels only: every row has long runs of ties that span shards
    m, sizes = 15, [7, 5, 9, 8]
    n = sum(sizes)
    sims = rng.integers(0, 4, size=(m, n)) / 4.0
    bounds = _cut(n, sizes)
    out = []
    for k in (4, 11):
        vals, idx, offsets = _shard_lists(sims, bounds, k, rng)
        want = _ref(vals, idx, offsets, k)
        got = _merge(fn, vals, idx, offsets, k)
        if _same(got, want):
            out.append(finding(f"ties, k = {k}", True, 1, ""))
            continue
        if _without_offsets(got, vals, idx, k):
            # ties broken right on the indices the answer has: the missing offsets are
            # matches_whole_bank's part, charged there
            out.append(
                finding(
                    f"ties, k = {k}",
                    True,
                    1,
                    "ties broken by the smaller index, though the indices are the shards' "
                    "local ones (see matches_whole_bank)",
                    "ties broken by the smaller index, though the indices are the shards' "
                    "local ones (see matches_whole_bank)",
                )
            )
            continue
        msg = (
            f"with similarities that take only four values (ties across shards) and "
            f"k = {k}: {differs(got, want, rtol=0, atol=1e-12)}."
        )
        if _without_offsets(got, vals, idx, k):
            msg += _OFFSET_HINT
        elif got[0].shape == want[0].shape and np.allclose(got[0], want[0], atol=1e-12):
            msg += (
                " The similarities are right, the indices are not: among equal "
                "similarities the smaller *global* index comes first, and when the tie "
                "is at the k-th place the smaller indices are kept (sort on the global "
                "index as the second key, with a stable sort or np.lexsort)."
            )
        out.append(finding(f"ties, k = {k}", False, 1, msg))
    return out


@register(
    f"{EX}/short_and_empty_shards",
    points=1,
    summary="shards smaller than k and empty shards; k beyond the whole bank",
)
def short_and_empty_shards(fn, rng):
    m, sizes = 6, [0, 2, 7, 1, 0]
    n = sum(sizes)
    sims = rng.normal(size=(m, n))
    bounds = _cut(n, sizes)
    for k in (5, 20):
        vals, idx, offsets = _shard_lists(sims, bounds, k, rng)
        want = _ref(vals, idx, offsets, k)
        try:
            got = _merge(fn, vals, idx, offsets, k)
        except StudentError as exc:
            return [
                finding(
                    "short and empty shards",
                    False,
                    1,
                    f"with shards of {sizes} rows and k = {k} your function failed "
                    f"({exc}). A shard smaller than k reports all its rows, an empty "
                    "one an (m, 0) array; pool what is there.",
                )
            ]
        if not _same(got, want) and not _without_offsets(got, vals, idx, k):
            msg = (
                f"with shards of {sizes} rows and k = {k} the result differs "
                f"({differs(got, want, rtol=0, atol=1e-12)})"
            )
            if got[0].shape != want[0].shape:
                msg += (
                    f"; with fewer than k candidates in all, return all {min(k, n)} of "
                    "them, without padding."
                )
            else:
                msg += (
                    "; an empty shard has no row, but its offset still places the shards after it."
                )
            return [finding("short and empty shards", False, 1, msg)]
    return [finding("short and empty shards", True, 1, "")]


@register(
    f"{EX}/properties", points=1, summary="a tuple (float vals, integer idx), inputs left untouched"
)
def properties(fn, rng):
    m, sizes, k = 5, [4, 6], 3
    sims = rng.normal(size=(m, sum(sizes)))
    vals, idx, offsets = _shard_lists(sims, _cut(sum(sizes), sizes), k, rng)
    args = [vals, idx]
    before = [frozen_copies(*vals), frozen_copies(*idx)]
    want = _ref(vals, idx, offsets, k)
    out, _ = call_student(fn, vals, idx, list(offsets), k, what="merge_topk")
    problems = []
    for name, arrays, copies in zip(("shard_vals", "shard_idx"), args, before):
        if mutated(copies, arrays, [f"{name}[{s}]" for s in range(len(arrays))]):
            problems.append(f"your function modified {name} in place")
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        problems.append(f"it returned a {type(out).__name__}, expected a tuple (vals, idx)")
        wrong = "not a pair (vals, idx)"
    else:
        v, i = (np.asarray(x) for x in out)
        if not np.issubdtype(i.dtype, np.integer):
            problems.append(f"idx has dtype {i.dtype}, expected an integer dtype")
        if not np.issubdtype(v.dtype, np.floating):
            problems.append(f"vals has dtype {v.dtype}, expected a float dtype")
        # either list right: a mistake in the indices alone (no offsets) is charged by
        # the checks of the merge, not here as well
        wrong = differs(v, want[0], rtol=0, atol=1e-12) and differs(i, want[1], rtol=0, atol=0)
    return gate(
        [finding("properties", not problems, 1, "; ".join(problems))],
        wrong and f"the merged lists: {wrong}",
    )
