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


def _follows_a_rule(got, Z, eps=1e-7):
    """Whether ``got`` is RankMe of the raw ``Z`` or one of its typical slips in the
    value itself (no eps, squared singular values, the entropy without exp, centring by
    default). Checks of the centring option and of the properties credit such an
    answer: the slip is matches_reference's to charge; zeros, NaN and constants follow
    no rule."""
    raw = np.linalg.svd(Z, compute_uv=False)
    want = _entropy_rank(raw, eps)
    rules = (
        want,
        _entropy_rank(raw, 0.0),
        _entropy_rank(raw**2, eps),
        float(np.log(want)),
        _entropy_rank(np.linalg.svd(Z - Z.mean(0), compute_uv=False), eps),
    )
    return np.isfinite(got) and any(_close(got, r) for r in rules)


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
        # the centring is right with the answer's own value: credited when that value
        # is RankMe or one of its slips, charged by matches_reference alone
        note = (
            "Your center=True equals your own result on the column-centred Z with "
            "center=False, so the centring itself is right: the difference lies in the "
            "effective rank you compute (see the check matches_reference)."
        )
        if _follows_a_rule(by_hand, Z - Z.mean(0)):
            return [finding("center=True", True, 1, note, note)]
        msg += " " + note
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
    # (3, 3, 3, 0) has the round answer 3; a second spectrum of two unequal values and
    # two zeros, drawn per seed, has an answer no constant guesses
    sigma2 = np.concatenate([rng.uniform(0.5, 4.0, size=2), [0.0, 0.0]])
    shares = sigma2[:2] / sigma2.sum()
    for sigma, want in (
        (np.array([3.0, 3.0, 3.0, 0.0]), 3.0),
        (sigma2, float(np.exp(-np.sum(shares * np.log(shares))))),
    ):
        shown = ", ".join(f"{v:.4g}" for v in sigma)
        try:
            Z = _with_singular_values(sigma, rng)
            got, _ = _call(fn, Z, eps=0.0)
        except StudentError as exc:
            return [
                finding(
                    "known spectra", False, 1, f"for singular values ({shown}) and eps = 0: {exc}"
                )
            ]
        if not np.isfinite(got):
            return [
                finding(
                    "known spectra",
                    False,
                    1,
                    f"for singular values ({shown}) and eps = 0 you returned {got}: "
                    "a zero share gives 0 * log 0 = nan in floating point; treat that "
                    "term as 0 (its limit).",
                )
            ]
        # a slip in the value elsewhere (squared singular values, the entropy without
        # exp, ...) is matches_reference's: here only 0 log 0 = 0 is scored
        if not (abs(got - want) < 1e-9 * max(1.0, want) or _follows_a_rule(got, Z, 0.0)):
            return [
                finding(
                    "known spectra",
                    False,
                    1,
                    f"for singular values ({shown}) and eps = 0 the shares are sigma / "
                    f"sum(sigma), a zero share adds 0 to the entropy, and the effective "
                    f"rank is {want:.8g}; you returned {got:.8g}.",
                )
            ]
    return [finding("known spectra", True, 1, "")]


def _with_singular_values(sigma, rng):
    """A 2m x m matrix whose singular values are exactly ``sigma`` (length m), rows
    and columns shuffled: each value appears as the pair of rows +-sigma_i e_i / sqrt 2."""
    m = len(sigma)
    rows = np.zeros((2 * m, m))
    for i, v in enumerate(sigma):
        rows[2 * i, i], rows[2 * i + 1, i] = v / np.sqrt(2.0), -v / np.sqrt(2.0)
    return rows[rng.permutation(2 * m)][:, rng.permutation(m)]


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
            try:  # (the first pass has the default options)
                if wrong and _follows_a_rule(float(res), Z):
                    wrong = ""  # a slip in the value: matches_reference's to charge
            except (TypeError, ValueError):
                pass
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
