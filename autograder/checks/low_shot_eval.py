"""Hidden checks of the exercise "Low-shot evaluation with honest error bars" (book/noise.md).

Contract: ``low_shot_eval(train_h, train_y, test_h, test_y, ...)`` with a support size
``n_per_class``, a number of draws ``n_draws`` and a Generator ``rng`` returns
``(mean, std)`` as Python floats: unit features; for each draw and for each class
``label`` of ``np.unique(train_y)`` in increasing order exactly one call
``rng.choice(np.flatnonzero(train_y == label), size=n_per_class, replace=False)`` and no
other random call; nearest class mean by cosine with the renormalised means; mean and sample
standard deviation (``ddof=1``) of the per-draw accuracies.
Reference: :func:`repeval_ref.low_shot_eval`.
"""

from __future__ import annotations

import numpy as np

from ._framework import StudentError, call_student, finding, register
from ._helpers import close, differs, frozen_copies, gate, is_plain_float, mutated, unpack

EX = "low_shot_eval"


def _ref(*args):
    from repeval_ref import low_shot_eval

    return low_shot_eval(*args)


def _data(rng, per_train=8, per_test=6):
    from repeval_ref.datasets import low_shot_setup

    return low_shot_setup(rng, n_train_per_class=per_train, n_test_per_class=per_test)


def _call(fn, data, shots, draws, gen):
    """Call the student's function on copies of ``data = (train_h, train_y, test_h, test_y)``."""
    out, _ = call_student(fn, *(a.copy() for a in data), shots, draws, gen, what="low_shot_eval")
    mean, std = unpack(out, 2, "low_shot_eval")
    try:
        return float(mean), float(std), out
    except (TypeError, ValueError):
        raise StudentError(
            f"low_shot_eval should return two numbers (mean, std), got {out!r}"
        ) from None


def _state(gen):
    return gen.bit_generator.state


def _variant(data, shots, draws, seed, unit_rows=True, unit_means=True):
    """The prescribed procedure with one step left out (the pool's rows or the class means
    not scaled to unit length), on the generator np.random.default_rng(seed)."""
    train_h, train_y, test_h, test_y = data
    gen = np.random.default_rng(seed)
    pool = train_h / np.linalg.norm(train_h, axis=1, keepdims=True) if unit_rows else train_h
    queries = test_h / np.linalg.norm(test_h, axis=1, keepdims=True)
    classes = np.unique(train_y)
    accs = []
    for _ in range(draws):
        means = np.stack(
            [
                pool[gen.choice(np.flatnonzero(train_y == c), size=shots, replace=False)].mean(
                    axis=0
                )
                for c in classes
            ]
        )
        if unit_means:
            means = means / np.linalg.norm(means, axis=1, keepdims=True)
        accs.append(np.mean(classes[np.argmax(queries @ means.T, axis=1)] == test_y))
    return float(np.mean(accs)), float(np.std(accs, ddof=1))


def _same(m, s, pair):
    return abs(m - pair[0]) < 1e-12 and abs(s - pair[1]) < 1e-12


def _step_left_out(m, s, data, shots, draws, seed):
    """The sentence naming a normalisation left out, if that explains (m, s); else ''."""
    if _same(m, s, _variant(data, shots, draws, seed, unit_means=False)):
        return (
            " Your random calls are right, but your class means are not rescaled: "
            "after averaging the unit features of a support, rescale each class mean "
            "to unit length, so that every class is compared by its direction alone."
        )
    if _same(m, s, _variant(data, shots, draws, seed, unit_rows=False)):
        return (
            " Your random calls are right, but you averaged the raw features: scale "
            "every row of train_h to unit length before averaging, or the longest "
            "vectors of a support dominate its mean."
        )
    return ""


@register(
    f"{EX}/matches_reference",
    points=3,
    summary="mean and standard deviation equal the reference for the same generator",
)
def matches_reference(fn, rng):
    data = _data(rng)
    seed = int(rng.integers(0, 2**31))
    for n_per_class, n_draws in ((3, 6), (1, 4)):
        ref_gen, gen = np.random.default_rng(seed), np.random.default_rng(seed)
        want_m, want_s = _ref(*data, n_per_class, n_draws, ref_gen)
        m, s, _ = _call(fn, data, n_per_class, n_draws, gen)
        if abs(m - want_m) < 1e-12 and abs(s - want_s) < 1e-12:
            continue
        where = (
            f"with n_per_class = {n_per_class}, n_draws = {n_draws} and "
            f"np.random.default_rng({seed}) you returned ({m:.6f}, {s:.6f}); the "
            f"exact procedure gives ({want_m:.6f}, {want_s:.6f})."
        )
        if abs(m - want_m) < 1e-12:
            if abs(s - want_s * np.sqrt((n_draws - 1) / n_draws)) < 1e-12:
                hint = (
                    " Your mean is right but your spread is the population standard "
                    "deviation: use the sample standard deviation, np.std(acc, ddof=1)."
                )
            elif abs(s - want_s / np.sqrt(n_draws)) < 1e-12:
                hint = (
                    " Your mean is right but you returned the standard error of the "
                    "mean; the task asks for the standard deviation over draws (ddof=1)."
                )
            else:
                hint = (
                    _step_left_out(m, s, data, n_per_class, n_draws, seed)
                    or " Your mean is right but the standard deviation differs."
                )
        elif _state(gen) not in (_state(ref_gen), _state(np.random.default_rng(seed))):
            hint = (
                " After your function the generator is not where the prescribed calls "
                "leave it: you made other random calls (a permutation, a shuffle, a "
                "call without replace=False, an extra draw), so your supports differ. "
                "For each draw, loop over the classes of np.unique(train_y) in "
                "increasing order and call rng.choice(np.flatnonzero(train_y == label), "
                "size=n_per_class, replace=False) once per class, and nothing else."
            )
        elif _step_left_out(m, s, data, n_per_class, n_draws, seed):
            hint = _step_left_out(m, s, data, n_per_class, n_draws, seed)
        else:
            hint = (
                " Your supports differ from the prescribed ones: for each draw, loop over "
                "the classes of np.unique(train_y) in increasing order and call "
                "rng.choice(np.flatnonzero(train_y == label), size=n_per_class, "
                "replace=False) once per class, with no other random call; use unit "
                "features and renormalise the class means."
            )
        return [finding("matches the reference", False, 3, where + hint)]
    return [finding("matches the reference", True, 3, "")]


def _mean_differs(m, data, shots, draws, seed):
    """How the answer's mean differs from the reference's on ``np.random.default_rng(seed)``
    ("" when equal). Checks of the supports, the labels and the inputs compare the mean
    only: the spread is the ddof check's part, so a wrong ``ddof`` is charged once."""
    wrong = differs(m, _ref(*data, shots, draws, np.random.default_rng(seed))[0])
    return f"the mean accuracy: {wrong}" if wrong else ""


def _no_accuracy(fn, m, data, shots, draws, seed):
    """Empty when ``m`` (the answer's mean on ``np.random.default_rng(seed)``) is the
    reference's, or is a mean of accuracies drawn with the generator: a multiple of
    1 / (n_test n_draws) in [0, 1] that changes with the generator. So other random
    calls (the random_calls check's part) do not cost the checks of the labels and the
    inputs; numbers made from the shapes, constants and NaN are neither."""
    wrong = _mean_differs(m, data, shots, draws, seed)
    if not wrong:
        return ""
    n = len(data[3]) * draws
    if np.isfinite(m) and 0.0 <= m <= 1.0 and _integral(m, n):
        for step in (1, 2, 3):  # (two generators may give equal means by chance)
            other, _, _ = _call(fn, data, shots, draws, np.random.default_rng(seed + step))
            if other != m:
                return ""
    return wrong


def _integral(x, n):
    return abs(x * n - round(x * n)) < 1e-6


@register(
    f"{EX}/ddof",
    points=2,
    summary="the spread is the sample standard deviation over draws (ddof=1)",
)
def ddof(fn, rng):
    # With two draws the accuracies a1, a2 are multiples of 1/n_test, and
    # ddof=1 gives std = |a1 - a2| / sqrt(2) while ddof=0 gives |a1 - a2| / 2, so the
    # student's (mean, std) reveal which one was used, whatever supports were drawn.
    # An answer equal to the reference (mean and spread) passes at once. Otherwise the two
    # accuracies read back from (mean, std) must be multiples of 1/n_test in [0, 1] and
    # the answer must change with the generator: numbers made from the shapes alone
    # (1 / n_test, ...) do neither.
    data = _data(rng, per_train=5, per_test=8)
    n_test = len(data[3])
    seen = set()
    for _ in range(8):
        seed = int(rng.integers(0, 2**31))
        m, s, _ = _call(fn, data, 1, 2, np.random.default_rng(seed))
        seen.add((m, s))
        want_m, want_s = _ref(*data, 1, 2, np.random.default_rng(seed))
        if want_s > 1e-12 and close(m, want_m) and close(s, want_s):
            return [finding("ddof = 1", True, 2, "")]
        if s > 1e-12 and np.isfinite(s) and len(seen) > 1:
            break
    else:
        return [
            finding(
                "ddof = 1",
                False,
                2,
                "with one shot per class and two draws, in 8 runs with different "
                "generators your standard deviation was 0 (or not a number) or your "
                "result never changed: are the supports drawn with the rng you were "
                "given, and is the spread computed from the accuracies of the draws?",
            )
        ]
    for gap, passed, msg in (
        (s * np.sqrt(2.0), True, ""),
        (
            2.0 * s,
            False,
            "with two draws your standard deviation is |a1 - a2| / 2, the population "
            "formula (ddof=0) or the standard error of the mean. Report the sample "
            "standard deviation over draws, np.std(accuracies, ddof=1): it estimates how "
            "far one evaluation with one draw can land from another.",
        ),
    ):
        hi, lo = m + gap / 2, m - gap / 2
        if _integral(hi, n_test) and _integral(lo, n_test) and -1e-9 <= lo <= hi <= 1 + 1e-9:
            return [finding("ddof = 1", passed, 2, msg)]
    return [
        finding(
            "ddof = 1",
            False,
            2,
            f"with two draws on {n_test} test images, your (mean, std) = ({m:.6f}, "
            f"{s:.6f}) are not the mean and the sample standard deviation (ddof=1) "
            "of two accuracies (multiples of 1/n_test).",
        )
    ]


@register(
    f"{EX}/random_calls",
    points=2,
    summary="exactly n_draws x n_classes calls rng.choice(..., replace=False), nothing else",
)
def random_calls(fn, rng):
    data = _data(rng)
    seed = int(rng.integers(0, 2**31))
    n_draws = 3
    want = np.random.default_rng(seed)
    _ref(*data, 2, n_draws, want)
    gen = np.random.default_rng(seed)
    start = _state(np.random.default_rng(seed))
    m, s, _ = _call(fn, data, 2, n_draws, gen)
    if _state(gen) == _state(want):
        # the right calls earn points only with the supports they draw, which the mean
        # shows; the spread is scored by the ddof check alone
        wrong = _mean_differs(m, data, 2, n_draws, seed)
        return gate([finding("random calls", True, 2, "")], wrong)
    if _state(gen) == start:
        msg = (
            "your function never used the generator rng it was given, so two graders "
            "with the same rng cannot reproduce your numbers. Draw every support set "
            "with rng.choice."
        )
    else:
        msg = (
            f"after your function the generator is not where {n_draws} draws x 10 classes "
            "= 30 calls rng.choice(np.flatnonzero(train_y == label), size=n_per_class, "
            "replace=False) leave it: you made other random calls (a permutation, a "
            "shuffle, a call without replace=False, an extra draw), so your supports "
            "differ from everybody else's. Use exactly those calls and no other."
        )
    return [finding("random calls", False, 2, msg)]


@register(
    f"{EX}/labels_not_contiguous",
    points=1,
    summary="labels such as {3, 7, 12} are predicted as themselves",
)
def labels_not_contiguous(fn, rng):
    train_h, train_y, test_h, test_y = _data(rng, per_train=6, per_test=5)
    values = np.sort(rng.choice(np.arange(1, 40), size=10, replace=False))
    tr_y, te_y = values[train_y], values[test_y]
    seed = int(rng.integers(0, 2**31))
    # relabelling the classes in increasing order changes neither the supports nor the
    # predictions, so your function must return exactly what it returns for 0 .. 9
    plain = (train_h, train_y, test_h, test_y)
    renamed = (train_h, tr_y, test_h, te_y)
    m0, s0, _ = _call(fn, plain, 2, 3, np.random.default_rng(seed))
    m, s, _ = _call(fn, renamed, 2, 3, np.random.default_rng(seed))
    ok = m == m0 and s == s0
    wrong = _no_accuracy(fn, m0, plain, 2, 3, seed)
    return gate(
        [
            finding(
                "labels not contiguous",
                ok,
                1,
                f"with the labels 0 .. 9 renamed to {values.tolist()} (same order, same "
                f"generator) your result changed from ({m0:.4f}, {s0:.4f}) to "
                f"({m:.4f}, {s:.4f}). The classes are np.unique(train_y); an argmax over "
                "the class means is a position in that array, so map it back with "
                "classes[argmax] before comparing with test_y.",
            )
        ],
        wrong and f"with the labels 0 .. 9, {wrong}",
    )


@register(f"{EX}/properties", points=1, summary="two Python floats, inputs left untouched")
def properties(fn, rng):
    train_h, train_y, test_h, test_y = _data(rng, per_train=4, per_test=3)
    arrays = [train_h, train_y, test_h, test_y]
    before = frozen_copies(*arrays)
    want = _ref(*frozen_copies(*arrays), 2, 3, np.random.default_rng(0))
    out, _ = call_student(fn, *arrays, 2, 3, np.random.default_rng(0), what="low_shot_eval")
    problems = []
    changed = mutated(before, arrays, ["train_h", "train_y", "test_h", "test_y"])
    if changed:
        problems.append(
            f"your function modified {', '.join(changed)} in place (normalise into new arrays)"
        )
    m, s = unpack(out, 2, "low_shot_eval")
    if not (is_plain_float(m) and is_plain_float(s)):
        problems.append(
            f"return Python floats (float(x)), got {type(m).__name__} and {type(s).__name__}"
        )
    elif not (0.0 <= m <= 1.0 and s >= 0.0):
        problems.append("the mean accuracy must lie in [0, 1] and the std be >= 0")
    # the mean: a wrong spread costs the ddof check alone, other random calls the
    # random_calls check
    data = tuple(before)  # the inputs as they were (the answer may have changed them)
    try:
        wrong = _no_accuracy(fn, float(m), data, 2, 3, 0)
    except (TypeError, ValueError):
        wrong = differs(m, want[0])
    return gate(
        [finding("properties", not problems, 1, "; ".join(problems))],
        wrong and f"the mean: {wrong}",
    )
