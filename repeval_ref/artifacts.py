"""High-norm artifact tokens: patch tokens whose norm stands far above the rest of their image.

Book: chapter ``book/encoders.md`` ("Which block, and are there artifact tokens?"); seed
000, the dense-probe settings (artifact tokens corrupt feature maps unless the model has
registers).

Large ViTs trained long enough move global information into a few patch tokens of
low-information regions, and those tokens then have a norm about ten times that of
the other patches (Darcet, Oquab, Mairal and Bojanowski 2024, "Vision Transformers Need
Registers"). The check here compares each patch token's norm with the median norm of
the patch tokens of the same image::

    ratio[i, j] = norms[i, j] / median_j(norms[i, :]),
    flagged[i, j] = ratio[i, j] > threshold        (default threshold 4).

**Where to read the norms.** Measure them on the residual stream *before* the final
normalisation (``TinyViT.forward_tokens(x, pre_norm=True)``; timm's
``forward_features`` before ``norm``). A LayerNorm maps every token to the same norm
before its affine map, so after it the ratio is confined to the spread of the affine
weights and cannot reveal a high-norm token, however large it was.

**Why 4.** The median is a robust centre: up to half of an image's tokens can be
artifacts without moving it much. Artifact tokens sit near ten times the median
(Darcet et al. 2024), healthy tokens within a few tens of percent of it (the zoo's
four-block ViTs stay below 2 on thousands of images, measured in the encoders
chapter). Four lies between them on a log scale (the geometric mean of 2 and 10 is
4.5, rounded down to a round number), leaving a factor of about two of margin on
each side, like the other thresholds of :mod:`repeval_ref.verdicts` a deliberate
round number rather than a fitted one. Pass another ``threshold`` for a model whose
healthy tokens spread more, and report it.
"""

from __future__ import annotations

import numpy as np

from ._validation import as_float_array, check_positive

__all__ = ["ARTIFACT_RATIO", "token_norm_ratios", "high_norm_tokens"]

#: Default cut: a token more than this many times its image's median norm is flagged.
ARTIFACT_RATIO = 4.0


def _norms(norms):
    arr = as_float_array(norms, "norms", ndim=2)
    if np.any(arr < 0):
        raise ValueError("norms must be >= 0 (they are token norms)")
    if np.any(np.median(arr, axis=1) <= 0):
        raise ValueError("norms has an image whose median token norm is 0; the ratio is undefined")
    return arr


def token_norm_ratios(norms):
    """Each token's norm divided by the median token norm of its image.

    Parameters
    ----------
    norms : array_like of float, shape (n, p)
        Euclidean norms of the ``p`` patch tokens of each of ``n`` images (leave the
        class token and any registers out), ``>= 0``, with a positive median per image.

    Returns
    -------
    numpy.ndarray of float64, shape (n, p)
        ``norms[i, j] / median(norms[i])``; its row maximum is the image's
        max-to-median ratio.

    Raises
    ------
    ValueError
        ``norms`` not 2-D, empty, not finite, negative, or with a zero median in a row.
    """
    arr = _norms(norms)
    return arr / np.median(arr, axis=1, keepdims=True)


def high_norm_tokens(norms, threshold=ARTIFACT_RATIO):
    """Flag the tokens whose norm exceeds ``threshold`` times their image's median.

    Parameters
    ----------
    norms : array_like of float, shape (n, p)
        Patch-token norms as in :func:`token_norm_ratios`, read before the final
        normalisation (see the module docstring).
    threshold : float, default 4.0
        The cut on the ratio to the median, ``> 1``; the module docstring gives the
        reasons for the default.

    Returns
    -------
    flags : numpy.ndarray of bool, shape (n, p)
        ``True`` where ``norms[i, j] > threshold * median(norms[i])``; an image has
        artifact tokens when its row has any ``True`` (``flags.any(axis=1)``).

    Raises
    ------
    ValueError
        As :func:`token_norm_ratios`, or ``threshold`` not a finite number above 1.

    Notes
    -----
    Darcet, Oquab, Mairal and Bojanowski 2024, "Vision Transformers Need Registers" (ICLR).
    """
    threshold = check_positive(threshold, "threshold")
    if threshold <= 1.0:
        raise ValueError(f"threshold must be > 1 (a ratio to the median), got {threshold}")
    return token_norm_ratios(norms) > threshold
