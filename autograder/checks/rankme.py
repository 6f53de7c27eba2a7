"""Hidden checks of the exercise "RankMe: the effective rank of embeddings" (book/rankme.md).

Contract: ``rankme(Z, center=False, eps=1e-7)`` returns a Python float: the singular
values sigma of Z (column-centred first only when ``center`` is True), shares
``p = sigma / sum(sigma) + eps`` and ``exp(-sum p log p)``, with ``0 log 0 = 0``.
Reference: :func:`repeval_ref.rankme`.
"""
from __future__ import annotations

import numpy as np

from ._framework import StudentError, call_student, finding, register
from ._helpers import frozen_copies, is_plain_float, mutated

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


@register(f"{EX}/matches_reference", points=3,
          summary="the effective rank of raw (uncentred) embeddings, with eps added to "
                  "every share")
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
        msg = (f"for Z of shape ({n}, {d}) you returned {got:.8g}; the effective rank is "
               f"{want:.8g}.")
        if _close(got, _entropy_rank(centred, eps)):
            msg += (" You centred the columns although center=False: by default take the "
                    "embedding matrix as it is (as Garrido et al. do); centre only when "
                    "center=True.")
        elif _close(got, _entropy_rank(raw, 0.0)):
            msg += f" Add eps = {eps:g} to every share p_i = sigma_i / sum(sigma) before the entropy."
        elif _close(got, _entropy_rank(raw ** 2, eps)):
            msg += (" You used the squared singular values (eigenvalues of Z^T Z); RankMe's "
                    "shares are the singular values themselves, normalised to sum to 1.")
        return [finding("matches the reference", False, 3, msg)]
    return [finding("matches the reference", True, 3, "")]


@register(f"{EX}/center_option", points=1,
          summary="center=True subtracts the column means first")
def center_option(fn, rng):
    Z = _embeddings(rng, 50, 8, 5)
    want = _ref(Z, center=True)
    got, _ = _call(fn, Z, center=True)
    shifted, _ = _call(fn, Z + 5.0 * rng.normal(size=8), center=True)
    ok = _close(got, want) and _close(shifted, want)
    return [finding("center=True", ok, 1,
                    f"with center=True you returned {got:.8g} (and {shifted:.8g} after "
                    f"translating every row); expected {want:.8g} in both cases: subtract "
                    "the column means before the SVD when center is True.")]


@register(f"{EX}/known_spectra", points=1,
          summary="singular values (3, 3, 3, 0) give 3 with eps = 0 (0 log 0 = 0)")
def known_spectra(fn, rng):
    base = np.array([[3, 0, 0, 0], [-3, 0, 0, 0], [0, 3, 0, 0], [0, -3, 0, 0],
                     [0, 0, 3, 0], [0, 0, -3, 0]], dtype=float) / np.sqrt(2.0)
    Z = base[rng.permutation(6)][:, rng.permutation(4)]   # the zero column stays exact
    try:
        got, _ = _call(fn, Z, eps=0.0)
    except StudentError as exc:
        return [finding("known spectra", False, 1,
                        f"for singular values (3, 3, 3, 0) and eps = 0: {exc}")]
    if not np.isfinite(got):
        return [finding("known spectra", False, 1,
                        f"for singular values (3, 3, 3, 0) and eps = 0 you returned {got}: "
                        "a zero share gives 0 * log 0 = nan in floating point; treat that "
                        "term as 0 (its limit).")]
    return [finding("known spectra", abs(got - 3.0) < 1e-9, 1,
                    f"for singular values (3, 3, 3, 0) and eps = 0 the shares are (1/3, 1/3, "
                    f"1/3, 0), the entropy log 3 and the effective rank 3; you returned "
                    f"{got:.8g}.")]


@register(f"{EX}/properties", points=1,
          summary="a Python float, invariant to rotations and scale, inputs untouched")
def properties(fn, rng):
    Z = _embeddings(rng, 30, 6, 6)
    before = frozen_copies(Z)
    out, _ = call_student(fn, Z, what="rankme")
    problems = []
    if mutated(before, [Z], ["Z"]):
        problems.append("your function modified Z in place")
    if not is_plain_float(out):
        problems.append(f"return a Python float (float(x)), got {type(out).__name__}")
    base, _ = _call(fn, before[0])
    Q, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    rotated, _ = _call(fn, before[0] @ Q)
    scaled, _ = _call(fn, 1e3 * before[0])
    if not (_close(rotated, base) and _close(scaled, base)):
        problems.append("rotating the features or multiplying them by 1000 changed the value; "
                        "the shares sigma_i / sum(sigma) ignore both")
    return [finding("properties", not problems, 1, "; ".join(problems))]
