"""Spectral metrics of a given eigenvalue list, other libraries' conventions, a collapse check.

Book: ``book/rankme.md`` (label-free checks); seeds 000 ("Measuring a representation
without labels") and 002 (sections 3.1 and 4.1).

* :func:`spectrum_metrics` evaluates RankMe, NE-sum, the condition number and
  alpha-ReQ, and their versions divided by ``d``, directly on a list of covariance
  eigenvalues. That is what the synthetic sensitivity study of 002 (section 4.1) needs:
  for ``d = 5000`` no feature matrix has to be built or decomposed.
* :func:`rankme_squared_shares` and :func:`alpha_req_weighted` are the two conventions
  of the ``reptrix`` library that differ from the papers under the same names: its
  ``get_rankme`` takes the entropy of the shares of the eigenvalues
  :math:`\\sigma_i^2` of the centred covariance (Garrido et al. 2023 use the singular
  values :math:`\\sigma_i`), and its alpha fit weights the point of index ``i`` by
  ``1/i``. Written here from those definitions so that the book can show, computed,
  how far the numbers part.
* :func:`unit_coordinate_std` is the per-coordinate standard deviation of
  unit-normalised embeddings, which falls to zero when every input is mapped to the
  same direction (complete collapse).
"""
from __future__ import annotations

import numpy as np

from ._validation import as_float_array, check_positive

__all__ = ["spectrum_metrics", "rankme_squared_shares", "alpha_req_weighted", "unit_coordinate_std"]


def _check_center(center):
    if not isinstance(center, (bool, np.bool_)):
        raise TypeError(f"center must be True or False, got {center!r}")
    return bool(center)


def spectrum_metrics(eigenvalues, fit_range=(10, 0.9), eps=1e-7):
    """RankMe, NE-sum, condition number and alpha-ReQ of a covariance spectrum.

    With the eigenvalues :math:`\\lambda_1 \\ge \\dots \\ge \\lambda_d \\ge 0` (sorted
    here) and the singular values :math:`\\sigma_i = \\sqrt{\\lambda_i}` of a matrix
    whose Gram matrix has them:

    * ``rankme``: :math:`\\exp(-\\sum_i p_i \\log p_i)` with
      :math:`p_i = \\sigma_i / \\sum_j \\sigma_j + \\epsilon`, as
      :func:`repeval_ref.rankme`;
    * ``ne_sum``: :math:`\\sum_i \\lambda_i / \\lambda_1`, as
      :func:`repeval_ref.ne_sum` (and :func:`repeval_ref.stable_rank`);
    * ``kappa``: :math:`\\sigma_1 / \\sigma_r` over the non-zero values
      (:math:`\\sigma_i > d\\,\\epsilon_{mach}\\,\\sigma_1`), as
      :func:`repeval_ref.condition_number`;
    * ``alpha``: minus the least-squares slope of :math:`\\log \\lambda_i` on
      :math:`\\log i` over ``fit_range``, as :func:`repeval_ref.alpha_req` (same
      conventions for ``fit_range``);
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
    from .labelfree.intrinsic_dimension import _rankme_from_sigma
    from .spectral import _alpha_from_spectrum, _check_fit_range

    lam = as_float_array(eigenvalues, "eigenvalues", ndim=1, min_rows=2)
    if np.any(lam < 0):
        raise ValueError(f"eigenvalues must be >= 0, got smallest {lam.min()}")
    lam = np.sort(lam)[::-1]
    if not lam[0] > 0:
        raise ValueError("eigenvalues are all zero; the metrics are undefined")
    eps = check_positive(eps, "eps", allow_zero=True)
    _check_fit_range(fit_range)
    d = lam.shape[0]
    sigma = np.sqrt(lam)
    kept = sigma[sigma > d * np.finfo(float).eps * sigma[0]]
    out = {
        "rankme": _rankme_from_sigma(sigma, False, eps),
        "ne_sum": float(lam.sum() / lam[0]),
        "kappa": float(sigma[0] / kept[-1]),
    }
    try:
        out["alpha"] = _alpha_from_spectrum(lam, fit_range, "eigenvalues")
    except ValueError:
        out["alpha"] = float("nan")
    for key in ("rankme", "ne_sum", "kappa"):
        out[key + "_star"] = out[key] / d
    return out


def _centred_eigenvalues(X, center):
    from .labelfree.intrinsic_dimension import _singular_values

    Z = as_float_array(X, "X", ndim=2, min_rows=2)
    return _singular_values(Z, center=center) ** 2


def rankme_squared_shares(X, center=True, eps=1e-7):
    """Effective rank from the shares of the eigenvalues :math:`\\sigma_i^2` (reptrix's convention).

    .. math:: q_i = \\frac{\\sigma_i^2}{\\sum_j \\sigma_j^2} + \\epsilon, \\qquad
       \\exp\\Bigl(-\\sum_i q_i \\log q_i\\Bigr),

    with :math:`\\sigma_i` the singular values of the column-centred ``X``
    (``center=True``, as reptrix's PCA does) or of ``X``. The shares
    :math:`q_i` are the explained-variance ratios of a PCA. Garrido et al. (2023)
    define RankMe with :math:`\\sigma_i` itself (:func:`repeval_ref.rankme`); the
    squares concentrate the distribution, so this value is never larger than RankMe
    of the same spectrum for ``eps = 0`` (equal for a flat spectrum). Book
    ``book/rankme.md``.

    Parameters
    ----------
    X : array_like of shape (n, d)
        Features, ``n >= 2``.
    center : bool, default True
    eps : float, default 1e-7
        Added to every share, ``>= 0`` (reptrix uses ``1e-7``).

    Returns
    -------
    float

    Raises
    ------
    ValueError
        Non-finite or too small ``X``, negative ``eps``, or all singular values zero.
    """
    from .labelfree.intrinsic_dimension import _rankme_from_sigma

    center = _check_center(center)
    eps = check_positive(eps, "eps", allow_zero=True)
    lam = _centred_eigenvalues(X, center)
    if not lam.sum() > 0:
        raise ValueError("X has all singular values zero" + (" after centring" if center else "")
                         + "; the effective rank is undefined")
    return _rankme_from_sigma(lam, center, eps)


def alpha_req_weighted(X, fit_range=(6, 100), center=True):
    """Power-law exponent fitted with weights ``1/i`` on the log-log spectrum (reptrix's alpha).

    Minimises :math:`\\sum_{i = i_{lo}}^{i_{hi}} \\frac{1}{i}\\,(\\log \\lambda_i - c +
    \\alpha \\log i)^2` over :math:`(\\alpha, c)` and returns :math:`\\alpha`, with
    :math:`\\lambda_i` the eigenvalues (1-based, decreasing) of the covariance of
    ``X``. The weights favour the head of the range, where the points lie sparsely
    on a logarithmic axis. The default range, indices 6 to 100 (1-based, inclusive),
    is reptrix's ``np.arange(5, 100)`` in 0-based indices. Compare
    :func:`repeval_ref.alpha_req` (unweighted, 002's range :math:`[10, 0.9 d]`). Book
    ``book/rankme.md``.

    Parameters
    ----------
    X : array_like of shape (n, d)
    fit_range : (int, int), default (6, 100)
        1-based inclusive indices ``lo < hi <= min(n, d)``.
    center : bool, default True

    Returns
    -------
    float

    Raises
    ------
    ValueError
        A range outside the spectrum, with fewer than 2 points, or holding a zero
        eigenvalue.
    """
    center = _check_center(center)
    if not isinstance(fit_range, (tuple, list)) or len(fit_range) != 2:
        raise TypeError(f"fit_range must be a pair (lo, hi) of ints, got {fit_range!r}")
    lo, hi = fit_range
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in (lo, hi)):
        raise TypeError(f"fit_range must hold two ints, got {fit_range!r}")
    lam = _centred_eigenvalues(X, center)
    if lo < 1 or hi <= lo or hi > lam.shape[0]:
        raise ValueError(f"fit_range must satisfy 1 <= lo < hi <= {lam.shape[0]} (the number of "
                         f"singular values), got {fit_range!r}")
    sel = lam[lo - 1:hi]
    if not np.all(sel > lam.shape[0] * np.finfo(float).eps * lam[0]):
        raise ValueError(f"fit_range {fit_range!r} holds a zero eigenvalue; narrow it")
    i = np.arange(lo, hi + 1, dtype=float)
    A = np.column_stack([-np.log(i), np.ones_like(i)])
    root_w = 1.0 / np.sqrt(i)
    coef, *_ = np.linalg.lstsq(A * root_w[:, None], np.log(sel) * root_w, rcond=None)
    return float(coef[0])


def unit_coordinate_std(Z):
    """Standard deviation of every coordinate of the unit-normalised embeddings.

    Each row is divided by its Euclidean norm, then the population standard deviation
    (``ddof=0``) of each column is taken. If all rows point the same way (complete
    collapse) every value is 0; for directions spread uniformly on the sphere each is
    close to :math:`1/\\sqrt{d}`. Seed 000, "Measuring a representation without
    labels" (the per-coordinate spread of unit embeddings as a collapse check). Book
    ``book/rankme.md``.

    Parameters
    ----------
    Z : array_like of shape (n, d)
        Embeddings, no zero row.

    Returns
    -------
    numpy.ndarray of float64, shape (d,)
    """
    Z = as_float_array(Z, "Z", ndim=2)
    norms = np.linalg.norm(Z, axis=1)
    if np.any(norms == 0):
        raise ValueError(f"Z has a zero row (row {int(np.flatnonzero(norms == 0)[0])}); it cannot be normalised")
    return np.std(Z / norms[:, None], axis=0)
