"""Hidden checks of the exercise "Exact leave-one-out for the ridge probe" (book/invariances.md).

Contract: ``ridge_loo(train_h, train_y, lams)`` returns ``(best_lam, press)``:
PRESS(lam) = (1/(nK)) sum_i ||e_(i)||^2 of the ridge probe with an unpenalised bias on
{-1, 1}^K targets (K = max label + 1), e_(i) from the hat matrix; best_lam = first lam of
minimal PRESS (a Python float), press a float array of shape (len(lams),).
Reference: :func:`repeval_ref.ridge_loo`.
"""
from __future__ import annotations

import numpy as np

from ._framework import StudentError, call_student, finding, register
from ._helpers import as_array, differs, frozen_copies, gate, is_plain_float, mutated, unpack

EX = "ridge_loo"


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
    out, _ = call_student(fn, h.copy(), y.copy(), np.array(lams, dtype=float),
                          what="ridge_loo")
    best, press = unpack(out, 2, "ridge_loo")
    press = as_array(press, "the PRESS array (second item)", ndim=1)
    if press.shape != (len(lams),):
        raise StudentError(f"the PRESS array has shape {press.shape}, expected "
                           f"({len(lams)},): one value per lambda")
    try:
        best = float(best)
    except (TypeError, ValueError):
        raise StudentError(f"best_lam should be a number, got {best!r}") from None
    return best, press.astype(float)


@register(f"{EX}/matches_reference", points=3,
          summary="PRESS values and the chosen lambda equal the exact leave-one-out")
def matches_reference(fn, rng):
    h, y = _data(rng, n=int(rng.integers(30, 60)), d=int(rng.integers(3, 9)),
                 K=int(rng.integers(2, 5)))
    lams = np.concatenate([[0.0], np.logspace(-3, 3, 9)])
    want_best, want = _ref(h, y, lams)
    best, press = _call(fn, h, y, lams)
    if np.allclose(press, want, rtol=1e-6, atol=1e-12) and best == want_best:
        return [finding("matches the reference", True, 3, "")]
    if not np.allclose(press, want, rtol=1e-6, atol=1e-12):
        j = int(np.argmax(np.abs(press - want)))
        ratio = press[j] / want[j] if want[j] else np.nan
        msg = (f"PRESS at lambda = {lams[j]:g} is {press[j]:.6g}, the exact leave-one-out "
               f"value is {want[j]:.6g}.")
        if np.isfinite(ratio) and np.allclose(press / want, ratio, rtol=1e-6):
            msg += (f" Every value is off by the same factor {ratio:.4g}: average over "
                    "n K entries, PRESS = sum_i ||e_(i)||^2 / (n K).")
        else:
            msg += (" Check the targets (+1 in the true class's column, -1 elsewhere), "
                    "the unpenalised bias, and the residual e_(i) = (t_i - fitted_i) / "
                    "(1 - leverage_i).")
    else:
        msg = (f"PRESS is right but you chose lambda = {best:g}; the first lambda of "
               f"minimal PRESS is {want_best:g}.")
    return [finding("matches the reference", False, 3, msg)]


@register(f"{EX}/bias_unpenalised", points=2,
          summary="PRESS ignores a translation of the features (unpenalised bias)")
def bias_unpenalised(fn, rng):
    h, y = _data(rng)
    lams = np.logspace(-2, 2, 5)
    offset = 20.0 * rng.normal(size=h.shape[1])
    _, p0 = _call(fn, h, y, lams)
    _, p1 = _call(fn, h + offset, y, lams)
    ok = np.allclose(p0, p1, rtol=1e-6, atol=1e-12)
    wrong = differs(p0, _ref(h, y, lams)[1], rtol=1e-6)
    return gate([finding("translation invariance", ok, 2,
                    "adding the same vector to every feature row changed your PRESS. With "
                    "an unpenalised bias the probe can absorb any translation: centre the "
                    "features and targets (or leave the intercept out of the penalty).")],
                wrong and f"PRESS: {wrong}")


@register(f"{EX}/scale_invariance", points=1,
          summary="PRESS(a h, a^2 lam) = PRESS(h, lam)")
def scale_invariance(fn, rng):
    h, y = _data(rng)
    lams = np.logspace(-2, 2, 5)
    a = float(rng.uniform(3.0, 10.0))
    _, p0 = _call(fn, h, y, lams)
    _, p1 = _call(fn, a * h, y, a * a * lams)
    ok = np.allclose(p0, p1, rtol=1e-6, atol=1e-12)
    wrong = differs(p0, _ref(h, y, lams)[1], rtol=1e-6)
    return gate([finding("scale invariance", ok, 1,
                    f"scaling the features by a = {a:.3g} and lambda by a^2 should leave "
                    "PRESS unchanged (the penalty acts on the weights only, not on the "
                    "bias); yours changed.")], wrong and f"PRESS: {wrong}")


@register(f"{EX}/properties", points=1,
          summary="Python float best_lam from the grid, float array, inputs untouched")
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
    return gate([finding("properties", not problems, 1, "; ".join(problems))],
                differs(out, want, rtol=1e-6))
