"""Similarity of two representations of the same samples: linear CKA.

Linear centred kernel alignment (Kornblith et al. 2019) compares two feature matrices
``X`` (n, p) and ``Y`` (n, q) computed on the same n samples, for example two layers
or two encoders (seed 003, section 6). With the sample Gram matrices
:math:`K = XX^\\top`, :math:`L = YY^\\top` and the centring matrix
:math:`H = I - \\mathbf{1}\\mathbf{1}^\\top / n`,

.. math:: \\mathrm{HSIC}(K, L) = \\frac{\\operatorname{tr}(K H L H)}{(n-1)^2},
   \\qquad
   \\mathrm{CKA} = \\frac{\\mathrm{HSIC}(K, L)}{\\sqrt{\\mathrm{HSIC}(K, K)\\,\\mathrm{HSIC}(L, L)}}.

For linear kernels, :math:`\\operatorname{tr}(KHLH) = \\lVert \\tilde X^\\top \\tilde Y \\rVert_F^2`
with column-centred :math:`\\tilde X = HX`, :math:`\\tilde Y = HY`, so everything is
computed from p x q, p x p and q x q matrices and no n x n matrix is formed.
"""
from __future__ import annotations

import numpy as np

from ._validation import as_float_array, check_same_length

__all__ = ["linear_cka"]


def _center_columns(X, name):
    """Column-centred, rescaled copy of ``X``; an all-constant ``X`` raises ``ValueError``.

    A column that is exactly constant is set to exactly zero (its rounded mean
    would otherwise leave residues of order 1e-17). The result is divided by its
    largest absolute entry, which changes no CKA value (CKA is invariant to
    isotropic scaling) and keeps the products below away from overflow and
    underflow.
    """
    constant = np.ptp(X, axis=0) == 0
    if np.all(constant):
        raise ValueError(
            f"{name} is constant in every column; after centring it is zero and CKA is undefined"
        )
    Xc = X - X.mean(axis=0, keepdims=True)
    Xc[:, constant] = 0.0
    return Xc / np.max(np.abs(Xc))


def _hsic_linear(Xc, Yc):
    """Biased HSIC estimate with linear kernels, from already column-centred inputs.

    Returns :math:`\\lVert X_c^\\top Y_c \\rVert_F^2 / (n-1)^2`, equal to
    :math:`\\operatorname{tr}(KHLH)/(n-1)^2` with :math:`K = XX^\\top`, :math:`L = YY^\\top`.
    """
    n = Xc.shape[0]
    cross = Xc.T @ Yc
    return float(np.sum(cross * cross)) / (n - 1) ** 2


def linear_cka(X, Y):
    """Linear centred kernel alignment between two representations of the same samples.

    .. math:: \\mathrm{CKA}(X, Y) =
       \\frac{\\lVert \\tilde X^\\top \\tilde Y \\rVert_F^2}
            {\\lVert \\tilde X^\\top \\tilde X \\rVert_F \\, \\lVert \\tilde Y^\\top \\tilde Y \\rVert_F},

    with :math:`\\tilde X, \\tilde Y` the column-centred inputs (Kornblith et al. 2019).
    The value lies in [0, 1]; it is 1 when ``Y`` is an orthogonal transform of ``X``
    up to scale and translation, and it is invariant to orthogonal transforms,
    isotropic scaling and translation of either input, but not to general invertible
    linear maps. No small constant is added to the denominator: a zero denominator
    (an input that is constant) is an error, not a silent near-zero score.

    Book: representation similarity chapter (seed 003, section 6).

    Parameters
    ----------
    X : array_like of shape (n, p)
        First representation, one row per sample; ``n >= 2``.
    Y : array_like of shape (n, q)
        Second representation of the same ``n`` samples, in the same order.

    Returns
    -------
    float
        CKA in [0, 1] (rounding excess beyond the bounds is clipped).

    Raises
    ------
    ValueError
        Non-2-D input, fewer than 2 rows, different numbers of rows, NaN/inf, or an
        input whose every column is constant (zero after centring).
    """
    X = as_float_array(X, "X", ndim=2, min_rows=2)
    Y = as_float_array(Y, "Y", ndim=2, min_rows=2)
    check_same_length(X=X, Y=Y)
    Xc = _center_columns(X, "X")
    Yc = _center_columns(Y, "Y")
    hsic_xy = _hsic_linear(Xc, Yc)
    norm_x = np.sqrt(_hsic_linear(Xc, Xc))
    norm_y = np.sqrt(_hsic_linear(Yc, Yc))
    if norm_x == 0:  # pragma: no cover - excluded by the constant-column check
        raise ValueError("X is zero after centring; CKA is undefined")
    if norm_y == 0:  # pragma: no cover
        raise ValueError("Y is zero after centring; CKA is undefined")
    return float(min(1.0, max(0.0, hsic_xy / (norm_x * norm_y))))
