"""Hidden checks of the exercise "A linear probe done right" (book/protocols.md).

Contract: ``linear_probe_done_right`` (training features and labels, test features and
labels, the grid ``Cs``, keyword ``seed=0``) returns
``(best_C, test_accuracy)`` as Python floats: validation ``perm[:n // 5]`` of
``default_rng(seed).permutation(n)``, both parts standardised with the fitting part's
statistics, first C of best validation accuracy, refit on the whole training set
standardised with its own statistics, test scored with those same training statistics.
Reference: :func:`repeval_ref.linear_probe_done_right`.
"""

from __future__ import annotations

import numpy as np

from ._framework import StudentError, call_student, finding, register
from ._helpers import close, frozen_copies, gate, is_plain_float, mutated, unpack
from ._memo import remembered

EX = "linear_probe_done_right"
CS = [0.001, 0.01, 0.03, 0.1, 1.0, 10.0]


# the reference's answers are remembered per grading process (:mod:`._memo`): every
# student of a class draws the same inputs, and ``recipe`` may draw a dozen grids of fits
@remembered
def _ref(*args, **kw):
    from repeval_ref import linear_probe_done_right

    return linear_probe_done_right(*args, **kw)


@remembered
def _grid(*args, **kw):
    from repeval_ref.linear_probe import probe_accuracy_grid

    return probe_accuracy_grid(*args, **kw)


def _setup(rng, n_train=150, n_test=120, d=10, K=3, shift=1.0):
    """Features on very different scales; the test set comes from a shifted 'camera'."""
    means = rng.normal(size=(K, d)) * 0.9
    scales = np.exp(rng.uniform(-3.0, 3.0, size=d))
    ytr = rng.integers(0, K, size=n_train)
    yte = rng.integers(0, K, size=n_test)
    htr = (means[ytr] + rng.normal(size=(n_train, d))) * scales
    camera = shift * rng.normal(size=d)
    hte = (
        (means[yte] + rng.normal(size=(n_test, d)) + camera)
        * scales
        * np.exp(0.2 * rng.normal(size=d))
    )
    return htr, ytr, hte, yte


def _restandardised(htr, hte):
    """Test features that, standardised with the training statistics, equal the test set
    standardised with its *own* statistics (what the common mistake computes)."""
    return htr.mean(0) + htr.std(0) * (hte - hte.mean(0)) / hte.std(0)


def _call(fn, *args, **kw):
    out, _ = call_student(fn, *args, what="linear_probe_done_right", **kw)
    C, acc = unpack(out, 2, "linear_probe_done_right")
    try:
        return float(C), float(acc), out
    except (TypeError, ValueError):
        raise StudentError(
            "linear_probe_done_right should return two numbers "
            f"(best_C, test_accuracy), got {out!r}"
        ) from None


_NO_REFIT = (
    " That is the test accuracy of the model fitted on the fitting rows only: "
    "once C is chosen, refit on the whole training set, standardised with the "
    "mean and std of all its rows, before the single test."
)


def _fitting_rows_only(htr, ytr, hte, yte, C, seed):
    """Test accuracy of the model fitted on the fitting rows alone (no refit)."""
    from sklearn.linear_model import LogisticRegression

    n = len(htr)
    fitting = np.random.default_rng(seed).permutation(n)[n // 5 :]
    centre, spread = htr[fitting].mean(axis=0), htr[fitting].std(axis=0)
    model = LogisticRegression(C=C, max_iter=2000).fit(
        (htr[fitting] - centre) / spread, ytr[fitting]
    )
    return float(model.score((hte - centre) / spread, yte))


@register(f"{EX}/recipe", points=3, summary="best C and test accuracy equal the honest recipe's")
def recipe(fn, rng):
    for _ in range(12):  # draw until both common mistakes would show
        htr, ytr, hte, yte = _setup(rng, shift=1.2)
        seed = int(rng.integers(0, 1000))
        val_acc, test_acc = _grid(htr, ytr, hte, yte, CS, seed=seed)
        best = int(np.argmax(val_acc))
        _, test_own = _grid(htr, ytr, _restandardised(htr, hte), yte, [CS[best]], seed=seed)
        if int(np.argmax(test_acc)) != best and abs(test_own[0] - test_acc[best]) > 1e-9:
            break
    want_C, want_acc = _ref(htr, ytr, hte, yte, CS, seed=seed)
    C, acc, _ = _call(fn, htr.copy(), ytr.copy(), hte.copy(), yte.copy(), list(CS), seed=seed)
    if C == want_C and abs(acc - want_acc) < 1e-9:
        return [finding("recipe", True, 3, "")]
    if C != want_C:
        msg = (
            f"you chose C = {C:g}; the honest recipe chooses C = {want_C:g} (first C with "
            f"the best accuracy on the validation split perm[:n // 5] of "
            f"default_rng({seed}).permutation(n))."
        )
        last = len(CS) - 1 - int(np.argmax(val_acc[::-1]))
        if C == CS[last] and val_acc[last] == val_acc[best]:
            msg += (
                " Your C has the best validation accuracy too, but a later one: when "
                "several C tie, keep the earliest C in the order of Cs."
            )
        elif C == CS[int(np.argmax(test_acc))]:
            msg += (
                " Your C is the one with the best TEST accuracy: choosing C by looking "
                "at the test set reports an optimistic number. Choose it on the "
                "validation split carved from the training set."
            )
    else:
        msg = f"your test accuracy is {acc:.4f}, the recipe gives {want_acc:.4f} with the same C."
        if abs(acc - test_own[0]) < 1e-9:
            msg += (
                " That is the accuracy obtained by standardising the test set with its "
                "own mean and std: standardise it with the TRAINING set's statistics, "
                "the only ones a deployed probe knows."
            )
        elif abs(acc - _fitting_rows_only(htr, ytr, hte, yte, want_C, seed)) < 1e-9:
            msg += _NO_REFIT
        else:
            msg += (
                " Refit on the whole training set standardised with its own mean and "
                "std (ddof=0) and apply those same statistics to the test set."
            )
    return [finding("recipe", False, 3, msg)]


@register(
    f"{EX}/selection_ignores_test_set",
    points=2,
    summary="the chosen C does not depend on the test set",
)
def selection_ignores_test_set(fn, rng):
    htr, ytr, hte, yte = _setup(rng, shift=0.0)
    seed = int(rng.integers(0, 1000))
    val_acc, _ = _grid(htr, ytr, hte, yte, CS, seed=seed)
    best = int(np.argmax(val_acc))
    # random test labels for which the test-best C differs from the validation-best C
    for _ in range(30):
        y_fake = rng.integers(0, 3, size=len(yte))
        _, test_acc = _grid(htr, ytr, hte, y_fake, CS, seed=seed)
        if int(np.argmax(test_acc)) != best:
            break
    C, acc, _ = _call(fn, htr.copy(), ytr.copy(), hte.copy(), y_fake, list(CS), seed=seed)
    ok = C == CS[best]
    # a C returned without fitting anything (a constant that happens to be the right one
    # here) earns nothing: the accuracy must be that of a probe fitted with it
    wrong = C in CS and _not_a_fit(htr, ytr, hte, y_fake, C, acc, seed)
    tied = [c for c, a in zip(CS, val_acc) if a == val_acc[best]]
    if C in tied[1:] and C != CS[int(np.argmax(test_acc))]:
        msg = (
            f"you chose C = {C:g}, which ties on validation accuracy with C = "
            f"{CS[best]:g}: keep the earliest C in the order of Cs that reaches the "
            "highest validation accuracy."
        )
    else:
        msg = (
            f"with the test labels replaced by random ones you chose C = {C:g} instead "
            f"of C = {CS[best]:g}. The test set may only be scored once, after C is "
            "fixed: pick C by validation accuracy on perm[:n // 5] of the training set."
        )
    return gate([finding("selection ignores the test set", ok, 2, msg)], wrong)


@register(
    f"{EX}/test_uses_training_statistics",
    points=2,
    summary="the test set is standardised with the training statistics",
)
def test_uses_training_statistics(fn, rng):
    htr, ytr, hte, yte = _setup(rng, shift=0.0)
    shift = 2.5 * htr.std(0) * rng.choice([-1.0, 1.0], size=htr.shape[1])
    hte_shifted = hte + shift
    seed = int(rng.integers(0, 1000))
    Cs = [0.1]  # one candidate: only the standardisation can change the accuracy
    _, want = _ref(htr, ytr, hte_shifted, yte, Cs, seed=seed)
    _, got, _ = _call(
        fn, htr.copy(), ytr.copy(), hte_shifted.copy(), yte.copy(), list(Cs), seed=seed
    )
    ok = abs(got - want) < 1e-9
    msg = (
        f"after shifting every test feature by 2.5 training standard deviations your "
        f"accuracy is {got:.4f}, the recipe gives {want:.4f}."
    )
    _, unshifted, _ = _call(fn, htr.copy(), ytr.copy(), hte.copy(), yte.copy(), list(Cs), seed=seed)
    if abs(got - _fitting_rows_only(htr, ytr, hte_shifted, yte, Cs[0], seed)) < 1e-9:
        msg += _NO_REFIT
    elif abs(unshifted - got) < 1e-12:
        msg += (
            " Your accuracy did not react to the shift at all, so you standardise the "
            "test set with its own mean and std. Use the whole training set's mean and "
            "std for the test set, the way a deployed probe would see a new camera."
        )
    return [finding("test standardised with training statistics", ok, 2, msg)]


@register(
    f"{EX}/properties",
    points=1,
    summary="returns two Python floats, C from the grid, inputs untouched",
)
def properties(fn, rng):
    htr, ytr, hte, yte = _setup(rng, n_train=60, n_test=30, shift=0.3)
    args = [htr, ytr, hte, yte]
    before = frozen_copies(*args)
    out, _ = call_student(fn, *args, [0.1, 1.0], what="linear_probe_done_right")
    C, acc = unpack(out, 2, "linear_probe_done_right")
    problems = []
    changed = mutated(before, args, ["train_h", "train_y", "test_h", "test_y"])
    if not changed:  # every option path: a seed other than the default too
        call_student(fn, *args, [0.1, 1.0], seed=3, what="linear_probe_done_right")
        changed = [
            f"{n} (with seed = 3)"
            for n in mutated(before, args, ["train_h", "train_y", "test_h", "test_y"])
        ]
    if changed:
        problems.append(f"your function modified {', '.join(changed)} in place")
    if not (is_plain_float(C) and is_plain_float(acc)):
        problems.append(
            f"return Python floats (float(...)), got {type(C).__name__} and {type(acc).__name__}"
        )
    if C not in (0.1, 1.0):
        problems.append(f"best_C = {C!r} is not one of the candidates")
    try:
        if not 0.0 <= float(acc) <= 1.0:
            problems.append(f"test_accuracy = {acc!r} should be a fraction in [0, 1]")
    except (TypeError, ValueError):
        problems.append(f"test_accuracy = {acc!r} is not a number")
    findings = [finding("properties", not problems, 1, "; ".join(problems))]
    if problems:
        return findings
    return gate(findings, _not_a_fit(htr, ytr, hte, yte, float(C), float(acc)))


def _not_a_fit(htr, ytr, hte, yte, C, acc, seed=0):
    """Empty when ``acc`` is the test accuracy of a probe fitted with ``C`` by the recipe or
    one of its common variants (test set standardised with its own statistics, no refit),
    else why not: a property earns its points with a probe that was fitted, whatever
    step of the recipe went wrong (those steps are scored by their own checks)."""
    fits = (
        _ref(htr, ytr, hte, yte, [C], seed=seed)[1],
        _ref(htr, ytr, _restandardised(htr, hte), yte, [C], seed=seed)[1],
        _fitting_rows_only(htr, ytr, hte, yte, C, seed),
    )
    if any(close(acc, a, 1e-9) for a in fits):
        return ""
    return (
        f"your test accuracy {acc:.4f} is not that of a logistic regression fitted with "
        f"C = {C:g} (the recipe gives {fits[0]:.4f})"
    )


@register(
    f"{EX}/ties_to_earliest",
    points=1,
    summary="of several C with the same validation accuracy, the earliest is kept",
)
def ties_to_earliest(fn, rng):
    htr, ytr, hte, yte = _setup(rng, n_train=80, n_test=40, shift=1.0)
    seed = int(rng.integers(0, 1000))
    # one candidate first: with no choice to make the answer must be right, so that the
    # finding below is about the choice alone
    C1, acc1, _ = _call(fn, htr.copy(), ytr.copy(), hte.copy(), yte.copy(), [0.1], seed=seed)
    want1 = _ref(htr, ytr, hte, yte, [0.1], seed=seed)
    # the accuracy of a probe fitted with C = 0.1, by the recipe or with a slip in the
    # standardisation or the refit (scored by their own checks), not of no fit at all
    if C1 != want1[0] or _not_a_fit(htr, ytr, hte, yte, 0.1, acc1, seed):
        return gate(
            [finding("ties to the earliest C", False, 1, "")],
            f"with the single candidate C = 0.1, (best_C, test_accuracy) = "
            f"({C1:g}, {acc1:.4f}) instead of ({want1[0]:g}, {want1[1]:.4f})",
        )
    Cs = [1e-6, 1e-5, 1e-4]  # so strongly regularised that every C predicts alike
    val_acc, _ = _grid(htr, ytr, hte, yte, Cs, seed=seed)
    want_C, _ = _ref(htr, ytr, hte, yte, Cs, seed=seed)
    C, _, _ = _call(fn, htr.copy(), ytr.copy(), hte.copy(), yte.copy(), list(Cs), seed=seed)
    tied = ", ".join(f"{c:g}" for c, a in zip(Cs, val_acc) if a == val_acc.max())
    return [
        finding(
            "ties to the earliest C",
            C == want_C,
            1,
            f"the candidates C = {tied} reach the same validation accuracy "
            f"({val_acc.max():.4f}) and you returned C = {C:g}: keep the earliest C "
            "in the order of Cs that reaches the highest validation accuracy.",
        )
    ]
