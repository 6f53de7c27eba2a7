"""Forward pass of a multi-head attentive probe with one learned query.

Book: chapter ``book/attentive.md`` ("Attentive probes"); seed 000, box "Attentive
probe" and the interview exercise "An attentive probe forward pass".

For the patch tokens ``H`` (T x d) of one image, after dropping the first ``n_prefix``
tokens (class token, registers), with ``h`` heads of width ``d_k = d / h`` and head
``j`` (counted from 0) owning columns ``j d_k .. (j + 1) d_k - 1``::

    K = H W_K,   V = H W_V,
    a^(j) = softmax_over_tokens( K^(j) q^(j) / sqrt(d_k) ),
    o = [V^(0)T a^(0); ...; V^(h-1)T a^(h-1)]   (length d),
    logits = W_cls^T W_O^T o       (i.e. o @ W_O @ W_cls for a row vector o).
"""

from __future__ import annotations

import numpy as np
from scipy.special import softmax

from ._validation import as_float_array, check_divisor, check_int

__all__ = ["attentive_probe", "attentive_probe_param_count", "linear_probe_param_count"]


def _square(W, name, d):
    W = as_float_array(W, name, ndim=2)
    if W.shape != (d, d):
        raise ValueError(f"{name} must have shape ({d}, {d}) to match H, got {W.shape}")
    return W


def attentive_probe(
    H,
    q,
    Wk,
    Wv,
    Wo,  # tokens, query, key/value/output maps
    W_cls,
    n_heads,
    n_prefix=0,
):
    """Logits and attention weights of an attentive probe, for a batch of images.

    Parameters
    ----------
    H : array_like of shape (B, T, d)
        Frozen tokens of ``B`` images.
    q : array_like of shape (d,)
        Learned query, split into ``n_heads`` pieces of length ``d / n_heads``.
    Wk, Wv, Wo : array_like of shape (d, d)
        Key, value and output matrices.
    W_cls : array_like of shape (d, K)
        Classifier.
    n_heads : int
        Number of heads; must divide ``d``.
    n_prefix : int, default 0
        Number of leading tokens (class token, registers) to drop; ``0 <= n_prefix < T``.

    Returns
    -------
    logits : numpy.ndarray of float64, shape (B, K)
        ``o @ Wo @ W_cls`` for every image.
    A : numpy.ndarray of float64, shape (B, n_heads, T - n_prefix)
        Attention weights; each row is non-negative and sums to 1.

    Raises
    ------
    ValueError
        ``H`` not 3-D or with an empty axis, shapes of ``q``, ``Wk``, ``Wv``, ``Wo``,
        ``W_cls`` that do not match ``d``, NaN/inf, ``n_heads < 1`` or not dividing ``d``,
        ``n_prefix < 0`` or ``n_prefix >= T``.
    TypeError
        Non-numeric arrays or non-integer ``n_heads``/``n_prefix``.

    Notes
    -----
    Book ``book/attentive.md``; seed 000, "Attentive probe" and the exercise "An
    attentive probe forward pass". The softmax subtracts the largest score of each row before
    exponentiating (``scipy.special.softmax``), so very large scores do not overflow. There is no
    Python loop over images or heads.
    """
    H = as_float_array(H, "H", ndim=3)
    B, T, d = H.shape
    if T == 0 or d == 0:
        raise ValueError(f"H has an empty axis, got shape {H.shape}")
    q = as_float_array(q, "q", ndim=1)
    if q.shape != (d,):
        raise ValueError(f"q must have shape ({d},) to match H, got {q.shape}")
    Wk = _square(Wk, "Wk", d)
    Wv = _square(Wv, "Wv", d)
    Wo = _square(Wo, "Wo", d)
    W_cls = as_float_array(W_cls, "W_cls", ndim=2)
    if W_cls.shape[0] != d:
        raise ValueError(f"W_cls must have {d} rows to match H, got shape {W_cls.shape}")
    n_heads = check_divisor(n_heads, "n_heads", d, "the feature dimension d")
    n_prefix = check_int(n_prefix, "n_prefix", minimum=0)
    if n_prefix >= T:
        raise ValueError(f"n_prefix={n_prefix} would drop all T={T} tokens; need n_prefix < T")

    with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported as a ValueError below
        dk = d // n_heads
        tokens = H[:, n_prefix:, :]  # (B, T', d)
        keys = (tokens @ Wk).reshape(B, T - n_prefix, n_heads, dk)  # (B, T', h, dk)
        values = (tokens @ Wv).reshape(B, T - n_prefix, n_heads, dk)
        scores = np.einsum("bthk,hk->bht", keys, q.reshape(n_heads, dk)) / np.sqrt(dk)
        if not np.all(np.isfinite(scores)):
            raise ValueError(
                "the attention scores overflow float64 (H, q or Wk hold values too large "
                "for their products); rescale the inputs"
            )
        A = softmax(scores, axis=-1)  # (B, h, T')
        o = np.einsum("bht,bthk->bhk", A, values).reshape(B, d)
        logits = o @ Wo @ W_cls
        if not np.all(np.isfinite(logits)):
            raise ValueError(
                "the logits overflow float64 (H, Wv, Wo or W_cls hold values too large "
                "for their products); rescale the inputs"
            )
    return logits, A


def attentive_probe_param_count(d, n_heads, n_classes):
    """Number of trained parameters of the attentive probe of :func:`attentive_probe`.

    The query ``q`` (``d``), the three square maps ``Wk``, ``Wv``, ``Wo`` (``3 d^2``) and
    the classifier ``W_cls`` (``d K``), no biases: ``d + 3 d^2 + d K``. The head split
    partitions ``q`` and the columns of the maps, so the count does not depend on the
    number of heads; ``n_heads`` is only checked to divide ``d``.

    Parameters
    ----------
    d : int
        Token width, ``>= 1``.
    n_heads : int
        Number of heads, ``>= 1``, dividing ``d``.
    n_classes : int
        Number of classes ``K``, ``>= 1``.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        An argument below 1, or ``n_heads`` not dividing ``d``.
    TypeError
        A non-integer argument.
    """
    d = check_int(d, "d", minimum=1)
    n_heads = check_divisor(n_heads, "n_heads", d, "the feature dimension d")
    n_classes = check_int(n_classes, "n_classes", minimum=1)
    return d + 3 * d * d + d * n_classes


def linear_probe_param_count(d, n_classes, bias=True):
    """Number of parameters of a linear probe on a ``d``-dimensional pooled vector.

    Parameters
    ----------
    d : int
        Feature dimension, ``>= 1``.
    n_classes : int
        Number of classes ``K``, ``>= 1``.
    bias : bool, default True
        Whether the probe has one bias per class.

    Returns
    -------
    int
        ``d K + K`` with a bias, ``d K`` without.

    Raises
    ------
    ValueError
        ``d`` or ``n_classes`` below 1, or ``bias`` not a bool.
    TypeError
        A non-integer ``d`` or ``n_classes``.
    """
    d = check_int(d, "d", minimum=1)
    n_classes = check_int(n_classes, "n_classes", minimum=1)
    if not isinstance(bias, (bool, np.bool_)):
        raise ValueError(f"bias must be True or False, got {bias!r}")
    return d * n_classes + (n_classes if bias else 0)
