"""Canonical correlation analysis between two representations of the same samples.

Canonical correlation analysis (CCA) finds pairs of directions, one in the space of each
representation, whose projections are as correlated as possible, then the next pair
uncorrelated with the first, and so on. The correlations of the pairs are the *canonical
correlations*; their mean is the similarity index that SVCCA (Raghu et al. 2017) applies after
reducing each representation to its leading singular directions.

The canonical correlations are the singular values of ``Qx.T @ Qy``, where ``Qx`` and ``Qy``
are orthonormal bases of the column spaces of the centred matrices (Björck and Golub 1973).
Because they depend on the column spaces only, they do not change under any invertible linear
map of either representation's features, which is why CCA cannot tell two representations
apart once the number of samples is at most their width: the centred columns of each then
span the same space, that of all centred vectors.
"""

from __future__ import annotations

import numpy as np

__all__ = ["canonical_correlations", "mean_cca_similarity"]


def _features(X, name):
    """``X`` as a finite float64 matrix with at least two rows; ``ValueError`` naming ``name``."""
    try:
        A = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be a numeric array of shape (n, d)") from err
    if A.ndim != 2:
        raise ValueError(f"{name} must be 2-D of shape (n, d), got {A.ndim} dimension(s)")
    if A.shape[0] < 2 or A.shape[1] < 1:
        raise ValueError(f"{name} needs at least 2 rows and 1 column, got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return A


def _centred_basis(A, name):
    """Orthonormal basis (n x r) of the column space of the column-centred ``A``.

    The rank ``r`` counts the singular values above ``max(n, d) * eps`` times the largest, the
    tolerance of :func:`numpy.linalg.matrix_rank`. A matrix that is constant in every column
    (zero after centring) raises ``ValueError``.
    """
    centred = A - A.mean(axis=0, keepdims=True)
    U, s, _ = np.linalg.svd(centred, full_matrices=False)
    if s.size == 0 or s[0] == 0.0:
        raise ValueError(f"{name} is constant in every column; after centring it is zero")
    rank = int(np.sum(s > s[0] * max(centred.shape) * np.finfo(np.float64).eps))
    return U[:, :rank]


def canonical_correlations(X, Y):
    """Canonical correlations between two representations of the same samples.

    Parameters
    ----------
    X : array_like of shape (n, p)
        First representation, one row per sample.
    Y : array_like of shape (n, q)
        Second representation of the same samples, rows aligned with ``X``.

    Returns
    -------
    ndarray of shape (m,)
        The canonical correlations in decreasing order, each in ``[0, 1]``, with ``m`` the
        smaller of the ranks of the centred ``X`` and ``Y`` (at most ``min(n - 1, p, q)``).

    Raises
    ------
    ValueError
        If ``X`` or ``Y`` is not a finite 2-D array with at least two rows, if their row
        counts differ, or if either is constant in every column.
    """
    X = _features(X, "X")
    Y = _features(Y, "Y")
    if X.shape[0] != Y.shape[0]:
        raise ValueError(
            f"X and Y must have the same number of rows, got {X.shape[0]} and {Y.shape[0]}"
        )
    Qx = _centred_basis(X, "X")
    Qy = _centred_basis(Y, "Y")
    rho = np.linalg.svd(Qx.T @ Qy, compute_uv=False)
    return np.clip(rho, 0.0, 1.0)


def mean_cca_similarity(X, Y):
    """Mean canonical correlation between two representations, in ``[0, 1]``.

    The similarity index of SVCCA once each representation has been reduced (Raghu et al.
    2017). It is invariant to any invertible linear map of the features of ``X`` or of ``Y``
    and to translations; when ``n - 1`` is at most the rank of both centred matrices, every
    canonical correlation is one whatever the data.

    Parameters
    ----------
    X : array_like of shape (n, p)
        First representation, one row per sample.
    Y : array_like of shape (n, q)
        Second representation of the same samples, rows aligned with ``X``.

    Returns
    -------
    float
        The mean of :func:`canonical_correlations`.

    Raises
    ------
    ValueError
        As :func:`canonical_correlations`.
    """
    return float(np.mean(canonical_correlations(X, Y)))
