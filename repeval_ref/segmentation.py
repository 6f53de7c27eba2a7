"""Mean intersection over union, kept as per-tile counts so that it can be bootstrapped.

Book: chapter ``book/noise.md`` ("A bootstrap over tiles"); seed 000, the dense probes of
"Transfer suites and dense probes" (mIoU: for each class, the overlap of the predicted
and the true region divided by their union, then the mean over classes) and "Choosing a frozen
backbone for aerial segmentation" (a bootstrap over validation tiles).

Mean IoU over a validation set is *not* the average of per-tile IoUs: for each class
``c`` it divides the intersection pixels summed over all tiles by the union pixels summed
over all tiles, then averages over the classes. Storing the two counts of every class on
every tile (:func:`tile_iou_counts`) makes the metric a function of sums over tiles
(:func:`mean_iou`), which is the form :func:`repeval_ref.item_bootstrap_ci` resamples.
:func:`region_bootstrap_miou` resamples whole regions instead of tiles, for tiles that
are not independent of their neighbours (chapter ``book/encoders.md``).
"""

from __future__ import annotations

import numpy as np

from ._validation import as_float_array, as_labels, check_int

__all__ = ["tile_iou_counts", "mean_iou", "region_bootstrap_miou"]


def _label_maps(x, name):
    arr = np.asarray(x)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.integer) or arr.dtype == bool):
        raise TypeError(f"{name} must hold integer class labels, got dtype {arr.dtype}")
    if arr.ndim < 2:
        raise ValueError(
            f"{name} must have shape (n_tiles, ...) with at least one pixel axis, "
            f"got shape {arr.shape}"
        )
    if arr.shape[0] == 0 or arr[0].size == 0:
        raise ValueError(f"{name} is empty (shape {arr.shape})")
    return arr.astype(np.int64)


def tile_iou_counts(pred, true, n_classes, ignore_index=None):
    """Intersection and union pixel counts of every class on every tile.

    For tile ``t`` and class ``c``, over the pixels whose true label is not
    ``ignore_index``::

        counts[t, 0, c] = #{pixels with pred == c and true == c}     (intersection)
        counts[t, 1, c] = #{pixels with pred == c or  true == c}     (union)

    Parameters
    ----------
    pred, true : array_like of int, shape (n_tiles, ...)
        Predicted and true label maps (any number of pixel axes, same shape). Labels
        of ``pred`` lie in ``0 .. n_classes - 1``; so do those of ``true``, except
        ``ignore_index``.
    n_classes : int
        Number of classes, ``>= 1``.
    ignore_index : int, optional
        A true label whose pixels are left out (e.g. 255 for "unlabelled").

    Returns
    -------
    numpy.ndarray of float64, shape (n_tiles, 2, n_classes)

    Raises
    ------
    ValueError
        Shapes that differ, no pixel axis, labels outside the classes, ``n_classes < 1``.
    TypeError
        Non-integer label maps or counts.

    Notes
    -----
    Book ``book/noise.md`` ("A bootstrap over tiles").
    """
    n_classes = check_int(n_classes, "n_classes", minimum=1)
    p = _label_maps(pred, "pred")
    t = _label_maps(true, "true")
    if t.shape != p.shape:
        raise ValueError(f"true has shape {t.shape} but pred has shape {p.shape}")
    if ignore_index is not None:
        ignore_index = check_int(ignore_index, "ignore_index")
    p = p.reshape(p.shape[0], -1)
    t = t.reshape(t.shape[0], -1)
    keep = np.ones(t.shape, dtype=bool) if ignore_index is None else t != ignore_index
    for name, arr in (("pred", p), ("true", t)):
        vals = arr[keep]
        if vals.size and (vals.min() < 0 or vals.max() >= n_classes):
            bad = vals[(vals < 0) | (vals >= n_classes)][0]
            raise ValueError(
                f"{name} contains label {bad}, outside 0..{n_classes - 1} for n_classes={n_classes}"
            )
    n_tiles = p.shape[0]
    rows = np.broadcast_to(np.arange(n_tiles)[:, None], p.shape)[keep]
    pk, tk = p[keep], t[keep]

    def per_tile(mask):
        return np.bincount(rows[mask] * n_classes + pk[mask], minlength=n_tiles * n_classes)

    hit = pk == tk
    inter = per_tile(hit).reshape(n_tiles, n_classes)
    pred_count = per_tile(np.ones_like(hit)).reshape(n_tiles, n_classes)
    true_count = np.bincount(rows * n_classes + tk, minlength=n_tiles * n_classes).reshape(
        n_tiles, n_classes
    )
    union = pred_count + true_count - inter
    return np.stack([inter, union], axis=1).astype(np.float64)


def mean_iou(counts):
    """Mean IoU from intersection and union totals, over the classes that occur.

    ``mean_iou(c) = mean over {k : c[..., 1, k] > 0} of c[..., 0, k] / c[..., 1, k]``;
    a class that neither occurs nor is predicted (union 0) is left out of the mean, as
    usual for mIoU. Vectorised over any leading axes, so that
    ``mean_iou(tile_iou_counts(pred, true, K).sum(axis=0))`` is the mIoU of a set of
    tiles and ``mean_iou`` can be handed to :func:`repeval_ref.item_bootstrap_ci`
    as its ``metric``.

    Parameters
    ----------
    counts : array_like of float, shape (..., 2, K)
        Intersection (``[..., 0, :]``) and union (``[..., 1, :]``) totals, with
        ``0 <= intersection <= union``.

    Returns
    -------
    float or numpy.ndarray of float64, shape (...)
        A float when ``counts`` has shape (2, K).

    Raises
    ------
    ValueError
        A shape without the (2, K) tail, negative counts, an intersection above its
        union, or a row in which no class has a positive union.
    TypeError
        Non-numeric counts.

    Notes
    -----
    Book ``book/noise.md`` ("A bootstrap over tiles"); seed 000, "Transfer suites and
    dense probes".
    """
    c = as_float_array(counts, "counts", ndim=tuple(range(2, 9)))
    if c.shape[-2] != 2:
        raise ValueError(f"counts must have shape (..., 2, K) (intersection, union), got {c.shape}")
    inter, union = c[..., 0, :], c[..., 1, :]
    if np.any(inter < 0) or np.any(union < 0):
        raise ValueError("counts must be non-negative")
    if np.any(inter > union * (1 + 1e-12)):
        raise ValueError("counts: an intersection exceeds its union")
    present = union > 0
    n_present = present.sum(axis=-1)
    if np.any(n_present == 0):
        raise ValueError("counts: a row has no class with a positive union (no pixels)")
    ratio = np.divide(inter, union, out=np.zeros_like(inter), where=present)
    out = ratio.sum(axis=-1) / n_present
    return float(out) if out.ndim == 0 else out


def region_bootstrap_miou(counts, regions, n_boot, rng, level=0.95):
    """mIoU of a set of tiles and a percentile bootstrap interval that resamples regions.

    Tiles cut from one region (one city, one flight, one photograph) share its
    appearance, so they are not independent draws; the independent unit is the region.
    The bootstrap therefore adds up the counts of the tiles of each region and resamples
    the ``R`` regions with replacement. With the region totals ``T`` (shape (R, 2, K),
    regions in increasing order of their id, ``np.unique(regions)``), every replicate is
    one row of a single draw::

        W      = rng.multinomial(R, np.full(R, 1 / R), size=n_boot)     # (n_boot, R)
        values = mean_iou(W @ T)                                        # (n_boot,)

    and ``lo, hi = np.percentile(values, [100 (1 - level) / 2, 100 (1 + level) / 2])``.
    A class whose union is zero in a replicate (it lives only in regions the replicate
    left out) is dropped from that replicate's mean, as :func:`mean_iou` does. Giving every
    tile its own region gives the tile bootstrap of :func:`repeval_ref.item_bootstrap_ci`.

    Parameters
    ----------
    counts : array_like of float, shape (n_tiles, 2, K)
        Intersection (``[:, 0]``) and union (``[:, 1]``) pixel counts of every class on
        every tile, as :func:`tile_iou_counts` returns them.
    regions : array_like of int, shape (n_tiles,)
        Region id of every tile, non-negative integers; they need not be contiguous.
    n_boot : int
        Number of replicates, ``>= 1``.
    rng : numpy.random.Generator or int
        Random generator (an int seeds a new one); used only by the one multinomial call.
    level : float, default 0.95
        Confidence level in (0, 1).

    Returns
    -------
    (float, float, float)
        ``(miou, lo, hi)``, with ``miou = mean_iou(counts.sum(axis=0))``.

    Raises
    ------
    ValueError
        ``counts`` not of shape (n_tiles, 2, K), negative, not finite or with an
        intersection above its union, or a region with no pixel; ``regions`` of another
        length, negative or not whole numbers; ``n_boot < 1``; ``level`` outside (0, 1).
    TypeError
        Non-numeric ``counts`` or ``regions``, or a bad ``rng``.

    Notes
    -----
    Book ``book/encoders.md`` ("The aerial-segmentation example, run small"); seed 000,
    "Choosing a frozen backbone for aerial segmentation" (split by region, bootstrap the
    validation tiles). With few regions (under a dozen or so) a percentile interval is
    itself unreliable: it can only recombine the regions it has seen.
    """
    from .uncertainty import item_bootstrap_ci

    c = as_float_array(counts, "counts", ndim=3)
    if c.shape[1] != 2:
        raise ValueError(
            f"counts must have shape (n_tiles, 2, K) (intersection, union), got {c.shape}"
        )
    if np.any(c < 0):
        raise ValueError("counts must be non-negative")
    if np.any(c[:, 0] > c[:, 1] * (1 + 1e-12)):
        raise ValueError("counts: an intersection exceeds its union")
    g = as_labels(regions, "regions", n=c.shape[0])
    ids, which = np.unique(g, return_inverse=True)
    totals = np.zeros((ids.size,) + c.shape[1:])
    np.add.at(totals, which, c)
    empty = ~np.any(totals[:, 1] > 0, axis=1)
    if np.any(empty):
        raise ValueError(
            f"counts: region {ids[np.argmax(empty)]} of regions has no pixel (every union is zero)"
        )
    return item_bootstrap_ci(totals, mean_iou, n_boot, rng, level=level)
