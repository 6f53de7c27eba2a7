"""Folding a frozen, non-affine BatchNorm into a linear probe, and back.

Book: chapter ``book/batchnorm.md``; seed 000, sections "Frozen means evaluation
mode", the result "BatchNorm before a probe changes nothing but conditioning" and the
worked example "Folding a BatchNorm into a probe, by hand".

In evaluation mode a non-affine BatchNorm subtracts fixed means ``mu`` and divides by
fixed scales ``s > 0`` (for ``torch.nn.BatchNorm1d``, ``s = sqrt(running_var + eps)``).
A probe ``(W, b)`` on the standardised features has the same logits as the probe
``(W', b')`` on the raw features::

    W^T diag(s)^{-1} (h - mu) + b  =  W'^T h + b',
    W' = diag(s)^{-1} W,     b' = b - W'^T mu,

and conversely ``W = diag(s) W'``, ``b = b' + W'^T mu``. The two parameterisations
describe the same classifiers; only the optimisation problem differs.
"""

from __future__ import annotations

import numpy as np

from ._validation import as_float_array

__all__ = ["fold_batchnorm", "unfold_batchnorm"]


def _check(W, b, mu, s, w_name, b_name):
    """Validate a probe ``(W, b)`` of shape (d, K), (K,) and statistics ``mu``, ``s``."""
    W = as_float_array(W, w_name, ndim=2)
    d, K = W.shape
    b = as_float_array(b, b_name, ndim=1)
    if b.shape[0] != K:
        raise ValueError(f"{b_name} has {b.shape[0]} entries but {w_name} has {K} columns")
    mu = as_float_array(mu, "mu", ndim=1)
    if mu.shape[0] != d:
        raise ValueError(f"mu has {mu.shape[0]} entries but {w_name} has {d} rows")
    s = as_float_array(s, "s", ndim=1)
    if s.shape[0] != d:
        raise ValueError(f"s has {s.shape[0]} entries but {w_name} has {d} rows")
    if np.any(s <= 0):
        j = int(np.flatnonzero(s <= 0)[0])
        raise ValueError(f"s must be strictly positive, got s[{j}] = {s[j]}")
    return W, b, mu, s


def fold_batchnorm(W, b, mu, s):
    """Turn a probe on standardised features into the equivalent probe on raw ones.

    Parameters
    ----------
    W : array_like of shape (d, K)
        Probe weights acting on ``(h - mu) / s``; column ``k`` scores class ``k``.
    b : array_like of shape (K,)
        Probe bias.
    mu : array_like of shape (d,)
        Frozen per-feature means of the BatchNorm.
    s : array_like of shape (d,)
        Frozen per-feature scales, every entry ``> 0``.

    Returns
    -------
    W_folded : numpy.ndarray of shape (d, K)
        ``diag(s)^{-1} W`` (row ``j`` of ``W`` divided by ``s_j``).
    b_folded : numpy.ndarray of shape (K,)
        ``b - W_folded^T mu``.

    Raises
    ------
    ValueError
        Wrong shapes, NaN/inf, or a non-positive entry of ``s``.

    Notes
    -----
    Book ``book/batchnorm.md``; seed 000, "BatchNorm before a probe changes nothing
    but conditioning". ``W_folded^T h + b_folded == W^T ((h - mu) / s) + b``.
    """
    W, b, mu, s = _check(W, b, mu, s, "W", "b")
    W_folded = W / s[:, None]
    return W_folded, b - W_folded.T @ mu


def unfold_batchnorm(W_folded, b_folded, mu, s):
    """Turn a probe on raw features into the equivalent probe on standardised ones.

    Parameters
    ----------
    W_folded : array_like of shape (d, K)
        Probe weights acting on raw features ``h``.
    b_folded : array_like of shape (K,)
        Probe bias.
    mu : array_like of shape (d,)
        Frozen per-feature means.
    s : array_like of shape (d,)
        Frozen per-feature scales, every entry ``> 0``.

    Returns
    -------
    W : numpy.ndarray of shape (d, K)
        ``diag(s) W_folded``.
    b : numpy.ndarray of shape (K,)
        ``b_folded + W_folded^T mu``.

    Notes
    -----
    The converse of :func:`fold_batchnorm` (book ``book/batchnorm.md``; seed 000):
    ``W^T ((h - mu) / s) + b == W_folded^T h + b_folded``.
    """
    W_folded, b_folded, mu, s = _check(W_folded, b_folded, mu, s, "W_folded", "b_folded")
    return W_folded * s[:, None], b_folded + W_folded.T @ mu
