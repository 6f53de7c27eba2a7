"""From features to their spectrum: singular values, Gram and covariance eigenvalues.

Book: ``book/rankme.md`` (label-free checks); seed 002, section 3.1. Every spectral
metric (:mod:`repeval_ref.labelfree.spectral`) is a function
(:mod:`repeval_ref.labelfree.eigenvalue_metrics`) of the eigenvalues of one d x d
matrix,

* ``center=True``: the centred scatter :math:`\\tilde X^\\top \\tilde X`, with
  :math:`\\tilde X = X - \\mathbf 1 \\bar x^\\top`, proportional to the covariance;
* ``center=False``: the raw second-moment matrix :math:`X^\\top X`,

or of their square roots, the singular values :math:`\\sigma_i` of :math:`\\tilde X`
(or :math:`X`). Two routes lead there:

* an in-memory array: an SVD of the matrix (:func:`singular_values`), exact to
  rounding for every singular value;
* any input, in particular a ``numpy.memmap`` (for example ``np.load(path,
  mmap_mode="r")``) or an iterator of ``(n_b, d)`` row batches: the d x d matrix is
  accumulated in float64 from row batches (:mod:`repeval_ref.labelfree._streaming`),
  so ``N`` may exceed the memory (memory :math:`O(d^2)` plus one batch, time
  :math:`O(N d^2)`), and its eigenvalues are taken (:func:`gram_spectrum`).
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from .._validation import as_float_array, check_center, check_int
from ._streaming import accumulate_moments, is_batch_iterator
from .eigenvalue_metrics import gram_rounding_level

__all__ = [
    "is_in_memory",
    "singular_values",
    "singular_values_from_gram",
    "feature_singular_values",
    "FeatureSingularValues",
    "gram_spectrum",
    "covariance_spectrum",
]

FeatureSingularValues = namedtuple("FeatureSingularValues", ["values", "n", "d"])
FeatureSingularValues.__doc__ = """Result of :func:`feature_singular_values`.

values : numpy.ndarray of shape (min(n, d),)
    Singular values, largest first.
n, d : int
    Rows and columns of the features.
"""


def is_in_memory(X):
    """True for an array held in memory (the SVD route), False for a memmap or an iterator.

    Parameters
    ----------
    X : array_like, numpy.memmap or iterator of arrays

    Returns
    -------
    bool
    """
    return not (is_batch_iterator(X) or isinstance(X, np.memmap))


def singular_values(Z, *, center=False):
    """Singular values of an in-memory matrix ``Z`` (optionally column-centred), largest first.

    Parameters
    ----------
    Z : array_like of shape (n, d)
        Finite features (not modified).
    center : bool, default False
        If True, subtract the column means before the decomposition, so that the
        spectrum describes the covariance of the features rather than their second
        moment about the origin. A column that is exactly constant becomes exactly
        zero (rounding in its mean would otherwise leave residues of order 1e-17).

    Returns
    -------
    numpy.ndarray of shape (min(n, d),)
        Non-negative singular values in decreasing order; all zero for a zero matrix.

    Notes
    -----
    The matrix is divided by its largest absolute entry before the SVD and the
    singular values are multiplied back, which avoids overflow and underflow for
    features of extreme magnitude.
    """
    Z = as_float_array(Z, "Z", ndim=2)
    if check_center(center):
        constant = np.ptp(Z, axis=0) == 0
        Z = Z - Z.mean(axis=0, keepdims=True)
        Z[:, constant] = 0.0
    scale = float(np.max(np.abs(Z))) if Z.size else 0.0
    if scale == 0.0:
        return np.zeros(min(Z.shape))
    return scale * np.linalg.svd(Z / scale, compute_uv=False)


def singular_values_from_gram(eigenvalues, n):
    """Singular values of ``Z`` from the eigenvalues of its d x d Gram matrix.

    Parameters
    ----------
    eigenvalues : array_like of shape (d,)
        Eigenvalues of :math:`Z^\\top Z` (or of the centred scatter), largest first,
        non-negative (as :func:`gram_spectrum` returns them).
    n : int
        Number of rows of ``Z``, ``>= 1``.

    Returns
    -------
    numpy.ndarray of shape (min(n, d),)
        :math:`\\sqrt{\\lambda_i}` for the first ``min(n, d)`` eigenvalues (an SVD of
        ``Z`` has only that many), with eigenvalues below :math:`d\\,\\epsilon\\,
        \\lambda_1` (:func:`~repeval_ref.labelfree.eigenvalue_metrics.gram_rounding_level`)
        set to zero: that is the rounding level of the Gram matrix, and a zero singular
        value of ``Z`` would otherwise come out near :math:`\\sqrt{d\\,\\epsilon}\\,
        \\sigma_1` (about 1e-7 relative), which is the size of RankMe's ``eps`` and
        would shift the value in the 7th digit.
    """
    lam = as_float_array(eigenvalues, "eigenvalues", ndim=1)
    n = check_int(n, "n", minimum=1)
    floor = gram_rounding_level(lam) if lam.size else 0.0
    lam = np.array(lam[: min(n, lam.shape[0])], dtype=float)
    if lam.size and lam[0] > 0:
        lam[lam < floor] = 0.0
    return np.sqrt(lam)


def feature_singular_values(Z, center=False, *, name="Z"):
    """Singular values of the features ``Z`` by the route its type calls for.

    An in-memory array goes through an SVD of the matrix (:func:`singular_values`); a
    ``numpy.memmap`` or an iterator of row batches through the eigenvalues of the
    streamed float64 d x d Gram matrix (:func:`singular_values_from_gram`), so ``N``
    may exceed the memory; the two agree to about 1e-10 relative.

    Parameters
    ----------
    Z : array_like of shape (n, d), numpy.memmap, or iterator of (n_b, d) arrays
        Features, one row per sample; the type chooses the route.
    center : bool, default False
        Subtract the column means before the decomposition.
    name : str, default "Z"
        Argument name used in error messages.

    Returns
    -------
    FeatureSingularValues
        ``(values, n, d)``: the ``min(n, d)`` singular values, largest first, and the
        shape of ``Z``.
    """
    center = check_center(center)
    if is_in_memory(Z):
        Z = as_float_array(Z, name, ndim=2)
        return FeatureSingularValues(singular_values(Z, center=center), *Z.shape)
    mom = accumulate_moments(Z, name)
    sigma = singular_values_from_gram(mom.eigenvalues(center), mom.n)
    return FeatureSingularValues(sigma, mom.n, mom.d)


def gram_spectrum(X, center=True):
    """Squared singular values of ``X`` (centred or not), largest first, streamed.

    .. math:: \\lambda_1 \\ge \\dots \\ge \\lambda_d \\ge 0, \\qquad
       \\lambda_i = \\sigma_i^2(\\tilde X) \\;\\text{(or } \\sigma_i^2(X)\\text{)},

    the eigenvalues of the d x d matrix :math:`\\tilde X^\\top \\tilde X` (``center=True``)
    or :math:`X^\\top X`. Divide by ``N - 1`` for the covariance eigenvalues. When
    ``N < d`` the trailing ``d - N`` (or ``d - N + 1`` centred) values are zero up to
    rounding. Seed 002, section 3.1.

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
    center = check_center(center)
    return accumulate_moments(X, "X").eigenvalues(center)


def covariance_spectrum(X):
    """Eigenvalues of the centred scatter of ``X``, largest first; a constant ``X`` raises.

    The scatter :math:`\\tilde X^\\top \\tilde X` is ``N - 1`` times the covariance; the
    metrics of seed 003, section 5 that take this spectrum are scale-free. Streamed
    like :func:`gram_spectrum` with ``center=True``.

    Parameters
    ----------
    X : array_like of shape (n, d), numpy.memmap, or iterator of (n_b, d) arrays

    Returns
    -------
    numpy.ndarray of float64, shape (d,)

    Raises
    ------
    ValueError
        If ``X`` is not finite and 2-D, or is constant (its covariance is zero).
    """
    lam = gram_spectrum(X, center=True)
    if not lam[0] > 0:
        raise ValueError("X is constant (its covariance is zero); the metric is undefined")
    return lam
