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
from .._validation import as_float_array, check_int, check_positive, check_rng

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
    """Turn one end of ``fit_range`` into a 1-based inclusive eigenvalue index.

    An ``int`` is a 1-based index; a ``float`` in (0, 1] is the fraction ``f`` of ``d``
    meaning index ``floor(f * d)``. A lower bound of ``0`` (or ``0.0``, or a fraction
    whose floor is 0) means "from the first eigenvalue", index 1.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"fit_range {which} must be an int index or a float fraction, got {value!r}")
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


def alpha_req(X, fit_range=(10, 0.9), center=True):
    """Power-law exponent alpha of the covariance spectrum (alpha-ReQ, Agrawal et al. 2022).

    With the eigenvalues :math:`\\lambda_1 \\ge \\dots \\ge \\lambda_d` of the
    covariance of ``X`` indexed from 1, fits :math:`\\lambda_i \\propto i^{-\\alpha}` by
    ordinary least squares of :math:`\\log \\lambda_i` on :math:`\\log i` over
    :math:`i \\in [i_{lo}, i_{hi}]` (both ends included) and returns minus the slope.

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

    Book: label-free checks chapter; seed 002, section 3.1. Centres by default (the
    spectrum of the covariance matrix).

    Parameters
    ----------
    X : array_like of shape (n, d), numpy.memmap, or iterator of (n_b, d) arrays
    fit_range : (int or float, int or float), default (10, 0.9)
        ``(lo, hi)``: 1-based inclusive indices, or fractions of ``d`` (floored); a
        lower bound of 0 means the first eigenvalue (see above).
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
    Two routes, chosen by the type of ``X``:

    * an in-memory array (``numpy.ndarray`` that is not a memory map, or array_like):
      the singular values come from an SVD of ``X`` (of the centred ``X`` when
      ``center=True``), with the rank tolerance of ``numpy.linalg.matrix_rank`` by
      default, ``rtol = max(N, d) * eps``. A full-rank ``X`` gives
      ``numpy.linalg.cond(X)`` (relative agreement about ``kappa * eps``), up to
      :math:`\\kappa \\approx 1 / (\\max(N, d)\\,\\epsilon)`.
    * a ``numpy.memmap`` or an iterator of row batches (features too big for memory):
      the eigenvalues of the streamed float64 d x d Gram matrix. Their rounding error is
      about :math:`d\\,\\epsilon\\,\\sigma_1^2`, so singular values are resolved only
      down to about ``sqrt(d * eps) * sigma_1`` (a relative resolution of order
      :math:`\\sqrt{\\epsilon}`, about 4e-7 for d = 768), which is the default
      ``rtol``. Values of kappa near or above ``1 / sqrt(d * eps)`` (about 2.4e6 for
      d = 768) cannot be resolved: they come out too small, and a ``RuntimeWarning``
      is issued when the returned value is within a factor 10 of that limit
      (:math:`\\sigma_r < 10 \\sqrt{d \\epsilon}\\, \\sigma_1`). Load the array
      into memory for an exact value.

    A rank-deficient ``X`` reports the condition number of its non-zero part (where
    ``numpy.linalg.cond`` returns a huge value or inf). Seed 002, section 3.1 (002
    notes that kappa mainly tracks the conditioning of closed-form OLS probes rather
    than representation quality). Not centred by default (kappa of the matrix ``X``,
    as in 002).

    Parameters
    ----------
    X : array_like of shape (n, d), numpy.memmap, or iterator of (n_b, d) arrays
    center : bool, default False
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
    center = _check_center(center)
    if rtol is not None:
        rtol = check_positive(rtol, "rtol")
        if rtol >= 1:
            raise ValueError(f"rtol must be < 1, got {rtol}")
    what = "the centred X" if center else "X"
    if _in_memory(X):
        from .intrinsic_dimension import _singular_values

        Z = as_float_array(X, "X", ndim=2)
        sigma = _singular_values(Z, center=center)
        return _kappa_from_singular_values(sigma, Z.shape, rtol, what)
    lam, n = _spectrum(X, center)
    return _kappa_from_spectrum(lam, rtol, what, n=n)


def _in_memory(X):
    """True for an array held in memory (SVD route), False for a memmap or an iterator."""
    from ._streaming import is_batch_iterator

    return not (is_batch_iterator(X) or isinstance(X, np.memmap))


def _kappa_from_singular_values(sigma, shape, rtol, what):
    """kappa from the singular values of an SVD (largest first) of a matrix of ``shape``."""
    if rtol is None:
        rtol = max(shape) * np.finfo(float).eps
    if not (sigma.size and sigma[0] > 0):
        raise ValueError(f"{what} is zero (all singular values vanish); the metric is undefined")
    kept = sigma[sigma > rtol * sigma[0]]
    return float(sigma[0] / kept[-1])


def _kappa_from_spectrum(lam, rtol, what, n=None):
    """kappa from the eigenvalues of a streamed Gram matrix (see :func:`condition_number`).

    Only the first ``min(n, d)`` eigenvalues are used (``X`` has at most that many
    non-zero singular values; the rest are rounding noise).
    """
    limit = float(np.sqrt(lam.shape[0] * np.finfo(float).eps))
    if rtol is None:
        rtol = limit
    _nonzero_spectrum(lam, what)
    if n is not None:
        lam = lam[:min(int(n), lam.shape[0])]
    sigma = np.sqrt(lam)
    kept = sigma[sigma > rtol * sigma[0]]
    kappa = float(sigma[0] / kept[-1])
    if kappa * limit > 0.1:
        import warnings

        warnings.warn(
            f"condition number {kappa:.3g} from the streamed Gram matrix is at its "
            f"resolution limit (singular values below about {limit:.1e} x the largest "
            "are not resolved); the true value may be larger. Pass an in-memory array "
            "for an SVD-based value.",
            RuntimeWarning,
            stacklevel=3,
        )
    return kappa


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
