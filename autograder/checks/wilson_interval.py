"""Hidden checks of the notebook "Error bars for top-1 accuracy" (book/noise.md).

One notebook, three functions:

* ``wilson_interval(k, n, z=1.959963984540054)`` -> ``(lo, hi)``: the Wilson score
  interval, inside [0, 1], with ``lo = 0`` at ``k = 0`` and ``hi = 1`` at ``k = n``.
* ``mcnemar_exact(a_correct, b_correct)`` -> p-value
  ``min(1, 2 P(X <= min(n01, n10)))``, ``X ~ Binomial(n01 + n10, 1/2)``; 1.0 without
  discordant pairs.
* ``paired_bootstrap_ci(a_correct, b_correct, n_boot, rng, level=0.95)`` ->
  ``(gain, lo, hi)`` with ONE call ``rng.multinomial(n, cell_counts / n, size=n_boot)``
  over the cells ``2 a + b`` and ``np.percentile`` of the replicate gains.

References: :func:`repeval_ref.wilson_interval`, :func:`repeval_ref.mcnemar_exact`,
:func:`repeval_ref.paired_bootstrap_ci`.
"""

from __future__ import annotations

import numpy as np

from ._framework import StudentError, call_student, finding, register
from ._helpers import close, differs, frozen_copies, gate, is_plain_float, mutated, unpack

Z95 = 1.959963984540054


def _floats(out, n, what):
    items = unpack(out, n, what)
    try:
        return [float(x) for x in items]
    except (TypeError, ValueError):
        raise StudentError(f"{what} should return {n} numbers, got {out!r}") from None


def _float(out, what):
    try:
        return float(out)
    except (TypeError, ValueError):
        raise StudentError(f"{what} should return a number, got {out!r}") from None


# ----------------------------------------------------------------------------- Wilson


def _wilson(k, n, z=Z95):
    from repeval_ref import wilson_interval

    return wilson_interval(k, n, z)


def _wald(k, n, z):
    p = k / n
    half = z * np.sqrt(p * (1 - p) / n)
    return p - half, p + half


def _wilson_parts(k, n, z, *, shift=True, shrink=True, extra=True):
    """The interval centred on p (no centre shift), without the shrink 1 + z^2/n or
    without the extra variance z^2/(4n^2) (clipped to [0, 1]), for diagnosing an answer."""
    p = k / n
    den = 1.0 + z * z / n if shrink else 1.0
    centre = (p + z * z / (2 * n)) / den if shift else p
    half = z * np.sqrt(p * (1 - p) / n + (z * z / (4 * n * n) if extra else 0.0)) / den
    return max(0.0, centre - half), min(1.0, centre + half)


#: typical mistakes of the Wilson interval: (what is left out, the missing part's hint)
_WILSON_MISTAKES = (
    (
        dict(shift=False),
        " Your interval is centred on p = k/n: Wilson's centre is shifted "
        "towards 1/2, (p + z^2/(2n)) / (1 + z^2/n). Add z^2/(2n) to p before dividing.",
    ),
    (
        dict(shrink=False),
        " Your centre and half-width are not divided by 1 + z^2/n: "
        "centre (p + z^2/(2n)) / (1 + z^2/n), half-width z sqrt(p(1-p)/n + z^2/(4n^2)) / "
        "(1 + z^2/n).",
    ),
    (
        dict(extra=False),
        " Your half-width lacks the term z^2/(4n^2) under the square "
        "root: it is z sqrt(p(1-p)/n + z^2/(4n^2)) / (1 + z^2/n).",
    ),
)


def _wilson_cause(fn, cases):
    """A sentence naming the answer's mistake, found by comparing its intervals on
    ``cases`` [(k, n, z), ...] with the mistakes' ("" when none matches)."""
    got = []
    for k, n, z in cases:
        out, _ = call_student(fn, k, n, z, what="wilson_interval")
        got.append(_floats(out, 2, "wilson_interval"))

    def same(f):
        return all(
            abs(g[0] - w[0]) < 1e-10 and abs(g[1] - w[1]) < 1e-10
            for g, w in zip(got, (f(*c) for c in cases))
        )

    if same(lambda k, n, z: tuple(np.clip(_wald(k, n, z), 0.0, 1.0))):
        return (
            " You computed the normal (Wald) interval p +- z sqrt(p(1-p)/n); "
            "Wilson's centre is (p + z^2/(2n)) / (1 + z^2/n) and its half-width "
            "z sqrt(p(1-p)/n + z^2/(4n^2)) / (1 + z^2/n)."
        )
    for leave_out, why in _WILSON_MISTAKES:
        if same(lambda k, n, z, lo=leave_out: _wilson_parts(k, n, z, **lo)):
            return why
    if any(abs(z - 1.96) > 1e-9 for _, _, z in cases) and same(
        lambda k, n, z: _wilson_parts(k, n, 1.96)
    ):
        return (
            " Your interval is the 95% one whatever z is: use the argument z (the "
            "normal quantile of the level) rather than a fixed 1.96."
        )
    return ""


@register(
    "wilson_interval/matches_reference",
    points=2,
    summary="the Wilson interval for random k, n and z",
)
def wilson_matches_reference(fn, rng):
    cases = [
        (int(rng.integers(1, 49)), 50, Z95),
        (int(rng.integers(100, 900)), 1000, Z95),
        (int(rng.integers(1, 9)), 10, float(rng.uniform(1.0, 3.0))),
    ]
    for k, n, z in cases:
        want = _wilson(k, n, z)
        out, _ = call_student(fn, k, n, z, what="wilson_interval")
        lo, hi = _floats(out, 2, "wilson_interval")
        if not close((lo, hi), want, 1e-10):
            msg = (
                f"wilson_interval({k}, {n}, z={z:.4f}) returned ({lo:.6f}, {hi:.6f}); the "
                f"Wilson interval is ({want[0]:.6f}, {want[1]:.6f})."
            )
            msg += _wilson_cause(fn, cases)
            return [finding("Wilson interval", False, 2, msg)]
    return [finding("Wilson interval", True, 2, "")]


def _rounded_ends(n, z=Z95):
    """The formula's ends at k = 0 and k = n, clipped to [0, 1] (what rounding leaves)."""
    out = []
    for k in (0, n):
        p = k / n
        shrink = 1.0 + z * z / n
        centre = (p + z * z / (2 * n)) / shrink
        half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / shrink
        out.append((max(0.0, centre - half), min(1.0, centre + half)))
    return out


#: n in 5 .. 399 where the clipped formula misses lo = 0.0 at k = 0, and where it misses
#: hi = 1.0 at k = n (computed once; the check draws one n from each list on every seed)
_INEXACT_LO = [n for n in range(5, 400) if _rounded_ends(n)[0][0] != 0.0]
_INEXACT_HI = [n for n in range(5, 400) if _rounded_ends(n)[1][1] != 1.0]


@register(
    "wilson_interval/extremes",
    points=2,
    summary="k = 0 gives exactly lo = 0.0 and k = n exactly hi = 1.0, with positive width",
)
def wilson_extremes(fn, rng):
    # both n are drawn where floating-point rounding of the formula (even clipped to
    # [0, 1]) leaves 5.6e-17 or 0.9999999999999999, so the exact ends are tested every time
    cases = [(0, int(rng.choice(_INEXACT_LO))), None]
    n_hi = int(rng.choice(_INEXACT_HI))
    cases[1] = (n_hi, n_hi)
    out = []
    for k, n in cases:
        want = _wilson(k, n)
        res, _ = call_student(fn, k, n, what="wilson_interval")
        lo, hi = _floats(res, 2, "wilson_interval")
        name = f"k = {'0' if k == 0 else 'n'}"
        if not (np.isfinite(lo) and np.isfinite(hi)):
            out.append(
                finding(
                    name,
                    False,
                    1,
                    f"wilson_interval({k}, {n}) returned ({lo}, {hi}): no NaN or "
                    "inf at the extremes.",
                )
            )
            continue
        end, exact = (lo, 0.0) if k == 0 else (hi, 1.0)
        other, other_want = (hi, want[1]) if k == 0 else (lo, want[0])
        ok = end == exact and abs(other - other_want) < 1e-12
        msg = (
            f"wilson_interval({k}, {n}) returned ({lo!r}, {hi!r}); expected "
            f"({want[0]!r}, {want[1]!r})."
        )
        cause = "" if ok else _wilson_cause(fn, [(k, n, Z95), (7, 40, Z95), (3, 10, 2.5)])
        if cause and not (
            end != exact and abs(end - exact) < 1e-12 and abs(other - other_want) < 1e-12
        ):
            msg += cause
        elif hi - lo < 1e-12:
            msg += (
                " An interval of zero width claims certainty after finitely many "
                "trials: that is the Wald interval's failure at k = 0 and k = n, which "
                "the Wilson interval avoids."
            )
        elif end != exact and abs(end - exact) < 1e-12:
            msg += (
                f" The {'lower' if k == 0 else 'upper'} end must be exactly {exact}: "
                f"rounding leaves {end!r}, which clipping to [0, 1] does not remove. "
                f"Return {exact} for that end when k = {'0' if k == 0 else 'n'}."
            )
        elif end < 0 or end > 1:
            msg += " The interval must stay inside [0, 1]."
        out.append(finding(name, ok, 1, msg))
    return out


# ---------------------------------------------------------------------------- McNemar


def _mcnemar(a, b):
    from repeval_ref import mcnemar_exact

    return mcnemar_exact(a, b)


def _one_sided(n01, n10):
    """P(X <= min(n01, n10)) for X ~ Binomial(n01 + n10, 1/2): the tail without the 2."""
    from scipy import stats

    return float(stats.binom.cdf(min(n01, n10), n01 + n10, 0.5))


def _one_sided_at(x, n):
    from scipy import stats

    return float(stats.binom.cdf(x, n, 0.5))


def _chi_square(n01, n10):
    """The p-values of McNemar's chi-square approximation, with and without Yates's
    continuity correction (not the exact test)."""
    from scipy import stats

    d = n01 + n10
    return [
        float(stats.chi2.sf(stat, 1))
        for stat in (
            (n01 - n10) ** 2 / d,
            (abs(n01 - n10) - 1) ** 2 / d,
            max(abs(n01 - n10) - 1, 0) ** 2 / d,
        )
    ]


def _close(p, candidates):
    candidates = candidates if isinstance(candidates, list) else [candidates]
    return any(abs(p - c) <= 1e-9 * max(1.0, c) for c in candidates)


def _pairs(rng, n, p_a=0.7, p_b=0.75, rho=0.6):
    a = rng.random(n) < p_a
    b = np.where(rng.random(n) < rho, a, rng.random(n) < p_b)
    return a.astype(int), b.astype(int)


@register(
    "mcnemar_exact/matches_reference",
    points=2,
    summary="the exact two-sided p-value on random paired outcomes",
)
def mcnemar_matches_reference(fn, rng):
    # random outcomes, then one pair where B is clearly better and one where A is: the
    # tail must start from the smaller discordant count whichever model that favours
    for n, p_a, p_b in ((40, 0.7, 0.75), (300, 0.7, 0.75), (120, 0.6, 0.85), (120, 0.85, 0.6)):
        a, b = _pairs(rng, n, p_a, p_b)
        want = _mcnemar(a, b)
        out, _ = call_student(fn, a.copy(), b.copy(), what="mcnemar_exact")
        p = _float(out, "mcnemar_exact")
        if not abs(p - want) <= 1e-9 * max(1.0, want):
            n01 = int(np.sum((a == 0) & (b == 1)))
            n10 = int(np.sum((a == 1) & (b == 0)))
            msg = (
                f"with n01 = {n01} images only B gets right and n10 = {n10} only A gets "
                f"right you returned p = {p:.6g}; the exact test gives {want:.6g} = "
                f"min(1, 2 P(X <= {min(n01, n10)})) with X ~ Binomial({n01 + n10}, 1/2)."
            )
            if p > 1:
                msg += " A p-value cannot exceed 1: take min(1, ...)."
            elif _close(p, _chi_square(n01, n10)):
                msg += (
                    " Your value is the chi-square approximation of McNemar's test; the "
                    "exact test needs no approximation: use the binomial tail above."
                )
            elif _close(p, min(1.0, 2 * _one_sided_at(max(n01, n10), n01 + n10))):
                msg += (
                    f" Your value is 2 P(X <= {max(n01, n10)}): the tail starts from the "
                    "smaller of the two discordant counts, min(n01, n10)."
                )
            elif abs(p - _one_sided(n01, n10)) <= 1e-9:
                msg += (
                    f" Your value is the one-sided tail P(X <= {min(n01, n10)}) = "
                    f"{_one_sided(n01, n10):.6g}. The test is two-sided: multiply the "
                    "tail by 2 (then cap at 1)."
                )
            return [finding("exact McNemar", False, 2, msg)]
    return [finding("exact McNemar", True, 2, "")]


@register(
    "mcnemar_exact/no_discordant_pairs",
    points=1,
    summary="p = 1 when the two models agree on every image; p <= 1 for n01 = n10",
)
def mcnemar_no_discordant(fn, rng):
    a = (rng.random(30) < 0.6).astype(int)
    try:
        out, _ = call_student(fn, a.copy(), a.copy(), what="mcnemar_exact")
        p = _float(out, "mcnemar_exact")
    except StudentError as exc:
        return [
            finding(
                "no discordant pairs",
                False,
                1,
                f"when A and B are right on exactly the same images: {exc}. "
                "Nothing distinguishes the models then, so return p = 1.0 (handle "
                "n01 + n10 = 0 before calling a binomial test, which needs at least "
                "one trial).",
            )
        ]
    if p != 1.0:
        return [
            finding(
                "no discordant pairs",
                False,
                1,
                f"when A and B are right on exactly the same images you returned "
                f"{p}; nothing distinguishes them, so p = 1.0 (handle n01 + n10 = 0 "
                "before calling a binomial test, which needs at least one trial).",
            )
        ]
    b = a.copy()
    i, j = np.flatnonzero(a == 1)[0], np.flatnonzero(a == 0)[0]
    b[i], b[j] = 0, 1  # one discordant pair each way
    out, _ = call_student(fn, a.copy(), b, what="mcnemar_exact")
    p = _float(out, "mcnemar_exact")
    if p == 0.75:
        why = (
            f"with n01 = n10 = 1 you returned {p} = P(X <= 1) for X ~ Binomial(2, 1/2), "
            "the one-sided tail. The two-sided p-value doubles it: 2 P(X <= 1) = 1.5, "
            "which min(1, ...) caps at 1.0. Multiply the tail by 2."
        )
    elif p > 1:
        why = (
            f"with n01 = n10 = 1 you returned {p}; 2 P(X <= 1) = 1.5 for "
            "X ~ Binomial(2, 1/2), and a p-value cannot exceed 1: take min(1, ...)."
        )
    else:
        why = (
            f"with n01 = n10 = 1 you returned {p}; the two-sided exact p-value is "
            "min(1, 2 P(X <= 1)) = 1.0 for X ~ Binomial(2, 1/2)."
        )
    # a constant 1.0 earns nothing: random discordant pairs must give the exact p-value
    a2, b2 = _pairs(rng, 60)
    res, _ = call_student(fn, a2.copy(), b2.copy(), what="mcnemar_exact")
    wrong = differs(_float(res, "mcnemar_exact"), _mcnemar(a2, b2))
    return gate(
        [finding("no discordant pairs", p == 1.0, 1, why)],
        wrong and f"on 60 random paired outcomes, the p-value: {wrong}",
    )


# -------------------------------------------------------------------- paired bootstrap


def _bootstrap(*args, **kw):
    from repeval_ref import paired_bootstrap_ci

    return paired_bootstrap_ci(*args, **kw)


def _boot_call(fn, a, b, n_boot, gen, **kw):
    out, _ = call_student(fn, a.copy(), b.copy(), n_boot, gen, what="paired_bootstrap_ci", **kw)
    return _floats(out, 3, "paired_bootstrap_ci")


def _interval_cause(got, a, b, n_boot, seed, level):
    """Which typical slip turns the reference's replicates into the student's (lo, hi),
    found by recomputing the prescribed draw; '' if none does."""
    n = len(a)
    cells = np.bincount(2 * a + b, minlength=4)
    counts = np.random.default_rng(seed).multinomial(n, cells / n, size=n_boot)
    gains = (counts[:, 1] - counts[:, 2]) / n
    tails = [100 * (1 - level) / 2, 100 * (1 + level) / 2]

    def same(values):
        return all(abs(g - w) < 1e-12 for g, w in zip(got[1:], values))

    if same(np.percentile(-gains, tails)):
        return (
            " Your replicates are the gains of A over B: cell 1 (only B right) counts "
            "for B, so a replicate's gain is (count[1] - count[2]) / n."
        )
    if level != 0.95 and same(np.percentile(gains, [2.5, 97.5])):
        return (
            f" Your interval is the 95% one although level = {level}: the percentiles "
            "are 100 (1 - level) / 2 and 100 (1 + level) / 2."
        )
    if same(np.percentile(gains, [100 * (1 - level), 100 * level])):
        return (
            " Your percentiles leave 1 - level out in each tail; a two-sided interval "
            "leaves (1 - level) / 2 on either side: np.percentile(gains, "
            "[100 (1 - level) / 2, 100 (1 + level) / 2])."
        )
    return ""


@register(
    "paired_bootstrap_ci/matches_reference",
    points=3,
    summary="gain and percentile interval equal the reference for the same generator",
)
def bootstrap_matches_reference(fn, rng):
    for n, n_boot, level in ((200, 500, 0.95), (57, 301, 0.8)):
        a, b = _pairs(rng, n)
        seed = int(rng.integers(0, 2**31))
        ref_gen, gen = np.random.default_rng(seed), np.random.default_rng(seed)
        want = _bootstrap(a, b, n_boot, ref_gen, level=level)
        got = _boot_call(fn, a, b, n_boot, gen, level=level)
        if all(abs(g - w) < 1e-12 for g, w in zip(got, want)):
            continue
        msg = (
            f"with n = {n}, n_boot = {n_boot}, level = {level} and "
            f"np.random.default_rng({seed}) you returned ({got[0]:.4f}, {got[1]:.4f}, "
            f"{got[2]:.4f}); expected ({want[0]:.4f}, {want[1]:.4f}, {want[2]:.4f})."
        )
        if not close(got[0], want[0]):
            msg += " The gain is mean(b) - mean(a): B's accuracy minus A's."
        elif gen.bit_generator.state != ref_gen.bit_generator.state:
            msg += (
                " After your function the generator is not where one multinomial draw "
                "leaves it: resampling n images with replacement only changes the four "
                "cell counts 2a + b, so the single call rng.multinomial(n, cell_counts "
                "/ n, size=n_boot) gives every replicate at once; take each replicate's "
                "gain (count[1] - count[2]) / n and np.percentile(gains, [100 (1 - "
                "level) / 2, 100 (1 + level) / 2])."
            )
        elif _interval_cause(got, a, b, n_boot, seed, level):
            msg += _interval_cause(got, a, b, n_boot, seed, level)
        else:
            msg += (
                " Count the four cells 2a + b, draw all replicates with the single call "
                "rng.multinomial(n, cell_counts / n, size=n_boot), take each replicate's "
                "gain (count[1] - count[2]) / n, and the interval np.percentile(gains, "
                "[100 (1 - level) / 2, 100 (1 + level) / 2])."
            )
        return [finding("paired bootstrap", False, 3, msg)]
    return [finding("paired bootstrap", True, 3, "")]


def _no_part_right(got, want):
    """Empty when the gain or the interval of ``got`` equals the reference's ``want``, else
    how both differ: the generator and property checks count with either part right,
    so a slip in the other is charged by matches_reference alone."""
    if close(got[0], want[0]) or close(list(got[1:]), list(want[1:])):
        return ""
    return f"(gain, lo, hi): {differs(list(got), list(want))}"


@register(
    "paired_bootstrap_ci/single_multinomial_call",
    points=1,
    summary="the generator is used by exactly one multinomial call",
)
def bootstrap_single_call(fn, rng):
    a, b = _pairs(rng, 120)
    seed = int(rng.integers(0, 2**31))
    want = np.random.default_rng(seed)
    _bootstrap(a, b, 400, want)  # the reference makes exactly that one call
    gen = np.random.default_rng(seed)
    got = _boot_call(fn, a, b, 400, gen)
    ok = gen.bit_generator.state == want.bit_generator.state
    wrong = _no_part_right(got, _bootstrap(a, b, 400, np.random.default_rng(seed)))
    return gate(
        [
            finding(
                "one multinomial call",
                ok,
                1,
                "after your function the generator is not where one call "
                "rng.multinomial(n, cell_fractions, size=n_boot) leaves it. Resampling "
                "n images with replacement only changes the four cell counts, so one "
                "multinomial draw of shape (n_boot, 4) gives every replicate at once; "
                "do not loop over replicates with rng.integers or rng.choice.",
            )
        ],
        wrong,
    )


@register(
    "paired_bootstrap_ci/properties",
    points=1,
    summary="three Python floats, boolean inputs accepted, inputs untouched",
)
def bootstrap_properties(fn, rng):
    a, b = _pairs(rng, 80)
    a_bool, b_bool = a.astype(bool), b.astype(bool)
    arrays = [a_bool, b_bool]
    before = frozen_copies(*arrays)
    out, _ = call_student(fn, *arrays, 200, np.random.default_rng(1), what="paired_bootstrap_ci")
    problems = []
    changed = mutated(before, arrays, ["a_correct", "b_correct"])
    if not changed:  # every option path: a level other than the default too
        call_student(
            fn, *arrays, 200, np.random.default_rng(2), level=0.8, what="paired_bootstrap_ci"
        )
        changed = [
            f"{n} (with level = 0.8)" for n in mutated(before, arrays, ["a_correct", "b_correct"])
        ]
    if changed:
        problems.append(f"your function modified {', '.join(changed)} in place")
    items = unpack(out, 3, "paired_bootstrap_ci")
    if not all(is_plain_float(x) for x in items):
        problems.append(
            "return three Python floats (float(x)), got "
            + ", ".join(type(x).__name__ for x in items)
        )
    ints = _boot_call(fn, a, b, 200, np.random.default_rng(1))
    if not close([float(x) for x in items], ints):
        problems.append("boolean inputs (True = correct) must give the same result as 0/1 inputs")
    wrong = _no_part_right(ints, _bootstrap(a, b, 200, np.random.default_rng(1)))
    return gate([finding("properties", not problems, 1, "; ".join(problems))], wrong)


@register(
    "paired_bootstrap_ci/empty_cells",
    points=1,
    summary="an outcome that never occurs keeps its cell (A never right alone)",
)
def bootstrap_empty_cells(fn, rng):
    a, b = _pairs(rng, 90)
    seed = int(rng.integers(0, 2**31))
    gen, ref_gen = np.random.default_rng(seed), np.random.default_rng(seed)
    got = _boot_call(fn, a, b, 300, gen)
    wrong = differs(got, list(_bootstrap(a, b, 300, ref_gen)))
    if not wrong and gen.bit_generator.state != ref_gen.bit_generator.state:
        wrong = "the generator is not where the single multinomial call leaves it"
    if wrong:
        return gate(
            [finding("empty cells", False, 1, "")],
            f"with every outcome present, (gain, lo, hi): {wrong}",
        )
    b = (rng.random(60) < 0.7).astype(int)
    a = np.zeros(60, dtype=int)  # A is never right: cells 2 and 3 are empty
    want = _bootstrap(a, b, 300, np.random.default_rng(seed))
    try:
        got = _boot_call(fn, a, b, 300, np.random.default_rng(seed))
    except StudentError as exc:
        return [
            finding(
                "empty cells",
                False,
                1,
                f"when A is right on no image: {exc}. The cells 2 (only A right) and "
                "3 (both right) are empty then, and np.bincount(2a + b) stops after "
                "cell 1: count with minlength=4, so that the multinomial still "
                "draws four cells (two of probability 0).",
            )
        ]
    ok = all(abs(g - w) < 1e-12 for g, w in zip(got, want))
    return [
        finding(
            "empty cells",
            ok,
            1,
            f"when A is right on no image you returned ({got[0]:.4f}, {got[1]:.4f}, "
            f"{got[2]:.4f}), expected ({want[0]:.4f}, {want[1]:.4f}, {want[2]:.4f}): "
            "two of the four cells are empty, and they still enter the single "
            "multinomial draw, with probability 0.",
        )
    ]
