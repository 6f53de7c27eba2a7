"""Spectral label-free metrics: alpha-ReQ, NE-sum, stable rank, condition number.

Seed 002, section 3.1 ("Spectral metrics") and section 4.1 ("Sensitivity of spectral
metrics"); book chapter on label-free checks. Every metric here is a function of the
eigenvalues of one d x d matrix,

* ``center=True``: the centred scatter :math:`\\tilde X^\\top \\tilde X`, with
  :math:`\\tilde X = X - \\mathbf 1 \\bar x^\\top`, proportional to the covariance;
* ``center=False``: the raw second-moment matrix :math:`X^\\top X`.

Its eigenvalues are the squared singular values :math:`\\sigma_i^2` of
:math:`\\tilde X` (or :math:`X`). The d x d matrix is accumulated in float64 from row
batches (:mod:`repeval_ref._streaming`), so ``X`` may be an array, a ``numpy.memmap``
(for example ``np.load(path, mmap_mode="r")``) or an iterator of ``(n_b, d)`` batches,
and ``N`` may exceed the memory: memory is :math:`O(d^2)` plus one batch, time
:math:`O(N d^2)`.

The scale-free metrics (all but the raw spectrum) do not depend on whether one uses
the scatter or the covariance (scatter / (N - 1)).

Each function states its default centring; 002 computes the covariance spectrum
(centred) for alpha-ReQ and NE-sum, and :math:`\\kappa(X)` and the stable rank on the
matrix ``X`` itself (not centred). For centred ``X`` the stable rank and NE-sum coincide.

:func:`power_law_spectrum` and :func:`sample_features_with_spectrum` generate the
synthetic spectra of the sensitivity study (002, section 4.1).
"""
from __future__ import annotations

import numbers

import numpy as np

from ._streaming import accumulate_moments, gram_eigenvalues
from ._validation import as_float_array, check_int, check_positive, check_rng

__all__ = [
    "gram_spectrum",
    "alpha_req",
    "ne_sum",
    "stable_rank",
    "condition_number",
    "power_law_spectrum",
    "sample_features_with_spectrum",
]


def _check_center(center):
    if not isinstance(center, (bool, np.bool_)):
        raise TypeError(f"center must be True or False, got {center!r}")
    return bool(center)


def _spectrum(X, center, name="X"):
    """Eigenvalues (largest first) of the streamed d x d Gram matrix, and N."""
    mom = accumulate_moments(X, name)
    lam = gram_eigenvalues(mom.gram(center))
    return lam, mom.n


def _nonzero_spectrum(lam, what):
    if not lam[0] > 0:
        raise ValueError(f"{what} is zero (all singular values vanish); the metric is undefined")
    return lam


def gram_spectrum(X, center=True):
    """Squared singular values of ``X`` (centred or not), largest first, streamed.

    .. math:: \\lambda_1 \\ge \\dots \\ge \\lambda_d \\ge 0, \\qquad
       \\lambda_i = \\sigma_i^2(\\tilde X) \\;\\text{(or } \\sigma_i^2(X)\\text{)},

    the eigenvalues of the d x d matrix :math:`\\tilde X^\\top \\tilde X` (``center=True``)
    or :math:`X^\\top X`. Divide by ``N - 1`` for the covariance eigenvalues. When
    ``N < d`` the trailing ``d - N`` (or ``d - N + 1`` centred) values are zero up to
    rounding.

    Parameters
    ----------
    X : array_like of shape (n, d), numpy.memmap, or iterator of (n_b, d) arrays
        Features, one row per sample.
    center : bool, default True
        Subtract the column means (streamed, exact).

    Returns
    -------
    numpy.ndarray of float64, shape (d,)
    """
    center = _check_center(center)
    lam, _ = _spectrum(X, center)
    return lam


def _index_bound(value, d, which):
    """Turn one end of ``fit_range`` into a 1-based eigenvalue index."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"fit_range {which} must be an int index or a float fraction, got {value!r}")
    if isinstance(value, numbers.Integral):
        idx = int(value)
        if idx < 1:
            raise ValueError(f"fit_range {which} index must be >= 1 (1-based), got {idx}")
        return idx
    value = float(value)
    if not (0.0 < value <= 1.0):
        raise ValueError(f"fit_range {which} fraction must lie in (0, 1], got {value}")
    return int(np.floor(value * d))


def alpha_req(X, fit_range=(10, 0.9), center=True):
    """Power-law exponent alpha of the covariance spectrum (alpha-ReQ, Agrawal et al. 2022).

    With the eigenvalues :math:`\\lambda_1 \\ge \\dots \\ge \\lambda_d` of the
    covariance of ``X`` indexed from 1, fits :math:`\\lambda_i \\propto i^{-\\alpha}` by
    ordinary least squares of :math:`\\log \\lambda_i` on :math:`\\log i` over
    :math:`i \\in [i_{lo}, i_{hi}]` (both ends included) and returns minus the slope.

    ``fit_range=(lo, hi)``: an ``int`` is a 1-based index, a ``float`` in (0, 1] a
    fraction ``f`` of ``d`` meaning index :math:`\\lfloor f d \\rfloor`. The default
    ``(10, 0.9)`` is 002's heuristic range :math:`[10, \\lfloor 0.9 d \\rfloor]`
    (002, section 3.1 and appendix B.1, which shows that including the head
    eigenvalues can flip the sign of the correlation with accuracy). 002's ranges
    written ``(0, .)`` start at the first eigenvalue: pass ``lo=1``.

    Book: label-free checks chapter; seed 002, section 3.1. Centres by default (the
    spectrum of the covariance matrix).

    Parameters
    ----------
    X : array_like of shape (n, d), numpy.memmap, or iterator of (n_b, d) arrays
    fit_range : (int or float, int or float), default (10, 0.9)
    center : bool, default True

    Returns
    -------
    float
        The exponent alpha (positive for a decaying spectrum).

    Raises
    ------
    ValueError
        If the range holds fewer than 2 indices or exceeds ``d``, or if an eigenvalue
        in the range is zero (up to ``d * eps`` relative to the largest): for example
        when ``N <= d`` the covariance is rank deficient; narrow the range.
    """
    center = _check_center(center)
    _check_fit_range(fit_range)
    lam, _ = _spectrum(X, center)
    return _alpha_from_spectrum(lam, fit_range, "the covariance of X" if center else "X")


def _check_fit_range(fit_range):
    if not isinstance(fit_range, (tuple, list)) or len(fit_range) != 2:
        raise TypeError(f"fit_range must be a pair (lo, hi), got {fit_range!r}")


def _alpha_from_spectrum(lam, fit_range, what):
    """alpha-ReQ from eigenvalues sorted decreasingly (see :func:`alpha_req`)."""
    d = lam.shape[0]
    lo = _index_bound(fit_range[0], d, "lower")
    hi = _index_bound(fit_range[1], d, "upper")
    if hi > d:
        raise ValueError(f"fit_range upper index {hi} exceeds the dimension d={d}")
    if hi - lo + 1 < 2:
        raise ValueError(
            f"fit_range gives indices {lo}..{hi} for d={d}; at least 2 eigenvalues are "
            "needed to fit a line"
        )
    _nonzero_spectrum(lam, what)
    sel = lam[lo - 1:hi]
    tol = d * np.finfo(float).eps * lam[0]
    if np.any(sel <= tol):
        n_zero = int(np.count_nonzero(sel <= tol))
        raise ValueError(
            f"{n_zero} eigenvalue(s) in the fit range {lo}..{hi} are zero (the spectrum "
            f"has rank below {hi}); the log-log fit is undefined, narrow fit_range"
        )
    logi = np.log(np.arange(lo, hi + 1, dtype=float))
    slope = np.polyfit(logi, np.log(sel), 1)[0]
    return float(-slope)


def ne_sum(X, center=True):
    """NE-sum: trace of the covariance over its largest eigenvalue (He and Ozay 2022).

    .. math:: \\text{NE-sum} = \\operatorname{tr}(C) / \\lambda_{\\max}(C)
       = \\frac{\\lVert \\tilde X \\rVert_F^2}{\\lVert \\tilde X \\rVert_2^2},

    with :math:`C` the covariance (or the scatter; the ratio is the same), lying
    between 1 (one direction) and ``d`` (whitened features). With ``center=True``
    (default, the covariance as in 002) it equals :func:`stable_rank` of the centred
    matrix (002, section 3.1). Seed 002, section 3.1.

    Parameters
    ----------
    X : array_like of shape (n, d), numpy.memmap, or iterator of (n_b, d) arrays
    center : bool, default True

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If every eigenvalue is zero (constant features when centred).
    """
    center = _check_center(center)
    lam, _ = _spectrum(X, center)
    _nonzero_spectrum(lam, "the covariance of X" if center else "X")
    return float(lam.sum() / lam[0])


def stable_rank(X, center=False):
    """Stable rank :math:`\\lVert X \\rVert_F^2 / \\lVert X \\rVert_2^2` (Rudelson and Vershynin).

    .. math:: \\operatorname{sr}(X) = \\frac{\\sum_i \\sigma_i^2}{\\sigma_1^2}.

    Computed on ``X`` as given (``center=False``, default); with ``center=True`` it is
    :func:`ne_sum`. Seed 002, section 3.1.

    Parameters
    ----------
    X : array_like of shape (n, d), numpy.memmap, or iterator of (n_b, d) arrays
    center : bool, default False

    Returns
    -------
    float
    """
    center = _check_center(center)
    lam, _ = _spectrum(X, center)
    _nonzero_spectrum(lam, "the centred X" if center else "X")
    return float(lam.sum() / lam[0])


def condition_number(X, center=False, rtol=None):
    """Largest over smallest non-zero singular value, :math:`\\kappa = \\sigma_1 / \\sigma_r`.

    A singular value counts as non-zero when :math:`\\sigma_i > \\text{rtol}\\,\\sigma_1`.
    The singular values come from the eigenvalues of the streamed d x d Gram matrix,
    whose rounding error is about :math:`d\\,\\epsilon\\,\\sigma_1^2`; the default
    ``rtol = sqrt(d * eps)`` (``eps`` the float64 machine epsilon, about 4e-7 for
    d = 768) is that resolution. The consequence: values of kappa above ``1 / rtol``
    cannot be resolved and a rank-deficient ``X`` reports the condition number of its
    non-zero part. Seed 002, section 3.1 (002 notes that kappa mainly tracks the
    conditioning of closed-form OLS probes rather than representation quality).

    Not centred by default (kappa of the matrix ``X``, as in 002).

    Parameters
    ----------
    X : array_like of shape (n, d), numpy.memmap, or iterator of (n_b, d) arrays
    center : bool, default False
    rtol : float, optional
        Relative tolerance in (0, 1) on singular values.

    Returns
    -------
    float
        ``>= 1``.
    """
    center = _check_center(center)
    if rtol is not None:
        rtol = check_positive(rtol, "rtol")
        if rtol >= 1:
            raise ValueError(f"rtol must be < 1, got {rtol}")
    lam, _ = _spectrum(X, center)
    return _kappa_from_spectrum(lam, rtol, "the centred X" if center else "X")


def _kappa_from_spectrum(lam, rtol, what):
    if rtol is None:
        rtol = float(np.sqrt(lam.shape[0] * np.finfo(float).eps))
    _nonzero_spectrum(lam, what)
    sigma = np.sqrt(lam)
    kept = sigma[sigma > rtol * sigma[0]]
    return float(sigma[0] / kept[-1])


def power_law_spectrum(alpha, d):
    """Eigenvalues :math:`\\lambda_i \\propto i^{-\\alpha}`, sorted decreasing, summing to 1.

    For ``alpha > 0`` the spectrum decays; ``alpha = 0`` is flat (whitened); for
    ``alpha < 0`` the values :math:`i^{|\\alpha|}` are sorted in decreasing order, which
    gives a long flat head and a sharp drop at the tail (002, section 4.1, figure 2a).
    The values for ``alpha`` and ``-alpha`` have the same ratio of largest to smallest,
    :math:`d^{|\\alpha|}`.

    Parameters
    ----------
    alpha : float
        Exponent (any finite real).
    d : int
        Number of eigenvalues, ``>= 1``.

    Returns
    -------
    numpy.ndarray of float64, shape (d,)
    """
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real):
        raise TypeError(f"alpha must be a real number, got {alpha!r}")
    alpha = float(alpha)
    if not np.isfinite(alpha):
        raise ValueError(f"alpha must be finite, got {alpha}")
    d = check_int(d, "d", minimum=1)
    # log-space normalisation avoids overflow of i**|alpha| for large d and alpha
    logv = -alpha * np.log(np.arange(1, d + 1, dtype=float))
    logv -= logv.max()
    v = np.exp(logv)
    v /= v.sum()
    return np.sort(v)[::-1].copy()


def sample_features_with_spectrum(eigenvalues, n, rng=None, exact=False):
    """Draw ``n`` feature vectors whose covariance has the given eigenvalues.

    With a random orthogonal :math:`Q` (Haar: QR of a Gaussian matrix, column signs
    fixed by the diagonal of ``R``, Mezzadri 2007)
    and :math:`\\Lambda = \\operatorname{diag}(\\lambda)`:

    * ``exact=False``: rows :math:`x = Q \\Lambda^{1/2} z`, :math:`z \\sim N(0, I)`;
      the population covariance is :math:`Q \\Lambda Q^\\top`.
    * ``exact=True``: :math:`X = \\sqrt{n-1}\\, U \\Lambda^{1/2} Q^\\top` with ``U`` an
      (n, d) matrix of orthonormal, column-centred columns; then the column means are
      zero and the *sample* covariance is exactly :math:`Q \\Lambda Q^\\top`, so every
      spectral metric of ``X`` equals the metric of the spectrum. Needs ``n > d``.

    Seed 002, section 4.1 (simulated eigenspectra).

    Parameters
    ----------
    eigenvalues : array_like of shape (d,)
        Non-negative covariance eigenvalues.
    n : int
        Number of rows, ``>= 2``.
    rng : numpy.random.Generator or int, optional
    exact : bool, default False

    Returns
    -------
    numpy.ndarray of float64, shape (n, d)
    """
    lam = as_float_array(eigenvalues, "eigenvalues", ndim=1)
    if np.any(lam < 0):
        raise ValueError(f"eigenvalues must be >= 0, got smallest {lam.min()}")
    n = check_int(n, "n", minimum=2)
    rng = check_rng(rng)
    if not isinstance(exact, (bool, np.bool_)):
        raise TypeError(f"exact must be True or False, got {exact!r}")
    d = lam.shape[0]
    # Haar-distributed orthogonal matrix: QR of a Gaussian matrix, signs fixed by diag(R)
    Q, R = np.linalg.qr(rng.standard_normal((d, d)))
    Q = Q * np.where(np.diag(R) < 0, -1.0, 1.0)
    root = np.sqrt(lam)
    if not exact:
        Z = rng.standard_normal((n, d))
        return (Z * root) @ Q.T
    if n <= d:
        raise ValueError(f"exact=True needs n > d, got n={n}, d={d}")
    G = rng.standard_normal((n, d))
    G -= G.mean(axis=0)
    U, _ = np.linalg.qr(G)  # columns orthonormal and (being in the span of centred G) centred
    return np.sqrt(n - 1) * (U * root) @ Q.T
