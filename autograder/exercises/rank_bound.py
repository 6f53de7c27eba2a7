"""Exercise spec: the rank bound of a least-squares probe (book/rank.md; seed 000)."""

NAME = "rank_bound"
TITLE = "How much can a low-rank representation fit?"
LEVEL = "interview"
ASSIGNMENT = "rank"
CHAPTER = "rank"

STATEMENT = r"""
A linear probe on representations of rank $r$ produces score matrices of rank at most
$r + 1$ (the bias adds one). One-hot targets have $Y^\top Y = \mathrm{diag}(n_1, \dots,
n_K)$, so by Eckart–Young no such probe can bring the squared error below the sum of the
$K - r - 1$ smallest class counts. Compute both sides of that inequality:

```python
rank_bound(H, y, n_classes)
```

**Inputs.** `H` of shape `(n, d)`, integer labels `y` of shape `(n,)` in
`0 .. n_classes - 1`, and `n_classes` $= K$.

**Return** `(residual, floor)`:

* `residual`, a Python float: $\min_{W, b}\lVert Y - HW - \mathbf{1}b^\top\rVert_F^2$ with
  one-hot `Y` of shape `(n, K)`, an ordinary least-squares fit with an unpenalised bias
  (for example `np.linalg.lstsq` on `H` with a column of ones appended).
* `floor`, a Python int: with `r = np.linalg.matrix_rank(H)`, the sum of the `K - r - 1`
  smallest class counts, and `0` when `r + 1 >= K`.

Classes may have different sizes. Do not modify the inputs.
"""

SOLUTION = r'''import numpy as np


def rank_bound(H, y, n_classes):
    """Least-squares residual of one-hot targets and the floor set by rank(H)."""
    ### BEGIN SOLUTION
    H = np.asarray(H, dtype=float)
    y = np.asarray(y).astype(int)
    n = len(H)
    Y = np.zeros((n, n_classes))
    Y[np.arange(n), y] = 1.0
    design = np.hstack([H, np.ones((n, 1))])
    coef, *_ = np.linalg.lstsq(design, Y, rcond=None)
    residual = float(np.sum((Y - design @ coef) ** 2))
    r = int(np.linalg.matrix_rank(H))
    dropped = n_classes - r - 1
    counts = np.sort(np.bincount(y, minlength=n_classes))
    floor = int(counts[:dropped].sum()) if dropped > 0 else 0
    return residual, floor
    ### END SOLUTION
'''

VISIBLE_TESTS = r"""import numpy as np

# the chapter's opening example: rank 1, four balanced classes of 25
rng = np.random.default_rng(0)
y = np.repeat(np.arange(4), 25)
H = rng.normal(size=(100, 1)) @ rng.normal(size=(1, 6))

residual, floor = rank_bound(H, y, 4)
assert floor == 50, f"rank 1 and four classes of 25: the floor is 25 + 25 = 50, got {floor}"
assert residual >= floor - 1e-9, "no probe can go below the floor"

# full rank, two classes: the floor vanishes
residual2, floor2 = rank_bound(rng.normal(size=(30, 3)), np.arange(30) % 2, 2)
assert floor2 == 0, f"r + 1 >= K: the floor must be 0, got {floor2}"
print("visible tests passed")
"""
VISIBLE_POINTS = 1

HIDDEN = [
    "rank_bound/matches_reference",
    "rank_bound/unbalanced_floor",
    "rank_bound/full_rank_floor_zero",
    "rank_bound/properties",
    "rank_bound/absent_class",
]
