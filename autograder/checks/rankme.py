"""Hidden checks of the exercise "RankMe: the effective rank of embeddings" (book/rankme.md).

Contract: ``rankme(Z, center=False, eps=1e-7)`` returns a Python float: the singular
values sigma of Z (column-centred first only when ``center`` is True), shares
``p = sigma / sum(sigma) + eps`` and ``exp(-sum p log p)``, with ``0 log 0 = 0``.
Reference: :func:`repeval_ref.rankme`.
"""

from __future__ import annotations

import numpy as np

from ._framework import StudentError, call_student, finding, register
from ._helpers import differs, frozen_copies, gate, is_plain_float, mutated

EX = "rankme"


def _ref(Z, **kw):
    from repeval_ref import rankme

    return rankme(Z, **kw)


def _embeddings(rng, n, d, rank):
    """Features with a decaying spectrum and column means far from zero."""
    basis = rng.normal(size=(rank, d))
    scales = np.exp(-0.4 * np.arange(rank))
    return (rng.normal(size=(n, rank)) * scales) @ basis + 2.0 * rng.normal(size=d)


def _call(fn, Z, **kw):
    out, _ = call_student(fn, Z.copy(), what="rankme", **kw)
    try:
        return float(out), out
    except (TypeError, ValueError):
        raise StudentError(f"rankme should return a number, got {out!r}") from None


def _entropy_rank(sigma, eps):
    p = sigma / sigma.sum() + eps
    p = p[p > 0]
    return float(np.exp(-np.sum(p * np.log(p))))


def _close(a, b):
    return abs(a - b) <= 1e-9 * max(1.0, abs(b))


@register(
    f"{EX}/matches_reference",
    points=3,
    summary="the effective rank of raw (uncentred) embeddings, with eps added to every share",
)
def matches_reference(fn, rng):
    for n, d, rank, kw in ((60, 12, 8, {}), (9, 20, 9, {}), (40, 10, 6, {"eps": 1e-3})):
        Z = _embeddings(rng, n, d, rank)
        want = _ref(Z, **kw)
        got, _ = _call(fn, Z, **kw)
        if _close(got, want):
            continue
        eps = kw.get("eps", 1e-7)
        raw = np.linalg.svd(Z, compute_uv=False)
        centred = np.linalg.svd(Z - Z.mean(0), compute_uv=False)
        msg = f"for Z of shape ({n}, {d}) you returned {got:.8g}; the effective rank is {want:.8g}."
        if _close(got, _entropy_rank(centred, eps)):
            msg += (
                " You centred the columns although center=False: by default take the "
                "embedding matrix as it is (as Garrido et al. do); centre only when "
                "center=True."
            )
        elif _close(got, _entropy_rank(raw, 0.0)):
            msg += (
                f" Add eps = {eps:g} to every share p_i = sigma_i / sum(sigma) before the entropy."
            )
        elif want > 0 and _close(got, float(np.log(want))):
            msg += (
                " Your value is the entropy of the shares; RankMe is its exponential, "
                "exp(-sum p_i log p_i), which counts dimensions."
            )
        elif _close(got, _entropy_rank(raw**2, eps)):
            msg += (
                " You used the squared singular values (eigenvalues of Z^T Z); RankMe's "
                "shares are the singular values themselves, normalised to sum to 1."
            )
        return [finding("matches the reference", False, 3, msg)]
    return [finding("matches the reference", True, 3, "")]


@register(f"{EX}/center_option", points=1, summary="center=True subtracts the column means first")
def center_option(fn, rng):
    Z = _embeddings(rng, 50, 8, 5)
    want = _ref(Z, center=True)
    got, _ = _call(fn, Z, center=True)
    shifted, _ = _call(fn, Z + 5.0 * rng.normal(size=8), center=True)
    if _close(got, want) and _close(shifted, want):
        return [finding("center=True", True, 1, "")]
    msg = (
        f"with center=True you returned {got:.8g} (and {shifted:.8g} after translating "
        f"every row); the effective rank of the centred Z is {want:.8g}."
    )
    # isolate the cause with the student's own function: centring by hand and calling
    # it with center=False must give what center=True gives
    try:
        by_hand, _ = _call(fn, Z - Z.mean(0), center=False)
    except StudentError:
        by_hand = None
    if by_hand is not None and _close(got, by_hand) and _close(shifted, by_hand):
        msg += (
            " Your center=True equals your own result on the column-centred Z with "
            "center=False, so the centring itself is right: the difference lies in the "
            "effective rank you compute (see the check matches_reference)."
        )
    elif by_hand is not None:
        msg += (
            f" Centring Z by hand and calling your function with center=False gives "
            f"{by_hand:.8g}, which differs from your center=True result: "
            "center=True should subtract the column means (Z - Z.mean(axis=0)) before "
            "the singular values and change nothing else."
        )
    return [finding("center=True", False, 1, msg)]


@register(
    f"{EX}/known_spectra",
    points=1,
    summary="singular values (3, 3, 3, 0) give 3 with eps = 0 (0 log 0 = 0)",
)
def known_spectra(fn, rng):
    base = np.array(
        [[3, 0, 0, 0], [-3, 0, 0, 0], [0, 3, 0, 0], [0, -3, 0, 0], [0, 0, 3, 0], [0, 0, -3, 0]],
        dtype=float,
    ) / np.sqrt(2.0)
    Z = base[rng.permutation(6)][:, rng.permutation(4)]  # the zero column stays exact
    try:
        got, _ = _call(fn, Z, eps=0.0)
    except StudentError as exc:
        return [
            finding(
                "known spectra", False, 1, f"for singular values (3, 3, 3, 0) and eps = 0: {exc}"
            )
        ]
    if not np.isfinite(got):
        return [
            finding(
                "known spectra",
                False,
                1,
                f"for singular values (3, 3, 3, 0) and eps = 0 you returned {got}: "
                "a zero share gives 0 * log 0 = nan in floating point; treat that "
                "term as 0 (its limit).",
            )
        ]
    return [
        finding(
            "known spectra",
            abs(got - 3.0) < 1e-9,
            1,
            f"for singular values (3, 3, 3, 0) and eps = 0 the shares are (1/3, 1/3, "
            f"1/3, 0), the entropy log 3 and the effective rank 3; you returned "
            f"{got:.8g}.",
        )
    ]


@register(
    f"{EX}/properties",
    points=1,
    summary="a Python float, invariant to rotations and scale, inputs untouched "
    "on every option path",
)
def properties(fn, rng):
    Z = _embeddings(rng, 30, 6, 6)
    problems = []
    wrong = None
    out = None
    # every option path of the contract: a mutation under center=True (Z -= Z.mean(0))
    # must be caught as well as one under the default
    for kw in ({}, {"center": True}, {"eps": 1e-3}, {"center": True, "eps": 0.0}):
        work = Z.copy()
        before = frozen_copies(work)
        res, _ = call_student(fn, work, what="rankme", **kw)
        if mutated(before, [work], ["Z"]):
            opts = ", ".join(f"{k}={v!r}" for k, v in kw.items()) or "the default options"
            problems.append(f"your function modified Z in place (with {opts})")
            break
        if wrong is None:
            wrong = differs(res, _ref(Z.copy(), **kw))
        if out is None:
            out = res
    if not is_plain_float(out):
        problems.append(f"return a Python float (float(x)), got {type(out).__name__}")
    base, _ = _call(fn, Z)
    Q, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    rotated, _ = _call(fn, Z @ Q)
    scaled, _ = _call(fn, 1e3 * Z)
    if not (_close(rotated, base) and _close(scaled, base)):
        problems.append(
            "rotating the features or multiplying them by 1000 changed the value; "
            "the shares sigma_i / sum(sigma) ignore both"
        )
    return gate([finding("properties", not problems, 1, "; ".join(problems))], wrong)
