"""Hidden checks of the exercise "Exact leave-one-out for the ridge probe" (book/invariances.md).

Contract: ``ridge_loo(train_h, train_y, lams)`` returns ``(best_lam, press)``:
PRESS(lam) = (1/(nK)) sum_i ||e_(i)||^2 of the ridge probe with an unpenalised bias on
{-1, 1}^K targets (K = max label + 1), e_(i) from the hat matrix; best_lam = first lam of
minimal PRESS (a Python float), press a float array of shape (len(lams),); no n x n
matrix is formed (the hat matrix enters through its diagonal and its product with T).
Reference: :func:`repeval_ref.ridge_loo`.
"""

from __future__ import annotations

import numpy as np

from ._framework import StudentError, call_student, finding, register
from ._helpers import (
    as_array,
    close,
    differs,
    frozen_copies,
    gate,
    is_plain_float,
    metered,
    mutated,
    unpack,
)

EX = "ridge_loo"
#: training points of the memory check: their n x n hat matrix takes 275 MB in float64
#: and 137 MB in float32, both far over the resident-memory backstop (RSS_BACKSTOP, 64 MB)
N_MEMORY = 6000
#: the largest allocation peak allowed for N_MEMORY points (the thin SVD route needs
#: about 1.3 MB for 4 features and 3 classes)
PEAK_LIMIT = 16 * 2**20
#: the penalties of the memory check (two: an answer forming one hat matrix per penalty
#: spends about 0.3 s on each)
MEMORY_LAMS = (0.1, 10.0)


def _ref(*args):
    from repeval_ref import ridge_loo

    return ridge_loo(*args)


def _data(rng, n=40, d=6, K=3):
    means = rng.normal(size=(K, d))
    y = rng.integers(0, K, size=n)
    y[:K] = np.arange(K)  # every class present, so K = max label + 1 is unambiguous
    h = means[y] + rng.normal(size=(n, d))
    return h, y


def _call(fn, h, y, lams):
    out, _ = call_student(fn, h.copy(), y.copy(), np.array(lams, dtype=float), what="ridge_loo")
    best, press = unpack(out, 2, "ridge_loo")
    press = as_array(press, "the PRESS array (second item)", ndim=1)
    if press.shape != (len(lams),):
        raise StudentError(
            f"the PRESS array has shape {press.shape}, expected "
            f"({len(lams)},): one value per lambda"
        )
    try:
        best = float(best)
    except (TypeError, ValueError):
        raise StudentError(f"best_lam should be a number, got {best!r}") from None
    return best, press.astype(float)


def _variant(h, y, lams, *, penalise_bias=False, bias_leverage=True, zero_one=False):
    """PRESS with one typical mistake: the bias penalised like the weights, the leverage
    without the bias's 1/n, or targets in {0, 1} instead of {-1, 1}. From the thin SVD
    (n x (d + 1) at most), so it runs on the memory check's inputs too."""
    n, K = len(h), int(y.max()) + 1
    T = np.zeros((n, K)) if zero_one else -np.ones((n, K))
    T[np.arange(n), y] = 1.0
    if penalise_bias:
        Z, Tc, base, extra = np.hstack([np.ones((n, 1)), h]), T, 0.0, 0.0
    else:
        Z, Tc, base = h - h.mean(0), T - T.mean(0), T.mean(0)
        extra = 1.0 / n if bias_leverage else 0.0
    U, sv, _ = np.linalg.svd(Z, full_matrices=False)
    proj = U.T @ Tc
    out = []
    for lam in lams:
        shrink = sv**2 / (sv**2 + lam)
        fitted = base + U @ (shrink[:, None] * proj)
        lev = (U**2) @ shrink + extra
        e = (T - fitted) / (1.0 - lev)[:, None]
        out.append(np.sum(e**2) / (n * K))
    return np.array(out)


def _same_press(got, want):
    return close(got, want, atol=1e-12, rtol=1e-6)


def _computed_like(press, h, y, lams, *, bias_free=False):
    """The rule that ``press`` follows on (h, y, lams): ``lambda h, y, lams: PRESS`` for
    the reference or one of its typical mistakes in another part (0/1 targets, another
    normalisation, the leverage without 1/n, the bias penalised unless ``bias_free``),
    or ``None``. A check of one part credits an answer whose only mistake is in another;
    zeros, NaNs and constants follow no rule."""
    want = _ref(h, y, lams)[1]
    if _same_press(press, want):
        return lambda h2, y2, l2: _ref(h2, y2, l2)[1]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.asarray(press, dtype=float) / want
    if (
        np.all(np.isfinite(ratio))
        and ratio[0] > 1e-6
        and _same_press(ratio, np.full_like(ratio, ratio[0]))
    ):
        r = float(ratio[0])
        return lambda h2, y2, l2: r * _ref(h2, y2, l2)[1]
    options = [{"bias_leverage": False}] + ([] if bias_free else [{"penalise_bias": True}])
    for kw in options:
        if _same_press(press, _variant(h, y, lams, **kw)):
            return lambda h2, y2, l2, kw=kw: _variant(h2, y2, l2, **kw)
    return None


def _not_computed(press, h, y, lams, **kw):
    """Empty when ``press`` follows the reference or a mistake in another part, else why not."""
    if _computed_like(press, h, y, lams, **kw) is not None:
        return ""
    return f"PRESS: {differs(press, _ref(h, y, lams)[1], rtol=1e-6) or 'not a PRESS'}"


def _diagnosis(h, y, lams, press, want):
    """What a wrong PRESS array is, in the student's terms (from its values alone)."""
    close = lambda a: np.allclose(press, a, rtol=1e-6, atol=1e-12)  # noqa: E731
    ratio = press / want
    if np.all(np.isfinite(ratio)) and np.allclose(ratio, ratio[0], rtol=1e-6):
        r = float(ratio[0])
        if np.isclose(r, 0.25, rtol=1e-6):
            return (
                "Every value is a quarter of the exact one, which is what 0/1 targets "
                "give: the targets are -1 in every column but the true class's, where "
                "they are +1."
            )
        return (
            f"Every value is off by the same factor {r:.4g}: average over the n K "
            "entries, PRESS = sum_i ||e_(i)||^2 / (n K)."
        )
    if close(_variant(h, y, lams, penalise_bias=True)):
        return (
            "Your PRESS is that of a probe whose bias is penalised like the weights. "
            "The bias must stay an unpenalised bias: centre the features and the "
            "targets with their training means (or leave the intercept out of the "
            "penalty)."
        )
    if close(_variant(h, y, lams, bias_leverage=False)):
        return (
            "Your leverages lack the bias's share: with an intercept the hat matrix is "
            "(1/n) 1 1^T + U diag(s^2 / (s^2 + lambda)) U^T, so every leverage "
            "includes the term 1/n."
        )
    return (
        "Compare your residuals with explicit refits without one training point, "
        "for one lambda: e_(i) = (t_i - fitted_i) / (1 - leverage_i)."
    )


@register(
    f"{EX}/matches_reference",
    points=3,
    summary="PRESS values and the chosen lambda equal the exact leave-one-out",
)
def matches_reference(fn, rng):
    h, y = _data(
        rng, n=int(rng.integers(30, 60)), d=int(rng.integers(3, 9)), K=int(rng.integers(2, 5))
    )
    lams = np.concatenate([[0.0], np.logspace(-3, 3, 9)])
    want_best, want = _ref(h, y, lams)
    best, press = _call(fn, h, y, lams)
    if np.allclose(press, want, rtol=1e-6, atol=1e-12) and best == want_best:
        return [finding("matches the reference", True, 3, "")]
    if not np.allclose(press, want, rtol=1e-6, atol=1e-12):
        j = int(np.argmax(np.abs(press - want)))
        msg = (
            f"PRESS at lambda = {lams[j]:g} is {press[j]:.6g}, the exact leave-one-out "
            f"value is {want[j]:.6g}. " + _diagnosis(h, y, lams, press, want)
        )
    else:
        msg = (
            f"PRESS is right but you chose lambda = {best:g}; the first lambda of "
            f"minimal PRESS is {want_best:g}."
        )
    return [finding("matches the reference", False, 3, msg)]


@register(
    f"{EX}/bias_unpenalised",
    points=2,
    summary="PRESS ignores a translation of the features (unpenalised bias)",
)
def bias_unpenalised(fn, rng):
    h, y = _data(rng)
    lams = np.logspace(-2, 2, 5)
    offset = 20.0 * rng.normal(size=h.shape[1])
    _, p0 = _call(fn, h, y, lams)
    _, p1 = _call(fn, h + offset, y, lams)
    ok = np.allclose(p0, p1, rtol=1e-6, atol=1e-12)
    wrong = _not_computed(p0, h, y, lams, bias_free=True)
    return gate(
        [
            finding(
                "translation invariance",
                ok,
                2,
                "adding the same vector to every feature row changed your PRESS. With "
                "an unpenalised bias the probe can absorb any translation: centre the "
                "features and targets (or leave the intercept out of the penalty).",
            )
        ],
        wrong,
    )


@register(f"{EX}/scale_invariance", points=1, summary="PRESS(a h, a^2 lam) = PRESS(h, lam)")
def scale_invariance(fn, rng):
    h, y = _data(rng)
    lams = np.logspace(-2, 2, 5)
    a = float(rng.uniform(3.0, 10.0))
    _, p0 = _call(fn, h, y, lams)
    _, p1 = _call(fn, a * h, y, a * a * lams)
    ok = np.allclose(p0, p1, rtol=1e-6, atol=1e-12)
    wrong = _not_computed(p0, h, y, lams, bias_free=True)
    return gate(
        [
            finding(
                "scale invariance",
                ok,
                1,
                f"scaling the features by a = {a:.3g} and lambda by a^2 should leave "
                "PRESS unchanged (the penalty acts on the weights only, not on the "
                "bias); yours changed.",
            )
        ],
        wrong,
    )


@register(
    f"{EX}/properties",
    points=1,
    summary="Python float best_lam from the grid, float array, inputs untouched",
)
def properties(fn, rng):
    h, y = _data(rng, n=25, d=4)
    lams = np.array([0.1, 1.0, 10.0])
    args = [h, y, lams]
    before = frozen_copies(*args)
    want = _ref(*before)
    out, _ = call_student(fn, *args, what="ridge_loo")
    best, press = unpack(out, 2, "ridge_loo")
    problems = []
    changed = mutated(before, args, ["train_h", "train_y", "lams"])
    if changed:
        problems.append(f"your function modified {', '.join(changed)} in place")
    if not is_plain_float(best):
        problems.append(f"best_lam should be a Python float, got {type(best).__name__}")
    elif best not in lams:
        problems.append(f"best_lam = {best!r} is not one of the candidates")
    if not isinstance(press, np.ndarray) or not np.issubdtype(press.dtype, np.floating):
        problems.append("press should be a float NumPy array")
    try:
        wrong = _not_computed(np.asarray(press, dtype=float), *before)
    except (TypeError, ValueError):
        wrong = f"PRESS: {differs(press, want[1], rtol=1e-6)}"
    return gate([finding("properties", not problems, 1, "; ".join(problems))], wrong)


@register(
    f"{EX}/absent_class",
    points=1,
    summary="a label that never occurs below the largest one still has its column",
)
def absent_class(fn, rng):
    h, y = _data(rng, n=36, d=5, K=4)
    lams = np.logspace(-2, 2, 5)
    # the same features with every class present: there the answer must be right, so
    # that the finding below is about the absent class alone
    # (the answer's own rule there, reference or a mistake in another part, gives what
    # it must return below)
    _, full = _call(fn, h, y, lams)
    rule = _computed_like(full, h, y, lams)
    if rule is None:
        return gate(
            [finding("absent class", False, 1, "")],
            f"with every class present, {_not_computed(full, h, y, lams)}",
        )
    gone = int(rng.integers(1, 3))  # class 1 or 2 has no example
    y = np.where(y == gone, 3, y)
    want = rule(h, y, lams)
    labels = ", ".join(map(str, np.unique(y)))
    tell = (
        f"with the labels {{{labels}}} (class {gone} has no example) the number of "
        "columns is K = the largest label + 1 = 4, not the number of distinct labels: "
        "the absent class keeps its column of -1 targets and counts in the n K of the "
        "average."
    )
    try:
        _, press = _call(fn, h, y, lams)
    except StudentError as exc:
        return [finding("absent class", False, 1, f"{exc}. {tell}")]
    ok = np.allclose(press, want, rtol=1e-6, atol=1e-12)
    return [
        finding(
            "absent class", ok, 1, f"your PRESS differs ({differs(press, want, rtol=1e-6)}): {tell}"
        )
    ]


@register(
    f"{EX}/no_hat_matrix",
    points=1,
    summary=f"{N_MEMORY} training points without an n x n hat matrix",
)
def no_hat_matrix(fn, rng):
    h, y = _data(rng, n=N_MEMORY, d=4, K=3)
    lams = np.array(MEMORY_LAMS)
    meter = metered(fn)
    _, press = _call(meter, h, y, lams)
    peak = max(meter.peaks)
    if not np.all(np.isfinite(press)):
        return [
            finding(
                "no n x n matrix",
                False,
                1,
                f"on {N_MEMORY} training points your PRESS values are {press}, not finite numbers.",
            )
        ]
    wrong = _not_computed(press, h, y, lams)
    return gate(
        [
            finding(
                "no n x n matrix",
                peak <= PEAK_LIMIT,
                1,
                f"for {N_MEMORY} training points your function allocated "
                f"{peak / 2**20:.0f} MB at once: it forms an n x n matrix (the hat "
                "matrix itself, or the full U of an SVD taken without "
                "full_matrices=False). Leave-one-out needs only the diagonal of the hat "
                "matrix and its product with the targets: from the thin SVD Hc = U S V^T, "
                "leverage_i = 1/n + sum_k U_ik^2 s_k^2 / (s_k^2 + lambda) and the fitted "
                "centred targets U (shrink * (U^T Tc)), both of n x K size or less.",
            )
        ],
        wrong and f"on the {N_MEMORY} training points: {wrong}",
    )
