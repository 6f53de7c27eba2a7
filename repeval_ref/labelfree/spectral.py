"""Spectral label-free metrics of a feature matrix: RankMe, alpha-ReQ, NE-sum, kappa, dimensions.

Book: ``book/rankme.md`` (label-free checks); seed 000 ("Measuring a representation
without labels"), seed 002, section 3.1 ("Spectral metrics") and section 4.1
("Sensitivity of spectral metrics"), seed 003, section 5 ("Intrinsic geometry").

Each function here takes the features ``X`` (an array, a ``numpy.memmap`` or an
iterator of ``(n_b, d)`` row batches, so that ``N`` may exceed the memory), computes
their spectrum (:mod:`repeval_ref.labelfree.spectrum`) and applies one metric of an
eigenvalue list (:mod:`repeval_ref.labelfree.eigenvalue_metrics`) to it. The
scale-free metrics do not depend on whether one uses the scatter or the covariance
(scatter / (N - 1)).

Each function states its default centring: Garrido et al. take RankMe of the
embeddings as they are (not centred); 002 computes the covariance spectrum (centred)
for alpha-ReQ and NE-sum, and :math:`\\kappa(X)` and the stable rank on the matrix
``X`` itself (not centred); 003 centres for its covariance geometry (participation
ratio, explained-variance dimension, isotropy). For centred ``X`` the stable rank and
NE-sum coincide.

Other libraries' conventions are written here beside the papers' ones, so that the
book can show, computed, how far the numbers part: the ``reptrix`` library's
``get_rankme`` takes the entropy of the shares of the eigenvalues :math:`\\sigma_i^2`
of the centred covariance (:func:`rankme_squared_shares`; Garrido et al. use the
singular values :math:`\\sigma_i`), and its alpha fit weights the point of index ``i``
by ``1/i`` (:func:`alpha_req_weighted`).
"""

from __future__ import annotations

import numpy as np

from .._validation import as_float_array, check_center, check_positive
from ._streaming import accumulate_moments
from .eigenvalue_metrics import (
    _check_int_pair,
    _check_rtol,
    alpha_req_of_spectrum,
    alpha_req_weighted_of_spectrum,
    check_fit_range,
    condition_number_of_gram_spectrum,
    condition_number_of_spectrum,
    explained_variance_dimension_of_spectrum,
    isotropy_ratio_of_spectrum,
    ne_sum_of_spectrum,
    participation_ratio_of_spectrum,
    rankme_of_spectrum,
    stable_rank_of_spectrum,
)
from .spectrum import (
    covariance_spectrum,
    feature_singular_values,
    gram_spectrum,
    is_in_memory,
    singular_values,
)

__all__ = [
    "rankme",
    "rankme_normalized",
    "rankme_squared_shares",
    "alpha_req",
    "alpha_req_weighted",
    "ne_sum",
    "stable_rank",
    "condition_number",
    "participation_ratio",
    "explained_variance_dimension",
    "isotropy_ratio",
]


def _subject(center):
    """How the messages of a spectrum that is zero name the features."""
    return "the centred X" if center else "X"


# ----------------------------------------------------------------------------- RankMe


def _rankme_of_features(sigma, center, eps):
    """RankMe of the singular values of the features ``Z`` (the message names ``Z``)."""
    if not float(sigma.sum()) > 0:
        raise ValueError(
            "Z has all singular values zero"
            + (" after centring (every column is constant)" if center else " (Z is all zeros)")
            + "; the effective rank is undefined"
        )
    return rankme_of_spectrum(sigma, eps)


def rankme(Z, center=False, eps=1e-7):
    """Effective rank of a feature matrix (RankMe, Garrido et al. 2023).

    With singular values :math:`\\sigma_1 \\ge \\dots \\ge \\sigma_m` of ``Z``,
    :math:`m = \\min(n, d)`, the normalised shares are

    .. math:: p_i = \\frac{\\sigma_i}{\\sum_j \\sigma_j} + \\epsilon,

    and the effective rank is :math:`\\exp\\bigl(-\\sum_i p_i \\log p_i\\bigr)`
    (:func:`~repeval_ref.labelfree.eigenvalue_metrics.rankme_of_spectrum`).
    Equal non-zero singular values in ``r`` directions give ``r`` (up to the tiny
    :math:`\\epsilon`); one dominant direction gives a value near 1.

    Book ``book/rankme.md`` (seed 000, "Measuring a representation without
    labels"; seed 002, section 3.1). Garrido et al. take the embeddings as
    they are (``center=False``, the default); the course's simulation centres them
    first (``center=True``). State the convention when you compare numbers.

    Parameters
    ----------
    Z : array_like of shape (n, d), numpy.memmap, or iterator of (n_b, d) arrays
        Features, one row per sample. A memory map or an iterator of row batches is
        streamed through the d x d Gram matrix (memory independent of ``n``): its
        first ``min(n, d)`` eigenvalues are kept and those below
        ``d * eps_machine * lambda_1`` (the Gram matrix's rounding level) are taken as
        zero, so the value matches the SVD of the array to about 1e-10 relative.
    center : bool, default False
        Subtract the column means before the SVD. Makes the value invariant to a
        translation of all features.
    eps : float, default 1e-7
        Small non-negative constant added to every share to keep the logarithm
        finite; ``eps=0`` gives the exact spectral entropy (``0 log 0 = 0``).

    Returns
    -------
    float
        The effective rank, between about 1 and ``min(n, d)``.

    Raises
    ------
    ValueError
        If ``Z`` is not a finite 2-D array, if ``eps < 0``, or if all singular
        values are zero (an all-zero matrix, or constant columns with
        ``center=True``).
    """
    center = check_center(center)
    eps = check_positive(eps, "eps", allow_zero=True)
    sigma = feature_singular_values(Z, center).values
    return _rankme_of_features(sigma, center, eps)


def rankme_normalized(Z, center=False, eps=1e-7):
    """RankMe divided by the feature dimension, :math:`\\text{RankMe}^\\star = \\text{RankMe}/d`.

    Seed 002, section 4.1 divides RankMe (and NE-sum, kappa) by the representation
    dimension ``d`` (the number of columns, not ``min(N, d)``) to compare encoders of
    different widths. See :func:`rankme` for the parameters, the centring convention
    and the streamed inputs (``numpy.memmap`` or an iterator of batches). Book
    ``book/rankme.md``.

    With ``eps=0`` the value lies in (0, 1]. With ``eps > 0`` it can exceed 1
    slightly, because every share is raised by ``eps``: its largest value, reached
    by ``d`` equal non-zero singular values (``n >= d``), is
    :math:`(1/d + \\epsilon)^{-(1 + d\\epsilon)} / d \\approx 1 + d\\epsilon(\\ln d - 1)`,
    for example 1.00014 for ``d = 300`` and the default ``eps = 1e-7``.

    Parameters
    ----------
    Z : array_like of shape (n, d), numpy.memmap, or iterator of (n_b, d) arrays
        Features, one row per sample.
    center : bool, default False
        Subtract the column means first.
    eps : float, default 1e-7
        Added to every share, ``>= 0``.

    Returns
    -------
    float
        ``rankme(Z, center, eps) / d``; in (0, 1] for ``eps=0``, at most
        :math:`(1/d + \\epsilon)^{-(1 + d\\epsilon)} / d` otherwise.
    """
    center = check_center(center)
    eps = check_positive(eps, "eps", allow_zero=True)
    sv = feature_singular_values(Z, center)
    return _rankme_of_features(sv.values, center, eps) / sv.d


def _squared_singular_values(X, center):
    """Eigenvalues :math:`\\sigma_i^2` of the SVD of the in-memory ``X`` (``n >= 2``)."""
    Z = as_float_array(X, "X", ndim=2, min_rows=2)
    return singular_values(Z, center=center) ** 2


def rankme_squared_shares(X, center=True, eps=1e-7):
    """Effective rank from the shares of the eigenvalues :math:`\\sigma_i^2` (reptrix's convention).

    .. math:: q_i = \\frac{\\sigma_i^2}{\\sum_j \\sigma_j^2} + \\epsilon, \\qquad
       \\exp\\Bigl(-\\sum_i q_i \\log q_i\\Bigr),

    with :math:`\\sigma_i` the singular values of the column-centred ``X``
    (``center=True``, as reptrix's PCA does) or of ``X``: RankMe of the spectrum
    taken on the eigenvalues instead of the singular values
    (:func:`~repeval_ref.labelfree.eigenvalue_metrics.rankme_of_spectrum` of
    :math:`\\sigma_i^2`). The shares :math:`q_i` are the explained-variance ratios of
    a PCA. Garrido et al. (2023) define RankMe with :math:`\\sigma_i` itself
    (:func:`rankme`); the squares concentrate the distribution, so this value is never
    larger than RankMe of the same spectrum for ``eps = 0`` (equal for a flat
    spectrum). Book ``book/rankme.md``.

    Parameters
    ----------
    X : array_like of shape (n, d)
        Features, ``n >= 2``.
    center : bool, default True
        Subtract the column means first (reptrix's PCA does).
    eps : float, default 1e-7
        Added to every share, ``>= 0`` (reptrix uses ``1e-7``).

    Returns
    -------
    float
        The effective rank of the explained-variance ratios, in about [1, min(n, d)].

    Raises
    ------
    ValueError
        Non-finite or too small ``X``, negative ``eps``, or all singular values zero.
    """
    center = check_center(center)
    eps = check_positive(eps, "eps", allow_zero=True)
    lam = _squared_singular_values(X, center)
    if not lam.sum() > 0:
        raise ValueError(
            "X has all singular values zero"
            + (" after centring" if center else "")
            + "; the effective rank is undefined"
        )
    return rankme_of_spectrum(lam, eps)


# ------------------------------------------------------------------------ alpha-ReQ


def alpha_req(X, fit_range=(10, 0.9), center=True):
    """Power-law exponent alpha of the covariance spectrum (alpha-ReQ, Agrawal et al. 2022).

    With the eigenvalues :math:`\\lambda_1 \\ge \\dots \\ge \\lambda_d` of the
    covariance of ``X`` indexed from 1, fits :math:`\\lambda_i \\propto i^{-\\alpha}` by
    ordinary least squares of :math:`\\log \\lambda_i` on :math:`\\log i` over
    :math:`i \\in [i_{lo}, i_{hi}]` (both ends included) and returns minus the slope
    (:func:`~repeval_ref.labelfree.eigenvalue_metrics.alpha_req_of_spectrum`).

    ``fit_range=(lo, hi)`` selects 1-based, inclusive indices
    :math:`i \\in [i_{lo}, i_{hi}]` (eigenvalue ``i`` is ``lam[i - 1]``): an ``int`` is
    a 1-based index, a ``float`` in (0, 1] a fraction ``f`` of ``d`` meaning index
    :math:`\\lfloor f d \\rfloor` (floored). A lower bound of ``0`` (or ``0.0``)
    means "from the first eigenvalue" and is the same as ``1``, so 002's ranges
    ``(0, d/2)``, ``(0, 0.8 d)``, ``(0, d)`` are written ``(0, 0.5)``, ``(0, 0.8)``,
    ``(0, 1.0)``; a lower fraction whose floor is 0 also starts at index 1. The
    default ``(10, 0.9)`` is 002's heuristic range :math:`[10, \\lfloor 0.9 d \\rfloor]`
    (002, section 3.1 and appendix B.1, which shows that including the head
    eigenvalues can flip the sign of the correlation with accuracy).

    Book ``book/rankme.md``; seed 002, section 3.1. Centres by default (the
    spectrum of the covariance matrix).

    Parameters
    ----------
    X : array_like of shape (n, d), numpy.memmap, or iterator of (n_b, d) arrays
        Features, one row per sample.
    fit_range : (int or float, int or float), default (10, 0.9)
        ``(lo, hi)``: 1-based inclusive indices, or fractions of ``d`` (floored); a
        lower bound of 0 means the first eigenvalue (see above).
    center : bool, default True
        Subtract the column means (the covariance spectrum, as in 002).

    Returns
    -------
    float
        Minus the fitted slope: positive when the covariance spectrum decays.

    Raises
    ------
    ValueError
        If the range holds fewer than 2 indices or exceeds ``d``, or if an eigenvalue
        in the range is zero (up to ``d * eps`` relative to the largest): for example
        when ``N <= d`` the covariance is rank deficient; narrow the range.
    """
    center = check_center(center)
    check_fit_range(fit_range)
    lam = gram_spectrum(X, center)
    return alpha_req_of_spectrum(lam, fit_range, name="the covariance of X" if center else "X")


def alpha_req_weighted(X, fit_range=(6, 100), center=True):
    """Power-law exponent fitted with weights ``1/i`` on the log-log spectrum (reptrix's alpha).

    Minimises :math:`\\sum_{i = i_{lo}}^{i_{hi}} \\frac{1}{i}\\,(\\log \\lambda_i - c +
    \\alpha \\log i)^2` over :math:`(\\alpha, c)` and returns :math:`\\alpha`, with
    :math:`\\lambda_i` the eigenvalues (1-based, decreasing) of the covariance of
    ``X``, from an SVD of the in-memory ``X``
    (:func:`~repeval_ref.labelfree.eigenvalue_metrics.alpha_req_weighted_of_spectrum`).
    The weights favour the head of the range, where the points lie sparsely on a
    logarithmic axis. The default range, indices 6 to 100 (1-based, inclusive), is
    reptrix's ``np.arange(5, 100)`` in 0-based indices. Compare :func:`alpha_req`
    (unweighted, 002's range :math:`[10, 0.9 d]`). Book ``book/rankme.md``.

    Parameters
    ----------
    X : array_like of shape (n, d)
        Features, ``n >= 2``.
    fit_range : (int, int), default (6, 100)
        1-based inclusive indices ``lo < hi <= min(n, d)``.
    center : bool, default True
        Subtract the column means first.

    Returns
    -------
    float
        The weighted exponent (positive for a decaying spectrum).

    Raises
    ------
    ValueError
        A range outside the spectrum, with fewer than 2 points, or holding a zero
        eigenvalue.
    """
    center = check_center(center)
    _check_int_pair(fit_range)
    return alpha_req_weighted_of_spectrum(_squared_singular_values(X, center), fit_range)


# --------------------------------------------------------- NE-sum, stable rank, kappa


def ne_sum(X, center=True):
    """NE-sum: trace of the covariance over its largest eigenvalue (He and Ozay 2022).

    .. math:: \\text{NE-sum} = \\operatorname{tr}(C) / \\lambda_{\\max}(C)
       = \\frac{\\lVert \\tilde X \\rVert_F^2}{\\lVert \\tilde X \\rVert_2^2},

    with :math:`C` the covariance (or the scatter; the ratio is the same), lying
    between 1 (one direction) and ``d`` (whitened features). With ``center=True``
    (default, the covariance as in 002) it equals :func:`stable_rank` of the centred
    matrix (002, section 3.1). Book ``book/rankme.md``; seed 002, section 3.1.

    Parameters
    ----------
    X : array_like of shape (n, d), numpy.memmap, or iterator of (n_b, d) arrays
        Features, one row per sample.
    center : bool, default True
        Subtract the column means (the covariance, as in 002).

    Returns
    -------
    float
        NE-sum, in [1, d].

    Raises
    ------
    ValueError
        If every eigenvalue is zero (constant features when centred).
    """
    center = check_center(center)
    lam = gram_spectrum(X, center)
    return ne_sum_of_spectrum(lam, name="the covariance of X" if center else "X")


def stable_rank(X, center=False):
    """Stable rank :math:`\\lVert X \\rVert_F^2 / \\lVert X \\rVert_2^2` (Rudelson and Vershynin).

    .. math:: \\operatorname{sr}(X) = \\frac{\\sum_i \\sigma_i^2}{\\sigma_1^2}.

    Computed on ``X`` as given (``center=False``, default); with ``center=True`` it is
    :func:`ne_sum`. Book ``book/rankme.md``; seed 002, section 3.1.

    Parameters
    ----------
    X : array_like of shape (n, d), numpy.memmap, or iterator of (n_b, d) arrays
        Features, one row per sample.
    center : bool, default False
        Subtract the column means first (002 takes ``X`` itself).

    Returns
    -------
    float
        The stable rank, in [1, min(n, d)].
    """
    center = check_center(center)
    lam = gram_spectrum(X, center)
    return stable_rank_of_spectrum(lam, name=_subject(center))


def condition_number(X, center=False, rtol=None):
    """Largest over smallest non-zero singular value, :math:`\\kappa = \\sigma_1 / \\sigma_r`.

    A singular value counts as non-zero when :math:`\\sigma_i > \\text{rtol}\\,\\sigma_1`
    (:func:`~repeval_ref.labelfree.eigenvalue_metrics.condition_number_of_spectrum`).
    Two routes, chosen by the type of ``X``:

    * an in-memory array (``numpy.ndarray`` that is not a memory map, or array_like):
      the singular values come from an SVD of ``X`` (of the centred ``X`` when
      ``center=True``), with the rank tolerance of ``numpy.linalg.matrix_rank`` by
      default, ``rtol = max(N, d) * eps``. A full-rank ``X`` gives
      ``numpy.linalg.cond(X)`` (relative agreement about ``kappa * eps``), up to
      :math:`\\kappa \\approx 1 / (\\max(N, d)\\,\\epsilon)`.
    * a ``numpy.memmap`` or an iterator of row batches (features too big for memory):
      the eigenvalues of the streamed float64 d x d Gram matrix
      (:func:`~repeval_ref.labelfree.eigenvalue_metrics.condition_number_of_gram_spectrum`).
      Their rounding error is about :math:`d\\,\\epsilon\\,\\sigma_1^2`, so singular
      values are resolved only down to about ``sqrt(d * eps) * sigma_1`` (a relative
      resolution of order :math:`\\sqrt{\\epsilon}`, about 4e-7 for d = 768), which is
      the default ``rtol``. Values of kappa near or above ``1 / sqrt(d * eps)`` (about
      2.4e6 for d = 768) cannot be resolved: they come out too small, and a
      ``RuntimeWarning`` is issued when the returned value is within a factor 10 of
      that limit (:math:`\\sigma_r < 10 \\sqrt{d \\epsilon}\\, \\sigma_1`). Load the
      array into memory for an exact value.

    The two default tolerances differ on purpose: each is the relative accuracy of the
    singular values on its route. A rank-deficient ``X`` reports the condition number
    of its non-zero part (where ``numpy.linalg.cond`` returns a huge value or inf).
    Book ``book/rankme.md``; seed 002, section 3.1 (002 notes that kappa mainly tracks
    the conditioning of closed-form OLS probes rather than representation quality).
    Not centred by default (kappa of the matrix ``X``, as in 002).

    Parameters
    ----------
    X : array_like of shape (n, d), numpy.memmap, or iterator of (n_b, d) arrays
        Features; a memory map or an iterator takes the Gram route.
    center : bool, default False
        Subtract the column means first (002 takes ``X`` itself).
    rtol : float, optional
        Relative tolerance in (0, 1) on singular values; default ``max(n, d) * eps``
        (SVD route) or ``sqrt(d * eps)`` (Gram route).

    Returns
    -------
    float
        ``>= 1``.

    Warns
    -----
    RuntimeWarning
        Gram route only, when the value is at the resolution limit described above.
    """
    center = check_center(center)
    rtol = _check_rtol(rtol)
    what = _subject(center)
    if is_in_memory(X):
        sv = feature_singular_values(X, center, name="X")
        if rtol is None:
            rtol = max(sv.n, sv.d) * np.finfo(float).eps
        return condition_number_of_spectrum(sv.values, rtol, name=what)
    mom = accumulate_moments(X, "X")
    return condition_number_of_gram_spectrum(mom.eigenvalues(center), mom.n, rtol, name=what)


# ------------------------------------------------------- covariance geometry (003, 5)


def participation_ratio(X):
    """Participation ratio of the covariance spectrum, an effective dimension.

    .. math:: d_{\\text{eff}} = \\frac{\\bigl(\\sum_i \\lambda_i\\bigr)^2}{\\sum_i \\lambda_i^2}
       = \\frac{(\\sum_i \\sigma_i^2)^2}{\\sum_i \\sigma_i^4},

    ``d`` when all eigenvalues are equal, 1 when one direction carries all the
    variance. Centred. Book ``book/rankme.md``; seed 003, section 5 ("Effective
    dimension").

    Parameters
    ----------
    X : array_like of shape (n, d), numpy.memmap, or iterator of (n_b, d) arrays
        Features, one row per sample; not constant (the covariance must not be zero).

    Returns
    -------
    float
        The participation ratio, in [1, d] (``d`` for isotropic features).
    """
    return participation_ratio_of_spectrum(covariance_spectrum(X))


def explained_variance_dimension(X, threshold=0.9):
    """Number of principal components needed to explain a share ``threshold`` of the variance.

    The smallest ``k`` with :math:`\\sum_{i \\le k} \\lambda_i \\ge \\text{threshold}
    \\sum_i \\lambda_i`; the comparison allows a relative rounding slack of 1e-12 (ten
    equal eigenvalues need exactly 9 components for 90 %). Centred. Book
    ``book/rankme.md``; seed 003, section 5 (``dims_for_90pct_var``).

    Parameters
    ----------
    X : array_like of shape (n, d), numpy.memmap, or iterator of (n_b, d) arrays
        Features, one row per sample; not constant.
    threshold : float, default 0.9
        In (0, 1].

    Returns
    -------
    int
        The number of principal components ``k``, in [1, d].
    """
    threshold = check_positive(threshold, "threshold")
    if threshold > 1:
        raise ValueError(f"threshold must be <= 1, got {threshold}")
    return explained_variance_dimension_of_spectrum(covariance_spectrum(X), threshold)


def isotropy_ratio(X):
    """Smallest over largest eigenvalue of the covariance, :math:`\\lambda_d / \\lambda_1`.

    1 for perfectly isotropic features, 0 when some direction has no variance.
    Eigenvalues below :math:`d\\,\\epsilon\\,\\lambda_1` (the rounding level of the
    streamed d x d matrix) count as 0. The smallest of all ``d`` covariance eigenvalues
    is taken (zero when the covariance is rank deficient, e.g. ``N <= d``), not the
    smallest of the ``min(N, d)`` singular values as in 003's dashboard code. Centred.
    Book ``book/rankme.md``; seed 003, section 5 ("Isotropy").

    Parameters
    ----------
    X : array_like of shape (n, d), numpy.memmap, or iterator of (n_b, d) arrays
        Features; not all rows equal.

    Returns
    -------
    float
        In [0, 1].
    """
    return isotropy_ratio_of_spectrum(covariance_spectrum(X))
