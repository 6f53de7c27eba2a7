"""Label-free metrics of a spectrum: functions of one list of eigenvalues or singular values.

Book: ``book/rankme.md`` (label-free checks); seeds 000 ("Measuring a representation
without labels"), 002 (sections 3.1 and 4.1) and 003 (section 5). Every spectral metric
of a feature matrix ``X`` (:mod:`repeval_ref.labelfree.spectral`) is one of these
functions applied to the spectrum of ``X`` (:mod:`repeval_ref.labelfree.spectrum`):

* the eigenvalues :math:`\\lambda_1 \\ge \\dots \\ge \\lambda_d \\ge 0` of the d x d
  Gram matrix :math:`X^\\top X` (or of the centred scatter, proportional to the
  covariance): alpha-ReQ, NE-sum, the stable rank, the participation ratio, the
  explained-variance dimension, the isotropy ratio;
* the singular values :math:`\\sigma_i = \\sqrt{\\lambda_i}`: RankMe and the condition
  number. RankMe of the eigenvalues themselves is the convention of the ``reptrix``
  library (:func:`repeval_ref.rankme_squared_shares`).

Taking the spectrum as input is what the synthetic sensitivity study of 002 (section
4.1) needs: for ``d = 5000`` no feature matrix has to be built or decomposed
(:func:`spectrum_metrics` gives the metrics of 002's figure 2 at once).

Every function accepts the values in any order (they are sorted here) and raises
``ValueError`` for a spectrum that is not a finite, non-negative 1-D array. The
keyword ``name`` describes the spectrum in the message raised when it is zero (the
feature-level functions pass, for example, ``"the covariance of X"``).
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np

from .._validation import as_float_array, check_int, check_positive

__all__ = [
    "check_spectrum",
    "gram_rounding_level",
    "check_fit_range",
    "fit_range_indices",
    "rankme_of_spectrum",
    "alpha_req_of_spectrum",
    "alpha_req_weighted_of_spectrum",
    "stable_rank_of_spectrum",
    "ne_sum_of_spectrum",
    "condition_number_of_spectrum",
    "condition_number_of_gram_spectrum",
    "participation_ratio_of_spectrum",
    "explained_variance_dimension_of_spectrum",
    "isotropy_ratio_of_spectrum",
    "spectrum_metrics",
]

_EPS = np.finfo(float).eps


def check_spectrum(values, argument="eigenvalues", *, min_size=1):
    """Return a spectrum as a float64 array sorted decreasingly, after checking it.

    Parameters
    ----------
    values : array_like of shape (m,)
        Eigenvalues or singular values, any order.
    argument : str, default "eigenvalues"
        Argument name used in error messages.
    min_size : int, default 1
        Smallest accepted length.

    Returns
    -------
    numpy.ndarray of float64, shape (m,)
        The values, largest first (a new array).

    Raises
    ------
    ValueError
        If ``values`` is not 1-D, is shorter than ``min_size``, holds NaN or infinite
        values, or a negative one.
    """
    lam = as_float_array(values, argument, ndim=1, min_rows=min_size)
    if np.any(lam < 0):
        raise ValueError(f"{argument} must be >= 0, got smallest {lam.min()}")
    return np.sort(lam)[::-1]


def _require_nonzero(lam, name):
    """``lam`` (largest first) unless it is zero; ``name`` describes it in the error."""
    if not (lam.size and lam[0] > 0):
        raise ValueError(f"{name} is zero (all singular values vanish); the metric is undefined")
    return lam


def gram_rounding_level(eigenvalues):
    """Rounding level :math:`d\\,\\epsilon\\,\\lambda_1` of the eigenvalues of a d x d matrix.

    An eigenvalue computed from a float64 Gram or covariance matrix is exact only up to
    about this much, so the label-free metrics take the values at or below it as zero.

    Parameters
    ----------
    eigenvalues : numpy.ndarray of shape (d,)
        Non-negative values, largest first (as :func:`check_spectrum` returns them).

    Returns
    -------
    float
        ``d * eps * eigenvalues[0]`` with ``eps`` the float64 machine epsilon.
    """
    return eigenvalues.shape[0] * _EPS * eigenvalues[0]


# ----------------------------------------------------------------------------- RankMe


def rankme_of_spectrum(singular_values, eps=1e-7, *, name="the spectrum"):
    """Effective rank (RankMe, Garrido et al. 2023) of a list of singular values.

    With the shares :math:`p_i = \\sigma_i / \\sum_j \\sigma_j + \\epsilon`, the effective
    rank is :math:`\\exp(-\\sum_i p_i \\log p_i)` (``0 log 0 = 0``). ``r`` equal non-zero
    values give ``r`` (up to the tiny ``eps``). :func:`repeval_ref.rankme` is this
    function of the singular values of the features; passing the eigenvalues
    :math:`\\lambda_i = \\sigma_i^2` instead gives the ``reptrix`` convention
    (:func:`repeval_ref.rankme_squared_shares`, the entropy of the explained-variance
    ratios of a PCA). Seed 000 ("Measuring a representation without labels"); seed
    002, section 3.1.

    Parameters
    ----------
    singular_values : array_like of shape (m,)
        The singular values :math:`\\sigma_i` (or the eigenvalues, for reptrix's
        convention), any order, not all zero.
    eps : float, default 1e-7
        Added to every share, ``>= 0``; ``eps=0`` gives the exact spectral entropy.
    name : str, default "the spectrum"
        What the values are, for the error message of an all-zero spectrum.

    Returns
    -------
    float
        The effective rank, between about 1 and ``m``.

    Raises
    ------
    ValueError
        A spectrum that :func:`check_spectrum` rejects, a negative ``eps``, or all
        values zero.
    """
    sigma = check_spectrum(singular_values, "singular_values")
    eps = check_positive(eps, "eps", allow_zero=True)
    total = float(sigma.sum())
    if not total > 0:
        raise ValueError(f"{name} has all singular values zero; the effective rank is undefined")
    p = sigma / total + eps
    # 0 * log 0 is taken as 0 (only reachable with eps == 0).
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return float(np.exp(-terms.sum()))


# ------------------------------------------------------------------------ alpha-ReQ


def check_fit_range(fit_range):
    """Raise ``TypeError`` unless ``fit_range`` is a pair ``(lo, hi)`` (tuple or list)."""
    if not isinstance(fit_range, (tuple, list)) or len(fit_range) != 2:
        raise TypeError(f"fit_range must be a pair (lo, hi), got {fit_range!r}")


def _index_bound(value, d, which):
    """Turn one end of ``fit_range`` into a 1-based inclusive eigenvalue index.

    An ``int`` is a 1-based index; a ``float`` in (0, 1] is the fraction ``f`` of ``d``
    meaning index ``floor(f * d)``. A lower bound of ``0`` (or ``0.0``, or a fraction
    whose floor is 0) means "from the first eigenvalue", index 1.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"fit_range {which} must be an int index or a float fraction, got {value!r}"
        )
    lower = which == "lower"
    if lower and value == 0:
        return 1
    if isinstance(value, numbers.Integral):
        idx = int(value)
        if idx < 1:
            minimum = ">= 0 (0 or 1 both mean the first eigenvalue)" if lower else ">= 1 (1-based)"
            raise ValueError(f"fit_range {which} index must be {minimum}, got {idx}")
        return idx
    value = float(value)
    if not (0.0 < value <= 1.0):
        raise ValueError(f"fit_range {which} fraction must lie in (0, 1], got {value}")
    idx = int(np.floor(value * d))
    return max(idx, 1) if lower else idx


def fit_range_indices(fit_range, d):
    """1-based inclusive indices ``(lo, hi)`` that alpha-ReQ's ``fit_range`` selects among ``d``.

    An ``int`` is a 1-based index; a ``float`` in (0, 1] the fraction ``f`` of ``d``
    meaning index :math:`\\lfloor f d \\rfloor`. A lower bound of 0 (or a fraction whose
    floor is 0) means the first eigenvalue. See :func:`repeval_ref.alpha_req`.

    Parameters
    ----------
    fit_range : (int or float, int or float)
    d : int
        Number of eigenvalues, ``>= 1``.

    Returns
    -------
    (int, int)
        ``lo <= hi <= d`` with at least two indices in between, both ends included.

    Raises
    ------
    TypeError
        If ``fit_range`` is not a pair of real numbers.
    ValueError
        If an end is out of range, ``hi > d``, or fewer than 2 indices are selected.
    """
    check_fit_range(fit_range)
    d = check_int(d, "d", minimum=1)
    lo = _index_bound(fit_range[0], d, "lower")
    hi = _index_bound(fit_range[1], d, "upper")
    if hi > d:
        raise ValueError(f"fit_range upper index {hi} exceeds the dimension d={d}")
    if hi - lo + 1 < 2:
        raise ValueError(
            f"fit_range gives indices {lo}..{hi} for d={d}; at least 2 eigenvalues are "
            "needed to fit a line"
        )
    return lo, hi


def alpha_req_of_spectrum(eigenvalues, fit_range=(10, 0.9), *, name="the spectrum"):
    """Power-law exponent alpha of a spectrum (alpha-ReQ, Agrawal et al. 2022).

    Fits :math:`\\lambda_i \\propto i^{-\\alpha}` by ordinary least squares of
    :math:`\\log \\lambda_i` on :math:`\\log i` over the 1-based indices ``fit_range``
    selects (:func:`fit_range_indices`; default 002's :math:`[10, \\lfloor 0.9 d
    \\rfloor]`) and returns minus the slope. :func:`repeval_ref.alpha_req` is this
    function of the covariance spectrum of the features. Seed 002, section 3.1 and
    appendix B.1.

    Parameters
    ----------
    eigenvalues : array_like of shape (d,)
        Non-negative values, any order.
    fit_range : (int or float, int or float), default (10, 0.9)
        1-based inclusive indices, or fractions of ``d`` (floored); a lower bound of 0
        means the first eigenvalue.
    name : str, default "the spectrum"
        What the values are, for the error message of an all-zero spectrum.

    Returns
    -------
    float
        The exponent alpha (positive for a decaying spectrum).

    Raises
    ------
    ValueError
        If the range holds fewer than 2 indices or exceeds ``d``, if the spectrum is
        zero, or if an eigenvalue in the range is zero (at most
        :func:`gram_rounding_level`).
    """
    check_fit_range(fit_range)
    lam = check_spectrum(eigenvalues)
    lo, hi = fit_range_indices(fit_range, lam.shape[0])
    _require_nonzero(lam, name)
    sel = lam[lo - 1 : hi]
    tol = gram_rounding_level(lam)
    if np.any(sel <= tol):
        n_zero = int(np.count_nonzero(sel <= tol))
        raise ValueError(
            f"{n_zero} eigenvalue(s) in the fit range {lo}..{hi} are zero (the spectrum "
            f"has rank below {hi}); the log-log fit is undefined, narrow fit_range"
        )
    logi = np.log(np.arange(lo, hi + 1, dtype=float))
    slope = np.polyfit(logi, np.log(sel), 1)[0]
    return float(-slope)


def _check_int_pair(fit_range):
    """``fit_range`` as a pair of ints (``TypeError`` otherwise), not yet checked against d."""
    if not isinstance(fit_range, (tuple, list)) or len(fit_range) != 2:
        raise TypeError(f"fit_range must be a pair (lo, hi) of ints, got {fit_range!r}")
    lo, hi = fit_range
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in (lo, hi)):
        raise TypeError(f"fit_range must hold two ints, got {fit_range!r}")
    return lo, hi


def alpha_req_weighted_of_spectrum(eigenvalues, fit_range=(6, 100)):
    """Power-law exponent fitted with weights ``1/i`` on the log-log spectrum (reptrix's alpha).

    Minimises :math:`\\sum_{i = i_{lo}}^{i_{hi}} \\frac{1}{i}\\,(\\log \\lambda_i - c +
    \\alpha \\log i)^2` over :math:`(\\alpha, c)` and returns :math:`\\alpha`, with
    :math:`\\lambda_i` the eigenvalues, 1-based and decreasing. The weights favour the
    head of the range, where the points lie sparsely on a logarithmic axis. The
    default range, indices 6 to 100 (1-based, inclusive), is reptrix's
    ``np.arange(5, 100)`` in 0-based indices. Compare :func:`alpha_req_of_spectrum`
    (unweighted, 002's range :math:`[10, 0.9 d]`); the feature-level function is
    :func:`repeval_ref.alpha_req_weighted`. Book ``book/rankme.md``.

    Parameters
    ----------
    eigenvalues : array_like of shape (m,)
        Non-negative values, any order.
    fit_range : (int, int), default (6, 100)
        1-based inclusive indices ``1 <= lo < hi <= m`` (no fractions, unlike
        :func:`alpha_req_of_spectrum`).

    Returns
    -------
    float

    Raises
    ------
    TypeError
        If ``fit_range`` is not a pair of ints.
    ValueError
        A range outside the spectrum, with fewer than 2 points, or holding a zero
        eigenvalue (at most :func:`gram_rounding_level`).
    """
    lo, hi = _check_int_pair(fit_range)
    lam = check_spectrum(eigenvalues)
    if lo < 1 or hi <= lo or hi > lam.shape[0]:
        raise ValueError(
            f"fit_range must satisfy 1 <= lo < hi <= {lam.shape[0]} (the number of "
            f"singular values), got {fit_range!r}"
        )
    sel = lam[lo - 1 : hi]
    if not np.all(sel > gram_rounding_level(lam)):
        raise ValueError(f"fit_range {fit_range!r} holds a zero eigenvalue; narrow it")
    i = np.arange(lo, hi + 1, dtype=float)
    A = np.column_stack([-np.log(i), np.ones_like(i)])
    root_w = 1.0 / np.sqrt(i)
    coef, *_ = np.linalg.lstsq(A * root_w[:, None], np.log(sel) * root_w, rcond=None)
    return float(coef[0])


# --------------------------------------------------------- stable rank, NE-sum, kappa


def stable_rank_of_spectrum(eigenvalues, *, name="the spectrum"):
    """Sum over largest of a spectrum, :math:`\\sum_i \\lambda_i / \\lambda_1`.

    With :math:`\\lambda_i = \\sigma_i^2(X)` it is the stable rank
    :math:`\\lVert X \\rVert_F^2 / \\lVert X \\rVert_2^2` (Rudelson and Vershynin,
    :func:`repeval_ref.stable_rank`); with the covariance eigenvalues it is NE-sum
    (:func:`ne_sum_of_spectrum`). Seed 002, section 3.1.

    Parameters
    ----------
    eigenvalues : array_like of shape (d,)
        Eigenvalues :math:`\\sigma_i^2` of :math:`X^\\top X` (or of the centred scatter),
        any order, not all zero.
    name : str, default "the spectrum"
        What the values are, for the error message of an all-zero spectrum.

    Returns
    -------
    float
        In [1, d]: 1 for one non-zero value, ``d`` for ``d`` equal ones.
    """
    lam = _require_nonzero(check_spectrum(eigenvalues), name)
    return float(lam.sum() / lam[0])


def ne_sum_of_spectrum(eigenvalues, *, name="the spectrum"):
    """NE-sum (He and Ozay 2022) of covariance eigenvalues, :math:`\\operatorname{tr} C /
    \\lambda_1`.

    The same quantity as :func:`stable_rank_of_spectrum`, under the name 002 uses for
    the covariance spectrum (:func:`repeval_ref.ne_sum` centres the features first).
    Seed 002, section 3.1.

    Parameters
    ----------
    eigenvalues : array_like of shape (d,)
        Covariance (or scatter) eigenvalues, any order, not all zero.
    name : str, default "the spectrum"
        What the values are, for the error message of an all-zero spectrum.

    Returns
    -------
    float
        NE-sum, in [1, d]: 1 for one direction, ``d`` for whitened features.
    """
    return stable_rank_of_spectrum(eigenvalues, name=name)


def _check_rtol(rtol):
    """``rtol`` as a float in (0, 1), or None."""
    if rtol is None:
        return None
    rtol = check_positive(rtol, "rtol")
    if rtol >= 1:
        raise ValueError(f"rtol must be < 1, got {rtol}")
    return rtol


def condition_number_of_spectrum(singular_values, rtol=None, *, name="the spectrum"):
    """Largest over smallest non-zero singular value, :math:`\\kappa = \\sigma_1 / \\sigma_r`.

    A value counts as non-zero when :math:`\\sigma_i > \\text{rtol}\\,\\sigma_1`. The
    tolerance is the one place where the routes differ, because it is the relative
    accuracy of the values that are passed in:

    * values known exactly (a synthetic spectrum, 002 section 4.1): the default
      ``rtol = m * eps``, ``numpy.linalg.matrix_rank``'s tolerance for ``m`` values;
    * the SVD of an ``n x d`` matrix: ``rtol = max(n, d) * eps`` (what
      :func:`repeval_ref.condition_number` passes for an in-memory array);
    * square roots of the eigenvalues of a Gram matrix: ``rtol = sqrt(d * eps)``, see
      :func:`condition_number_of_gram_spectrum`.

    Seed 002, section 3.1.

    Parameters
    ----------
    singular_values : array_like of shape (m,)
        Singular values, any order, not all zero; their relative accuracy sets ``rtol``.
    rtol : float, optional
        Relative tolerance in (0, 1); default ``m * eps``.
    name : str, default "the spectrum"
        What the values are, for the error message of an all-zero spectrum.

    Returns
    -------
    float
        ``sigma_1 / sigma_r``, ``>= 1`` (1 for equal values).
    """
    sigma = check_spectrum(singular_values, "singular_values")
    rtol = _check_rtol(rtol)
    if rtol is None:
        rtol = sigma.shape[0] * _EPS
    _require_nonzero(sigma, name)
    kept = sigma[sigma > rtol * sigma[0]]
    return float(sigma[0] / kept[-1])


def condition_number_of_gram_spectrum(eigenvalues, n=None, rtol=None, *, name="the spectrum"):
    """Condition number of ``X`` from the eigenvalues of its streamed d x d Gram matrix.

    The eigenvalues of a float64 Gram matrix are exact only up to about
    :math:`d\\,\\epsilon\\,\\sigma_1^2`, so singular values are resolved only down to
    about :math:`\\sqrt{d \\epsilon}\\,\\sigma_1`: that is the default ``rtol`` of
    :func:`condition_number_of_spectrum` here, applied to
    :math:`\\sigma_i = \\sqrt{\\lambda_i}`. Values of kappa near or above
    ``1 / sqrt(d * eps)`` cannot be resolved: a ``RuntimeWarning`` is issued when the
    value is within a factor 10 of that limit. Only the first ``min(n, d)``
    eigenvalues are used (``X`` has at most that many non-zero singular values; the
    rest are rounding noise). Seed 002, section 3.1.

    Parameters
    ----------
    eigenvalues : array_like of shape (d,)
        Eigenvalues of :math:`X^\\top X` (or of the centred scatter), any order.
    n : int, optional
        Number of rows of ``X``; all ``d`` values are used when omitted.
    rtol : float, optional
        Relative tolerance in (0, 1) on the singular values; default ``sqrt(d * eps)``.
    name : str, default "the spectrum"
        Describes the eigenvalues in the error raised when they are all zero.

    Returns
    -------
    float
        ``>= 1``; at most about ``1 / sqrt(d * eps)`` (the resolution limit).

    Warns
    -----
    RuntimeWarning
        When the value is at the resolution limit described above.
    """
    lam = check_spectrum(eigenvalues)
    rtol = _check_rtol(rtol)
    limit = float(np.sqrt(lam.shape[0] * _EPS))
    if rtol is None:
        rtol = limit
    _require_nonzero(lam, name)
    if n is not None:
        lam = lam[: min(check_int(n, "n", minimum=1), lam.shape[0])]
    kappa = condition_number_of_spectrum(np.sqrt(lam), rtol, name=name)
    if kappa * limit > 0.1:
        warnings.warn(
            f"condition number {kappa:.3g} from the streamed Gram matrix is at its "
            f"resolution limit (singular values below about {limit:.1e} x the largest "
            "are not resolved); the true value may be larger. Pass an in-memory array "
            "for an SVD-based value.",
            RuntimeWarning,
            stacklevel=3,
        )
    return kappa


# ------------------------------------------------------- covariance geometry (003, 5)


def participation_ratio_of_spectrum(eigenvalues, *, name="the spectrum"):
    """Participation ratio :math:`(\\sum_i \\lambda_i)^2 / \\sum_i \\lambda_i^2` (effective
    dimension).

    ``d`` when all eigenvalues are equal, 1 when one carries everything.
    :func:`repeval_ref.participation_ratio` is this function of the covariance
    spectrum. Seed 003, section 5 ("Effective dimension").

    Parameters
    ----------
    eigenvalues : array_like of shape (d,)
        Covariance (or scatter) eigenvalues, any order, not all zero; their scale does
        not matter.
    name : str, default "the spectrum"
        What the values are, for the error message of an all-zero spectrum.

    Returns
    -------
    float
        The participation ratio, in [1, d].
    """
    lam = _require_nonzero(check_spectrum(eigenvalues), name)
    s = lam / lam[0]  # scale-free; avoids overflow of the squares
    return float(s.sum() ** 2 / np.sum(s * s))


def explained_variance_dimension_of_spectrum(eigenvalues, threshold=0.9, *, name="the spectrum"):
    """Number of leading eigenvalues that hold a share ``threshold`` of the total.

    The smallest ``k`` with :math:`\\sum_{i \\le k} \\lambda_i \\ge \\text{threshold}
    \\sum_i \\lambda_i`, with a relative rounding slack of 1e-12 (ten equal eigenvalues
    need exactly 9 for 90 %). :func:`repeval_ref.explained_variance_dimension` is this
    function of the covariance spectrum. Seed 003, section 5 (``dims_for_90pct_var``).

    Parameters
    ----------
    eigenvalues : array_like of shape (d,)
        Covariance eigenvalues (the variances of the principal components), any order,
        not all zero.
    threshold : float, default 0.9
        In (0, 1].
    name : str, default "the spectrum"
        What the values are, for the error message of an all-zero spectrum.

    Returns
    -------
    int
        The number of components ``k``, in [1, d].
    """
    threshold = check_positive(threshold, "threshold")
    if threshold > 1:
        raise ValueError(f"threshold must be <= 1, got {threshold}")
    lam = _require_nonzero(check_spectrum(eigenvalues), name)
    share = np.cumsum(lam) / lam.sum()
    return int(np.argmax(share >= threshold - 1e-12)) + 1


def isotropy_ratio_of_spectrum(eigenvalues, *, name="the spectrum"):
    """Smallest over largest eigenvalue, :math:`\\lambda_d / \\lambda_1`.

    1 for a flat spectrum, 0 when some direction has no variance; values at or below
    :func:`gram_rounding_level` count as 0. :func:`repeval_ref.isotropy_ratio` is this
    function of the covariance spectrum. Seed 003, section 5 ("Isotropy").

    Parameters
    ----------
    eigenvalues : array_like of shape (d,)
        All ``d`` covariance eigenvalues (zeros included: a rank-deficient covariance
        has isotropy 0), any order, not all zero.
    name : str, default "the spectrum"
        What the values are, for the error message of an all-zero spectrum.

    Returns
    -------
    float
        In [0, 1].
    """
    lam = _require_nonzero(check_spectrum(eigenvalues), name)
    smallest = lam[-1] if lam[-1] > gram_rounding_level(lam) else 0.0
    return float(smallest / lam[0])


# ------------------------------------------------------------ 002's sensitivity study


def spectrum_metrics(eigenvalues, fit_range=(10, 0.9), eps=1e-7):
    """RankMe, NE-sum, condition number and alpha-ReQ of a covariance spectrum.

    With the eigenvalues :math:`\\lambda_1 \\ge \\dots \\ge \\lambda_d \\ge 0` (sorted
    here) and the singular values :math:`\\sigma_i = \\sqrt{\\lambda_i}` of a matrix
    whose Gram matrix has them:

    * ``rankme``: :func:`rankme_of_spectrum` of the :math:`\\sigma_i`, as
      :func:`repeval_ref.rankme`;
    * ``ne_sum``: :func:`ne_sum_of_spectrum`, :math:`\\sum_i \\lambda_i / \\lambda_1`, as
      :func:`repeval_ref.ne_sum` (and :func:`repeval_ref.stable_rank`);
    * ``kappa``: :func:`condition_number_of_spectrum` of the :math:`\\sigma_i` over the
      non-zero values (:math:`\\sigma_i > d\\,\\epsilon_{mach}\\,\\sigma_1`, its default
      for exact values), as :func:`repeval_ref.condition_number`;
    * ``alpha``: :func:`alpha_req_of_spectrum` over ``fit_range``, as
      :func:`repeval_ref.alpha_req` (same conventions for ``fit_range``);
    * ``rankme_star``, ``ne_sum_star``, ``kappa_star``: the first three divided by
      ``d`` (002, section 4.1).

    Seed 002, section 4.1 (all metrics are scale-invariant, so the spectrum may be
    normalised to sum 1). Book ``book/rankme.md``.

    Parameters
    ----------
    eigenvalues : array_like of shape (d,)
        Non-negative eigenvalues, any order, at least one positive; ``d >= 2``.
    fit_range : (int or float, int or float), default (10, 0.9)
        Fit range of alpha-ReQ; see :func:`repeval_ref.alpha_req`. ``alpha`` is NaN
        when the range does not fit the spectrum (too short, or a zero eigenvalue in it).
    eps : float, default 1e-7
        RankMe's constant, ``>= 0``.

    Returns
    -------
    dict of str to float
        ``rankme``, ``ne_sum``, ``kappa``, ``alpha``, ``rankme_star``, ``ne_sum_star``,
        ``kappa_star``.
    """
    lam = check_spectrum(eigenvalues, min_size=2)
    if not lam[0] > 0:
        raise ValueError("eigenvalues are all zero; the metrics are undefined")
    eps = check_positive(eps, "eps", allow_zero=True)
    check_fit_range(fit_range)
    d = lam.shape[0]
    sigma = np.sqrt(lam)
    out = {
        "rankme": rankme_of_spectrum(sigma, eps),
        "ne_sum": ne_sum_of_spectrum(lam),
        "kappa": condition_number_of_spectrum(sigma),
    }
    try:
        out["alpha"] = alpha_req_of_spectrum(lam, fit_range, name="eigenvalues")
    except ValueError:
        out["alpha"] = float("nan")
    for key in ("rankme", "ne_sum", "kappa"):
        out[key + "_star"] = out[key] / d
    return out
