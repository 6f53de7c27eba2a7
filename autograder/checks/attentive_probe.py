"""Hidden checks of the exercise "Forward pass of an attentive probe" (book/attentive.md).

Contract: ``attentive_probe(H, q, Wk, Wv, Wo, W_cls, ...)`` with tokens H (B, T, d), a
number of heads ``n_heads`` and ``n_prefix`` leading tokens returns ``(logits, A)``: those
first tokens of every image are dropped; head
``j`` (from 0) owns columns ``j dk .. (j + 1) dk - 1`` of K = H Wk, V = H Wv and q; the
attention of head j is a softmax over tokens of ``K_j q_j / sqrt(dk)``; the heads' outputs
``V_j^T a_j`` are concatenated into o and ``logits = o @ Wo @ W_cls`` (B, K);
A has shape (B, n_heads, T - n_prefix). The softmax must not overflow.
Reference: :func:`repeval_ref.attentive_probe`.
"""

from __future__ import annotations

import numpy as np

from ._framework import call_student, finding, register
from ._helpers import as_array, frozen_copies, mutated, unpack

EX = "attentive_probe"


def _ref(*args):
    from repeval_ref import attentive_probe

    return attentive_probe(*args)


def _draw(rng, B, T, d, K):
    H = rng.normal(size=(B, T, d))
    q = rng.normal(size=d)
    Wk, Wv, Wo = (rng.normal(size=(d, d)) / np.sqrt(d) for _ in range(3))
    W_cls = rng.normal(size=(d, K))
    return H, q, Wk, Wv, Wo, W_cls


def _variant(
    H,
    q,
    Wk,
    Wv,
    Wo,
    W_cls,
    h,
    n_prefix,
    *,
    split="block",
    scale="dk",
    wo_transposed=False,
    drop="first",
):
    """The forward pass with one deliberate change, to name a student's mistake."""
    B, T, d = H.shape
    dk = d // h
    if drop == "first":
        toks = H[:, n_prefix:]
    elif drop == "last":
        toks = H[:, : T - n_prefix]
    else:
        toks = H
    if split == "block":
        cols = np.arange(d).reshape(h, dk)
    else:  # interleaved: head j owns columns j, j + h, j + 2h, ...
        cols = np.arange(d).reshape(dk, h).T
    keys = (toks @ Wk)[..., cols]  # (B, T', h, dk)
    vals = (toks @ Wv)[..., cols]
    s = np.einsum("bthk,hk->bht", keys, q[cols])
    s = s / {"dk": np.sqrt(dk), "d": np.sqrt(d), "none": 1.0}[scale]
    s = s - s.max(axis=-1, keepdims=True)
    A = np.exp(s)
    A /= A.sum(axis=-1, keepdims=True)
    heads = np.einsum("bht,bthk->bhk", A, vals)  # (B, h, dk)
    o = np.empty((B, d))
    o[:, cols.ravel()] = heads.reshape(B, d)
    logits = o @ (Wo.T if wo_transposed else Wo) @ W_cls
    return logits, A


def _call(fn, args):
    out, warns = call_student(
        fn, *[a.copy() if isinstance(a, np.ndarray) else a for a in args], what="attentive_probe"
    )
    logits, A = unpack(out, 2, "attentive_probe")
    return (as_array(logits, "logits (first item)"), as_array(A, "A (second item)"), warns)


def _close(a, b):
    return a.shape == b.shape and np.allclose(a, b, rtol=1e-7, atol=1e-9)


#: slips of the forward pass that are matches_reference's to charge (the head split, the
#: score scale, W_O transposed): the checks of the prefix and of the softmax's stability
#: accept them, so one slip is not charged three times
OTHER_SLIPS = (
    dict(split="interleaved"),
    dict(scale="none"),
    dict(scale="d"),
    dict(wo_transposed=True),
)


def _right_but_for_other_slips(args, logits, A):
    """Whether (logits, A) is the definition on ``args``, or the definition with one of
    :data:`OTHER_SLIPS`, all computed with the prefix dropped and a stable softmax."""
    want_l, want_A = _ref(*args)
    if _close(logits, want_l) and _close(A, want_A):
        return True
    for kw in OTHER_SLIPS:
        slip_l, slip_A = _variant(*args, **kw)
        if _close(logits, slip_l) and _close(A, slip_A):
            return True
    return False


def _diagnose(args, logits, A):
    """A sentence naming the mistake that reproduces the student's numbers, if any."""
    H, q, Wk, Wv, Wo, W_cls, h, n_prefix = args
    tries = [
        (
            dict(split="interleaved"),
            "Your numbers match a head split where head j takes every h-th column. Head j "
            "must own the contiguous block of columns j*dk .. (j+1)*dk - 1 (reshape the last "
            "axis to (n_heads, dk)).",
        ),
        (
            dict(scale="none"),
            "Your numbers match attention scores that are not divided by sqrt(dk): scale the "
            "scores K_j q_j by 1 / sqrt(dk) before the softmax.",
        ),
        (
            dict(scale="d"),
            "Your numbers match scores divided by sqrt(d); divide by sqrt(dk) = sqrt(d / "
            "n_heads), the width of one head.",
        ),
        (
            dict(wo_transposed=True),
            "Your attention weights are right but the logits use W_O transposed: the logits "
            "are o @ Wo @ W_cls.",
        ),
    ]
    for kw, msg in tries:
        want_l, want_A = _variant(H, q, Wk, Wv, Wo, W_cls, h, n_prefix, **kw)
        if _close(logits, want_l) and _close(A, want_A):
            return msg
    return ""


@register(
    f"{EX}/matches_reference",
    points=3,
    summary="logits and attention weights equal the definition's (no prefix tokens)",
)
def matches_reference(fn, rng):
    for B, T, d, h, K in ((3, 7, 8, 2, 5), (2, 5, 12, 3, 4), (2, 6, 6, 6, 3)):
        H, q, Wk, Wv, Wo, W_cls = _draw(rng, B, T, d, K)
        args = (H, q, Wk, Wv, Wo, W_cls, h, 0)
        want_l, want_A = _ref(*args)
        logits, A, _ = _call(fn, args)
        if logits.shape != (B, K) or A.shape != (B, h, T):
            return [
                finding(
                    "matches the reference",
                    False,
                    3,
                    f"with B = {B}, T = {T}, d = {d}, n_heads = {h}, K = {K} and "
                    f"n_prefix = 0 you returned logits of shape {logits.shape} and A "
                    f"of shape {A.shape}; expected {(B, K)} and {(B, h, T)}.",
                )
            ]
        if not (_close(logits, want_l) and _close(A, want_A)):
            what = "the attention weights A" if not _close(A, want_A) else "the logits"
            msg = (
                f"with B = {B}, T = {T}, d = {d}, n_heads = {h}, K = {K}, {what} differ "
                "from the definition. " + _diagnose(args, logits, A)
            )
            return [finding("matches the reference", False, 3, msg.strip())]
    return [finding("matches the reference", True, 3, "")]


@register(
    f"{EX}/prefix_dropped",
    points=2,
    summary="the first n_prefix tokens (class token, registers) are dropped",
)
def prefix_dropped(fn, rng):
    B, T, d, h, K = 2, 9, 8, 4, 3
    for n_prefix in (1, 5):
        H, q, Wk, Wv, Wo, W_cls = _draw(rng, B, T, d, K)
        # make the prefix tokens stand out, so that keeping them changes everything
        H[:, :n_prefix] += 3.0 * rng.normal(size=(1, n_prefix, d))
        args = (H, q, Wk, Wv, Wo, W_cls, h, n_prefix)
        want_l, want_A = _ref(*args)
        logits, A, _ = _call(fn, args)
        if A.shape == (B, h, T):
            return [
                finding(
                    "prefix tokens dropped",
                    False,
                    2,
                    f"with T = {T} tokens and n_prefix = {n_prefix}, A has "
                    f"{T} weights per head: you kept the prefix tokens. The class "
                    "token and the registers are not patches; drop the first "
                    "n_prefix tokens of every image (H[:, n_prefix:]) before "
                    f"computing keys and values, so A has shape {(B, h, T - n_prefix)}.",
                )
            ]
        if A.shape != want_A.shape:
            return [
                finding(
                    "prefix tokens dropped",
                    False,
                    2,
                    f"with T = {T} and n_prefix = {n_prefix}, A has shape {A.shape}; "
                    f"expected (B, n_heads, T - n_prefix) = {want_A.shape}.",
                )
            ]
        if not _right_but_for_other_slips(args, logits, A):
            last_l, last_A = _variant(*args, drop="last")
            if _close(logits, last_l) and _close(A, last_A):
                msg = (
                    f"you dropped the LAST {n_prefix} tokens; the prefix tokens are the "
                    "first ones: keep H[:, n_prefix:]."
                )
            else:
                msg = (
                    f"with n_prefix = {n_prefix} your logits or weights differ from the "
                    "definition applied to the tokens H[:, n_prefix:]."
                )
            return [finding("prefix tokens dropped", False, 2, msg)]
    return [finding("prefix tokens dropped", True, 2, "")]


@register(
    f"{EX}/stable_softmax",
    points=2,
    summary="no overflow when the attention scores are in the thousands",
)
def stable_softmax(fn, rng):
    B, T, d, h, K = 2, 6, 8, 2, 3
    H, q, Wk, Wv, Wo, W_cls = _draw(rng, B, T, d, K)
    # rescale the query so that the largest attention score is 2000 (exp(2000) = inf)
    dk = d // h
    scores = np.einsum("bthk,hk->bht", (H @ Wk).reshape(B, T, h, dk), q.reshape(h, dk)) / np.sqrt(
        dk
    )
    extreme = scores.flat[np.argmax(np.abs(scores))]
    q = q * (2000.0 / extreme)  # the largest score becomes +2000
    args = (H, q, Wk, Wv, Wo, W_cls, h, 0)
    want_l, want_A = _ref(*args)
    logits, A, warns = _call(fn, args)
    overflow = any("overflow" in w or "invalid value" in w for w in warns)
    finite = np.all(np.isfinite(logits)) and np.all(np.isfinite(A))
    if overflow or not finite:
        return [
            finding(
                "stable softmax",
                False,
                2,
                "with a long query the scores reach the thousands and "
                "np.exp overflows (inf / inf = nan). Subtract each row's largest "
                "score before exponentiating: the softmax is unchanged and every "
                "exponent is <= 0.",
            )
        ]
    ok = _right_but_for_other_slips(args, logits, A)
    return [
        finding(
            "stable softmax",
            ok,
            2,
            "with very large scores your results are finite but differ from the "
            "definition (almost all weight should go to the best-scoring token).",
        )
    ]


@register(
    f"{EX}/properties", points=1, summary="shapes, weights that sum to 1, inputs left untouched"
)
def properties(fn, rng):
    B, T, d, h, K = 3, 5, 6, 3, 4
    H, q, Wk, Wv, Wo, W_cls = _draw(rng, B, T, d, K)
    arrays = [H, q, Wk, Wv, Wo, W_cls]
    before = frozen_copies(*arrays)
    out, _ = call_student(fn, *arrays, h, 0, what="attentive_probe")
    problems = []
    changed = mutated(before, arrays, ["H", "q", "Wk", "Wv", "Wo", "W_cls"])
    if not changed:
        # the other option path: dropping n_prefix tokens must not touch H either
        call_student(fn, *arrays, h, 2, what="attentive_probe")
        changed = [
            f"{n} (with n_prefix = 2)"
            for n in mutated(before, arrays, ["H", "q", "Wk", "Wv", "Wo", "W_cls"])
        ]
    if changed:
        problems.append(f"your function modified {', '.join(changed)} in place")
    logits, A = unpack(out, 2, "attentive_probe")
    logits = as_array(logits, "logits (first item)")
    A = as_array(A, "A (second item)")
    if logits.shape != (B, K):
        problems.append(f"logits have shape {logits.shape}, expected (B, K) = {(B, K)}")
    if A.shape != (B, h, T):
        problems.append(f"A has shape {A.shape}, expected (B, n_heads, T) = {(B, h, T)}")
    elif not (np.all(A >= 0) and np.allclose(A.sum(axis=-1), 1.0)):
        problems.append(
            "the weights of each head over the tokens must be non-negative and "
            "sum to 1 (the softmax runs over the token axis)"
        )
    if not (np.issubdtype(logits.dtype, np.floating) and np.issubdtype(A.dtype, np.floating)):
        problems.append("return floating-point arrays")
    one = _call(fn, (H, q, Wk, Wv, Wo, W_cls, 1, 0))
    want_l, want_A = _ref(H, q, Wk, Wv, Wo, W_cls, 1, 0)
    if not (_close(one[0], want_l) and _close(one[1], want_A)):
        problems.append("with n_heads = 1 (one head of width d) the result is wrong")
    return [finding("properties", not problems, 1, "; ".join(problems))]
