"""Exercise spec: Wilson interval, exact McNemar test and paired bootstrap (book/noise.md; seed
000).

One notebook with three functions; NAME is the first of them (the notebook's file name).
"""

NAME = "wilson_interval"
TITLE = "Error bars for top-1 accuracy: Wilson, McNemar, paired bootstrap"
LEVEL = "core"
ASSIGNMENT = "noise"
CHAPTER = "noise"

STATEMENT = r"""
A top-1 accuracy measured on $n$ test images is a binomial proportion, and two models
scored on the *same* images are paired. Write three small functions that turn such
counts into honest statements. All three return Python floats and leave their inputs
untouched. Correctness vectors `a_correct`, `b_correct` have shape `(n,)` and hold 0/1 or
booleans (1 = the model got that image right).

### 1. `wilson_interval(k, n, z=1.959963984540054)` returns `(lo, hi)`

The Wilson score interval for $k$ successes in $n \ge 1$ trials, with $p = k/n$:
$$\text{centre} = \frac{p + z^2/(2n)}{1 + z^2/n}, \qquad
\text{half} = \frac{z\sqrt{p(1-p)/n + z^2/(4n^2)}}{1 + z^2/n},$$
and `(lo, hi) = (centre - half, centre + half)`. Unlike $p \pm z\sqrt{p(1-p)/n}$ it
never collapses to a single point: at $k = 0$ it must return exactly `lo = 0.0` with a
positive `hi`, and at $k = n$ exactly `hi = 1.0`. In floating point the formula misses
these ends by a rounding error (for $n = 7$, `lo` comes out as `5.55e-17`; for $n = 10$,
`hi` as `0.9999999999999999`), and clipping to $[0, 1]$ does not remove that: return
`0.0` and `1.0` for those two ends explicitly.

### 2. `mcnemar_exact(a_correct, b_correct)` returns a p-value

Let $n_{01}$ be the number of images only B gets right and $n_{10}$ the number only A
gets right. Under the null hypothesis each discordant image goes either way with
probability 1/2, so with $X \sim \mathrm{Binomial}(n_{01} + n_{10}, 1/2)$ the two-sided
exact p-value is
$$p = \min\bigl(1,\; 2\,P(X \le \min(n_{01}, n_{10}))\bigr).$$
When there is no discordant image at all, return `1.0`. (`scipy.stats.binom.cdf` gives
$P(X \le x)$.)

### 3. `paired_bootstrap_ci(a_correct, b_correct, n_boot, rng, level=0.95)` returns `(gain, lo, hi)`

`gain = mean(b) - mean(a)`. Index the four outcomes of an image by $2a + b$ (0 both
wrong, 1 only B right, 2 only A right, 3 both right) and count them (`np.bincount` with
`minlength=4`). Resampling the $n$ images with replacement changes only these four
counts, so all `n_boot` replicates come from **one** call
```python
counts = rng.multinomial(n, cell_counts / n, size=n_boot)     # (n_boot, 4)
```
which is the only use of `rng`. Each replicate's gain is
`(counts[:, 1] - counts[:, 2]) / n`, and `lo, hi = np.percentile(gains,
[100 * (1 - level) / 2, 100 * (1 + level) / 2])`.
"""

SOLUTION = r'''import numpy as np
from scipy import stats


def wilson_interval(k, n, z=1.959963984540054):
    """Wilson score interval (lo, hi) for k successes out of n."""
    ### BEGIN SOLUTION
    p = k / n
    shrink = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / shrink
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / shrink
    lo = 0.0 if k == 0 else max(0.0, centre - half)
    hi = 1.0 if k == n else min(1.0, centre + half)
    return float(lo), float(hi)
    ### END SOLUTION


def mcnemar_exact(a_correct, b_correct):
    """Two-sided exact McNemar p-value of two models scored on the same images."""
    ### BEGIN SOLUTION
    a = np.asarray(a_correct).astype(bool)
    b = np.asarray(b_correct).astype(bool)
    only_b = int(np.sum(b & ~a))
    only_a = int(np.sum(a & ~b))
    discordant = only_a + only_b
    if discordant == 0:
        return 1.0
    tail = stats.binom.cdf(min(only_a, only_b), discordant, 0.5)
    return float(min(1.0, 2.0 * tail))
    ### END SOLUTION


def paired_bootstrap_ci(a_correct, b_correct, n_boot, rng, level=0.95):
    """Gain of B over A and its paired bootstrap percentile interval (gain, lo, hi)."""
    ### BEGIN SOLUTION
    a = np.asarray(a_correct).astype(int)
    b = np.asarray(b_correct).astype(int)
    n = len(a)
    cells = np.bincount(2 * a + b, minlength=4)
    counts = rng.multinomial(n, cells / n, size=n_boot)
    gains = (counts[:, 1] - counts[:, 2]) / n
    lo, hi = np.percentile(gains, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return float((cells[1] - cells[2]) / n), float(lo), float(hi)
    ### END SOLUTION
'''

VISIBLE_TESTS = r"""import numpy as np

# Wilson: 80 right out of 100 (statsmodels' proportion_confint(method="wilson") agrees)
lo, hi = wilson_interval(80, 100)
assert abs(lo - 0.7111708) < 1e-6 and abs(hi - 0.8666331) < 1e-6, \
    f"80 of 100: expected (0.7111708, 0.8666331), got {(lo, hi)}"
lo, hi = wilson_interval(0, 10)
assert lo == 0.0 and hi > 0.2, "at k = 0 the interval is [0, something positive]"

# McNemar: 9 images only B gets right, 2 only A gets right, 89 agree
a = np.array([0] * 9 + [1] * 2 + [1] * 60 + [0] * 29)
b = np.array([1] * 9 + [0] * 2 + [1] * 60 + [0] * 29)
p = mcnemar_exact(a, b)
assert abs(p - 0.0654296875) < 1e-12, f"2 P(X <= 2) for X ~ Binomial(11, 1/2) = 0.06543, got {p}"
assert mcnemar_exact(a, a) == 1.0, "no discordant image: p = 1"

# paired bootstrap: the gain is B's accuracy minus A's, the interval surrounds it
gain, lo, hi = paired_bootstrap_ci(a, b, 1000, np.random.default_rng(0))
assert abs(gain - 0.07) < 1e-12, f"gain = 0.69 - 0.62 = 0.07, got {gain}"
assert lo < gain < hi, "the 95% interval should contain the observed gain here"
print("visible tests passed")
"""
VISIBLE_POINTS = 2

HIDDEN = [
    "wilson_interval/matches_reference",
    "wilson_interval/extremes",
    "mcnemar_exact/matches_reference",
    "mcnemar_exact/no_discordant_pairs",
    "paired_bootstrap_ci/matches_reference",
    "paired_bootstrap_ci/single_multinomial_call",
    "paired_bootstrap_ci/properties",
    "paired_bootstrap_ci/empty_cells",
]
