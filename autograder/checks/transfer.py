"""Hidden checks of the exercise "Feature distortion and LP-FT" (book/lpft.md).

Contract: ``transfer(X, y, B0, v0, lr, steps)`` runs full-batch gradient descent on
``L = (1/n) ||X B^T v - y||^2`` with both gradients taken at the current parameters
(simultaneous updates) and returns ``{"lp": (v, B), "ft": (v, B), "lpft": (v, B)}``:
LP moves only v from (v0, B0); FT moves both from (v0, B0); LP-FT runs FT from
(v_LP, B0); each for ``steps`` steps at step ``lr``. On the setup of the exercise the ID
and OOD errors must show the ordering of Kumar et al. (2022).
Reference: :func:`repeval_ref.transfer`, :func:`repeval_ref.lpft_theory.prediction_error`,
:func:`repeval_ref.datasets.transfer_setup`.
"""

from __future__ import annotations

import numpy as np

from ._framework import StudentError, call_student, finding, register
from ._helpers import as_array, frozen_copies, gate, mutated, unpack

EX = "transfer"
METHODS = ("lp", "ft", "lpft")


def _ref(*args):
    from repeval_ref import transfer

    return transfer(*args)


def _error(v, B, X, v_star, B_star):
    from repeval_ref.lpft_theory import prediction_error

    return prediction_error(v, B, X, v_star, B_star)


def _problem(rng, n=10, d=6, k=3):
    X = rng.normal(size=(n, d))
    B_star = rng.normal(size=(k, d)) / np.sqrt(d)
    v_star = rng.normal(size=k)
    y = X @ B_star.T @ v_star
    B0 = B_star + 0.3 * rng.normal(size=(k, d)) / np.sqrt(d)
    v0 = 0.1 * rng.normal(size=k)
    return X, y, B0, v0


def _call(fn, X, y, B0, v0, lr, steps):
    out, _ = call_student(fn, X.copy(), y.copy(), B0.copy(), v0.copy(), lr, steps, what="transfer")
    if not isinstance(out, dict):
        raise StudentError(
            f"transfer should return a dict with keys 'lp', 'ft', 'lpft', "
            f"got a {type(out).__name__}"
        )
    missing = [m for m in METHODS if m not in out]
    if missing:
        raise StudentError(f"transfer's dict lacks the key(s) {', '.join(map(repr, missing))}")
    result = {}
    for m in METHODS:
        v, B = unpack(out[m], 2, f"transfer's entry {m!r}")
        result[m] = (as_array(v, f"v of {m!r}"), as_array(B, f"B of {m!r}"))
    return result


def _same(got, want):
    v, B = got
    wv, wB = want
    return (
        v.shape == wv.shape
        and B.shape == wB.shape
        and np.allclose(v, wv, rtol=1e-9, atol=1e-12)
        and np.allclose(B, wB, rtol=1e-9, atol=1e-12)
    )


def _sequential(X, y, B0, v0, lr, steps, first):
    """Gradient descent where one parameter is updated before the other's gradient."""
    n = len(X)

    def grad_v(v, B):
        return (2.0 / n) * B @ (X.T @ (X @ B.T @ v - y))

    def grad_B(v, B):
        return (2.0 / n) * np.outer(v, X.T @ (X @ B.T @ v - y))

    def run(v, B, move_B):
        for _ in range(steps):
            if not move_B:
                v = v - lr * grad_v(v, B)
            elif first == "v":
                v = v - lr * grad_v(v, B)
                B = B - lr * grad_B(v, B)
            else:
                B_new = B - lr * grad_B(v, B)
                v = v - lr * grad_v(v, B_new)
                B = B_new
        return v, B

    lp = run(v0, B0, False)
    return {"lp": lp, "ft": run(v0, B0, True), "lpft": run(lp[0], B0, True)}


def _explain(got, want, X, y, B0, v0, lr, steps):
    """Name the first method that differs and, when recognisable, the mistake."""
    wrong = [m for m in METHODS if not _same(got[m], want[m])]
    m = wrong[0]
    for first in ("v", "B"):
        alt = _sequential(X, y, B0, v0, lr, steps, first)
        if all(_same(got[k], alt[k]) for k in METHODS):
            return (
                f"Your updates are sequential: you update {first} first and then take "
                f"the other gradient at the NEW {first}. Compute both gradients at the "
                "current (v, B), then update both (simultaneous updates)."
            )
    n = len(X)
    for factor, why in (
        (
            0.5,
            "Your steps are half as long as they should be: the gradient "
            "of (1/n)||r||^2 carries the factor 2/n, not 1/n.",
        ),
        (
            float(n),
            "Your steps are n times too long: the loss is the MEAN "
            "of the squared residuals, so its gradient carries the "
            "factor 2/n, not 2.",
        ),
    ):
        alt = _ref(X, y, B0, v0, lr * factor, steps)
        if all(_same(got[k], alt[k]) for k in METHODS):
            return why
    for other in (steps - 1, steps + 1):
        alt = _ref(X, y, B0, v0, lr, other) if other >= 0 else None
        if alt is not None and all(_same(got[k], alt[k]) for k in METHODS):
            return (
                f"Your parameters are those after {other} steps instead of {steps}: "
                "each method takes exactly `steps` gradient steps."
            )
    if m == "lp" and not np.allclose(got["lp"][1], B0):
        return "LP must keep B fixed at B0: only the head v is trained."
    if m == "lpft":
        ft_from_v0 = want["ft"]
        if _same(got["lpft"], ft_from_v0):
            return (
                "Your LP-FT equals FT: LP-FT must start fine-tuning from the head found "
                "by linear probing, (v_LP, B0), not from (v0, B0)."
            )
        return (
            "LP-FT differs: it runs FT for `steps` steps starting from (v_LP, B0), the "
            "probed head and the pretrained features."
        )
    return (
        f"The result of {m!r} differs from gradient descent on "
        "(1/n)||X B^T v - y||^2 with the gradients given in the statement."
    )


@register(
    f"{EX}/matches_reference",
    points=3,
    summary="LP, FT and LP-FT equal gradient descent on small random problems",
)
def matches_reference(fn, rng):
    for n, d, k, lr, steps in ((10, 6, 3, 0.02, 25), (7, 5, 2, 0.05, 40)):
        X, y, B0, v0 = _problem(rng, n, d, k)
        want = _ref(X, y, B0, v0, lr, steps)
        got = _call(fn, X, y, B0, v0, lr, steps)
        if not all(_same(got[m], want[m]) for m in METHODS):
            msg = (
                f"on a problem with n = {n}, d = {d}, d' = {k}, lr = {lr}, steps = {steps} "
                "your parameters differ from the reference: "
                + _explain(got, want, X, y, B0, v0, lr, steps)
            )
            return [finding("matches the reference", False, 3, msg)]
    return [finding("matches the reference", True, 3, "")]


@register(
    f"{EX}/simultaneous_updates",
    points=2,
    summary="both gradients are taken at the current parameters (one and two steps)",
)
def simultaneous_updates(fn, rng):
    X, y, B0, v0 = _problem(rng, 8, 5, 2)
    v0 = rng.normal(size=2)  # a head far from zero: the update order matters
    for steps in (1, 2):
        want = _ref(X, y, B0, v0, 0.05, steps)
        got = _call(fn, X, y, B0, v0, 0.05, steps)
        if not all(_same(got[m], want[m]) for m in ("ft", "lpft")):
            msg = (
                f"after {steps} step(s) of fine-tuning your (v, B) differ from the "
                "simultaneous update v <- v - lr grad_v L(v, B), B <- B - lr grad_B L(v, B)."
                " " + _explain(got, want, X, y, B0, v0, 0.05, steps)
            )
            return [finding("simultaneous updates", False, 2, msg)]
    return [finding("simultaneous updates", True, 2, "")]


@register(
    f"{EX}/kumar_ordering",
    points=2,
    summary="ID and OOD errors ordered as Kumar et al. found (LP-FT < LP < FT out of distribution)",
)
def kumar_ordering(fn, rng):
    from repeval_ref.datasets import transfer_setup

    s = transfer_setup(rng)
    got = _call(fn, s["X"], s["y"], s["B0"], s["v0"], s["lr"], s["steps"])
    errs = {}
    for m in METHODS:
        v, B = got[m]
        if v.shape != s["v0"].shape or B.shape != s["B0"].shape:
            raise StudentError(
                f"transfer returned v of shape {v.shape} and B of shape "
                f"{B.shape} for {m!r}; expected {s['v0'].shape} and "
                f"{s['B0'].shape}"
            )
        if not (np.all(np.isfinite(v)) and np.all(np.isfinite(B))):
            return [
                finding(
                    "Kumar et al.'s ordering",
                    False,
                    2,
                    f"{m!r} returned non-finite parameters at lr = {s['lr']}",
                )
            ]
        errs[m] = (
            _error(v, B, s["X"], s["v_star"], s["B_star"]),
            _error(v, B, s["X_ood"], s["v_star"], s["B_star"]),
        )
    (id_lp, ood_lp), (id_ft, ood_ft), (id_lpft, ood_lpft) = (errs[m] for m in METHODS)
    table = (
        f"ID errors: LP {id_lp:.2e}, FT {id_ft:.2e}, LP-FT {id_lpft:.2e}; OOD errors: "
        f"LP {ood_lp:.3f}, FT {ood_ft:.3f}, LP-FT {ood_lpft:.3f}."
    )
    problems = []
    if not (id_ft < id_lp and id_lpft < id_lp):
        problems.append(
            "FT and LP-FT should fit the ID data better than LP, which cannot move the features"
        )
    if not ood_ft > ood_lp:
        problems.append(
            "FT should be worse than LP out of distribution: fine-tuning from a "
            "random head distorts the features only inside the span of the ID "
            "inputs"
        )
    if not ood_lpft < ood_lp:
        problems.append(
            "LP-FT should be the best out of distribution: it starts from the "
            "probed head, so the features barely move"
        )
    if not problems:
        return [finding("Kumar et al.'s ordering", True, 2, "", table)]
    return [
        finding(
            "Kumar et al.'s ordering",
            False,
            2,
            f"on the exercise's setup ({s['steps']} steps at lr = {s['lr']}): "
            + table
            + " "
            + "; ".join(problems)
            + ".",
        )
    ]


@register(
    f"{EX}/properties",
    points=1,
    summary="dict of (v, B) pairs of the right shapes; LP keeps B0; inputs untouched",
)
def properties(fn, rng):
    X, y, B0, v0 = _problem(rng, 9, 4, 2)
    arrays = [X, y, B0, v0]
    before = frozen_copies(*arrays)
    out, _ = call_student(fn, *arrays, 0.03, 5, what="transfer")
    problems = []
    changed = mutated(before, arrays, ["X", "y", "B0", "v0"])
    if changed:
        problems.append(
            f"your function modified {', '.join(changed)} in place (update "
            "copies, e.g. v = v - lr * g, not v -= lr * g on the input)"
        )
    got = _call(fn, X, y, B0, v0, 0.03, 5)
    for m in METHODS:
        v, B = got[m]
        if v.shape != (2,) or B.shape != (2, 4):
            problems.append(
                f"{m!r} holds v of shape {v.shape} and B of shape {B.shape}; "
                "expected (d',) = (2,) and (d', d) = (2, 4)"
            )
    if got["lp"][1].shape == B0.shape and not np.array_equal(got["lp"][1], B0):
        problems.append("the B returned by LP must be B0 unchanged (LP trains the head only)")
    zero = _call(fn, X, y, B0, v0, 0.03, 0)
    for m in ("lp", "ft"):
        if not _same(zero[m], (v0, B0)):
            problems.append(f"with steps = 0, {m!r} must return the starting point (v0, B0)")
            break
    # returning (v0, B0) satisfies every line above: the properties count with at least
    # one of the three methods descended as the reference does (a mistake in one method
    # is scored by that method's checks)
    want = _ref(X, y, B0, v0, 0.03, 5)
    right = [m for m in METHODS if _same(got[m], want[m])]
    return gate(
        [finding("properties", not problems, 1, "; ".join(problems))],
        not right and "none of 'lp', 'ft', 'lpft' equals gradient descent from (v0, B0)",
    )
