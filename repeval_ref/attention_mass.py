"""How much of a probe's attention falls on a region, against the region's share of the tokens.

Book: chapter ``book/attentive.md`` ("Where does the trained probe look?"); seed 000,
box "Attentive probe".

Image ``i`` has attention weights ``a_i`` over its ``p`` patch tokens (non-negative,
summing to 1; for several heads, their mean) and a region ``M_i`` of those tokens (the
patches touching the object's box). Over ``n`` images::

    mass_i  = sum_{j in M_i} a_ij            (attention on the region)
    share_i = |M_i| / p                      (what uniform weights, a mean, would give it)
    ratio   = sum_i mass_i / sum_i share_i   (= mean mass / mean share)

A ratio of 1 means no preference for the region; above 1, the probe leans towards it.
The ratio is a quotient of two totals over images, so its interval is the item
bootstrap of :func:`repeval_ref.item_bootstrap_ci` with the pair ``(mass_i, share_i)``
as each image's additive statistics: whole images are resampled, keeping the
dependence between the numerator and the denominator of one image.
"""

from __future__ import annotations

import numpy as np

from ._validation import as_float_array
from .uncertainty import item_bootstrap_ci

__all__ = ["attention_mass_ratio"]


def _ratio_of_totals(totals):
    return totals[:, 0] / totals[:, 1]


def attention_mass_ratio(attention, masks, n_boot, rng, level=0.95):
    """Attention on a region over the region's share of tokens, with a bootstrap interval over
    images.

    Parameters
    ----------
    attention : array_like of float, shape (n, ...)
        Attention weights of ``n`` images over their patch tokens, in any layout after
        the first axis (``(n, p)`` or a grid ``(n, rows, cols)``); non-negative, each
        image's weights summing to 1 (within ``1e-6``).
    masks : array_like of bool or 0/1, same shape as ``attention``
        The region's tokens in each image; every image's region must hold at least one
        token, so that no resample has an empty denominator.
    n_boot, rng, level
        As in :func:`~repeval_ref.uncertainty.paired_bootstrap_ci`: replicates (``>= 1``),
        the random generator (an int seeds a new one) and the confidence level in (0, 1),
        default 0.95.

    Returns
    -------
    (float, float, float)
        ``(ratio, lo, hi)``: the ratio of the total attention mass on the regions to
        their total share of the tokens, and the percentile interval of the images
        bootstrap (:func:`repeval_ref.item_bootstrap_ci`).

    Raises
    ------
    ValueError
        Shapes that differ or have no token axis; attention negative, not finite or not
        summing to 1 per image; masks not 0/1 or empty for an image; bad ``n_boot``
        or ``level``.
    TypeError
        Non-numeric arrays or a bad ``rng``.

    Notes
    -----
    Book ``book/attentive.md``; the chapter measured the ratio for the masked-image
    encoder's probe without an interval. An interval that contains 1 says the probe's
    preference for the region is not shown at that number of images.
    """
    a = as_float_array(attention, "attention", ndim=tuple(range(2, 8)))
    m = np.asarray(masks)
    if (
        isinstance(masks, (str, bytes))
        or masks is None
        or m.dtype == object
        or not (np.issubdtype(m.dtype, np.number) or m.dtype == bool)
    ):
        raise TypeError(f"masks must be a 0/1 or boolean array, got {type(masks).__name__}")
    if m.shape != a.shape:
        raise ValueError(f"masks must have the shape of attention {a.shape}, got {m.shape}")
    if m.dtype != bool:
        if not np.all(np.isin(m, (0, 1))):
            raise ValueError("masks must hold only 0 and 1 (or booleans)")
        m = m.astype(bool)
    n = a.shape[0]
    a2, m2 = a.reshape(n, -1), m.reshape(n, -1)
    if np.any(a2 < 0):
        raise ValueError("attention must be non-negative")
    if not np.allclose(a2.sum(axis=1), 1.0, rtol=0.0, atol=1e-6):
        raise ValueError("attention must sum to 1 over each image's tokens")
    if not np.all(m2.any(axis=1)):
        raise ValueError("masks must mark at least one token in every image")
    mass = (a2 * m2).sum(axis=1)
    share = m2.mean(axis=1)
    return item_bootstrap_ci(np.stack([mass, share], axis=1), _ratio_of_totals, n_boot, rng, level)
