"""Hidden checks of the exercise "Folding a BatchNorm into a probe" (book/batchnorm.md).

Contract: ``fold_batchnorm(W, b, mu, s)`` with W (d, K), b (K,), mu (d,), s (d,) > 0
returns ``(W2, b2)`` with ``W2 = diag(s)^-1 W`` and ``b2 = b - W2^T mu``, so that
``W2^T h + b2 = W^T ((h - mu) / s) + b`` for every h; ValueError if some s_j <= 0.
Reference: :func:`repeval_ref.fold_batchnorm`.
"""

from __future__ import annotations

import numpy as np

from ._framework import StudentError, call_student, finding, register
from ._helpers import as_array, differs, frozen_copies, gate, mutated, unpack

EX = "fold_batchnorm"


def _ref(*args):
    from repeval_ref import fold_batchnorm

    return fold_batchnorm(*args)


def _params(rng, d, K):
    W = rng.normal(size=(d, K))
    b = rng.normal(size=K)
    mu = 3.0 * rng.normal(size=d)
    s = np.exp(rng.uniform(-1.5, 1.5, size=d))
    return W, b, mu, s


def _call(fn, W, b, mu, s):
    out, _ = call_student(fn, W.copy(), b.copy(), mu.copy(), s.copy(), what="fold_batchnorm")
    W2, b2 = unpack(out, 2, "fold_batchnorm")
    return as_array(W2, "W' (first item)"), as_array(b2, "b' (second item)")


def _no_part_right(out, want):
    """Empty when W' or b' of ``out`` equals the reference's ``want``, else how both differ.
    The checks of the validation and of the inputs count with either part right: a
    mistake in one part is charged by matches_reference, not by them as well."""
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        return differs(out, want)
    wrong_W, wrong_b = differs(out[0], want[0]), differs(out[1], want[1])
    return wrong_W and wrong_b and f"W': {wrong_W}; b': {wrong_b}"


@register(f"{EX}/matches_reference", points=3, summary="W' = diag(s)^-1 W and b' = b - W'^T mu")
def matches_reference(fn, rng):
    d, K = int(rng.integers(5, 12)), int(rng.integers(2, 5))  # d != K: catches transposes
    W, b, mu, s = _params(rng, d, K)
    want_W, want_b = _ref(W, b, mu, s)
    W2, b2 = _call(fn, W, b, mu, s)
    if W2.shape != (d, K):
        return [
            finding(
                "matches the reference",
                False,
                3,
                f"W' has shape {W2.shape}; it must keep W's shape (d, K) = ({d}, {K})."
                " Divide row j of W by s_j: W / s[:, None].",
            )
        ]
    if b2.shape != (K,):
        return [
            finding(
                "matches the reference",
                False,
                3,
                f"b' has shape {b2.shape}, expected (K,) = ({K},).",
            )
        ]
    w_ok = np.allclose(W2, want_W, rtol=1e-9, atol=1e-12)
    b_ok = np.allclose(b2, want_b, rtol=1e-9, atol=1e-12)
    if w_ok and b_ok:
        return [finding("matches the reference", True, 3, "")]
    if not w_ok:
        if np.allclose(W2, W * s[:, None], rtol=1e-9):
            msg = (
                "W' multiplies row j of W by s_j; it must divide by s_j (the BatchNorm divides "
                "by s)."
            )
        else:
            msg = "W' is wrong: row j of W must be divided by s_j (W' = diag(s)^-1 W)."
    else:
        if np.allclose(b2, b - W.T @ mu, rtol=1e-9):
            msg = "b' uses the original W; it must use the folded one: b' = b - W'^T mu."
        else:
            msg = "b' is wrong: the mean must be absorbed into the bias, b' = b - W'^T mu."
    return [finding("matches the reference", False, 3, msg)]


@register(
    f"{EX}/logits_identity", points=1, summary="folded probe gives the same logits on raw features"
)
def logits_identity(fn, rng):
    d, K = 7, 3
    W, b, mu, s = _params(rng, d, K)
    H = mu + s * rng.normal(size=(20, d))
    W2, b2 = _call(fn, W, b, mu, s)
    try:
        folded = H @ W2 + b2
    except ValueError:
        raise StudentError(
            f"cannot compute h^T W' + b' with W' of shape {W2.shape} and b' of shape {b2.shape}"
        ) from None
    original = ((H - mu) / s) @ W + b
    err = float(np.max(np.abs(folded - original)))
    return [
        finding(
            "same logits",
            err < 1e-8,
            1,
            f"on 20 raw feature vectors the folded probe's logits differ from the "
            f"BatchNorm + probe logits by up to {err:.3g}; they must be identical.",
        )
    ]


@register(f"{EX}/rejects_bad_scale", points=1, summary="ValueError when some s_j <= 0")
def rejects_bad_scale(fn, rng):
    W, b, mu, s = _params(rng, 4, 2)
    # a function that rejects everything, or returns a constant, earns nothing here:
    # the same parameters with a valid s must give the folded probe
    W2, b2 = _call(fn, W, b, mu, s)
    wrong = _no_part_right((W2, b2), _ref(W, b, mu, s))
    failures = []
    for bad in (0.0, -1.0):
        s_bad = s.copy()
        s_bad[int(rng.integers(0, 4))] = bad
        try:
            call_student(fn, W.copy(), b.copy(), mu.copy(), s_bad, what="fold_batchnorm")
            failures.append(f"s containing {bad:g} was accepted")
        except StudentError as exc:
            if "raised ValueError" not in str(exc):
                failures.append(f"s containing {bad:g} gave {str(exc).splitlines()[0]}")
    return gate(
        [
            finding(
                "rejects s <= 0",
                not failures,
                1,
                "; ".join(failures) + ". The fold divides by s, and a standard "
                "deviation must be positive: raise ValueError naming s.",
            )
        ],
        wrong and f"with a valid s, {wrong}",
    )


@register(f"{EX}/properties", points=1, summary="inputs left untouched")
def properties(fn, rng):
    W, b, mu, s = _params(rng, 5, 3)
    args = [W, b, mu, s]
    before = frozen_copies(*args)
    want = _ref(*before)
    out, _ = call_student(fn, *args, what="fold_batchnorm")
    changed = mutated(before, args, ["W", "b", "mu", "s"])
    return gate(
        [
            finding(
                "inputs untouched",
                not changed,
                1,
                f"your function modified {', '.join(changed)} in place (W /= ... "
                "changes the caller's probe); build new arrays instead.",
            )
        ],
        _no_part_right(out, want),
    )
