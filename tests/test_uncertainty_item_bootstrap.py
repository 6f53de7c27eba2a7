"""Per-item bootstrap for metrics that are not accuracies, and the mean IoU it is made for.

Independent computations: scikit-learn's ``jaccard_score`` and pixel loops for the
counts and the mIoU; the documented multinomial draw replayed by hand; an explicit
resample of item indices (another random mechanism) for the distribution; the exact
bootstrap variance of a mean; the four-cell ``paired_bootstrap_ci`` for accuracies;
and the coverage of the 95 % interval in seeded simulations with a known true value.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import jaccard_score

import repeval_ref as R
from repeval_ref import uncertainty


def _tiles(rng, n_tiles=60, side=8, n_classes=3, acc=0.8):
    true = rng.integers(0, n_classes, size=(n_tiles, side, side))
    noisy = rng.integers(0, n_classes, size=true.shape)
    pred = np.where(rng.random(true.shape) < acc, true, noisy)
    return pred, true


# ----------------------------------------------------------------------------- counts and mIoU


def test_counts_match_pixel_loops():
    pred, true = _tiles(np.random.default_rng(0), n_tiles=5, side=4)
    counts = R.tile_iou_counts(pred, true, 3)
    assert counts.shape == (5, 2, 3)
    for t in range(5):
        for c in range(3):
            inter = sum(1 for p, q in zip(pred[t].ravel(), true[t].ravel()) if p == c and q == c)
            union = sum(1 for p, q in zip(pred[t].ravel(), true[t].ravel()) if p == c or q == c)
            assert counts[t, 0, c] == inter and counts[t, 1, c] == union


def test_mean_iou_matches_sklearn_jaccard():
    pred, true = _tiles(np.random.default_rng(1))
    miou = R.mean_iou(R.tile_iou_counts(pred, true, 3).sum(axis=0))
    assert miou == pytest.approx(
        jaccard_score(true.ravel(), pred.ravel(), average="macro"), abs=1e-12
    )


def test_absent_class_is_left_out_and_ignore_index():
    rng = np.random.default_rng(2)
    pred, true = _tiles(rng, n_classes=3)
    # a fourth class that nobody predicts and that never occurs: same mIoU as with K = 3
    assert R.mean_iou(R.tile_iou_counts(pred, true, 4).sum(0)) == pytest.approx(
        R.mean_iou(R.tile_iou_counts(pred, true, 3).sum(0)), abs=1e-15
    )
    # ignored pixels count for nothing, whatever is predicted there
    true_ign = true.copy()
    mask = rng.random(true.shape) < 0.2
    true_ign[mask] = 255
    counts = R.tile_iou_counts(pred, true_ign, 3, ignore_index=255)
    keep = ~mask
    expected = jaccard_score(true[keep], pred[keep], average="macro")
    assert R.mean_iou(counts.sum(0)) == pytest.approx(expected, abs=1e-12)


def test_miou_is_not_the_mean_of_tile_ious():
    # two tiles: a big one with a good fit and a tiny one with a bad fit
    pred = np.zeros((2, 10, 10), int)
    true = np.zeros((2, 10, 10), int)
    true[0, :5] = 1
    pred[0, :5] = 1
    true[1, 0, 0] = 1  # one pixel of class 1, missed
    counts = R.tile_iou_counts(pred, true, 2)
    per_tile = R.mean_iou(counts)  # vectorised over tiles
    assert per_tile.shape == (2,)
    assert R.mean_iou(counts.sum(0)) != pytest.approx(per_tile.mean())


# ----------------------------------------------------------------------------- the bootstrap


def _ratio_metric(T):
    return T[:, 0] / T[:, 1]


def test_contract_is_one_multinomial_draw_replayed_by_hand():
    rng = np.random.default_rng(3)
    stats_ = np.column_stack([rng.integers(0, 20, 40), rng.integers(20, 40, 40)]).astype(float)
    value, lo, hi = R.item_bootstrap_ci(
        stats_, _ratio_metric, 500, np.random.default_rng(7), level=0.9
    )
    W = np.random.default_rng(7).multinomial(40, np.full(40, 1 / 40), size=500)
    vals = _ratio_metric(W @ stats_)
    assert value == pytest.approx(stats_[:, 0].sum() / stats_[:, 1].sum())
    assert (lo, hi) == pytest.approx(tuple(np.percentile(vals, [5, 95])), abs=0)


def test_blocks_leave_the_result_unchanged(monkeypatch):
    stats_ = np.random.default_rng(4).random((30, 2)) + 0.1
    full = R.item_bootstrap_ci(stats_, _ratio_metric, 300, 11)
    monkeypatch.setattr(uncertainty, "_BLOCK_ENTRIES", 7 * 30)  # blocks of 7 replicates
    # the same draws; the totals agree up to rounding (BLAS may sum a (7, n) block in
    # another order than a (300, n) one on some CPUs)
    assert R.item_bootstrap_ci(stats_, _ratio_metric, 300, 11) == pytest.approx(full, rel=1e-12)
    pa = R.paired_item_bootstrap_ci(stats_, stats_[::-1].copy(), _ratio_metric, 300, 11)
    monkeypatch.setattr(uncertainty, "_BLOCK_ENTRIES", 1 << 22)
    assert R.paired_item_bootstrap_ci(
        stats_, stats_[::-1].copy(), _ratio_metric, 300, 11
    ) == pytest.approx(pa, rel=1e-12)


def test_matches_explicit_index_resampling_in_distribution():
    rng = np.random.default_rng(5)
    stats_ = np.column_stack([rng.poisson(8, 80), rng.poisson(8, 80) + 10]).astype(float)
    _, lo, hi = R.item_bootstrap_ci(stats_, _ratio_metric, 20_000, 0)
    idx = np.random.default_rng(1).integers(0, 80, size=(20_000, 80))  # resample items
    vals = stats_[idx, 0].sum(1) / stats_[idx, 1].sum(1)
    ref_lo, ref_hi = np.percentile(vals, [2.5, 97.5])
    width = ref_hi - ref_lo
    assert abs(lo - ref_lo) < 0.03 * width and abs(hi - ref_hi) < 0.03 * width


@pytest.mark.slow
def test_mean_metric_has_the_exact_bootstrap_variance():
    # for a mean the bootstrap replicates have variance s^2 / n with s^2 the ddof=0 variance;
    # with n = 400 the percentile interval is close to the normal one
    x = np.random.default_rng(6).exponential(size=400)
    n = x.size
    _, lo, hi = R.item_bootstrap_ci(x[:, None], lambda T: T[:, 0] / n, 40_000, 2)
    half = 1.959963984540054 * x.std() / np.sqrt(n)
    assert (hi - lo) / 2 == pytest.approx(half, rel=0.03)


@pytest.mark.slow
def test_accuracies_agree_with_the_four_cell_bootstrap():
    rng = np.random.default_rng(8)
    a = rng.random(3000) < 0.8
    b = np.where(rng.random(3000) < 0.9, a, rng.random(3000) < 0.85)
    n = a.size
    gain, lo, hi = R.paired_item_bootstrap_ci(
        a[:, None].astype(float), b[:, None].astype(float), lambda T: T[:, 0] / n, 20_000, 3
    )
    g4, lo4, hi4 = R.paired_bootstrap_ci(a, b, 20_000, 4)
    assert gain == pytest.approx(g4, abs=1e-15)
    width = hi4 - lo4
    assert abs(lo - lo4) < 0.05 * width and abs(hi - hi4) < 0.05 * width


def test_pairing_removes_the_shared_difficulty():
    # both models see the same tiles, whose difficulty varies a lot: the paired interval of
    # the gain is much narrower than one from independent resamples of A and B
    rng = np.random.default_rng(9)
    n = 300
    difficulty = rng.uniform(0.2, 0.95, n)
    union = rng.integers(50, 150, n).astype(float)
    a = np.column_stack([difficulty * union, union])
    b_rate = np.clip(difficulty + 0.02 + 0.03 * rng.standard_normal(n), 0, 1)
    b = np.column_stack([b_rate * union, union])
    gain, lo, hi = R.paired_item_bootstrap_ci(a, b, _ratio_metric, 2000, 0)
    _, alo, ahi = R.item_bootstrap_ci(a, _ratio_metric, 2000, 1)
    _, blo, bhi = R.item_bootstrap_ci(b, _ratio_metric, 2000, 2)
    unpaired_half = np.hypot((ahi - alo) / 2, (bhi - blo) / 2)
    assert lo <= gain <= hi
    assert (hi - lo) / 2 < 0.5 * unpaired_half
    same = R.paired_item_bootstrap_ci(a, a, _ratio_metric, 200, 0)
    assert same == (0.0, 0.0, 0.0)


def _population(rng, n_pop=4000, side=6, n_classes=3):
    """A finite population of tiles; its mIoU (over all tiles) is the true value."""
    pred, true = _tiles(rng, n_tiles=n_pop, side=side, n_classes=n_classes, acc=0.7)
    # tiles differ in difficulty: on a third of them the prediction is mostly noise
    hard = rng.random(n_pop) < 1 / 3
    noise_pred = rng.integers(0, n_classes, size=pred.shape)
    pred = np.where(hard[:, None, None] & (rng.random(pred.shape) < 0.6), noise_pred, pred)
    return R.tile_iou_counts(pred, true, n_classes), R.tile_iou_counts(true, true, n_classes)


@pytest.mark.slow
def test_coverage_of_the_95_interval_for_miou():
    rng = np.random.default_rng(2026)
    counts, _ = _population(rng)
    truth = R.mean_iou(counts.sum(0))
    n, reps, hits = 200, 300, 0
    for _ in range(reps):
        sample = counts[rng.integers(0, counts.shape[0], n)]
        _, lo, hi = R.item_bootstrap_ci(sample, R.mean_iou, 400, rng)
        hits += lo <= truth <= hi
    coverage = hits / reps
    # nominal 0.95; the binomial standard error of the estimate is about 0.013
    assert 0.91 <= coverage <= 0.98, coverage


@pytest.mark.slow
def test_coverage_of_the_paired_interval_for_a_miou_gain():
    rng = np.random.default_rng(7)
    a_counts, _ = _population(rng)
    # model B: the same tiles, its intersection a little larger on every class (bounded by union)
    b_counts = a_counts.copy()
    b_counts[:, 0] = np.minimum(a_counts[:, 0] * 1.03, a_counts[:, 1])
    truth = R.mean_iou(b_counts.sum(0)) - R.mean_iou(a_counts.sum(0))
    n, reps, hits = 200, 300, 0
    for _ in range(reps):
        idx = rng.integers(0, a_counts.shape[0], n)
        _, lo, hi = R.paired_item_bootstrap_ci(a_counts[idx], b_counts[idx], R.mean_iou, 400, rng)
        hits += lo <= truth <= hi
    assert 0.91 <= hits / reps <= 0.98, hits / reps


# ----------------------------------------------------------------------------- bad input


def test_bad_metric_and_mismatched_items():
    stats_ = np.ones((5, 2))
    with pytest.raises(TypeError, match="metric"):
        R.item_bootstrap_ci(stats_, "mean", 10, 0)
    with pytest.raises(ValueError, match="metric"):
        R.item_bootstrap_ci(stats_, lambda T: T, 10, 0)  # wrong shape
    with pytest.raises(ValueError, match="metric"):
        R.item_bootstrap_ci(stats_, lambda T: T[:, 0] * np.nan, 10, 0)  # not finite
    with pytest.raises(ValueError, match="b_stats"):
        R.paired_item_bootstrap_ci(stats_, np.ones((4, 2)), _ratio_metric, 10, 0)
    with pytest.raises(ValueError, match="item_stats"):
        R.item_bootstrap_ci(np.ones((0, 2)), _ratio_metric, 10, 0)


def test_bad_label_maps_and_counts():
    with pytest.raises(ValueError, match="pred"):
        R.tile_iou_counts(np.full((2, 3, 3), 3), np.zeros((2, 3, 3), int), 3)
    with pytest.raises(ValueError, match="true"):
        R.tile_iou_counts(np.zeros((2, 3, 3), int), np.zeros((2, 3, 2), int), 3)
    with pytest.raises(TypeError, match="pred"):
        R.tile_iou_counts(np.zeros((2, 3, 3)), np.zeros((2, 3, 3), int), 3)
    with pytest.raises(ValueError, match="counts"):
        R.mean_iou(np.array([[2.0, 1.0], [1.0, 1.0]]))  # intersection > union
    with pytest.raises(ValueError, match="counts"):
        R.mean_iou(np.zeros((2, 3)))


def test_inputs_not_modified():
    pred, true = _tiles(np.random.default_rng(10), n_tiles=6)
    p0, t0 = pred.copy(), true.copy()
    counts = R.tile_iou_counts(pred, true, 3)
    c0 = counts.copy()
    R.item_bootstrap_ci(counts, R.mean_iou, 50, 0)
    R.paired_item_bootstrap_ci(counts, counts[::-1], R.mean_iou, 50, 0)
    assert np.array_equal(pred, p0) and np.array_equal(true, t0) and np.array_equal(counts, c0)
