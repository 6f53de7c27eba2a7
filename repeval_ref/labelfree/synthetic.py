"""Synthetic spectra and features with a given covariance spectrum (002's sensitivity study).

Book: ``book/rankme.md`` (label-free checks); seed 002, section 4.1 ("Sensitivity of
spectral metrics"): :func:`power_law_spectrum` gives the eigenvalues
:math:`\\lambda_i \\propto i^{-\\alpha}` of the simulated eigenspectra, and
:func:`sample_features_with_spectrum` draws feature matrices whose covariance has a
given spectrum, so that every spectral metric of the features
(:mod:`repeval_ref.labelfree.spectral`) can be compared with the same metric of the
spectrum (:mod:`repeval_ref.labelfree.eigenvalue_metrics`).
"""

from __future__ import annotations

import numbers

import numpy as np

from .._validation import as_float_array, check_bool, check_int, check_rng

__all__ = ["power_law_spectrum", "sample_features_with_spectrum"]


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
    exact = check_bool(exact, "exact")
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
