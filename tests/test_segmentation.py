"""``region_bootstrap_miou``: mIoU with a bootstrap that resamples whole regions.

Checked against an explicit resampling that rebuilds the pixels of every replicate and
scores them with scikit-learn's Jaccard score, against the tile bootstrap when each tile
is its own region, and on the cases whose answer is known in closed form.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import jaccard_score

import repeval_ref as R


def _maps(seed, n_tiles=18, side=5, k=3):
    rng = np.random.default_rng(seed)
    true = rng.integers(0, k, (n_tiles, side, side))
    noisy = rng.random(true.shape) < 0.35
    pred = np.where(noisy, rng.integers(0, k, true.shape), true)
    return pred, true


def _pixel_miou(pred, true):
    """Macro Jaccard over the classes present in prediction or truth (sklearn)."""
    labels = np.unique(np.concatenate([pred.ravel(), true.ravel()]))
    return jaccard_score(true.ravel(), pred.ravel(), labels=labels, average="macro")


def test_every_replicate_matches_sklearn_on_the_resampled_pixels():
    pred, true = _maps(0)
    regions = np.repeat([7, 2, 11, 40, 5, 3], 3)  # six regions, ids not contiguous
    counts = R.tile_iou_counts(pred, true, 3)
    n_boot, level = 60, 0.9
    miou, lo, hi = R.region_bootstrap_miou(counts, regions, n_boot, np.random.default_rng(4), level)
    assert miou == pytest.approx(_pixel_miou(pred, true), rel=1e-12)
    ids = np.unique(regions)  # the order the contract fixes
    weights = np.random.default_rng(4).multinomial(
        ids.size, np.full(ids.size, 1 / ids.size), size=n_boot
    )
    values = []
    for w in weights:  # rebuild each replicate's tiles
        tiles = np.concatenate(
            [np.flatnonzero(regions == r).repeat(m) for r, m in zip(ids, w)] + [np.zeros(0, int)]
        )
        values.append(_pixel_miou(pred[tiles], true[tiles]))
    want = np.percentile(values, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    assert (lo, hi) == pytest.approx(tuple(want), rel=1e-12)


def test_a_class_missing_from_a_replicate_is_left_out_of_its_mean():
    # class 2 lives only in region 1; replicates without region 1 average classes 0 and 1
    true = np.zeros((4, 2, 2), int)
    true[:, 0] = 1
    true[3] = 2
    pred = true.copy()
    pred[0, 1, 1] = 1  # one mistake in region 0
    counts = R.tile_iou_counts(pred, true, 3)
    regions = np.array([0, 0, 0, 1])
    weights = np.random.default_rng(1).multinomial(2, [0.5, 0.5], size=400)
    _, lo, hi = R.region_bootstrap_miou(counts, regions, 400, np.random.default_rng(1), level=0.5)
    region_tot = np.stack([counts[:3].sum(0), counts[3:].sum(0)])
    values = R.mean_iou(np.einsum("br,rck->bck", weights.astype(float), region_tot))
    assert (lo, hi) == pytest.approx(tuple(np.percentile(values, [25, 75])))
    only_region0 = R.mean_iou(region_tot[0])  # classes 0 and 1 only
    assert only_region0 == pytest.approx(np.mean([5 / 6, 6 / 7]))
    assert np.any(np.isclose(values, only_region0))


def test_one_tile_per_region_is_the_tile_bootstrap():
    pred, true = _maps(2, n_tiles=30)
    counts = R.tile_iou_counts(pred, true, 3)
    got = R.region_bootstrap_miou(counts, np.arange(30) * 3 + 1, 500, np.random.default_rng(9))
    want = R.item_bootstrap_ci(counts, R.mean_iou, 500, np.random.default_rng(9))
    assert got == pytest.approx(want, rel=1e-12)


def test_one_region_gives_a_point_interval_and_order_preserving_ids_change_nothing():
    pred, true = _maps(3)
    counts = R.tile_iou_counts(pred, true, 3)
    miou, lo, hi = R.region_bootstrap_miou(counts, np.zeros(18, int), 50, 0)
    assert lo == pytest.approx(miou) and hi == pytest.approx(miou)
    regions = np.arange(18) % 5
    a = R.region_bootstrap_miou(counts, regions, 300, 5)
    b = R.region_bootstrap_miou(counts, 10 * regions + 3, 300, 5)  # same order, other ids
    assert a == b
    tiles_shuffled = np.random.default_rng(0).permutation(18)  # tile order is irrelevant
    c = R.region_bootstrap_miou(counts[tiles_shuffled], regions[tiles_shuffled], 300, 5)
    assert c == pytest.approx(a, rel=1e-12)


def test_regions_that_share_difficulty_widen_the_interval():
    """Tiles of a region share one error rate: resampling tiles understates the spread."""
    rng = np.random.default_rng(6)
    n_regions, per_region, side = 12, 20, 6
    true = rng.integers(0, 3, (n_regions * per_region, side, side))
    rate = np.repeat(rng.beta(2, 3, n_regions), per_region)[:, None, None]
    wrong = rng.random(true.shape) < rate
    pred = np.where(wrong, rng.integers(0, 3, true.shape), true)
    counts = R.tile_iou_counts(pred, true, 3)
    regions = np.repeat(np.arange(n_regions), per_region)
    _, rlo, rhi = R.region_bootstrap_miou(counts, regions, 2000, 1)
    _, tlo, thi = R.item_bootstrap_ci(counts, R.mean_iou, 2000, 1)
    assert rhi - rlo > 2 * (thi - tlo)


def test_bad_input_names_the_argument():
    pred, true = _maps(0)
    counts = R.tile_iou_counts(pred, true, 3)
    regions = np.arange(18) // 3
    with pytest.raises(ValueError, match="regions"):
        R.region_bootstrap_miou(counts, regions[:-1], 10, 0)
    with pytest.raises(ValueError, match="regions"):
        R.region_bootstrap_miou(counts, regions - 1, 10, 0)
    with pytest.raises(ValueError, match="counts"):
        R.region_bootstrap_miou(counts[:, :1], regions, 10, 0)
    empty = counts.copy()
    empty[:3] = 0  # region 0 has no pixel
    with pytest.raises(ValueError, match="region 0 of regions"):
        R.region_bootstrap_miou(empty, regions, 10, 0)
    swapped = counts[:, ::-1]  # intersections above unions
    with pytest.raises(ValueError, match="counts"):
        R.region_bootstrap_miou(swapped, regions, 10, 0)
    with pytest.raises(ValueError, match="n_boot"):
        R.region_bootstrap_miou(counts, regions, 0, 0)
    with pytest.raises(ValueError, match="level"):
        R.region_bootstrap_miou(counts, regions, 10, 0, level=1.5)
