"""Hidden checks of the notebook "Error bars for a segmentation probe" (book/encoders.md).

``region_bootstrap_miou(counts, regions, n_boot, rng, level=0.95)`` -> ``(miou, lo, hi)``:
the mIoU of the summed counts, and the percentile interval of a bootstrap that sums the
tiles of each region (regions in increasing order of their id) and draws every replicate
from ONE call ``rng.multinomial(R, np.full(R, 1 / R), size=n_boot)``; a class with zero
union in a replicate is left out of that replicate's mean.

Reference: :func:`repeval_ref.region_bootstrap_miou`.
"""

from __future__ import annotations

import numpy as np

from ._framework import StudentError, call_student, finding, register
from ._helpers import close, differs, frozen_copies, gate, is_plain_float, mutated, unpack

WHAT = "region_bootstrap_miou"


def _reference(counts, regions, n_boot, seed, level=0.95):
    from repeval_ref import region_bootstrap_miou

    return region_bootstrap_miou(counts, regions, n_boot, np.random.default_rng(seed), level)


def _tile_bootstrap(counts, n_boot, seed, level=0.95):
    """What resampling tiles instead of regions gives (a typical mistake)."""
    from repeval_ref import item_bootstrap_ci, mean_iou

    return item_bootstrap_ci(counts, mean_iou, n_boot, np.random.default_rng(seed), level)


def _per_tile_mean(counts):
    """The mean over tiles of each tile's own mIoU (not the metric: a typical mistake)."""
    from repeval_ref import mean_iou

    return float(np.mean(mean_iou(counts)))


def _zeros_counted(counts, regions, n_boot, seed, level=0.95):
    """Absent classes counted as IoU 0 instead of being left out (a typical mistake)."""
    ids, which = np.unique(regions, return_inverse=True)
    tot = np.zeros((ids.size,) + counts.shape[1:])
    np.add.at(tot, which, counts)
    w = np.random.default_rng(seed).multinomial(
        ids.size, np.full(ids.size, 1 / ids.size), size=n_boot
    )
    t = np.einsum("br,rik->bik", w.astype(float), tot)
    vals = np.divide(t[:, 0], t[:, 1], out=np.zeros_like(t[:, 0]), where=t[:, 1] > 0).mean(axis=1)
    return tuple(np.percentile(vals, [100 * (1 - level) / 2, 100 * (1 + level) / 2]))


def _tiles(rng, n_regions, per_region, k=3, side=6, ids=None, rare_class=False):
    """Counts of tiles whose error rate is shared within a region, and their region ids."""
    from repeval_ref import tile_iou_counts

    n = n_regions * per_region
    true = rng.integers(0, k, (n, side, side))
    if rare_class:  # class k - 1 only in the first region
        true = np.where(true == k - 1, 0, true)
        true[:per_region, :2, :2] = k - 1
    rate = np.repeat(rng.uniform(0.1, 0.6, n_regions), per_region)[:, None, None]
    wrong = rng.random(true.shape) < rate
    pred = np.where(wrong, rng.integers(0, k - 1 if rare_class else k, true.shape), true)
    region = np.repeat(np.arange(n_regions) if ids is None else np.asarray(ids), per_region)
    order = rng.permutation(n)  # tiles of a region are not contiguous
    return tile_iou_counts(pred, true, k)[order], region[order]


def _call(fn, counts, regions, n_boot, gen, **kw):
    out, _ = call_student(fn, counts.copy(), regions.copy(), n_boot, gen, what=WHAT, **kw)
    items = unpack(out, 3, WHAT)
    try:
        return [float(x) for x in items]
    except (TypeError, ValueError):
        raise StudentError(f"{WHAT} should return three numbers, got {out!r}") from None


def _same(got, want):
    return all(abs(g - w) <= 1e-10 for g, w in zip(got, want))


def _no_part_right(got, want):
    """Empty when the estimate or the interval of ``got`` equals the reference's ``want``,
    else how both differ: checks of the ids, the generator and the inputs count with
    either part right, so a mistake in the other is charged by its own check only."""
    if close(got[0], want[0], 1e-10) or close(got[1:], list(want[1:]), 1e-10):
        return ""
    return f"(miou, lo, hi): {differs(got, list(want), rtol=0, atol=1e-10)}"


def _show(x):
    return "(" + ", ".join(f"{v:.5f}" for v in x) + ")"


@register(
    "region_bootstrap_miou/matches_reference",
    points=3,
    summary="mIoU and the region-bootstrap interval equal the reference for the same generator",
)
def matches_reference(fn, rng):
    for n_regions, per_region, n_boot, level in ((8, 5, 400, 0.95), (5, 7, 251, 0.8)):
        counts, regions = _tiles(rng, n_regions, per_region)
        seed = int(rng.integers(0, 2**31))
        want = _reference(counts, regions, n_boot, seed, level)
        got = _call(fn, counts, regions, n_boot, np.random.default_rng(seed), level=level)
        if _same(got, want):
            continue
        msg = (
            f"with {len(regions)} tiles in {n_regions} regions, n_boot = {n_boot}, "
            f"level = {level} and np.random.default_rng({seed}) you returned {_show(got)}; "
            f"expected {_show(want)}."
        )
        if not close(got[0], want[0], 1e-10):
            if abs(got[0] - _per_tile_mean(counts)) < 1e-10:
                msg += (
                    " Your mIoU is the average of the tiles' own mIoUs. mIoU sums the "
                    "intersections and the unions over all tiles first, then divides "
                    "class by class and averages the classes."
                )
            else:
                msg += (
                    " The mIoU is the mean over classes with a positive union of "
                    "(summed intersection) / (summed union)."
                )
        elif _same(got[1:], _tile_bootstrap(counts, n_boot, seed, level)[1:]):
            msg += (
                " Your interval resamples tiles. Tiles of one region are not "
                "independent: sum the tiles of each region and resample the R regions, "
                "rng.multinomial(R, np.full(R, 1 / R), size=n_boot)."
            )
        else:
            msg += (
                " Sum the tiles of each region (regions in the order of np.unique), draw "
                "W = rng.multinomial(R, np.full(R, 1 / R), size=n_boot), take the mIoU "
                "of each row's weighted totals, and np.percentile(values, "
                "[100 (1 - level) / 2, 100 (1 + level) / 2])."
            )
        return [finding("region bootstrap", False, 3, msg)]
    return [finding("region bootstrap", True, 3, "")]


@register(
    "region_bootstrap_miou/regions_not_contiguous",
    points=1,
    summary="region ids such as 3, 17, 402 (not 0 .. R-1) count as R regions",
)
def regions_not_contiguous(fn, rng):
    ids = np.sort(rng.choice(np.arange(1, 500), size=6, replace=False)) * 3
    counts, regions = _tiles(rng, 6, 4, ids=ids)
    seed = int(rng.integers(0, 2**31))
    # the same tiles with the ids 0 .. R-1 in the same order: there the answer must be
    # right, so that the finding below is about the ids alone
    # (renaming the ids in the same order changes nothing, so the answer is compared
    # with its own result on 0 .. R-1, which must have a part right)
    plain = np.searchsorted(ids, regions)
    base = _call(fn, counts, plain, 300, np.random.default_rng(seed))
    wrong = _no_part_right(base, _reference(counts, plain, 300, seed))
    if wrong:
        return gate(
            [finding("ids not contiguous", False, 1, "")],
            f"with the ids 0 .. {ids.size - 1}, {wrong}",
        )
    got = _call(fn, counts, regions, 300, np.random.default_rng(seed))
    ok = _same(got, base)
    return [
        finding(
            "ids not contiguous",
            ok,
            1,
            f"with region ids {ids.tolist()} you returned {_show(got)}; with the ids "
            f"0 .. {ids.size - 1} in the same order, {_show(base)}. There are "
            f"R = {ids.size} regions, the distinct ids "
            "(np.unique(regions)); an id is a name, not an index, so do not make "
            "room for max(regions) + 1 regions, empty ones included.",
        )
    ]


@register(
    "region_bootstrap_miou/absent_classes",
    points=2,
    summary="a class absent from a replicate is left out of its mean, not counted as 0",
)
def absent_classes(fn, rng):
    counts, regions = _tiles(rng, 6, 4, rare_class=True)
    seed = int(rng.integers(0, 2**31))
    want = _reference(counts, regions, 400, seed, 0.9)
    try:
        got = _call(fn, counts, regions, 400, np.random.default_rng(seed), level=0.9)
    except StudentError as exc:
        return [
            finding(
                "absent classes",
                False,
                2,
                f"one class occurs in a single region, so some replicates have no "
                f"pixel of it: {exc}. Leave a class whose union is 0 out of that "
                "replicate's mean.",
            )
        ]
    if _same(got, want):
        return [finding("absent classes", True, 2, "")]
    msg = f"one class occurs in a single region; you returned {_show(got)}, expected {_show(want)}."
    if not all(np.isfinite(got)):
        msg += (
            " A replicate without that region has union 0 for the class; 0 / 0 gave NaN. "
            "Leave such a class out of the replicate's mean."
        )
    elif abs(got[0] - want[0]) < 1e-10 and _same(
        got[1:], _zeros_counted(counts, regions, 400, seed, 0.9)
    ):
        msg += (
            " In replicates that miss the region, you counted the class as IoU 0. It "
            "neither occurs nor is predicted there, so it is left out of the mean."
        )
    return [finding("absent classes", False, 2, msg)]


@register(
    "region_bootstrap_miou/single_multinomial_call",
    points=1,
    summary="the generator is used by exactly one multinomial call",
)
def single_multinomial_call(fn, rng):
    counts, regions = _tiles(rng, 7, 3)
    seed = int(rng.integers(0, 2**31))
    after = np.random.default_rng(seed)
    want = _reference(counts, regions, 500, after)
    gen = np.random.default_rng(seed)
    got = _call(fn, counts, regions, 500, gen)
    ok = gen.bit_generator.state == after.bit_generator.state
    return gate(
        [
            finding(
                "one multinomial call",
                ok,
                1,
                "after your function the generator is not where the single call "
                "rng.multinomial(R, np.full(R, 1 / R), size=n_boot) leaves it. "
                "Resampling R regions only changes how often each appears, so one "
                "multinomial draw of shape (n_boot, R) gives every replicate; do not "
                "loop with rng.choice or rng.integers.",
            )
        ],
        _no_part_right(got, want),
    )


@register(
    "region_bootstrap_miou/properties",
    points=1,
    summary="three Python floats, inputs untouched, integer counts accepted",
)
def properties(fn, rng):
    counts, regions = _tiles(rng, 5, 4)
    as_int = counts.astype(np.int64)
    arrays = [as_int, regions]
    before = frozen_copies(*arrays)
    out, _ = call_student(fn, *arrays, 200, np.random.default_rng(3), what=WHAT)
    problems = []
    changed = mutated(before, arrays, ["counts", "regions"])
    if not changed:  # the other option path: a level that is not the default
        call_student(fn, *arrays, 200, np.random.default_rng(4), level=0.8, what=WHAT)
        changed = [
            f"{n} (with level = 0.8)" for n in mutated(before, arrays, ["counts", "regions"])
        ]
    if changed:
        problems.append(f"your function modified {', '.join(changed)} in place")
    items = unpack(out, 3, WHAT)
    if not all(is_plain_float(x) for x in items):
        problems.append(
            "return three Python floats (float(x)), got "
            + ", ".join(type(x).__name__ for x in items)
        )
    want = _reference(counts, regions, 200, 3)
    try:
        got = [float(x) for x in items]
    except (TypeError, ValueError):
        return gate([finding("properties", False, 1, "")], f"returned {out!r}")
    if not _same(got, _call(fn, counts, regions, 200, np.random.default_rng(3))):
        problems.append(
            "integer counts (as tile_iou_counts would give after astype(int)) must "
            "give the same result as float counts"
        )
    return gate(
        [finding("properties", not problems, 1, "; ".join(problems))],
        _no_part_right(got, want),
    )
