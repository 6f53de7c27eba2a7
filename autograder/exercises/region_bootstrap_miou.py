"""Exercise spec: mIoU with a bootstrap over whole regions (book/encoders.md; seed 000)."""

NAME = "region_bootstrap_miou"
TITLE = "Error bars for a segmentation probe: a bootstrap over regions"
LEVEL = "core"
ASSIGNMENT = "encoders"
CHAPTER = "encoders"

STATEMENT = r"""
A segmentation probe is scored by mean intersection over union (mIoU) on validation
tiles. Tiles cut from the same region (one city, one flight, one photograph) look alike,
so they are not independent draws: the independent unit is the region, and an honest
error bar resamples regions, not tiles. Write

```python
region_bootstrap_miou(counts, regions, n_boot, rng, level=0.95)
```

**Inputs.** `counts` has shape `(n_tiles, 2, K)`: `counts[t, 0, c]` is the number of pixels
of tile `t` that are class `c` in both the prediction and the truth (the intersection),
`counts[t, 1, c]` the number that are class `c` in either (the union). `regions` has shape
`(n_tiles,)` and holds the region id of every tile: non-negative integers that need **not**
be `0 .. R-1` (ids such as `3, 17, 42` are fine). `n_boot >= 1`, `rng` is a NumPy
`Generator`, `level` lies in `(0, 1)`.

**mIoU of summed counts.** For totals `T` of shape `(2, K)`, the mIoU is the mean of
`T[0, c] / T[1, c]` over the classes with `T[1, c] > 0`. A class with zero union (it occurs
nowhere, and is predicted nowhere) is **left out** of the mean, not counted as 0.

**The procedure.**

1. `miou` is the mIoU of `counts.sum(axis=0)`.
2. Sum the counts of the tiles of each region. Order the regions by increasing id
   (`np.unique(regions)`), giving `R` region totals of shape `(R, 2, K)`.
3. Draw all replicates with **one** call, the only use of `rng`:
   ```python
   W = rng.multinomial(R, np.full(R, 1 / R), size=n_boot)     # (n_boot, R)
   ```
   Row `b` says how often each region appears in replicate `b`; its totals are the
   `W[b]`-weighted sum of the region totals, and its value is the mIoU of those totals.
4. `lo, hi = np.percentile(values, [100 * (1 - level) / 2, 100 * (1 + level) / 2])`.

Return `(miou, lo, hi)` as three Python floats and leave the inputs untouched. With one tile
per region this is the tile bootstrap of the chapter on noise; with a single region every
replicate equals the data, so `lo == hi == miou`.
"""

SOLUTION = r'''import numpy as np


def region_bootstrap_miou(counts, regions, n_boot, rng, level=0.95):
    """mIoU of all tiles and a percentile interval from resampling whole regions."""
    ### BEGIN SOLUTION
    counts = np.asarray(counts, dtype=float)
    ids, which = np.unique(np.asarray(regions), return_inverse=True)
    per_region = np.zeros((len(ids),) + counts.shape[1:])
    np.add.at(per_region, which, counts)

    def miou_of(totals):                                  # totals: (..., 2, K)
        inter, union = totals[..., 0, :], totals[..., 1, :]
        present = union > 0
        ratio = np.divide(inter, union, out=np.zeros_like(inter), where=present)
        return ratio.sum(axis=-1) / present.sum(axis=-1)

    R = len(ids)
    W = rng.multinomial(R, np.full(R, 1 / R), size=n_boot)
    values = miou_of(np.einsum("br,rik->bik", W, per_region))
    lo, hi = np.percentile(values, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return float(miou_of(counts.sum(axis=0))), float(lo), float(hi)
    ### END SOLUTION
'''

VISIBLE_TESTS = r"""import numpy as np

# two classes, three regions of two tiles each
counts = np.array([
    [[3, 1], [4, 2]], [[2, 0], [2, 1]],      # region 5
    [[1, 2], [3, 2]], [[0, 1], [1, 1]],      # region 8
    [[4, 0], [4, 0]], [[2, 3], [3, 4]],      # region 11
], dtype=float)
regions = np.array([5, 5, 8, 8, 11, 11])
miou, lo, hi = region_bootstrap_miou(counts, regions, 200, np.random.default_rng(0))
# totals: intersections (12, 7), unions (17, 10)
assert abs(miou - (12 / 17 + 7 / 10) / 2) < 1e-12, f"mIoU of the summed counts is 0.70294, got {miou}"
assert lo <= miou <= hi, "here the interval contains the mIoU of all tiles"

# a single region: every replicate is the data itself
m1, lo1, hi1 = region_bootstrap_miou(counts, np.zeros(6, int), 50, np.random.default_rng(1))
assert abs(lo1 - m1) < 1e-12 and abs(hi1 - m1) < 1e-12, "one region gives lo == hi == miou"

# a tile without any pixel of class 1 (zero union): that class is left out of the mean
only = np.array([[[2, 0], [4, 0]]], dtype=float)
m2, _, _ = region_bootstrap_miou(only, np.array([3]), 10, np.random.default_rng(2))
assert abs(m2 - 0.5) < 1e-12, f"class 1 has no pixel: mIoU is class 0's IoU 2/4 = 0.5, got {m2}"
print("visible tests passed")
"""
VISIBLE_POINTS = 2

HIDDEN = [
    "region_bootstrap_miou/matches_reference",
    "region_bootstrap_miou/regions_not_contiguous",
    "region_bootstrap_miou/absent_classes",
    "region_bootstrap_miou/single_multinomial_call",
    "region_bootstrap_miou/properties",
]
