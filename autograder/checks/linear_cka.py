"""Hidden checks of the exercise "Linear CKA" (book/cka.md).

Contract: ``linear_cka(X, Y)`` with X (n, p), Y (n, q) returns the Python float
``||Xc^T Yc||_F^2 / (||Xc^T Xc||_F ||Yc^T Yc||_F)`` with column-centred Xc, Yc, without
n x n matrices and without a fudge constant in the denominator.
Reference: :func:`repeval_ref.linear_cka`.
"""

from __future__ import annotations

import numpy as np

from ._framework import StudentError, call_student, finding, register
from ._helpers import differs, frozen_copies, gate, is_plain_float, metered, mutated

EX = "linear_cka"
#: samples of the memory check: an n x n Gram matrix of them takes 275 MB in float64 and
#: 137 MB in float32, both far over the resident-memory backstop (RSS_BACKSTOP, 64 MB)
N_MEMORY = 6000
#: allowed allocation peak for N_MEMORY samples
PEAK_LIMIT = 16 * 2**20


def _ref(X, Y):
    from repeval_ref import linear_cka

    return linear_cka(X, Y)


def _pair(rng, n, p, q, noise=1.0):
    """Two related representations with column means far from zero."""
    X = rng.normal(size=(n, p)) * np.exp(rng.uniform(-1, 1, size=p))
    Y = X @ rng.normal(size=(p, q)) + noise * rng.normal(size=(n, q))
    return X + 4.0 * rng.normal(size=p), Y + 4.0 * rng.normal(size=q)


def _call(fn, X, Y):
    out, _ = call_student(fn, X.copy(), Y.copy(), what="linear_cka")
    try:
        return float(out), out
    except (TypeError, ValueError):
        raise StudentError(f"linear_cka should return a number, got {out!r}") from None


def _uncentred(X, Y):
    return np.linalg.norm(X.T @ Y) ** 2 / (np.linalg.norm(X.T @ X) * np.linalg.norm(Y.T @ Y))


def _centred_parts(X, Y):
    """||Xc^T Yc||_F, ||Xc^T Xc||_F and ||Yc^T Yc||_F of the column-centred pair."""
    Xc, Yc = X - X.mean(axis=0), Y - Y.mean(axis=0)
    return (np.linalg.norm(Xc.T @ Yc), np.linalg.norm(Xc.T @ Xc), np.linalg.norm(Yc.T @ Yc))


#: typical slips in the formula: (their value from the parts, the hint naming the slip)
_CKA_SLIPS = (
    (
        lambda c, x, y: c / (x * y),
        " Your numerator is ||X^T Y||_F, not squared: on centred columns CKA divides the "
        "squared Frobenius norm of X^T Y by the product of those of X^T X and Y^T Y.",
    ),
    (
        lambda c, x, y: c * c / np.sqrt(x * y),
        " Your denominator has a square root too many: it is ||X^T X||_F ||Y^T Y||_F (each "
        "Frobenius norm already scales like the numerator's square root).",
    ),
)


def _close(a, b, rtol=1e-9):
    return abs(a - b) <= rtol * max(1e-12, abs(b))


def _wrong_beyond_centring(got, X, Y):
    """How ``got`` differs from CKA on (X, Y) ("" when equal), where the uncentred value
    counts as equal: the centring is the translation check's part, so the checks of
    the scale, the properties and the memory do not charge it again."""
    wrong = differs(got, _ref(X, Y))
    if wrong and not differs(got, _uncentred(X, Y), rtol=1e-7):
        return ""
    return wrong


@register(
    f"{EX}/matches_reference",
    points=2,
    summary="CKA of column-centred representations of different widths",
)
def matches_reference(fn, rng):
    for n, p, q in ((100, 5, 8), (60, 12, 3)):
        X, Y = _pair(rng, n, p, q)
        want = _ref(X, Y)
        got, _ = _call(fn, X, Y)
        if _close(got, want):
            continue
        msg = (
            f"for X of shape ({n}, {p}) and Y of shape ({n}, {q}) you returned {got:.8g}; CKA is "
            f"{want:.8g}."
        )
        if _close(got, _uncentred(X, Y), 1e-7):
            msg += (
                " You did not centre the columns: subtract each column's mean from X and "
                "from Y first (CKA compares centred Gram matrices)."
            )
        else:
            parts = _centred_parts(X, Y)
            msg += next(
                (why for slip, why in _CKA_SLIPS if _close(got, float(slip(*parts)), 1e-7)), ""
            )
        return [finding("matches the reference", False, 2, msg)]
    return [finding("matches the reference", True, 2, "")]


@register(
    f"{EX}/translation_invariance",
    points=1,
    summary="adding a constant vector to every row changes nothing",
)
def translation_invariance(fn, rng):
    X, Y = _pair(rng, 80, 6, 4)
    base, _ = _call(fn, X, Y)
    moved, _ = _call(fn, X + 25.0 * rng.normal(size=6), Y - 25.0 * rng.normal(size=4))
    return gate(
        [
            finding(
                "translation invariance",
                _close(moved, base, 1e-8),
                1,
                f"shifting every row of X and Y by a constant vector changed your "
                f"CKA from {base:.6g} to {moved:.6g}. Two representations that "
                "differ by an offset organise the samples identically: centre the "
                "columns.",
            )
        ],
        differs(base, _ref(X, Y)),
    )


@register(
    f"{EX}/scale_invariance",
    points=1,
    summary="tiny features (scale 1e-6) give the same CKA: no fudge constant",
)
def scale_invariance(fn, rng):
    X, Y = _pair(rng, 50, 4, 4)
    base, _ = _call(fn, X, Y)
    small, _ = _call(fn, 1e-6 * X, 1e-5 * Y)
    wrong = _wrong_beyond_centring(base, X, Y)
    msg = (
        f"multiplying X by 1e-6 and Y by 1e-5 changed your CKA from {base:.6g} to "
        f"{small:.6g}. CKA ignores the scale of each representation"
    )
    if wrong:  # the formula itself is off (see matches_reference), not a fudge constant
        msg += ": numerator and denominator must scale alike."
    else:
        msg += (
            "; a small constant added to the denominator (the common '+ 1e-10') "
            "dominates when the features are small. Do not add one."
        )
    return gate([finding("scale invariance", _close(small, base, 1e-8), 1, msg)], wrong)


@register(
    f"{EX}/properties",
    points=1,
    summary="a Python float in [0, 1]; 1 for rotated copies; inputs untouched",
)
def properties(fn, rng):
    X, Y = _pair(rng, 40, 5, 5)
    before = frozen_copies(X, Y)
    want = _ref(*frozen_copies(X, Y))
    out, _ = call_student(fn, X, Y, what="linear_cka")
    problems = []
    changed = mutated(before, [X, Y], ["X", "Y"])
    if changed:
        problems.append(
            f"your function modified {', '.join(changed)} in place (centre into new arrays)"
        )
    if not is_plain_float(out):
        problems.append(f"return a Python float (float(x)), got {type(out).__name__}")
    elif not 0.0 <= out <= 1.0 + 1e-12:
        problems.append(f"CKA lies in [0, 1], got {out}")
    Q, _ = np.linalg.qr(rng.normal(size=(5, 5)))
    same, _ = _call(fn, before[0], 3.0 * before[0] @ Q)
    if not abs(same - 1.0) < 1e-9:
        problems.append(f"CKA of X and a rotated, rescaled copy of X must be 1, got {same:.8g}")
    wrong = differs(out, want) and _wrong_beyond_centring(out, *before)
    return gate([finding("properties", not problems, 1, "; ".join(problems))], wrong)


@register(
    f"{EX}/no_gram_matrix", points=1, summary=f"{N_MEMORY} samples without n x n Gram matrices"
)
def no_gram_matrix(fn, rng):
    X, Y = _pair(rng, N_MEMORY, 3, 2)
    meter = metered(fn)
    got, _ = _call(meter, X, Y)
    peak = max(meter.peaks)
    if not np.isfinite(got):
        return [
            finding(
                "no Gram matrix",
                False,
                1,
                f"on {N_MEMORY} samples you returned {got}, not a finite number.",
            )
        ]
    wrong = _wrong_beyond_centring(got, X, Y)
    return gate(
        [
            finding(
                "no Gram matrix",
                peak <= PEAK_LIMIT,
                1,
                f"for {N_MEMORY} samples your function allocated {peak / 2**20:.0f} MB at once: "
                "it forms n x n Gram matrices (XX^T). Use the feature-space form "
                "||Xc^T Yc||_F^2 / (||Xc^T Xc||_F ||Yc^T Yc||_F), which needs only "
                "p x q, p x p and q x q products.",
            )
        ],
        wrong and f"on {N_MEMORY} samples: {wrong}",
    )
